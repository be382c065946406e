"""Measured steps' predicted energy split by op and by how each kernel's work was priced (issue 12, session 11):
``simulator.step_breakdown``. ``python -m scripts.h200_step_breakdown DIR[@REPORT] ... [-o FILE] [--top N]``.

Each DIR is a ``kdvfs-steps/1`` folder (steps.json and its Kineto traces); REPORT (a file name in DIR) is the
``validate-steps`` report whose gap power and judged energy each step is set beside (default: DIR/steps_check.json
where it exists). Prints one line per step and, over all steps given, how the kernels' error goes with the share of
their predicted energy priced by the catch-all, by kernel names, by category, or in ops no zoo set has.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from kdvfs.gpus import get_gpu
from simulator.step_breakdown import SHARE_KEYS, association, breakdown_steps, check_rows, summary_rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR[@REPORT]")
    ap.add_argument("-o", "--output", help="the breakdown JSON (default: print only)")
    ap.add_argument("--top", type=int, default=25, help="ops kept per step, by predicted energy (default 25)")
    ap.add_argument("--gpu", default="h200")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_step_breakdown",
                    *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    spec = get_gpu(a.gpu)
    out = {"command": cmd, "folders": {}}
    rows_all = []
    for arg in a.dirs:
        d, _, rep = arg.partition("@")
        report = Path(d) / (rep or "steps_check.json")
        checks = check_rows(report) if report.is_file() else None
        doc = breakdown_steps(d, spec, top=a.top, checks=checks)
        doc["report"] = str(report) if checks is not None else None
        out["folders"][d] = doc
        for r in summary_rows(doc):
            r["folder"] = d
            chk = doc["steps"][r["model"]].get("check") or {}
            r["check_error_pct"] = chk.get("error_pct")
            rows_all.append(r)
            print(f"{d} {r['model']:28s} {r['kernel_power_w']:3.0f} W kernels, error {r['error_pct']:+6.2f} % (check {_pct(r['check_error_pct'])}), kernels "
                  f"{_pct(r.get('kernel_error_pct'))}, gaps {100 * (r['gap_share'] or 0):3.0f} % of the time, "
                  + ", ".join(f"{key} {100 * r[f'{key}_share']:4.1f} %" for _, key in SHARE_KEYS), flush=True)
    out["summary"] = rows_all
    out["association"] = {key: association(rows_all, f"{key}_share") for _, key in SHARE_KEYS}
    out["association"]["kernel_power_w"] = association(rows_all, "kernel_power_w")
    for key, s in out["association"].items():
        if s.get("steps", 0) >= 3:
            print(f"kernel error against {key} over {s['steps']} steps: slope {s['slope_pct_per_share']:+.3g} "
                  f"points per unit, r = {s['correlation']:+.2f}; mean error above the median "
                  f"({s['median_share']:.3g}) {s['mean_error_above_median_pct']:+.2f} %, at or below "
                  f"{s['mean_error_at_or_below_median_pct']:+.2f} %")
    if a.output:
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _pct(v) -> str:
    return "—" if v is None else f"{v:+.2f} %"


if __name__ == "__main__":
    raise SystemExit(main())
