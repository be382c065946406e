"""Issue 12, session 10: the conv set (``characterization13``) in the H200 fit, judged by the project's rule.

The rule (sessions 7–9, ``validation/h200/fidelity/README.md``): fit every valid zoo file; keep a structure only if
the zoo's held-out split gains (kernels in file-then-zoo order, even positions fitted, odd checked); the steps are
checked read-only afterwards. The conv file is appended after the nine default files, so the nine files' rows keep
their positions and both candidates' held-out sets contain the same 62 rows of the nine files; the conv file's odd
rows (12) are held out for both (the nine-file fit never sees any of it). The split the other way round (odd fitted,
even checked) is a sensitivity. ``characterization12`` (a warm-cool set measured after session 9's choice) is a check
never fitted.

``conv_fit_comparison`` returns the document; ``python -m scripts.h200_conv_fit`` writes it
(``validation/h200/convfit/comparison.json``) and prints a line per candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from kdvfs.h200_fit import DEFAULT_STRUCTURE

__all__ = ["CHECK12", "CONV", "STEP_FOLDERS", "check12_row", "conv_fit_comparison", "step_lines"]

log = logging.getLogger(__name__)

CONV = "validation/h200/characterization/characterization13.json.gz"
CHECK12 = "validation/h200/characterization/characterization12.json.gz"
STEP_FOLDERS = ("validation/h200/steps", "validation/h200/steps7", "validation/h200/steps8", "validation/h200/steps9",
                "validation/h200/steps10")


def _met(rep: dict) -> list[int]:
    return [rep["meet_both"], rep["kernels"]]


def check12_row(doc: dict, root: Path) -> dict:
    """A fitted candidate (``run_h200_fit``'s document) checked on characterization12, which no fit sees: kernels within
    both targets (of all) and each entry's power error."""
    from kdvfs.calibrate_h200 import check_h200_fit

    ck = check_h200_fit(doc, [str(root / CHECK12)])["check"]
    return {"met": _met(ck), "power_error_pct": {o["name"]: o["power_error_pct"] for o in ck["per_kernel"]}}


def _candidate(rows9: list[dict], conv: list[dict], gw: float | None, structure: str, with_conv: bool) -> dict:
    """Held-out counts of one candidate: fitted on the even (forward) or odd (reverse) positions of its rows, checked
    on the other positions of the nine files and of the conv file."""
    from kdvfs.calibrate_h200 import _extra_fields, _report, fit_h200, spec_from_vector

    rows = rows9 + conv if with_conv else rows9
    extra = _extra_fields(structure)
    out = {}
    for split, (fit_at, check_at) in {"forward": (0, 1), "reverse": (1, 0)}.items():
        x = fit_h200(rows[fit_at::2], gw, structure)
        spec = spec_from_vector(x, extra=extra)
        nine = _report(spec, rows9[check_at::2], gap_w=gw)
        cv = _report(spec, conv[check_at::2], gap_w=gw)
        out[split] = {"nine_files": _met(nine), "conv": _met(cv), "total": nine["meet_both"] + cv["meet_both"],
                      "conv_power_error_pct": {o["name"]: o["power_error_pct"] for o in cv["per_kernel"]}}
    return out


def conv_fit_comparison(root: Path, *, structures: Sequence[str] = (DEFAULT_STRUCTURE,),
                        gap_model: str = "thermal", steps: bool = True, command: str = "",
                        on_row: Callable[[dict], None] | None = None) -> dict:
    """For each structure of ``structures``, two candidates — fitted on the nine default files, and on them plus the
    conv file — with their held-out counts both ways (``_candidate``), the full fit's counts, the check on
    ``characterization12`` (never fitted) and, with ``steps``, the steps of ``STEP_FOLDERS`` read-only."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, check_h200_fit, prepared_rows, run_h200_fit, spec_from_fit
    from kdvfs.thermal import thermal_from_params
    from simulator.h200_variants import _steps

    data9 = [str(root / p) for p in DEFAULT_DATA]
    data10 = data9 + [str(root / CONV)]
    rows9, gw9, _, _ = prepared_rows(data9, gap_model)
    rows10, gw10, _, _ = prepared_rows(data10, gap_model)
    if [r["name"] for r in rows10[: len(rows9)]] != [r["name"] for r in rows9]:
        raise AssertionError("the conv file changed the nine files' rows or their order")
    conv = rows10[len(rows9):]
    out = []
    for s in structures:
        for with_conv in (False, True):
            data, gw = (data10, gw10) if with_conv else (data9, gw9)
            label = f"{s}, {'nine files + conv' if with_conv else 'nine files'}"
            doc = run_h200_fit(data, command=f"kdvfs calibrate-h200 --structure {s} --gap-model {gap_model} "
                               "--no-bundle" + ("".join(f" --data {p}" for p in (*DEFAULT_DATA, CONV))
                                                if with_conv else ""), structure=s, gap_model=gap_model)
            row = {"candidate": label, "structure": s, "with_conv": with_conv,
                   "zoo_all": _met(doc["fit"]), "params": doc["params"],
                   "heldout": _candidate(rows9, conv, gw, s, with_conv)}
            row["check12"] = check12_row(doc, root)
            if not with_conv:  # the whole conv file is held out from the nine-file fit
                row["conv_all_heldout"] = _met(check_h200_fit(doc, [str(root / CONV)])["check"])
            if steps:
                row["steps"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root, STEP_FOLDERS,
                                      thermal_from_params(doc["params"]))
            out.append(row)
            log.info("%s: held out %s", label, row["heldout"]["forward"]["total"])
            if on_row is not None:
                on_row(row)
    return {"command": command, "data": list(DEFAULT_DATA) + [CONV], "check": CHECK12, "gap_model": gap_model,
            "rule": "the most zoo kernels within both targets on the held-out split (file-then-zoo order, even "
                    "positions fitted, odd checked), the same 62 rows of the nine files plus the conv file's 12 odd "
                    "rows for every candidate; reverse: odd fitted, even checked (a sensitivity); characterization12 "
                    "and the steps read-only",
            "candidates": out}


def step_lines(steps: dict | None) -> list[str]:
    """One line per step set of a candidate's step checks: how many steps meet the energy (3 %) and clock (2 %)
    targets."""
    return [f"    {d}: energy within 3 % {sum(abs(v) <= 3 for v in s['energy_pct'].values())} of "
            f"{len(s['energy_pct'])}, clock {sum(abs(v) <= 2 for v in s['median_clock_pct'].values())}"
            for d, s in (steps or {}).items()]
