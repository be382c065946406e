"""Issue 12, session 12: the H200 fit with the two newest zoo sets (``characterization15``, ``tiny-grid2``;
``characterization16``, ``step-ops``), judged by the project's rule. Analysis only: it writes no fit and no profile.

The rule (sessions 7–11, ``validation/h200/fidelity/README.md``): keep a structure or a data set only if the zoo's
held-out split gains (kernels in file-then-zoo order, even positions fitted, odd checked), and not where it is worse
the other way round (odd fitted, even checked) or on ``characterization12``, which no fit sees; the steps are
checked read-only afterwards, never a criterion.

The rows are the nine default files, then ``characterization15``, ``characterization16`` and ``characterization14``
(``FILES``), in that order: each data set of ``DATASETS`` is a prefix of that list, so the nine files' rows keep their
positions (and their held-out rows those of sessions 9–11) and every candidate, whatever it was fitted on, is checked
on the same odd (forward) or even (reverse) rows of the whole list. A row measured twice keeps its first measurement
(``kdvfs.h200_rows``): characterization14's three entries that characterization15 repeats are dropped. The rows a
data set holds are checked as that data set prepares them (its gap power); the others as the whole list does.

``light_comparison`` returns the document; ``python -m scripts.h200_lightfit`` writes it
(``validation/h200/lightfit/comparison.json``) and prints a line per candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from kdvfs.h200_fit import DEFAULT_STRUCTURE
from simulator.h200_convfit import CHECK12, _met, check12_row
from simulator.h200_tinygrid import C14, power_summary
from simulator.h200_tinygrid import STEP_FOLDERS as _TG_STEPS

__all__ = ["C15", "C16", "DATASETS", "FILES", "PARTS", "STEP_FOLDERS", "light_comparison"]

log = logging.getLogger(__name__)

C15 = "validation/h200/characterization/characterization15.json.gz"
C16 = "validation/h200/characterization/characterization16.json.gz"
FILES = (C15, C16, C14)
PARTS = ("nine", "c15", "c16", "c14")
# each data set: how many of FILES it adds to the nine default files (a prefix)
DATASETS = {"nine": 0, "nine+c15+c16": 2, "nine+c15+c16+c14": 3}
STEP_FOLDERS = (*_TG_STEPS, "validation/h200/steps12", "validation/h200/steps12/repeat_lease2",
                "validation/h200/steps12/repeat_lease3")


def _part_rows(root: Path, gap_model: str) -> tuple[list[list[dict]], list[str], list[float | None]]:
    """For each prefix of ``FILES`` (0 … all): its prepared rows and gap power; and the part label of every row of
    the whole list."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, prepared_rows

    data = [str(root / p) for p in DEFAULT_DATA]
    rows: list[list[dict]] = []
    gws: list[float | None] = []
    labels: list[str] = []
    for n in range(len(FILES) + 1):
        r, gw, _, _ = prepared_rows(data + [str(root / p) for p in FILES[:n]], gap_model)
        if rows and [x["name"] for x in r[: len(rows[-1])]] != [x["name"] for x in rows[-1]]:
            raise AssertionError(f"{FILES[n - 1]} changed the earlier files' rows or their order")
        labels += [PARTS[n]] * (len(r) - (len(rows[-1]) if rows else 0))
        rows.append(r)
        gws.append(gw)
    return rows, labels, gws


def _split(rows_ds: list[dict], rows_all: list[dict], labels: list[str], gw: float | None, structure: str) -> dict:
    """Held-out counts of one candidate: fitted on the even (forward) or odd (reverse) positions of its data set's
    rows, checked on the other positions of the whole list, counted per part; the checked rows' power errors."""
    from kdvfs.calibrate_h200 import _extra_fields, _report, fit_h200, spec_from_vector

    extra = _extra_fields(structure)
    rows = rows_ds + rows_all[len(rows_ds):]
    out = {}
    for split, (fit_at, check_at) in {"forward": (0, 1), "reverse": (1, 0)}.items():
        spec = spec_from_vector(fit_h200(rows_ds[fit_at::2], gw, structure), extra=extra)
        reps = {}
        for k in PARTS:
            chk = [r for i, (r, lab) in enumerate(zip(rows, labels)) if lab == k and i % 2 == check_at]
            if chk:
                reps[k] = _report(spec, chk, gap_w=gw)
        out[split] = {"parts": {k: _met(r) for k, r in reps.items()},
                      "total": sum(r["meet_both"] for r in reps.values()),
                      "power_error_pct": {k: {o["name"]: o["power_error_pct"] for o in r["per_kernel"]}
                                          for k, r in reps.items() if k != "nine"}}
    return out


def light_comparison(root: Path, *, structures: Sequence[str] = (DEFAULT_STRUCTURE,),
                     datasets: Sequence[str] = tuple(DATASETS), gap_model: str = "thermal",
                     steps_for: Sequence[str] = (), command: str = "",
                     on_row: Callable[[dict], None] | None = None) -> dict:
    """For each structure and data set: the full fit's counts and params, the held-out split both ways (``_split``),
    the full fit's check on each new file (fitted or held out, as the data set says) and on ``characterization12``
    (never fitted), and, for ``"S@D"`` pairs in ``steps_for``, the steps of ``STEP_FOLDERS`` read-only (SEEN)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, check_h200_fit, run_h200_fit, spec_from_fit
    from kdvfs.thermal import thermal_from_params
    from simulator.h200_variants import _steps

    prefixes, labels, gws = _part_rows(root, gap_model)
    rows_all = prefixes[-1]
    sizes = {k: labels.count(k) for k in PARTS}
    out = []
    for ds in datasets:
        n = DATASETS[ds]
        files = FILES[:n]
        for s in structures:
            label = f"{s}, {ds}"
            doc = run_h200_fit([str(root / p) for p in (*DEFAULT_DATA, *files)],
                               command=f"kdvfs calibrate-h200 --structure {s} --gap-model {gap_model} --no-bundle"
                               + "".join(f" --data {p}" for p in ((*DEFAULT_DATA, *files) if files else ())),
                               structure=s, gap_model=gap_model)
            row = {"candidate": label, "structure": s, "dataset": ds, "zoo_all": _met(doc["fit"]),
                   "params": doc["params"], "heldout": _split(prefixes[n], rows_all, labels, gws[n], s),
                   "check12": check12_row(doc, root)}
            for f, k in zip(FILES, PARTS[1:]):
                ck = check_h200_fit(doc, [str(root / f)])["check"]
                row[f"{k}_full_fit"] = {"met": _met(ck), "seen": f in files, **power_summary(ck)}
            if f"{s}@{ds}" in steps_for:
                row["steps_seen"] = _steps(spec_from_fit(doc), doc["params"]["gap_power_w"], root, STEP_FOLDERS,
                                           thermal_from_params(doc["params"]))
            out.append(row)
            log.info("%s: held out %s", label, row["heldout"]["forward"]["total"])
            if on_row is not None:
                on_row(row)
    return {"command": command, "data": list(DEFAULT_DATA), "files": list(FILES), "sizes": sizes,
            "datasets": {k: list(FILES[:v]) for k, v in DATASETS.items()}, "check": CHECK12, "gap_model": gap_model,
            "rule": "the most zoo kernels within both targets on the held-out split (the nine files, then c15, c16, "
                    "c14; even positions fitted, odd checked, the same rows of the whole list for every candidate), "
                    "not worse the other way round (odd fitted, even checked) or on characterization12 (never "
                    "fitted); the steps read-only afterwards (SEEN), never a criterion",
            "candidates": out}


# the kernel classes of a zoo entry's profiled kernels (``cuda_kernels``), by name: where its time goes
_KINDS = (("layout copy", r"(?<![A-Za-z_])elementwise_kernel<\d+,\s*\d+,\s*at::native::gpu_kernel_impl_nocast<"
                          r"at::native::direct_copy_kernel_cuda|nchwToNhwc|nhwcToNchw"),
          ("GEMM", r"xmma|cutlass|gemm|sm90_|sm80_"), ("fill", r"FillFunctor|Memset"))


def _kind_shares(r: dict) -> dict:
    import re

    ck = [c for c in r.get("cuda_kernels") or [] if isinstance(c, dict) and not str(c.get("name", "")).startswith("(+")]
    tot = sum(float(c.get("us") or 0.0) for c in ck) or 1.0
    out: dict[str, float] = {}
    for c in ck:
        kind = next((k for k, rx in _KINDS if re.search(rx, str(c.get("name", "")))), "other")
        out[kind] = out.get(kind, 0.0) + float(c.get("us") or 0.0) / tot
    return {k: round(v, 3) for k, v in sorted(out.items())}


def light_diagnosis(root: Path, fit: dict, files: Sequence[str] = (C15, C16)) -> dict:
    """Each entry of ``files`` against a fit (``traces/h200.fit.json``'s document): measured and predicted clock and
    power; the kernel's time (the model takes the measured time at the capture clock, so its predicted time is the
    measured one scaled by the clock ratio); its FLOP and useful-byte rates; the predicted power at the measured
    clock split into static (idle), base, math and memory-traffic parts; and the memory traffic that would close the
    power gap at the fit's traffic power (``mem_traffic_power_w`` per peak bandwidth), beside the useful bytes' rate —
    the physical quantity a term would have to supply."""
    import numpy as np

    from kdvfs.calibrate_h200 import DEFAULT_DATA, prepared_rows, spec_from_fit
    from kdvfs.h200_fit import _power_at_measured, predict_zoo
    from kdvfs.h200_rows import kernel_time_s
    from kdvfs.model import activity_from_work
    from kdvfs.work import math_class

    spec = spec_from_fit(fit)
    n9 = len(prepared_rows([str(root / p) for p in DEFAULT_DATA])[0])
    peak_tbs = spec.mem_bandwidth_gbs[-1] / 1e3
    w_per_tbs = spec.mem_traffic_power_w / peak_tbs
    out = {}
    for f in files:
        rows, gw, _, _ = prepared_rows([str(root / p) for p in DEFAULT_DATA] + [str(root / f)])
        rows = rows[n9:]
        fp, pp = predict_zoo(spec, rows, gap_w=gw)
        pm_clock = _power_at_measured(spec, rows, gw)
        fm = np.array([r["sm_mhz_median"] for r in rows])
        t = np.array([kernel_time_s(r) for r in rows])
        args: dict = dict(maths=[r.get("math") or math_class(r["category"], r["dtype"]) for r in rows], time_s=t,
                    core_mhz=fm, categories=[r["category"] for r in rows],
                    working_set_bytes=[r.get("ws_bytes", r["bytes"]) for r in rows],
                    constant_write=[bool(r.get("constant_write")) for r in rows],
                    sm_fraction=[r.get("sm_fraction", 1.0) for r in rows],
                    dot_product=[bool(r.get("dot_product")) for r in rows],
                    occupancy=[r.get("occupancy", 1.0) for r in rows], strided=[bool(r.get("strided")) for r in rows])
        flops = np.array([r["flops"] for r in rows])
        nbytes = np.array([r["bytes"] for r in rows])
        uc, _ = activity_from_work(spec, flops, nbytes, **args)
        uc0, _ = activity_from_work(spec, 0 * flops, nbytes, **args)
        shape = spec.core_power_shape(fm)
        core_w, math_w = spec.core_power_w * uc * shape, spec.core_power_w * (uc - uc0) * shape
        ents = []
        for i, r in enumerate(rows):
            gap = r["power_w"] - pm_clock[i]
            ents.append({
                "name": r["name"], "category": r["category"], "dtype": r["dtype"], "math": args["maths"][i],
                "measured_sm_mhz": r["sm_mhz_median"], "predicted_sm_mhz": round(float(fp[i]), 1),
                "measured_power_w": round(r["power_w"], 1), "predicted_power_w": round(float(pp[i]), 1),
                "power_error_pct": round(100 * (pp[i] / r["power_w"] - 1), 2),
                "kernel_time_us": round(1e6 * t[i], 1),
                "predicted_time_us": round(1e6 * t[i] * r["sm_mhz_median"] / max(float(fp[i]), 1.0), 1),
                "tflops": round(r["flops"] / t[i] / 1e12, 2), "useful_tbs": round(r["bytes"] / t[i] / 1e12, 3),
                "occupancy": round(float(r.get("occupancy", 1.0)), 3),
                "sm_fraction": round(float(r.get("sm_fraction", 1.0)), 3),
                "temperature_c": r.get("temperature_c"), "kernel_time_shares": _kind_shares(r),
                "at_measured_clock_w": {"predicted": round(float(pm_clock[i]), 1), "idle": round(spec.idle_power_w, 1),
                                        "base": round(float(core_w[i] - math_w[i]), 1), "math": round(float(math_w[i]), 1),
                                        "traffic": round(float(pm_clock[i] - core_w[i] - spec.idle_power_w), 1)},
                "gap_w": round(float(gap), 1),
                "extra_traffic_tbs_to_close": round(float(gap) / w_per_tbs, 2)})
        out[f] = ents
    return {"fit_params": fit["params"], "traffic_w_per_tbs": round(w_per_tbs, 2), "entries": out}


FINALISTS = (("warp-occupancy+conv-dot", "nine"), ("warp-occupancy+conv-dot+tensor-knee", "nine+c15+c16"),
             ("warp-occupancy+conv-dot+tensor-knee+strided-copy", "nine+c15+c16"),
             ("warp-occupancy+conv-dot+tensor-knee+strided-copy", "nine+c15+c16+c14"))
"""The bundled model and the candidates that led the comparison on one of its counts (``README.md`` there)."""


def seen_by_a_fit(data: str | Path, root: Path) -> bool:
    """Whether a characterisation file is one the comparison's fits take (so not held out)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA

    seen = {(root / p).resolve() for p in (*DEFAULT_DATA, *FILES)}
    return Path(data).resolve() in seen


def light_check(root: Path, data: str, candidates: Sequence[tuple[str, str]] = FINALISTS) -> dict:
    """Each candidate (structure, data set of ``DATASETS``), fitted in full, checked on ``data``, a zoo file none of
    them saw: kernels within both targets, within 10 % in power, the median |power error| and each entry's errors."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, check_h200_fit, run_h200_fit

    if seen_by_a_fit(data, root):
        raise ValueError(f"{data} is one of the files the candidates are fitted on, so it is not held out")
    rows = []
    for s, ds in candidates:
        doc = run_h200_fit([str(root / p) for p in (*DEFAULT_DATA, *FILES[:DATASETS[ds]])], command="", structure=s,
                           gap_model="thermal")
        ck = check_h200_fit(doc, [data])["check"]
        sm = power_summary(ck)
        rows.append({"structure": s, "dataset": ds, "kernels": ck["kernels"], "meet_both": ck["meet_both"],
                     "meet_clock": ck["meet_clock"], "within_10pct": sm["within_10pct"],
                     "median_abs_pct": round(sm["median_abs_pct"], 2),
                     "per_kernel": [{k: o[k] for k in ("name", "measured_sm_mhz", "predicted_sm_mhz", "clock_error_pct",
                                                       "measured_power_w", "predicted_power_w", "power_error_pct")}
                                    for o in ck["per_kernel"]]})
    return {"data": str(data), "note": "held out for every candidate: no fit saw this file", "candidates": rows}
