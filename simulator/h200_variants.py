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
from collections.abc import Callable, Sequence
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


def _steps(spec, gap_w: float, root: Path, folders=FOLDERS, thermal=None) -> dict:
    from simulator.stepcheck import check_steps

    out = {}
    for d in folders:
        r = check_steps(root / d, spec, gap_power_w=gap_w, thermal=thermal)
        e = {x["model"]: x["error"]["limiter_with_gaps"] for x in r["steps"] if "error" in x}
        out[d] = {"met": r["met"], "energy_pct": {m: round(v["energy_pct"], 2) for m, v in e.items()},
                  "median_clock_pct": {m: round(v["median_clock_pct"], 2) for m, v in e.items()}}
    return out


def _reverse(data, structure: str, gap_model: str) -> list[int]:
    """[within both targets, of] on the zoo's odd positions' complement: fitted on the odd positions, checked on the even."""
    from kdvfs.calibrate_h200 import _extra_fields, _report, fit_h200, prepared_rows, spec_from_vector

    rows, gap_w, _, _ = prepared_rows(data, *([gap_model] if gap_model else []))
    x = fit_h200(rows[1::2], gap_w, structure)
    r = _report(spec_from_vector(x, extra=_extra_fields(structure)), rows[0::2], gap_w=gap_w)
    return [r["meet_both"], r["kernels"]]


def structure_variants(root: Path, *, variants: Sequence[str] | None = None, steps: Sequence[str] | None = None,
                       zoo_only: bool = False, check: Sequence[str] | None = None, reverse_split: bool = False,
                       command: str = "python -m scripts.h200_structure_variants",
                       on_row: Callable[[dict], None] | None = None) -> dict:
    """The document of ``python -m scripts.h200_structure_variants`` (``variants.json``): session 7's bundled fit on
    the steps (unless ``variants`` or ``zoo_only``), then each structure of ``variants`` (default ``VARIANTS``;
    ``STRUCTURE@GAP_MODEL`` fits it with that gap model of ``kdvfs.calibrate_h200.GAP_MODELS``) refitted on the
    default files under ``root`` (the checkout), with its zoo counts (all, held-out, the first 90); for those of
    ``STEPS_FOR`` (or every one where ``steps`` names folders) the steps read-only; each file of ``check`` predicted
    with the fit, fitting nothing to it; with ``reverse_split`` the split the other way round (a sensitivity of the
    rule, not the rule). ``on_row`` gets each variant's row as it is done (the fits take minutes)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, DEFAULT_GAP_MODEL, run_h200_fit, spec_from_fit
    from kdvfs.thermal import thermal_from_params

    data = [str(root / p) for p in DEFAULT_DATA]
    rows = []
    if not variants and not zoo_only:
        s7 = json.loads((root / SESSION7_FIT).read_text())  # the session-7 bundled fit (six files, no structure)
        rows.append({"variant": "session 7 as bundled (six files, none)", "zoo_all": None, "zoo_heldout": None,
                     "params": s7["params"], "steps": _steps(spec_from_fit(s7), s7["params"]["gap_power_w"], root)})
    for vg in variants or VARIANTS:
        v, _, gm = vg.partition("@")
        doc = run_h200_fit(data, command=f"kdvfs calibrate-h200 --structure {v} --no-bundle"
                           + (f" --gap-model {gm}" if gm else ""), structure=v, gap_model=gm or DEFAULT_GAP_MODEL)
        f, h = doc["fit"], doc["heldout"]["test"]
        row = {"variant": vg, "zoo_all": [f["meet_both"], f["kernels"]], "zoo_heldout": [h["meet_both"], h["kernels"]],
               "zoo_first90": sum(o["meets_both"] for o in f["per_kernel"][:90]),
               "power_rms_pct": round(f["power_rms_error_pct"], 2), "params": doc["params"]}
        if check:
            from kdvfs.calibrate_h200 import check_h200_fit

            row["checks"] = {}
            for cf in check:
                ck = check_h200_fit(doc, [cf])["check"]
                row["checks"][cf] = {"met": [ck["meet_both"], ck["kernels"]], "power_error_pct": {
                    o["name"]: o["power_error_pct"] for o in ck["per_kernel"]}}
        if reverse_split:
            row["zoo_heldout_reverse"] = _reverse(data, v, gm)
        if not zoo_only and (steps or v in STEPS_FOR):
            row["steps"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root, tuple(steps or FOLDERS),
                                  thermal_from_params(doc["params"]))
        rows.append(row)
        log.info("structure variant %s: zoo %s, held-out %s", vg, row["zoo_all"], row["zoo_heldout"])
        if on_row is not None:
            on_row(row)
    return {"command": command, "data": list(DEFAULT_DATA),
            "rule": "keep a structure only if the zoo's held-out split (file-then-zoo order, even fitted, odd checked) "
                    "gains; the steps are checked read-only",
            "variants": rows}
