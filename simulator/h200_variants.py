"""Issue 12, session 8: the H200 model's structure variants, each refitted on the zoo (``kdvfs calibrate-h200
--structure S``, the default files: ``kdvfs.calibrate_h200.DEFAULT_DATA``), compared by the zoo's held-out split (the rule that chose the bundled one),
and, read-only, on the recorded steps (nothing is fitted to them; steps7 and steps8 are seen).

``structure_variants`` returns the document; ``python -m scripts.h200_structure_variants [-o
validation/h200/small_kernels/variants.json]`` writes it and prints a line per variant (about two minutes of fits and,
for the variants in ``STEPS_FOR``, a minute of step checks each).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

__all__ = ["FOLDERS", "SESSION7_FIT", "STEPS_FOR", "VARIANTS", "structure_variants"]

log = logging.getLogger(__name__)

VARIANTS = ("none", "sm-occupancy", "issue-rate", "sm-occupancy+issue-rate", "tensor-rate", "conv-dot",
            "warp-occupancy", "warp-occupancy+conv-dot", "warp-occupancy+issue-rate", "warp-occupancy+sm-occupancy",
            "warp-occupancy+tensor-rate", "warp-occupancy+occupancy-rate-floor",
            "warp-occupancy+occupancy-rate-floor+conv-dot", "warp-occupancy+occupancy-rate-floor+tensor-rate")
STEPS_FOR = ("none", "warp-occupancy", "warp-occupancy+conv-dot", "warp-occupancy+occupancy-rate-floor")
FOLDERS = ("validation/h200/steps", "validation/h200/steps7", "validation/h200/steps8")
SESSION7_FIT = "validation/h200/fidelity/session7_fit.json"


def _steps(spec, gap_w: float, root: Path) -> dict:
    from simulator.stepcheck import check_steps

    out = {}
    for d in FOLDERS:
        r = check_steps(root / d, spec, gap_power_w=gap_w)
        e = {x["model"]: x["error"]["limiter_with_gaps"] for x in r["steps"] if "error" in x}
        out[d] = {"met": r["met"], "energy_pct": {m: round(v["energy_pct"], 2) for m, v in e.items()},
                  "median_clock_pct": {m: round(v["median_clock_pct"], 2) for m, v in e.items()}}
    return out


def structure_variants(root: Path, on_row: Callable[[dict], None] | None = None) -> dict:
    """The document of ``python -m scripts.h200_structure_variants`` (``variants.json``): session 7's bundled fit on
    the steps, then every structure of ``VARIANTS`` refitted on the default files under ``root`` (the checkout), with
    its zoo counts (all, held-out, the first 90) and, for those of ``STEPS_FOR``, the steps read-only. ``on_row`` gets
    each variant's row as it is done (the fits take minutes)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, run_h200_fit, spec_from_fit

    data = [str(root / p) for p in DEFAULT_DATA]
    rows = []
    s7 = json.loads((root / SESSION7_FIT).read_text())  # the session-7 bundled fit (six files, no structure)
    rows.append({"variant": "session 7 as bundled (six files, none)", "zoo_all": None, "zoo_heldout": None,
                 "params": s7["params"], "steps": _steps(spec_from_fit(s7), s7["params"]["gap_power_w"], root)})
    for v in VARIANTS:
        doc = run_h200_fit(data, command=f"kdvfs calibrate-h200 --structure {v} --no-bundle", structure=v)
        f, h = doc["fit"], doc["heldout"]["test"]
        row = {"variant": v, "zoo_all": [f["meet_both"], f["kernels"]], "zoo_heldout": [h["meet_both"], h["kernels"]],
               "zoo_first90": sum(o["meets_both"] for o in f["per_kernel"][:90]),
               "power_rms_pct": round(f["power_rms_error_pct"], 2), "params": doc["params"]}
        if v in STEPS_FOR:
            row["steps"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root)
        rows.append(row)
        log.info("structure variant %s: zoo %s, held-out %s", v, row["zoo_all"], row["zoo_heldout"])
        if on_row is not None:
            on_row(row)
    return {"command": "python -m scripts.h200_structure_variants", "data": list(DEFAULT_DATA),
            "rule": "keep a structure only if the zoo's held-out split (file-then-zoo order, even fitted, odd checked) "
                    "gains; the steps are checked read-only",
            "variants": rows}
