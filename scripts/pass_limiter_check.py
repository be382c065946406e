"""The study's passes under the RTX 3080 Ti's power limiter, per calibration (issue 11, session 10):
``simulator.pass_limiter`` (isolated and summed, the limiter's steady state, its controller at the H200's window) and
``kdvfs.limiter_pass.pass_table2`` (Table 2's pass rows from the passes under the limiter). Nothing is fitted.

    python -m scripts.pass_limiter_check CALIBRATION.json … [--windows none,0.005,0.1] [--out FILE.json]
"""

import argparse
from pathlib import Path

import numpy as np

from kdvfs.bundled import bundled_dir
from kdvfs.diagnosis import load_fit
from kdvfs.gpus import RTX3080TI
from kdvfs.limiter_pass import pass_table2
from kdvfs.passweep import read_pass_sweep, study_settings
from kdvfs.reproduce import table2_targets_met
from kdvfs.trace import load_trace
from scripts import emit_json
from simulator.pass_limiter import pass_limiter_check

_KEYS = ("median_abs_time_err", "median_abs_energy_err", "worst_main_time_err", "worst_main_energy_err")


def _short(d: dict) -> dict:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items() if not isinstance(v, np.ndarray)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The study's passes under the limiter, per calibration (issue 11).")
    ap.add_argument("fits", nargs="+", help="calibration JSON files")
    ap.add_argument("--windows", default="none", help="limiter windows in seconds for the controller, comma list; "
                    "'none' = the H200's fitted window (default)")
    ap.add_argument("--out", help="write the JSON here (default: print it)")
    a = ap.parse_args(argv)
    base = bundled_dir()
    trace = load_trace(base / "gpt3xl-llmc-rtx3080ti.trace.json")
    sweep = read_pass_sweep(base / "spaan2026_fig3_fig4_pass_level.csv", RTX3080TI)
    wins = tuple(None if w.strip() == "none" else float(w) for w in a.windows.split(","))
    out = []
    for f in a.fits:
        r = pass_limiter_check(f, sweep, trace, wins)
        spec, params = load_fit(f)
        rows = pass_table2(spec, params, trace, study_settings(), r["structure"].get("limit_cap_w"))
        met = table2_targets_met(rows)
        for x in rows:
            x["target_met"] = met[f"pass/{x['scope']}/{x['objective']}"]
        out.append({"fit": Path(f).name, "cap_w": r["cap_w"], "isolated": _short(r["isolated"]),
                    "steady": _short(r["steady"]), "dynamic": [_short(d) for d in r["dynamic"]],
                    "kernel_minima_sum_pct": r["kernel_minima_sum_pct"],
                    "table2_pass_rows_under_limiter": rows})
    return emit_json(out, a.out)


if __name__ == "__main__":
    raise SystemExit(main())
