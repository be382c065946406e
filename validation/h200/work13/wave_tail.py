"""Session 13 (helper i13b), a finding left for a fit by the rule: a launch's occupancy over its time where its last
wave is partial. The model's occupancy (``kdvfs.occupancy.thread_occupancy``) is the first wave's share of the
resident-thread slots; with blocks of equal work on ``slots = 132 · min(32, 2048 // threads)`` slots a launch of
``B`` blocks fills ``B / (ceil(B / slots) · slots)`` of them over its time. Each zoo row (the nine fitted files and
characterization12–17c, kernels other than GEMMs and attention, with recorded launch grids) whose share differs by more
than 0.03, predicted with the bundled fit (nothing refitted) at its recorded and at its wave-quantized occupancy.

    python validation/h200/work13/wave_tail.py       # writes validation/h200/work13/wave_tail.json, prints the rows
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))


def wave_share(grid, block, sms: int = 132) -> float:
    threads = math.prod(int(b) for b in block)
    blocks = math.prod(int(g) for g in grid)
    per_sm = max(1, min(32, 2048 // threads))
    slots = sms * per_sm
    waves = math.ceil(blocks / slots)
    first = min(1.0, blocks * threads / (sms * 2048))
    return first if waves <= 1 else blocks / (waves * slots) * min(1.0, per_sm * threads / 2048)


def main() -> int:
    from kdvfs.calibrate_h200 import DEFAULT_DATA, prepared_rows, spec_from_fit
    from kdvfs.h200_fit import predict_zoo

    fit = json.loads((ROOT / "traces/h200.fit.json").read_text())
    spec = spec_from_fit(fit)
    extra = [f"validation/h200/characterization/characterization{f}.json.gz"
             for f in ("12", "13", "14", "15", "16", "17", "17b", "17c")]
    rows, _, _, _ = prepared_rows([str(ROOT / p) for p in (*DEFAULT_DATA, *extra)])
    nine = {r["name"] for r in prepared_rows([str(ROOT / p) for p in DEFAULT_DATA])[0]}
    sel, new = [], []
    for r in rows:
        if r["role"] == "gap" or r["category"] in ("gemm", "attention"):
            continue
        lg = [c for c in r.get("launch_grids") or [] if c.get("grid") and c.get("block")]
        us = sum(float(c["us"]) for c in lg)
        if not lg or us <= 0:
            continue
        wo = sum(float(c["us"]) * wave_share(c["grid"], c["block"]) for c in lg) / us
        if abs(wo - r["occupancy"]) > 0.03:
            sel.append(r)
            new.append(dict(r, occupancy=min(r["occupancy"], wo)))
    gw = fit["params"]["gap_power_w"]
    _, p0 = predict_zoo(spec, sel, gap_w=gw)
    _, p1 = predict_zoo(spec, new, gap_w=gw)
    out = [{"name": r["name"], "fitted": r["name"] in nine, "occupancy": round(r["occupancy"], 3),
            "wave_occupancy": round(n["occupancy"], 3), "power_error_pct": round(100 * (a / r["power_w"] - 1), 1),
            "power_error_wave_pct": round(100 * (b / r["power_w"] - 1), 1)} for r, n, a, b in zip(sel, new, p0, p1)]
    (ROOT / "validation/h200/work13/wave_tail.json").write_text(json.dumps(
        {"command": "python validation/h200/work13/wave_tail.py", "rows": out}, indent=1) + "\n")
    for x in out:
        print(f"{'fit' if x['fitted'] else '   '} {x['name'][:50]:50s} occupancy {x['occupancy']:.2f} → "
              f"{x['wave_occupancy']:.2f}: power error {x['power_error_pct']:+6.1f} → {x['power_error_wave_pct']:+6.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
