"""Cross-validate the sweep fit on synthetic older-GPU sweeps (no GPU needed).

    python -m scripts.crossval_synthetic [--seeds 4] [--kernels 20]

Each sweep: kernels from compute- to memory-bound (50 µs – 20 ms) on a Volta-like card that is *not* in the catalog
(its own voltage curve, 250 W cap), 10 core clocks, memory fixed, 1 % time and 2 % power noise, throttling at the top
clocks (kdvfs.synthetic). `kdvfs profile crossval --train-points 3` is run on each (a generic card is built from the
sweep). The sweeps are written to validation/synthetic/ so the command line can be run on them too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kdvfs.fit import crossval, read_sweep
from kdvfs.synthetic import synthetic_sweep, write_sweep

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--kernels", type=int, default=20)
    a = ap.parse_args()
    out = ROOT / "validation/synthetic"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(a.seeds):
        p = write_sweep(synthetic_sweep(n_kernels=a.kernels, seed=seed), out / f"sweep-seed{seed}.csv")
        r = crossval(read_sweep(p), 3)
        rows.append({"seed": seed, "sweep": p.name, "time_mape_pct": r["time_mape_pct"],
                     "power_mape_pct": r["power_mape_pct"], "energy_mape_pct": r["energy_mape_pct"]})
        print(json.dumps(rows[-1]))
    (out / "crossval.json").write_text(json.dumps({"command": "python -m scripts.crossval_synthetic", "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
