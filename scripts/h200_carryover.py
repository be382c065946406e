"""Observe-only follow-up on the H200: does a light stage cost more energy right after a heavy one than alone?

    python -m scripts.h200_carryover OUT [--window 5]

For heavy stage H = fwd.fc1 and light stages L ∈ {bwd.res2, fwd.res1, bwd.ln1}: measure L alone, H alone, and the pair
H then L as one unit, each in ≥ 5 s energy-counter windows; the step before and after (thermal drift). If the card's
operating point carries over, E(H+L) − E(H) > E(L). Reads only (NvmlBackend observe-only); writes OUT/carryover.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from hw_backend.measure import measure_window
    from hw_backend.workloads import BlockConfig, BlockWorkload
    from scripts.h200_common import observe_only_block

    be, wl, sync = observe_only_block("bf16")
    res: dict = {"command": f"python -m scripts.h200_carryover OUT --window {a.window:g}", "pairs": {}}

    def m(fn, batch=1):
        w = measure_window(fn, sync, be, window_s=a.window, warmup_s=1.0, batch=batch)
        return w.to_dict()

    step_wl = BlockWorkload(BlockConfig(precision="bf16"))
    res["step_before"] = m(step_wl.step)
    heavy = "fwd.fc1"

    def pair(h, light):
        wl.run_stage(h)
        wl.run_stage(light)

    res["heavy_alone"] = m(functools.partial(wl.run_stage, heavy), 10)
    for light in ("bwd.res2", "fwd.res1", "bwd.ln1"):
        alone = m(functools.partial(wl.run_stage, light), 20)
        both = m(functools.partial(pair, heavy, light), 10)
        e_in = both["energy_per_iter_j"] - res["heavy_alone"]["energy_per_iter_j"]
        t_in = both["time_per_iter_s"] - res["heavy_alone"]["time_per_iter_s"]
        res["pairs"][light] = {"alone": alone, "after_heavy": both, "light_energy_in_pair_j": e_in,
                               "light_time_in_pair_s": t_in,
                               "energy_ratio_in_pair_vs_alone": e_in / alone["energy_per_iter_j"]}
        print(light, json.dumps({k: v for k, v in res["pairs"][light].items() if k not in ("alone", "after_heavy")}), flush=True)
        (out / "carryover.json").write_text(json.dumps(res, indent=1) + "\n")
    res["step_after"] = m(step_wl.step)
    res["wall_clock_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "carryover.json").write_text(json.dumps(res, indent=1) + "\n")
    print("step before/after", res["step_before"]["energy_per_iter_j"], res["step_after"]["energy_per_iter_j"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
