"""What each of session 11's grouped-convolution fixes moves on the steps11 steps (issue 12; SEEN, not blind):
``python -m scripts.h200_gconv_parts [-o FILE]``. Each fix is switched off in turn (in this process only) and the three
steps11 folders are checked as ``kdvfs validate-steps`` checks them, with the bundled fit:

- ``wall-share``: kernels one op ran on several streams take their share of the wall time
  (``kdvfs.kernelwork.concurrent_wall_share``, ``kdvfs.trace.Kernel.concurrency``);
- ``simt-by-name``: cuDNN's convolve_sgemm engines on the CUDA cores (``kdvfs.work.simt_by_name``);
- ``gradient-halves``: a convolution backward's dgrad and wgrad kernels take half the work each
  (``kdvfs.kernelwork._gradient_shares``).
"""

import argparse
import json
import tempfile
from pathlib import Path

FOLDERS = ("validation/h200/steps11", "validation/h200/steps11/repeat_leaseB", "validation/h200/steps11/repeat_leaseC")
VARIANTS = ("all fixes", "without wall-share", "without simt-by-name", "without gradient-halves", "none")


def _check(folder: str) -> dict[str, float]:
    from kdvfs.cli import main

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "check.json"
        main(["validate-steps", folder, "--gpu", "h200", "-o", str(out)])
        doc = json.loads(out.read_text())
    return {s["model"]: round(s["error"]["limiter_with_gaps"]["energy_pct"], 2) for s in doc["steps"]}


def main(argv=None) -> int:
    import kdvfs.importers as imp
    import kdvfs.kernelwork as kw

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/gconv/parts.json")
    a = ap.parse_args(argv)
    keep = (imp.concurrent_wall_share, kw.simt_by_name, kw._gradient_shares)
    out = {}
    for v in VARIANTS:
        imp.concurrent_wall_share, kw.simt_by_name, kw._gradient_shares = keep
        if v in ("without wall-share", "none"):
            imp.concurrent_wall_share = lambda s, d, st, o: [1.0] * len(s)
        if v in ("without simt-by-name", "none"):
            kw.simt_by_name = lambda name: False
        if v in ("without gradient-halves", "none"):
            kw._gradient_shares = lambda kernels, ops, share: {}
        out[v] = {f: _check(f) for f in FOLDERS}
        print(v, {f: {m: e for m, e in r.items() if "wav2vec" in m} for f, r in out[v].items()}, flush=True)
    imp.concurrent_wall_share, kw.simt_by_name, kw._gradient_shares = keep
    Path(a.output).write_text(json.dumps({"command": "python -m scripts.h200_gconv_parts", "energy_error_pct": out},
                                         indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
