"""Held-out check of carrying a schedule to another batch size (``kdvfs simulate --batch``) on the H200 steps.

Five models were recorded on the H200 at two per-GPU batch sizes (``validation/h200/steps``: the small-batch ``-b<N>``
steps and the same models at their own batch sizes). For each pair this imports both traces, builds the model profile
of each (``kdvfs profile build --gpu h200``), and compares, at the large batch:

- auto carried from the small trace (each kernel scaled by its work, ``kdvfs.scaling``) against the model on the
  large trace itself: what the carrying adds to the kernel model's own error;
- the 1 % slack kernel-level schedule (free switching) chosen on the small trace and carried, against the one chosen
  on the large trace: the saving a user would be told from the small trace, beside the one the large trace gives.

Both sides use the same kernel model (isolated throttling, no limiter: ``simulate --batch`` carries without it), so
the difference is the carrying alone. Nothing is fitted. ``python -m scripts.h200_batch_carry_check [-o FILE]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulator.h200_analyses import batch_carry_check, batch_carry_lines

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/user-findings6/batch_carry.json")
    a = ap.parse_args()
    doc = batch_carry_check(Path(__file__).resolve().parents[1] / "validation/h200/steps")
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(batch_carry_lines(doc) + [f"wrote {out}"]))
