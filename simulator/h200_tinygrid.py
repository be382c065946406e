"""Issue 12, session 10: which structure prices tensor-core kernels of few blocks (``characterization14``, the
``tiny-grid`` set), judged by the project's rule. Analysis only: it writes no fit and no profile.

The rule (sessions 7–9, ``validation/h200/fidelity/README.md``): fit every valid zoo file; keep a structure only if
the zoo's held-out split gains (kernels in file-then-zoo order, even positions fitted, odd checked); the steps are
checked read-only afterwards. The extra files go after the nine default files (``characterization14`` first, then,
in the second data set, ``characterization13``), so the nine files' rows keep their positions and every candidate of
one data set is checked on the same rows. A row measured twice keeps its first measurement (``kdvfs.h200_rows``), so
``characterization14``'s repeats of 256³, 512³ and 128 × 4096 × 1024 are dropped (they are in the nine files), and
``characterization13``'s SE GEMM 128 × 48 × 1152 is dropped after ``characterization14``. The split takes even and
odd positions of the whole list (the nine files' part has 124 rows, so their held-out rows are those of session 10);
each part's held-out counts are reported. The split the other way
round (odd fitted, even checked) is a sensitivity. ``characterization12`` is a check never fitted.

``tinygrid_comparison`` returns the document; ``python -m scripts.h200_tinygrid`` writes it
(``validation/h200/tinygrid/comparison.json``) and prints a line per candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kdvfs.h200_fit import DEFAULT_STRUCTURE
from simulator.h200_convfit import CHECK12, _met, check12_row

__all__ = ["C13", "C14", "CHECK12", "DATASETS", "STEP_FOLDERS", "power_summary", "tinygrid_comparison"]

log = logging.getLogger(__name__)

C14 = "validation/h200/characterization/characterization14.json.gz"
C13 = "validation/h200/characterization/characterization13.json.gz"
# the data sets: the nine default files plus these, in this order
DATASETS = {"nine": (), "nine+c14": (C14,), "nine+c14+c13": (C14, C13)}
STEP_FOLDERS = ("validation/h200/steps", "validation/h200/steps7", "validation/h200/steps8", "validation/h200/steps9",
                "validation/h200/steps10", "validation/h200/lease_anchor/leaseA/steps",
                "validation/h200/lease_anchor/leaseB/steps", "validation/h200/lease_anchor/leaseC/steps",
                "validation/h200/steps11", "validation/h200/steps11/repeat_leaseB",
                "validation/h200/steps11/repeat_leaseC")


def power_summary(check: dict) -> dict:
    """A fit's check on one zoo file (``check_h200_fit(...)["check"]``) in power: entries within 10 %, the median and
    largest |error| (%), and each entry's error."""
    err = [abs(o["power_error_pct"]) for o in check["per_kernel"]]
    return {"within_10pct": sum(e <= 10 for e in err), "median_abs_pct": float(np.median(err)), "max_abs_pct": max(err),
            "power_error_pct": {o["name"]: o["power_error_pct"] for o in check["per_kernel"]}}


def _split(rows: list[dict], labels: list[str], gw: float | None, structure: str,
           check_only: list[dict] | None = None) -> dict:
    """Held-out counts, fitted on the even (forward) or odd (reverse) positions of the whole list, checked on the
    other positions, counted per source part (``labels``); the tiny-grid rows' power errors where they are checked.
    ``check_only`` (rows appended after ``rows`` for the check only, at those positions: the tiny-grid rows for the
    nine-file fits) is counted as part ``c14``, so that every data set's candidates meet the same held-out rows."""
    from kdvfs.calibrate_h200 import _extra_fields, _report, fit_h200, spec_from_vector

    extra = _extra_fields(structure)
    out = {}
    for split, (fit_at, check_at) in {"forward": (0, 1), "reverse": (1, 0)}.items():
        x = fit_h200(rows[fit_at::2], gw, structure)
        spec = spec_from_vector(x, extra=extra)
        reps = {}
        for k in dict.fromkeys(labels):
            chk = [r for i, (r, lab) in enumerate(zip(rows, labels)) if lab == k and i % 2 == check_at]
            if chk:
                reps[k] = _report(spec, chk, gap_w=gw)
        if check_only and check_only[(check_at + len(rows)) % 2::2]:
            reps["c14"] = _report(spec, check_only[(check_at + len(rows)) % 2::2], gap_w=gw)
        out[split] = {"parts": {k: _met(r) for k, r in reps.items()},
                      "total": sum(r["meet_both"] for r in reps.values()),
                      "c14_power_error_pct": {o["name"]: o["power_error_pct"]
                                              for o in reps.get("c14", {"per_kernel": []})["per_kernel"]}}
    return out


def tinygrid_comparison(root: Path, *, structures: Sequence[str] = (DEFAULT_STRUCTURE,),
                        datasets: Sequence[str] = tuple(DATASETS), gap_model: str = "thermal",
                        steps_for: Sequence[str] = (), command: str = "",
                        on_row: Callable[[dict], None] | None = None) -> dict:
    """For each structure and data set of ``datasets`` (keys of ``DATASETS``): the full fit's counts and params, the
    held-out split both ways (``_split``), the tiny-grid rows' residuals under the full fit (fitted rows where the
    data set holds them, all held out for ``nine``), the check on ``characterization12`` (never fitted) and, for
    ``(structure, dataset)`` pairs named ``"S@D"`` in ``steps_for``, the steps of ``STEP_FOLDERS`` read-only (SEEN:
    chosen after looking at them)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, check_h200_fit, prepared_rows, run_h200_fit, spec_from_fit
    from kdvfs.thermal import thermal_from_params
    from simulator.h200_variants import _steps

    data9 = [str(root / p) for p in DEFAULT_DATA]
    rows9, _, _, _ = prepared_rows(data9, gap_model)
    out = []
    for ds in datasets:
        extra_files = DATASETS[ds]
        data = data9 + [str(root / p) for p in extra_files]
        rows, gw, _, _ = prepared_rows(data, gap_model)
        if [r["name"] for r in rows[: len(rows9)]] != [r["name"] for r in rows9]:
            raise AssertionError(f"{ds}: the extra files changed the nine files' rows or their order")
        sizes = {"nine": len(rows9)}
        i = len(rows9)
        for p in extra_files:  # each file's rows after de-duplication, by their source file
            n = len(prepared_rows(data9 + [str(root / q) for q in extra_files[: extra_files.index(p) + 1]],
                                  gap_model)[0]) - i
            sizes["c14" if p == C14 else "c13"] = n
            i += n
        labels = [k for k, n in sizes.items() for _ in range(n)]
        # the nine-file fits meet the tiny-grid rows they never saw, at the positions they take in nine+c14
        check_only = (prepared_rows(data9 + [str(root / C14)], gap_model)[0][len(rows9):] if not extra_files
                      else None)
        for s in structures:
            label = f"{s}, {ds}"
            doc = run_h200_fit(data, command=f"kdvfs calibrate-h200 --structure {s} --gap-model {gap_model} "
                               "--no-bundle" + "".join(f" --data {p}" for p in (*DEFAULT_DATA, *extra_files)),
                               structure=s, gap_model=gap_model)
            row = {"candidate": label, "structure": s, "dataset": ds, "sizes": sizes, "zoo_all": _met(doc["fit"]),
                   "params": doc["params"], "heldout": _split(rows, labels, gw, s, check_only)}
            row["check12"] = check12_row(doc, root)
            c14 = check_h200_fit(doc, [str(root / C14)])["check"]  # the fitted or held-out tiny-grid rows, full fit
            row["c14_full_fit"] = {"met": _met(c14), "seen": "c14" in sizes, **power_summary(c14)}
            if f"{s}@{ds}" in steps_for:
                row["steps_seen"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root, STEP_FOLDERS,
                                           thermal_from_params(doc["params"]))
            out.append(row)
            log.info("%s: held out %s", label, row["heldout"]["forward"]["total"])
            if on_row is not None:
                on_row(row)
    return {"command": command, "data": list(DEFAULT_DATA), "datasets": {k: list(v) for k, v in DATASETS.items()},
            "check": CHECK12, "gap_model": gap_model,
            "rule": "the most zoo kernels within both targets on the held-out split (file-then-zoo order, even "
                    "positions fitted, odd checked), the same rows for every candidate of one data set; reverse: odd "
                    "fitted, even checked (a sensitivity); characterization12 and the steps read-only (the steps "
                    "SEEN: looked at after the zoo's choice, not blind)",
            "candidates": out}
