"""A data-parallel (DDP over NCCL) training step of a real model on several GPUs, measured observe-only.

    torchrun --standalone --nproc_per_node 2 -m scripts.h200x2_ddp --out OUT_DIR [--window 10]
    torchrun --standalone --nproc_per_node 2 -m scripts.h200x2_ddp --out /tmp/dry --dry-run     # CPU, gloo, tiny

A GPT-2-style model built from its Hugging Face config (random weights, nothing downloaded), bf16 autocast, AdamW,
each rank its own GPU at the cards' own clocks. Never changes a clock, limit or mode: NVML is only read (the energy
counter, power, clocks, temperature, limits). Writes into OUT_DIR:

  measurements.json            per rank: ≥ --window s windows of the DDP step (time and energy per step from the
                               NVML energy counter), one window with gradient sync off (no_sync: the compute-only
                               step), power/clock samples, the cards' limits and clocks
  rank0.kineto.json.gz, …      one profiled step per rank (torch.profiler, CPU + CUDA, ProfilerStep annotations)
  rank0.shapes.kineto.json.gz … the same with op shapes (record_shapes=True): the kernels' work

With --extra, also (per rank, in measurements.json): an idle window (no work, after the warm-up: each card's idle
power at the clocks it holds then), and two windows of the collective alone (``--bucket-mb`` all-reduces back to
back, no compute: the collective's own power while it transfers; and the same with every rank but 0 spinning in a
GPU sleep kernel before each all-reduce, so rank 0's collective kernel mostly waits: its power while waiting).
Set CUDA_VISIBLE_DEVICES=1,0 to run rank 0 on the second card (NVML is read by each rank's PCI bus id).

Every rank runs the same number of steps per window (chosen on rank 0 from the warm-up, shared), so no rank waits in
a collective the others never reach.
"""

from __future__ import annotations

import argparse
import logging
import sys

from hw_backend.ddp import DdpConfig, ddp_session

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16, help="per-GPU batch size (large enough that the GPU, not the "
                    "host, sets the pace, also under the profiler)")
    ap.add_argument("--window", dest="window_s", type=float, default=10.0, help="seconds per measured window")
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--warmup", dest="warmup_s", type=float, default=15.0, help="seconds of warm-up steps")
    ap.add_argument("--dry-run", action="store_true", help="CPU, gloo, a tiny model, short windows, no NVML")
    ap.add_argument("--extra", action="store_true", help="also an idle window and the collective-alone windows")
    ap.add_argument("--extra-window", dest="extra_window_s", type=float, default=5.0, help="seconds per --extra window")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="--extra: all-reduce size (DDP's bucket)")
    lg = logging.getLogger("hw_backend.ddp")  # each rank's "[rank N] …" lines on stdout; other libraries' logs as before
    lg.addHandler(logging.StreamHandler(sys.stdout))
    lg.setLevel(logging.INFO)
    lg.propagate = False
    raise SystemExit(ddp_session(DdpConfig(**vars(ap.parse_args()))))
