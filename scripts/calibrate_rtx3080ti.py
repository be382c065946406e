"""Calibrate the RTX 3080 Ti model and rewrite the bundled profile: a thin wrapper of the package command.

    python scripts/calibrate_rtx3080ti.py            # = kdvfs profile calibrate spaan2026
    python scripts/calibrate_rtx3080ti.py --check    # fit and report only

The fit (per-kernel table and pass-level sweep together, loss and weights in docs/model.md) is
``kdvfs.calibrate_joint.calibrate_spaan2026``; Table 2 is not fitted, it is the check.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kdvfs.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["profile", "calibrate", "spaan2026", *sys.argv[1:]]))
