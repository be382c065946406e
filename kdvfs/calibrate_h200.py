"""Fit the H200's card constants to the observe-only characterisation zoo (``kdvfs characterize``).

Fitted: core dynamic power at the boost clock, the voltage curve (``v_min`` and the knee; ``v_max`` = 1
at the top clock), memory-traffic power, the power the limiter holds (``cap_w``) and the coefficients of core
activity from work (``base``, ``tf32``, ``simt``, ``mem``, ``ew``, ``l2_mb``, ``att``; ``tensor16`` = 1 sets the
scale). Peak rates per dtype are the datasheet's (not fitted).

Data: each zoo kernel alone at the card's own clocks — its measured time per invocation, the SM clock the driver
chose (NVML median over ≥ 5 s), the average power (energy counter / window), its FLOPs and bytes. Each kernel's
time is anchored at its measured clock; the model then predicts the clock the cap allows (``evaluate`` at auto) and
the power there.

Loss: ``Σ_k ((f̂_k / f_k − 1) / 0.05)² + ((P̂_k / P_k − 1) / 0.03)²`` — the squared relative errors of clock and power,
each divided by its target (5 % and 3 %, issue 12), minimised with ``scipy.optimize.least_squares`` (trust region,
bounded). A held-out check fits on every other zoo kernel (in zoo order, which runs from compute- to memory-bound) and
predicts the rest.

The module is split along its seams: ``kdvfs.h200_rows`` reads and normalises the characterisation files into rows,
``kdvfs.h200_fit`` is the fit and its structures (plain rows in, numbers out), this module writes the fit's document,
checks a stored fit and rebuilds the bundled profiles; what the zoo's entries are, how a file is read and the block's
stage repeats come from ``hw_backend`` through one seam, ``kdvfs.zoo_source`` (plain data, imported lazily). Every
name below stays importable from here.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, H200_UNFITTED, GpuSpec, apply_h200_fit
from kdvfs.h200_fit import (
    _X0,
    ACTIVITY_FIELDS,
    CARD_FIELDS,
    CLOCK_TOL,
    DEFAULT_STRUCTURE,
    PEAK_TFLOPS_DTYPE,
    POWER_TOL,
    STRUCTURES,
    TEMP_REF_C,
    _extra_fields,
    _params,
    _report,
    _summary,
    fit_h200,
    predict_zoo,
    spec_from_vector,
)
from kdvfs.h200_rows import (
    DEFAULT_DATA,
    DEFAULT_GAP_MODEL,
    GAP_MODELS,
    LAUNCH_BOUND_BUSY,
    busy_fraction,
    constant_write,
    gap_power,
    gap_thermal,
    kernel_rows,
    kernel_time_s,
    load_rows,
    onset_rows,
    period_s,
    prepared_rows,
    row_role,
    warm_gap_power,
    zoo_direct_convolution,
    zoo_rows,
    zoo_sm_fraction,
)
from kdvfs.importers import transfer_work
from kdvfs.zoo_source import ZooSource, stage_repeats

__all__ = ["ACTIVITY_FIELDS", "CARD_FIELDS", "CLOCK_TOL", "DEFAULT_DATA", "DEFAULT_GAP_MODEL", "DEFAULT_STRUCTURE",
           "FIT_FORMAT", "GAP_MODELS", "LAUNCH_BOUND_BUSY", "PEAK_TFLOPS_DTYPE", "POWER_TOL", "STRUCTURES",
           "TEMP_REF_C", "build_h200_profiles", "busy_fraction", "check_h200_fit", "constant_write", "fit_h200",
           "gap_power", "gap_thermal", "kernel_rows", "kernel_time_s", "load_rows", "onset_rows", "period_s",
           "predict_zoo", "prepared_rows", "row_role", "run_h200_fit", "spec_from_fit", "spec_from_vector",
           "transfer_work", "warm_gap_power", "zoo_direct_convolution", "zoo_rows", "zoo_sm_fraction"]
# _extra_fields and _report are imported here too: simulator/h200_convfit.py and h200_variants.py take them from here

log = logging.getLogger(__name__)

FIT_FORMAT = "kdvfs-h200-fit/1"


def run_h200_fit(data, command: str = "", structure: str = DEFAULT_STRUCTURE, gap_model: str = DEFAULT_GAP_MODEL,
                 *, zoo: ZooSource | None = None) -> dict:
    """The full fit (every zoo kernel of every file: what the h200 preset uses) and the held-out check (kernels in
    file-then-zoo order, even positions fitted, odd checked), as one document. ``data``: a characterisation file or a
    list of them. The ``gap`` entries give the power between kernels (``gap_power_w``), which launch-bound entries
    are predicted with; they are not fitted. ``zoo``: the zoo's definitions (``kdvfs.zoo_source``; None: the
    ``hw_backend`` zoo's)."""
    extra = _extra_fields(structure)
    if gap_model not in GAP_MODELS:
        raise InputError(f"calibrate-h200: gap model {gap_model!r} is not one of {', '.join(GAP_MODELS)}; e.g. "
                         f"--gap-model {DEFAULT_GAP_MODEL}")
    rows, gap_w, paths, docs = prepared_rows(data, gap_model, zoo=zoo)
    if len(rows) < len(_X0):
        raise InputError(f"calibrate-h200: {len(rows)} measured kernel(s) in {', '.join(map(str, paths))}, fewer than "
                         f"the {len(_X0)} constants fitted; give more characterisation files (the default data has "
                         "124 kernels)")
    if not any(r["role"] == "duty" for r in rows):
        log.warning("calibrate-h200: no duty entry (a burst below the cap) in the data: the voltage curve's slope is "
                    "then set by throttled kernels alone; add a file with duty entries (characterization4.json.gz)")
    gaps = load_rows(data, zoo=zoo)[1]
    onset = onset_rows(docs, zoo=zoo)
    thermal = gap_thermal(rows, gaps).to_dict() if gap_model == "thermal" and gaps else None
    x = fit_h200(rows, gap_w, structure)
    spec = spec_from_vector(x, extra=extra)
    train = rows[0::2]
    test = rows[1::2]
    xh = fit_h200(train, gap_w, structure)
    sh = spec_from_vector(xh, extra=extra)
    full = _report(spec, rows, gap_w=gap_w)
    first = {r["name"] for r in rows if r["file"] == Path(paths[0]).name}
    by_file = _summary([o for o in full["per_kernel"] if o["name"] in first])
    return {
        "format": FIT_FORMAT, "command": command, "data": paths if len(paths) > 1 else paths[0],
        "gpu": docs[0].get("gpu"), "driver": docs[0].get("driver"),
        "loss": "sum over zoo kernels of ((predicted/measured clock - 1)/0.05)^2 + ((predicted/measured power - 1)/0.03)^2",
        "targets": {"clock_pct": 100 * CLOCK_TOL, "power_pct": 100 * POWER_TOL},
        "structure": structure, "gap_model": gap_model,
        "params": _params(x, gap_w, extra) | ({"thermal": thermal} if thermal else {}), "fit": full,
        "fit_first_file": by_file | {"note": f"the same fit, only the kernels of {Path(paths[0]).name}"},
        "gap": {"power_w": gap_w, "entries": [{"name": g["name"], "power_w": g["power_w"], "sm_mhz_median":
                                               g["sm_mhz_median"], "time_s": g["time_s"],
                                               "temperature_c": g.get("temperature_c")} for g in gaps],
                "note": "the GPU between kernels (a tiny kernel every 100 µs / 1 ms, nothing launched): the power of "
                        "a training step's host gaps and of the idle share of launch-bound entries"},
        "onset_check": _report(spec, onset, gap_w=gap_w) | {
            "note": "not fitted: NVML's instantaneous power at the probe's burst onsets, a lagging reading (see "
                    "prepared_rows); the duty entries' energy counter measures the same GEMM's bursts"} if onset else None,
        "fit_clock_solved": {k: v for k, v in _report(spec, rows, known_clock=False, gap_w=gap_w).items()
                             if k != "per_kernel"}
        | {"note": "the same fit, each kernel's capture clock not given but solved with its activity"},
        "heldout": {"split": "kernels in file-then-zoo order: even positions fit, odd positions checked",
                    "params": _params(xh, gap_w, extra), "train": _report(sh, train, gap_w=gap_w),
                    "test": _report(sh, test, gap_w=gap_w),
                    "test_clock_solved": {k: v for k, v in _report(sh, test, known_clock=False, gap_w=gap_w).items()
                                          if k != "per_kernel"}},
        "notes": "each kernel alone at the card's own clocks; the model sees its FLOPs, bytes (and the bytes one "
                 "launch touches, for L2 residency), measured time and the clock it was measured at, and predicts "
                 "the clock the fitted cap allows and the power there; a launch-bound entry is its kernels for the "
                 "busy share of its time and the gap power for the rest",
    }


def spec_from_fit(fit: dict, base: GpuSpec = H200_UNFITTED, source: str = "", where: str = "the fit") -> GpuSpec:
    """``base`` with the fitted constants of a ``kdvfs-h200-fit/1`` document, each with its source; ``where`` names
    the document in errors."""
    if not isinstance(fit, dict) or fit.get("format") != FIT_FORMAT:
        got = fit.get("format") if isinstance(fit, dict) else None
        hint = {"kdvfs-characterization/1": " (a characterisation file: give it with --data)",
                "kdvfs-h200-fit-check/1": " (the report of a check, not a fit)"}.get(str(got), "")
        raise InputError(f"{where} is not a {FIT_FORMAT} document: its format is {got!r}{hint}; give a fit written by "
                         "`kdvfs calibrate-h200` (e.g. validation/h200/characterization/fit.json)")
    return apply_h200_fit(base, fit.get("params"), source or f"fitted by `{fit.get('command') or 'kdvfs calibrate-h200'}`",
                          where=where)


def build_h200_profiles(root: str | Path, spec: GpuSpec | None = None, *,
                        repeats: dict[str, int] | None = None) -> list[dict]:
    """Rebuild the bundled H200 traces' work and profiles: each trace takes the op-shape work of its shape-recorded
    twin (``validation/h200/steps/block-<prec>.kineto.json.gz``, the same workload on the same card), then its
    profile is the model's (activity from work, the fitted h200 constants) over auto and every core clock at 3201 MHz.
    ``repeats``: each stage's repeats in the block's step (None: ``kdvfs.zoo_source.stage_repeats``).
    """
    from kdvfs.gpus import get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params
    from kdvfs.profile import build_profile, save_profile
    from kdvfs.trace import load_trace, save_trace

    root = Path(root)
    repeats = repeats if repeats is not None else stage_repeats()
    spec = spec or get_gpu("h200")
    settings = [(AUTO, AUTO)] + [(c, 3201) for c in spec.core_clocks_mhz]
    out = []
    for prec in ("bf16", "fp32"):
        tpath = root / "traces" / f"gpt3xl-torch-h200-{prec}.trace.json"
        shaped = import_kineto(root / "validation/h200/steps" / f"block-{prec}.kineto.json.gz", repeats=repeats).trace
        trace = load_trace(tpath)
        new = transfer_work(trace, shaped)  # the importer's current work estimates (they improve; keep them in step)
        if any((a.flops, a.bytes, a.dtype, a.math, a.work_source) != (b.flops, b.bytes, b.dtype, b.math, b.work_source)
               for a, b in zip(trace.kernels, new.kernels)):
            notes = trace.notes if (trace.notes or "").endswith(f"FLOPs/bytes from op shapes of {shaped.name}") \
                else new.notes
            trace = replace(new, notes=notes)
            save_trace(trace, tpath)
        prof = build_profile(trace, spec, default_params(trace, spec), settings=settings, source="model")
        ppath = root / "traces" / f"gpt3xl-torch-h200-{prec}.profile.csv.gz"
        save_profile(prof, ppath)
        ia = prof.auto_index
        assert prof.eff_core_mhz is not None
        out.append({"trace": trace.name, "profile": str(ppath.name), "kernels": len(prof.keys),
                    "settings": len(prof.settings),
                    "iteration_time_auto_s": float(trace.repeats @ prof.time_s[:, ia]),
                    "iteration_energy_auto_j": float(trace.repeats @ prof.energy_j[:, ia]),
                    "throttled_at_auto": int(np.sum(prof.eff_core_mhz[:, ia] < spec.boost_core_mhz - 0.5))})
    return out


def check_h200_fit(fit: dict, data, command: str = "", where: str = "the fit", *,
                   zoo: ZooSource | None = None) -> dict:
    """A stored fit (``kdvfs-h200-fit/1``) against characterisation files, without fitting: each measured kernel's
    predicted clock and power beside the measurement, and how many meet the targets. For files the fit did not see
    (a new campaign), this is a held-out check. Launch-bound and duty entries take the fit's own gap power."""
    spec = spec_from_fit(fit, where=where)
    rows, gap_w, paths, _ = prepared_rows(data, zoo=zoo)
    fitted_gap = (fit.get("params") or {}).get("gap_power_w")
    gw = fitted_gap if fitted_gap is not None else gap_w
    from kdvfs.thermal import thermal_from_params

    th = thermal_from_params(fit.get("params"), where)
    if th is not None:  # each entry's idle share at the fit's gap power for its temperature
        rows = [dict(r, gap_power_w=float(th.gap_power_w(r["temperature_c"])))
                if isinstance(r.get("temperature_c"), (int, float)) else r for r in rows]
    fit_data = fit.get("data")
    seen = {Path(p).name for p in ([fit_data] if isinstance(fit_data, str) else (fit_data or []))}
    return {"format": "kdvfs-h200-fit-check/1", "command": command, "fit_command": fit.get("command"),
            "fit_data": fit_data, "data": paths, "gap_power_w": gw,
            "files_in_fit": sorted(seen & {Path(p).name for p in paths}),
            "targets": {"clock_pct": 100 * CLOCK_TOL, "power_pct": 100 * POWER_TOL},
            "check": _report(spec, rows, gap_w=gw)}
