"""Observe-only, on the H200: how much does one 5 s measurement of a kernel scatter between repeats?

    python -m scripts.h200_measurement_noise OUT [--window 5] [--rounds 6] [--warmup 2]

The study (Spaan et al. 2026) measured every kernel at every clock setting once, in one 5 s window (time from CUDA
events, energy from the NVML energy counter), and picked the best of the 66 measurements; so its per-kernel picks and
Table 2 carry the scatter of a single measurement. This script measures that scatter with the same protocol at the
card's own clocks: stages of the recorded bf16 block (two GEMMs and three memory-bound ops), each measured `rounds`
times in ≥ 5 s energy-counter windows after a short warm-up, the stages interleaved so that every window follows a
different stage (as the study's sweep moved from setting to setting). Per stage it reports the coefficient of variation
of time, energy and mean power per iteration, and their correlation. Reads only (NvmlBackend observe-only): no clock,
power limit or other setting is changed. Writes OUT/measurement_noise.json. The measurement is
``hw_backend.observe.measurement_noise`` (tested there with the fake device).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

STAGES = ("fwd.fc1", "fwd.qkv", "fwd.gelu", "fwd.res1", "fwd.ln1")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--warmup", type=float, default=2.0)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from hw_backend.observe import measurement_noise, observe_only_block

    be, wl, sync = observe_only_block("bf16")
    head = {"command": f"python -m scripts.h200_measurement_noise OUT --window {a.window:g} --rounds {a.rounds} "
                       f"--warmup {a.warmup:g}", "torch": sys.modules["torch"].__version__}

    def save(doc: dict) -> None:
        (out / "measurement_noise.json").write_text(json.dumps(head | doc, indent=1) + "\n")

    res = measurement_noise(wl.run_stage, sync, be, stages=STAGES, rounds=a.rounds, window_s=a.window,
                            warmup_s=a.warmup, on_progress=save)
    res["wall_clock_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save(res)
    print(json.dumps(res["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
