"""Why a calibration of the RTX 3080 Ti model gives up the per-kernel table's best settings (issue 11, diagnosis).

    python -m scripts.best_setting_diagnosis CALIBRATION.json [CALIBRATION.json …] [--out FILE.json]

The same as ``kdvfs profile diagnose`` (``kdvfs.diagnosis``), kept under this name because the diagnosis files under
validation/rtx3080ti-calibration/structure/ were written with it.
"""

from __future__ import annotations

import sys

from kdvfs.cli import main

if __name__ == "__main__":
    sys.exit(main(["profile", "diagnose", *sys.argv[1:]]))
