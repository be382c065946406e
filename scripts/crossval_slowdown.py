"""Cross-validate the sweep fit on synthetic sweeps with and without low-clock slowdown (no GPU needed).

    python -m scripts.crossval_slowdown [--kernels 20]

Slowdown sweeps (``kdvfs.synthetic.slowdown_sweep``): an older datacentre card, 405–1380 MHz at 11 core clocks, memory
fixed, 1 % time and 2 % power noise; below an onset clock each kernel's time grows faster than 1/f by a form the model
does not share, up to 1 + ``slow_at_min`` × its compute share at 405 MHz. Eight draws: four seeds, an earlier and a
later onset, a weaker and a stronger slowdown. No-slowdown sweeps (``synthetic_sweep``): the Volta-like card of
``scripts/crossval_synthetic.py``, four seeds. Each sweep is cross-validated with 3 training points per kernel in the
rotated layout (``kdvfs.fit.train_indices``, what ``kdvfs profile crossval`` uses) and, for comparison, the fixed one
(lowest, middle, top for every kernel). Writes validation/rtx3080ti-calibration/crossval.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kdvfs.fit import crossval, read_sweep
from kdvfs.synthetic import slowdown_sweep, synthetic_sweep, write_sweep

ROOT = Path(__file__).resolve().parent.parent

SLOWDOWN = [dict(seed=s, knee_mhz=800.0, slow_at_min=0.9) for s in (1, 2, 3, 4)] + [
    dict(seed=1, knee_mhz=650.0, slow_at_min=0.9), dict(seed=1, knee_mhz=950.0, slow_at_min=0.9),
    dict(seed=2, knee_mhz=800.0, slow_at_min=0.6), dict(seed=3, knee_mhz=800.0, slow_at_min=1.2)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "validation/rtx3080ti-calibration/crossval.json"))
    a = ap.parse_args()
    cases = [("slowdown", kw, slowdown_sweep(n_kernels=a.kernels, **kw)) for kw in SLOWDOWN]
    cases += [("no slowdown", {"seed": s}, synthetic_sweep(n_kernels=a.kernels, seed=s)) for s in range(4)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, kw, sweep_rows) in enumerate(cases):
            sweep = read_sweep(write_sweep(sweep_rows, Path(tmp) / f"s{i}.csv"))
            for rotate in (True, False):
                t0 = time.process_time()
                r = crossval(sweep, 3, rotate=rotate)
                rows.append({"sweep": kind, **kw, "kernels": a.kernels, "layout": r["layout"],
                             "time_mape_pct": round(r["time_mape_pct"], 3),
                             "power_mape_pct": round(r["power_mape_pct"], 3),
                             "energy_mape_pct": round(r["energy_mape_pct"], 3),
                             "slow_core_mhz": round(r["slow_core_mhz"], 1),
                             "slow_exponent": None if r["slow_exponent"] is None else round(r["slow_exponent"], 3),
                             "cpu_s": round(time.process_time() - t0, 2)})
                print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for layout in ("rotated", "fixed"):
        for kind in ("slowdown", "no slowdown"):
            sel = [r for r in rows if r["layout"] == layout and r["sweep"] == kind]
            summary[f"{layout}, {kind}"] = {
                "sweeps": len(sel),
                "time_mape_pct_max": max(r["time_mape_pct"] for r in sel),
                "power_mape_pct_max": max(r["power_mape_pct"] for r in sel),
                "meets_5_pct": sum(r["time_mape_pct"] <= 5 and r["power_mape_pct"] <= 5 for r in sel)}
    doc = {"command": f"python -m scripts.crossval_slowdown --kernels {a.kernels}", "train_points": 3,
           "summary": summary, "rows": [{k: v for k, v in r.items() if k != "cpu_s"} for r in rows]}
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
