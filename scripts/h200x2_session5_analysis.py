"""Session 5's two-H200 run, read from its log, and what it says about the rank-0 energy miss.

    python -m scripts.h200x2_session5_analysis validation/h200x2/session5/log.txt validation/h200x2 \
        -o validation/h200x2/session5/analysis.json

The run (``scripts/h200x2_session5.sh``) measured the DDP step twice, with rank 0 on the first card (``ddp01``) and on
the second (``ddp10``, ``CUDA_VISIBLE_DEVICES=1,0``), each with an idle window and the collective alone. Both DDP
stages then hung in their last window (a count bug, fixed since) and were stopped by their timeout, so their
``measurements.json`` and traces were never written; every window's result was already in the log, read here from the
per-rank lines (``[rank R] LABEL: … J per step, … W``, from the NVML energy counter).

It reports, per card: the step's energy with and without gradient sync in both rank orders; the card's power right
after work with nothing running (``idle``), with only all-reduces running (``coll_transfer``), and rank 0's while its
all-reduce mostly waits for the other rank spinning in a sleep kernel (``coll_wait``). Then it replays session 4's
recorded step (the traces in SESSION4_DIR, the same model, batch and machine layout) with the model as shipped and
with the collective's power taken from these windows (its increment over the card's idle-after-work power, on top
of the model's idle), against session 4's and session 5's measured energies. Nothing is fitted to a step energy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulator.h200_analyses import session5_analysis, session5_lines

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("session4")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = session5_analysis(Path(a.log), Path(a.session4))
    print("\n".join(session5_lines(doc)))
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
