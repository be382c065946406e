"""Build the bundled H200 profiles (core clock only; memory fixed at 3201 MHz).

    python scripts/build_h200_profile.py

The model starts from each kernel's category and its recorded time (kdvfs.model.default_params on the h200 preset,
whose power constants are anchored on the read-only probe: 700 W cap reached by a bf16 GEMM with the SM clock at
1350–1980 MHz, idle 122 W). The bf16 profile's power at the card's own clocks is then anchored on the observe-only
measurements of validation/h200/h200_measurements.json: every kernel takes the measured average power of the workload
stage that launched it (source ``fitted``). The fp32 trace has no such measurements: its profile stays ``model``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw_backend.sim_workload import stages_of  # noqa: E402
from kdvfs.gpus import AUTO, get_gpu  # noqa: E402
from kdvfs.model import anchor_power, default_params  # noqa: E402
from kdvfs.profile import build_profile, save_profile  # noqa: E402
from kdvfs.trace import load_trace  # noqa: E402


def h200_settings(spec):
    return [(AUTO, AUTO)] + [(c, 3201) for c in spec.core_clocks_mhz]


def main() -> int:
    spec = get_gpu("h200")
    meas = json.loads((ROOT / "validation/h200/h200_measurements.json").read_text())
    for prec in ("bf16", "fp32"):
        trace = load_trace(ROOT / "traces" / f"gpt3xl-torch-h200-{prec}.trace.json")
        params = default_params(trace, spec)
        source = "model"
        if prec == "bf16":
            stage_power = {k: v["power_w"] for k, v in meas["stages"].items() if "power_w" in v}
            pw = np.array([stage_power[st] for st in stages_of(trace)])
            params = anchor_power(spec, params, pw, AUTO, AUTO, times_s=trace.times_s)
            source = "fitted"
        prof = build_profile(trace, spec, params, settings=h200_settings(spec), source=source)
        out = ROOT / "traces" / f"gpt3xl-torch-h200-{prec}.profile.csv.gz"
        save_profile(prof, out)
        ia = prof.auto_index
        print(f"{prec}: wrote {out.name} ({len(prof.keys)} kernels × {len(prof.settings)} settings, source {source}); "
              f"iteration at auto {float(trace.repeats @ prof.time_s[:, ia]):.4f} s, "
              f"{float(trace.repeats @ prof.energy_j[:, ia]):.2f} J")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
