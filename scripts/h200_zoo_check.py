"""Each entry of a characterisation file against the bundled H200 model: measured and predicted clock, power, time and
energy per invocation, and how many entries meet the targets (clock within 5 %, power within 3 %; issue 12).
``python -m scripts.h200_zoo_check FILE [--fit traces/h200.fit.json] [-o OUT.json]``.

Clock and power are ``kdvfs calibrate-h200 --check``'s (the same rows, gap power and counts). Time: the model takes
each entry's measured time at the clock it ran at (``kdvfs.model.params_from_work``) and gives its time at the
predicted clock (the core and memory terms of ``kdvfs.model.evaluate``), the launch-bound share of an entry's period
unchanged; energy per invocation is power × time. Nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np


def zoo_check(fit_path: str, data: str) -> dict:
    from kdvfs.calibrate_h200 import check_h200_fit, prepared_rows, spec_from_fit
    from kdvfs.gpus import AUTO
    from kdvfs.h200_fit import zoo_params
    from kdvfs.h200_rows import kernel_rows, kernel_time_s, period_s
    from kdvfs.model import evaluate

    fit = json.loads(Path(fit_path).read_text())
    doc = check_h200_fit(fit, [data], command="", where=fit_path)
    spec = spec_from_fit(fit, where=fit_path)
    rows = kernel_rows(prepared_rows([data])[0])
    by = {e["name"]: e for e in doc["check"]["per_kernel"]}
    rows = [r for r in rows if r["name"] in by]
    n = len(rows)
    fm = np.array([r["sm_mhz_median"] for r in rows], dtype=float)
    tk = np.array([kernel_time_s(r) for r in rows])
    params = zoo_params(spec, rows)
    fp = np.array([by[r["name"]]["predicted_sm_mhz"] for r in rows], dtype=float)
    ki = np.arange(n)
    inf = np.inf
    t_at_pred = evaluate(spec, params, fp, np.full(n, AUTO), kernel_index=ki, cap_w=inf).time_s
    t_at_meas = evaluate(spec, params, fm, np.full(n, AUTO), kernel_index=ki, cap_w=inf).time_s
    out, meet_t, meet_e = [], 0, 0
    for i, r in enumerate(rows):
        e = by[r["name"]]
        period = period_s(r)
        t_pred = float(period - tk[i] + tk[i] * float(t_at_pred[i] / t_at_meas[i]))
        e_meas = float(r.get("energy_j") or r["power_w"] * period)
        e_pred = float(e["predicted_power_w"]) * t_pred
        te, ee = 100 * (t_pred / period - 1), 100 * (e_pred / e_meas - 1)
        meet_t += int(abs(te) <= 3.0)
        meet_e += int(abs(ee) <= 3.0)
        out.append({**{k: e[k] for k in ("name", "measured_sm_mhz", "predicted_sm_mhz", "clock_error_pct",
                                         "measured_power_w", "predicted_power_w", "power_error_pct", "meets_clock",
                                         "meets_power", "meets_both")},
                    "measured_time_s": period, "predicted_time_s": t_pred, "time_error_pct": round(float(te), 2),
                    "measured_energy_j": e_meas, "predicted_energy_j": e_pred, "energy_error_pct": round(float(ee), 2)})
    c = doc["check"]
    return {"format": "kdvfs-h200-zoo-check/1", "fit": fit_path, "data": data,
            "targets": doc["targets"], "kernels": c["kernels"], "meet_clock": c["meet_clock"],
            "meet_power": c["meet_power"], "meet_both": c["meet_both"], "time_within_3pct": meet_t,
            "energy_within_3pct": meet_e,
            "median_abs_power_error_pct": float(np.median([abs(x["power_error_pct"]) for x in out])) if out else None,
            "per_kernel": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="a characterisation file (kdvfs characterize)")
    ap.add_argument("--fit", default="traces/h200.fit.json", help="the fit document (default: the bundled one)")
    ap.add_argument("-o", "--output", help="write the check as JSON")
    a = ap.parse_args(argv)
    from kdvfs.errors import KdvfsError

    try:
        doc = zoo_check(a.fit, a.data)
    except KdvfsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    doc["command"] = " ".join(["python -m scripts.h200_zoo_check", *map(shlex.quote, argv if argv is not None
                                                                          else sys.argv[1:])])
    for x in doc["per_kernel"]:
        print(f"{x['name'][:52]:52s} clock {x['measured_sm_mhz']:6.0f}/{x['predicted_sm_mhz']:6.0f} "
              f"power {x['measured_power_w']:6.1f}/{x['predicted_power_w']:6.1f} ({x['power_error_pct']:+6.1f} %) "
              f"time {x['time_error_pct']:+6.1f} % energy {x['energy_error_pct']:+6.1f} %"
              f"{'  both' if x['meets_both'] else ''}")
    print(f"{doc['meet_both']} of {doc['kernels']} within both targets (clock {doc['meet_clock']}, power "
          f"{doc['meet_power']}); time within 3 % {doc['time_within_3pct']}, energy {doc['energy_within_3pct']}; "
          f"median |power error| {doc['median_abs_power_error_pct']:.1f} %")
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
