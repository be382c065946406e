"""How much each stored step's kernels overlap on several streams (``kdvfs.importers.busy_overlap`` through the
importer's ``overlap_share``), against the measured step: ``python -m scripts.stream_overlap [STEPS.json …]``
(default: every ``validation/h200/steps*/steps.json`` and their repeats). Prints one row per step, most overlap first.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

from kdvfs.importers import import_kineto


def rows(files: list[str]) -> list[dict]:
    out = []
    for f in files:
        doc = json.loads(Path(f).read_text())
        for st in doc.get("steps", []):
            if "error" in st or "trace" not in st or not (Path(f).parent / st["trace"]).exists():
                continue
            imp = import_kineto(Path(f).parent / st["trace"], name=st["model"])
            busy = float(imp.trace.repeats @ imp.trace.times_s)
            out.append({"steps": f, "model": st["model"], "streams": imp.streams, "overlap_pct": 100 * imp.overlap_share,
                        "kernels_summed_s": busy, "busy_union_s": imp.busy_union_s, "step_s": st["step_time_s"],
                        "summed_over_step": busy / st["step_time_s"]})
    return sorted(out, key=lambda r: -r["overlap_pct"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("files", nargs="*")
    files = ap.parse_args().files or sorted(glob.glob("validation/h200/steps*/steps.json")
                                            + glob.glob("validation/h200/steps*/*/steps.json"))
    rs = rows(files)
    for r in rs:
        print(f"{r['overlap_pct']:7.2f} % {r['streams']:3d} streams  summed/step {r['summed_over_step']:.3f}  "
              f"{r['model']:24s} {r['steps']}")
    print(f"{len(rs)} steps: {sum(r['overlap_pct'] < 0.1 for r in rs)} overlap below 0.1 %, "
          f"{sum(r['overlap_pct'] > 1 for r in rs)} above 1 %")


if __name__ == "__main__":
    main()
