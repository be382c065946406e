"""Cross-validate the sweep fit on synthetic sweeps with and without low-clock slowdown (no GPU needed).

    python -m scripts.crossval_slowdown [--kernels 20]

Slowdown sweeps (``kdvfs.synthetic.slowdown_sweep``): an older datacentre card, 405–1380 MHz at 11 core clocks, memory
fixed, 1 % time and 2 % power noise; below an onset clock each kernel's time grows faster than 1/f by a form the model
does not share, up to 1 + ``slow_at_min`` × its compute share at 405 MHz. Eight draws: four seeds, an earlier and a
later onset, a weaker and a stronger slowdown. No-slowdown sweeps (``synthetic_sweep``): the Volta-like card of
``scripts/crossval_synthetic.py``, four seeds. Each sweep is cross-validated with 3 training points per kernel in the
rotated layout (``kdvfs.fit.train_indices``, what ``kdvfs profile crossval`` uses) and, for comparison, the fixed one
(lowest, middle, top for every kernel). Writes validation/rtx3080ti-calibration/crossval.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kdvfs.synthetic import crossval_study

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent /
                                         "validation/rtx3080ti-calibration/crossval.json"))
    a = ap.parse_args()
    doc = crossval_study(a.kernels, on_row=lambda r: print(json.dumps(r), flush=True))
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["summary"], indent=1))
