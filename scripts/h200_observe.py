"""One session on a lent H200, observe-only: record traces, measure kernels and the step, cost of live switching.

    python -m scripts.h200_observe OUT_DIR [--window 5]

Never changes a clock, limit or mode: the NVML backend is built with observe_only=True and only reads the energy
counter, clocks and power. Writes into OUT_DIR:
  gpt3xl-torch-h200-bf16.trace.json, gpt3xl-torch-h200-fp32.trace.json   (kdvfs record, layer segments × 24)
  gpt3xl-torch-h200-bf16.kineto.json.gz                                   (the raw profiler trace, labelled)
  foreign-transformer.kineto.json.gz   (a plain PyTorch training step of nn.TransformerEncoder, no kdvfs labels)
  h200_measurements.json               (isolated stages, whole step, live-mode switching cost with no-op writes)

The session is ``hw_backend.observe.observe_session``; its parts are tested there with the fake device.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--only-foreign", action="store_true", help="record only the foreign (unlabelled) trace")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from hw_backend.observe import observe_session

    observe_session(Path(a.out), a.window, a.only_foreign)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
