"""Rebuild the bundled H200 traces' work and profiles (core clock only; memory fixed at 3201 MHz).

    python -m scripts.build_h200_profile

Thin wrapper of ``kdvfs.calibrate_h200.build_h200_profiles``: each bundled trace takes the FLOPs and bytes of its
shape-recorded twin (validation/h200/steps/block-<prec>.kineto.json.gz, the same workload recorded with
``record_shapes=True`` on the same card), and its profile is the model's: activity from each kernel's work, the h200
preset's constants fitted to the characterisation zoo (traces/h200.fit.json). Source ``model``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kdvfs.calibrate_h200 import build_h200_profiles

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    import argparse

    argparse.ArgumentParser(description="rebuilds the bundled H200 traces and profiles in traces/ from the fitted preset (no options; run from anywhere).").parse_args()
    print(json.dumps(build_h200_profiles(ROOT), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
