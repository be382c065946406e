"""How many measurements sparse mode needs to come within 0.5 points of the exhaustive sweep's saving (fake GPU).

    python -m scripts.sparse_vs_exhaustive [--window 5]

The fake RTX 3080 Ti runs the bundled GPT-3 XL kernels with the calibrated model as its truth and realistic noise
(1 % time, 2 % power per run; energy counter stepping every 100 ms; 5 s windows). Exhaustive: every kernel at every
one of the study's settings. Sparse: auto plus two probe settings (a lower core clock; a lower memory clock), a
fit, the global optimum on the fitted profile, and each kernel's chosen setting measured (two rounds). Each sweep → `profile fit` → global strict-waste optimum over the study's
settings → the schedule's *true* saving (the fake's noise-free model). Writes validation/fake/sparse_vs_exhaustive.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hw_backend.sparse_study import sparse_vs_exhaustive

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "validation/fake"))
    a = ap.parse_args()
    doc = sparse_vs_exhaustive(a.window, a.out, on_run=lambda r: print(json.dumps(r)))
    (Path(a.out) / "sparse_vs_exhaustive.json").write_text(json.dumps(doc, indent=1) + "\n")
    ex, sp = doc["runs"]
    print(f"sparse: {sp['measurements']} of {ex['measurements']} measurements ({100 * doc['measurement_ratio']:.1f} %), "
          f"true saving {sp['true_energy_change_pct']:+.2f} % vs exhaustive {ex['true_energy_change_pct']:+.2f} % "
          f"(difference {doc['saving_difference_points']:.2f} points)")
