"""Issue 12, session 8: the H200 model's structure variants, each refitted on the zoo (``kdvfs calibrate-h200
--structure S``, the default files: ``kdvfs.calibrate_h200.DEFAULT_DATA``), compared by the zoo's held-out split (the rule that chose the bundled one),
and, read-only, on the recorded steps (nothing is fitted to them; steps7 and steps8 are seen).

Usage: ``python -m scripts.h200_structure_variants [-o validation/h200/small_kernels/variants.json]`` (about two
minutes of fits and, for the variants in ``STEPS_FOR``, a minute of step checks each).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["FOLDERS", "SESSION7_FIT", "STEPS_FOR", "VARIANTS", "main"]

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


def main(argv=None) -> int:
    from kdvfs.calibrate_h200 import DEFAULT_DATA, run_h200_fit, spec_from_fit

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/small_kernels/variants.json")
    ap.add_argument("--variant", action="append", help="only this structure (repeatable; default: every VARIANTS "
                    "entry and session 7's stored fit); STRUCTURE@GAP_MODEL fits it with that gap model "
                    "(kdvfs.calibrate_h200.GAP_MODELS), e.g. warp-occupancy+conv-dot@thermal")
    ap.add_argument("--steps", action="append", help="check the steps of this folder for every variant fitted "
                    "(repeatable; default: the variants of STEPS_FOR on FOLDERS)")
    ap.add_argument("--zoo-only", action="store_true", help="no step checks (the rule reads the zoo alone)")
    ap.add_argument("--check", action="append", metavar="FILE", help="also predict this characterisation file with "
                    "each variant's fit, fitting nothing to it (repeatable; e.g. a zoo set measured after the choice)")
    ap.add_argument("--reverse-split", action="store_true", help="also the split the other way round (odd positions "
                    "fitted, even checked): a sensitivity of the rule, not the rule")
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    data = [str(root / p) for p in DEFAULT_DATA]
    rows = []
    if not a.variant and not a.zoo_only:
        s7 = json.loads((root / SESSION7_FIT).read_text())  # the session-7 bundled fit (six files, no structure)
        rows.append({"variant": "session 7 as bundled (six files, none)", "zoo_all": None, "zoo_heldout": None,
                     "params": s7["params"], "steps": _steps(spec_from_fit(s7), s7["params"]["gap_power_w"], root)})
    from kdvfs.thermal import thermal_from_params

    for vg in a.variant or VARIANTS:
        v, _, gm = vg.partition("@")
        doc = run_h200_fit(data, command=f"kdvfs calibrate-h200 --structure {v} --no-bundle"
                           + (f" --gap-model {gm}" if gm else ""), structure=v, **({"gap_model": gm} if gm else {}))
        f, h = doc["fit"], doc["heldout"]["test"]
        row = {"variant": vg, "zoo_all": [f["meet_both"], f["kernels"]], "zoo_heldout": [h["meet_both"], h["kernels"]],
               "zoo_first90": sum(o["meets_both"] for o in f["per_kernel"][:90]),
               "power_rms_pct": round(f["power_rms_error_pct"], 2), "params": doc["params"]}
        if a.check:
            from kdvfs.calibrate_h200 import check_h200_fit

            row["checks"] = {}
            for cf in a.check:
                ck = check_h200_fit(doc, [cf])["check"]
                row["checks"][cf] = {"met": [ck["meet_both"], ck["kernels"]], "power_error_pct": {
                    o["name"]: o["power_error_pct"] for o in ck["per_kernel"]}}
        if a.reverse_split:
            row["zoo_heldout_reverse"] = _reverse(data, v, gm)
        if not a.zoo_only and (a.steps or v in STEPS_FOR):
            row["steps"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root, tuple(a.steps or FOLDERS),
                                  thermal_from_params(doc["params"]))
        rows.append(row)
        print(vg, row["zoo_all"], row["zoo_heldout"], {d: s["met"] for d, s in row.get("steps", {}).items()}, flush=True)
    import shlex
    import sys

    cmd = " ".join(["python -m scripts.h200_structure_variants", *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    doc = {"command": cmd, "data": list(DEFAULT_DATA),
           "rule": "keep a structure only if the zoo's held-out split (file-then-zoo order, even fitted, odd checked) "
                   "gains; the steps are checked read-only",
           "variants": rows}
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
