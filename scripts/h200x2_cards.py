"""Per card, not per rank: the DDP runs of ``scripts/h200x2_ddp.py`` laid side by side by the GPU each rank ran on.

    python -m scripts.h200x2_cards RUN_DIR [RUN_DIR ...] [-o cards.json]

Each RUN_DIR holds ``measurements.json`` and the ranks' Kineto files. For every rank of every run: the card (PCI bus
id), its measured DDP step energy and power, the same step with gradient sync off (no collective), and where the run
had ``--extra``: the card's idle power and the collective alone (transferring; and rank 0's waiting). Beside them the
replay of the run's own traces (``scripts/h200x2_compare.py``'s simulation, written to the run's comparison.json),
so a rank's miss can be read against its card. Nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulator.h200_analyses import card_comparison, card_lines

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = card_comparison([Path(r) for r in a.runs], a.gpu)
    print("\n".join(card_lines(doc)))
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
