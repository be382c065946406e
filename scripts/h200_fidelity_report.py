"""The H200 model's fidelity before and after session 5 (issue 12): zoo kernels per class and real training steps.

Reads the stored fits and step checks (``validation/h200/fidelity/before/`` = main at a6a2ddc; the current
``validation/h200/characterization/fit.json`` and ``validation/h200/steps_check.json``) and writes
``validation/h200/fidelity/summary.json`` and the markdown tables printed. Usage: ``python -m scripts.h200_fidelity_report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hw_backend.zoo import full_zoo
from simulator.h200_analyses import fidelity_lines, fidelity_summary

if __name__ == "__main__":
    argparse.ArgumentParser(description="rewrites validation/h200/fidelity/summary.json from the stored fit and step "
                                        "checks, and prints the tables (no options; run from anywhere).").parse_args()
    root = Path(__file__).resolve().parents[1]
    doc = fidelity_summary(root, {k.name: k.category for k in full_zoo()})
    (root / "validation/h200/fidelity/summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(fidelity_lines(doc)))
