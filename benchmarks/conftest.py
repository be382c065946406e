"""Benchmarks (``pytest benchmarks/``): CPU time per call through pytest-benchmark, separate from the test suite.

    python -m pytest benchmarks/ --benchmark-json=validation/benchmarks/benchmarks.json
    python benchmarks/report.py validation/benchmarks/benchmarks.json > docs/benchmarks.md

Each benchmark records its target and the measured value in ``extra_info``; the report turns the JSON into the table.
Ratios (fast path against engine) come from benchmarks of the same run.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
