"""The observe-only sweep over two H200s (one Ray actor per GPU) against the single-H200 sweep of the same trace.

    python -m scripts.ray_sweep_compare validation/ray/h200x2_sweep_auto.csv validation/h200/h200_sweep_auto.csv \
        [-o validation/ray/h200x2_sweep_compare.json]

With one setting (auto) and two GPUs the sweep deals the workload's units (stages) round-robin: unit i was measured
on GPU i mod 2 (``hw_backend.multisweep``). Per unit: time, power and energy of one pass of the stage (kernel rows
summed; power energy-weighted) in each file, and their ratio; then the ratios' mean per GPU, which shows a card that
draws more power for the same work. The single-H200 sweep ran on another lease, another card.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulator.h200_analyses import ray_sweep_comparison, ray_sweep_lines

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("two")
    ap.add_argument("one")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = ray_sweep_comparison(Path(a.two), Path(a.one))
    print("\n".join(ray_sweep_lines(doc)))
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
