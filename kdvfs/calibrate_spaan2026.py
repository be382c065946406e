"""The calibration behind ``kdvfs profile calibrate spaan2026``: the inputs read and checked, the fit (the table
method or ``kdvfs.calibrate_joint``'s joint method), its report on every target (pass level, per kernel, Table 2 from
the optimisers on the fitted profile), the bundled profile and calibration JSON it writes, and whether the catalog's
rtx3080ti preset holds the fitted constants.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from kdvfs.blas import single_threaded_blas
from kdvfs.calibrate_joint import (
    CARD_PARAMS,
    METHODS,
    PASS_LOSSES,
    JointOptions,
    JointResult,
    calibrate_joint,
    calibrate_table,
    check_table,
)
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, RTX3080TI, GpuSpec
from kdvfs.joint_structure import CARD_SHAPE_TERMS, KERNEL_LOSSES, parse_drop, parse_structure, pass_eval
from kdvfs.passcontext import parse_terms
from kdvfs.passweep import PassSweep, pass_errors, pass_index, study_settings

__all__ = ["calibrate_spaan2026", "fitted_profile", "joint_report", "preset_source", "write_outputs"]


def fitted_profile(result: JointResult, trace):
    """The bundled profile of a fit: the card's full grid plus every one of the study's 66 settings."""
    from kdvfs.profile import build_profile

    settings = list(result.spec.settings())
    settings += [s for s in study_settings() if s not in settings]
    return build_profile(trace, result.spec, result.params, settings=settings, source="fitted")


def joint_report(result: JointResult, rows: list[dict], sweep: PassSweep, trace, loss_pass: str = "backward") -> dict:
    """The calibration's targets from the model's deterministic values: pass-level errors and per-kernel checks."""
    from kdvfs.calibrate import CalibrationResult, report

    st = list(sweep.settings)
    struct = dict(result.structure)
    C, M = np.array([s[0] for s in st]), np.array([s[1] for s in st])  # noqa: N806

    def in_pass(lp):  # the kernels as they run in a pass (under the limiter the split moves the passes' ceilings)
        pi = pass_index(trace, lp)
        w = np.stack([trace.repeats * (pi == k) for k in range(2)])
        t, e, lim = pass_eval(result.spec, result.params, C, M, struct, w)
        return pass_errors(t, e, trace.repeats, pi, sweep, ctx, result.spec), lim

    ctx = result.context
    pe, lim = in_pass(loss_pass)
    other = "forward" if loss_pass == "backward" else "backward"
    pe_other = in_pass(other)[0]
    kern = report(CalibrationResult(result.spec, result.params, rows, result.cost))
    summary = {k: v for k, v in pe.items() if not isinstance(v, np.ndarray)}
    summary["pass_targets_met"] = bool(max(summary["median_abs_time_err"], summary["median_abs_energy_err"]) <= 1.5
                                       and max(summary["worst_main_time_err"], summary["worst_main_energy_err"]) <= 5.0)
    summary["loss_pass"] = loss_pass
    if not ctx.neutral:
        summary["pass_context"] = {f: float(getattr(ctx, f)) for f in ctx.__dataclass_fields__}
    if struct:
        summary["structure"] = struct
    if lim is not None:  # where the limiter's ceiling binds: (pass, setting) → f*
        summary["pass_limiter"] = {"cap_w": lim.cap_w, "ceilings_mhz": [
            {"pass": ("forward", "backward")[k], "core_mhz": "auto" if st[i][0] == AUTO else st[i][0],
             "mem_mhz": "auto" if st[i][1] == AUTO else st[i][1], "ceiling_mhz": float(lim.ceiling_mhz[k, i])}
            for k, i in zip(*np.nonzero(lim.limited))]}
    summary[f"with_loss_in_{other}"] = {k: v for k, v in pe_other.items() if not isinstance(v, np.ndarray)}
    passes = []
    for k, p in enumerate(("forward", "backward")):
        for i, (c, m) in enumerate(st):
            passes.append({"pass": p, "core_mhz": "auto" if c == AUTO else c, "mem_mhz": "auto" if m == AUTO else m,
                           "model_time_change_pct": float(pe["model_time_change_pct"][k, i]),
                           "study_time_change_pct": float(sweep.time_change_pct[k, i]),
                           "model_energy_change_pct": float(pe["model_energy_change_pct"][k, i]),
                           "study_energy_change_pct": float(sweep.energy_change_pct[k, i])})
    return {"pass_level": summary, "kernel": kern["summary"], "kernels": kern["kernels"], "card": kern["card"],
            "passes": passes}


def write_outputs(result: JointResult, report_doc: dict, trace, out_dir: str | Path, method: str = "table",
                  profile=None) -> list[Path]:
    """The bundled profile (``fitted_profile``; ``profile`` where the caller already built it) and its calibration
    JSON, byte-for-byte the same for the same fit."""
    import json

    from kdvfs.profile import save_profile

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prof = fitted_profile(result, trace) if profile is None else profile
    p1 = save_profile(prof, out / f"{trace.name}.profile.csv.gz")
    what = ("calibration of the rtx3080ti model to Spaan et al. 2026's per-kernel table, checked on the pass-level "
            "sweep (`kdvfs profile calibrate spaan2026`, table method)" if method == "table" else
            "joint calibration of the rtx3080ti model to Spaan et al. 2026, per-kernel table and pass-level sweep "
            "(`kdvfs profile calibrate spaan2026 --method joint`)")
    doc = {"what": what,
           "card_vector": dict(zip((c[0] for c in CARD_PARAMS), result.x)),
           **({"structure": dict(result.structure)} if result.structure else {}),
           "summary": report_doc["kernel"], "pass_level": report_doc["pass_level"], "card": report_doc["card"],
           "params": result.params.as_rows(), "kernels": report_doc["kernels"], "passes": report_doc["passes"]}
    p2 = out / f"{trace.name}.calibration.json"
    p2.write_text(json.dumps(doc, indent=1, default=float, sort_keys=False) + "\n")
    return [p1, p2]


def calibrate_spaan2026(table: str | Path | None = None, sweep: str | Path | None = None,
                        out_dir: str | Path | None = None, options: JointOptions = JointOptions(),  # noqa: B008 (frozen)
                        progress=None, started=None) -> dict:
    """The whole calibration behind ``kdvfs profile calibrate spaan2026``: read and check the per-kernel table and the
    pass-level sweep (bundled copies by default), fit jointly, report the targets (pass level, per kernel, and Table 2
    from the optimisers on the fitted profile), and with ``out_dir`` write the profile and calibration JSON there."""
    from kdvfs.bundled import bundled_dir
    from kdvfs.calibrate import read_table
    from kdvfs.passweep import read_pass_sweep
    from kdvfs.reproduce import reproduce_spaan2026
    from kdvfs.trace import load_trace

    base = bundled_dir()
    table = Path(table) if table else base / "spaan2026_gpt3xl_rtx3080ti_kernels.csv"
    sweep_path = Path(sweep) if sweep else base / "spaan2026_fig3_fig4_pass_level.csv"
    if not table.exists():
        raise InputError(f"kernel table {str(table)!r} does not exist; give --table PATH "
                         "(spaan2026_gpt3xl_rtx3080ti_kernels.csv)")
    trace = load_trace(base / "gpt3xl-llmc-rtx3080ti.trace.json")
    try:
        rows = read_table(table)
    except (KeyError, ValueError) as e:
        raise InputError(f"kernel table {str(table)!r} cannot be read ({e}); it needs the columns of "
                         "spaan2026_gpt3xl_rtx3080ti_kernels.csv with numbers or 'auto' in them") from None
    sw = read_pass_sweep(sweep_path, RTX3080TI)
    if options.method not in METHODS:
        raise InputError(f"calibration method {options.method!r} is not one of {', '.join(METHODS)}")
    check_table(rows, RTX3080TI, trace)
    parse_terms(options.pass_terms)  # an unknown term is refused before the minutes of fitting
    parse_structure(options.structure)
    parse_drop(options.pass_drop)
    if options.kernel_loss not in KERNEL_LOSSES:
        raise InputError(f"--fit-option kernel_loss={options.kernel_loss!r} is not one of {', '.join(KERNEL_LOSSES)}")
    if (options.kernel_loss != "hinge" or options.pass_drop) and options.method == "table":
        raise InputError("--fit-option kernel_loss and pass_drop need --method joint: the table method has its own loss")
    pass_only = [t for t in parse_structure(options.structure) if t not in (*CARD_SHAPE_TERMS, "limiter")]
    if pass_only and options.method == "table":
        verb = "acts" if len(pass_only) == 1 else "act"
        raise InputError(f"--fit-option structure={options.structure}: {', '.join(pass_only)} {verb} on the "
                         f"pass-level sweep, which the table method does not fit; with --method table give only "
                         f"{', '.join((*CARD_SHAPE_TERMS, 'limiter'))} (limiter changes only the check), or add "
                         f"--method joint")
    if options.pass_loss not in PASS_LOSSES:
        raise InputError(f"--fit-option pass_loss={options.pass_loss!r} is not one of {', '.join(PASS_LOSSES)}")
    if options.pass_terms and options.method == "table":
        raise InputError("--fit-option pass_terms needs --method joint: the table method fits no pass-level data")
    if started is not None:  # every input checked: the minutes of fitting start now
        started()
    with single_threaded_blas():
        if options.method == "table":
            res = calibrate_table(rows, trace, table, RTX3080TI, options.structure, options.emin_tol_pct)
            if "limiter" in parse_structure(options.structure):  # the fit is the table's; the passes are checked
                res = replace(res, structure=(*res.structure, ("pass_limiter", 1.0)))  # under the limiter
        else:
            res = calibrate_joint(rows, sw, trace, RTX3080TI, options, progress)
    rep = joint_report(res, rows, sw, trace, options.loss_pass)
    prof = fitted_profile(res, trace)  # built once: Table 2 is reproduced on it and it is the file written
    rep["table2"] = reproduce_spaan2026(prof)
    rep["table2_rows_met"] = sum(r["target_met"] for r in rep["table2"])
    if dict(res.structure).get("pass_limiter"):
        # the pass rows again, from the passes as they run under the limiter (the kernel rows stay the profile's)
        from kdvfs.limiter_pass import pass_table2
        from kdvfs.reproduce import table2_targets_met

        rows2 = pass_table2(res.spec, res.params, trace, study_settings(), dict(res.structure).get("limit_cap_w"))
        met = table2_targets_met(rows2)
        for r in rows2:
            r["target_met"] = met[f"{r['granularity']}/{r['scope']}/{r['objective']}"]
        rep["table2_pass_rows_under_limiter"] = rows2
        rep["table2_rows_met_with_limiter_pass_rows"] = (sum(r["target_met"] for r in rows2) + sum(
            r["target_met"] for r in rep["table2"] if r["granularity"] != "pass"))
    rep["seconds"] = res.seconds
    rep["evaluations"] = res.nfev
    rep["cost"] = res.cost
    rep["card_vector"] = dict(zip((c[0] for c in CARD_PARAMS), res.x))
    if res.structure:
        rep["structure"] = dict(res.structure)
    rep["preset_matches"] = _preset_matches(res.spec)
    rep["preset_source"] = preset_source(res.spec)
    rep["method"] = options.method
    rep["written"] = ([str(p) for p in write_outputs(res, rep, trace, out_dir, options.method, prof)]
                      if out_dir is not None else [])
    return rep


_PRESET_FIELDS = ("boost_core_mhz", "cap_w", "idle_power_w", "v_min", "v_max", "vf_knee_mhz", "vf_exponent",
                  "mem_power_w", "auto_mem_extra_w", "auto_mem_traffic_w", "auto_mem_onset_mhz", "mem_bandwidth_gbs",
                  "smooth_p", "smooth_p_mem", "core_floor_mhz", "quirk_core_clamp_mhz", "quirk_mem_fallback_mhz")


def _preset_matches(spec: GpuSpec) -> bool:
    """Whether the catalog's rtx3080ti preset holds this fit's card constants (to 1e-9 relative)."""
    for f in _PRESET_FIELDS:
        a, b = np.asarray(getattr(spec, f), dtype=float), np.asarray(getattr(RTX3080TI, f), dtype=float)
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-9, atol=0):
            return False
    return True


def preset_source(spec: GpuSpec) -> str:
    """The fitted card constants as Python keyword arguments, for the report. The rtx3080ti preset does not copy them:
    it reads the written calibration's ``card`` (``kdvfs.gpus._rtx3080ti_fitted``)."""
    parts = []
    for f in _PRESET_FIELDS:
        parts.append(f"{f}={getattr(spec, f)!r}")
    return ", ".join(parts)
