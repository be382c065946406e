"""Observe-only follow-up on the H200: does a light stage cost more energy right after a heavy one than alone?

    python -m scripts.h200_carryover OUT [--window 5]

For heavy stage H = fwd.fc1 and light stages L ∈ {bwd.res2, fwd.res1, bwd.ln1}: measure L alone, H alone, and the pair
H then L as one unit, each in ≥ 5 s energy-counter windows; the step before and after (thermal drift). If the card's
operating point carries over, E(H+L) − E(H) > E(L). Reads only (NvmlBackend observe-only); writes OUT/carryover.json.
The measurement is ``hw_backend.observe.carryover`` (tested there with the fake device).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from hw_backend.observe import carryover, observe_only_block
    from hw_backend.workloads import BlockConfig, BlockWorkload

    be, wl, sync = observe_only_block("bf16")
    head = {"command": f"python -m scripts.h200_carryover OUT --window {a.window:g}"}

    def save(doc: dict) -> None:
        (out / "carryover.json").write_text(json.dumps(head | doc, indent=1) + "\n")

    step_wl = BlockWorkload(BlockConfig(precision="bf16"))
    res = carryover(wl.run_stage, step_wl.step, sync, be, window_s=a.window, on_progress=save)
    res["wall_clock_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save(res)
    print("step before/after", res["step_before"]["energy_per_iter_j"], res["step_after"]["energy_per_iter_j"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
