"""Why a calibration of the RTX 3080 Ti model gives up the per-kernel table's best settings (issue 11, diagnosis).

``kdvfs profile diagnose CALIBRATION.json …`` (:func:`best_setting_diagnosis`). For each calibration JSON (written by
``kdvfs profile calibrate spaan2026 [--method joint] --out DIR``: its ``card_vector`` and ``params``), and for every
kernel of the per-kernel table:

- which per-kernel target it misses and by how much (auto time/energy within 1 %, change at the best setting within
  1 point time / 2 points energy, extremes within 25 %), with its share of its pass's time (repeats counted);
- the model at auto and at the best setting: effective core clock, whether the cap throttles, and the power split into
  its terms (idle + memory power at the memory clock, the auto-memory cost, core dynamic power, memory traffic power),
  next to the power the table implies at both (energy over time);
- which card parameter moves the kernel's best-setting energy change most: the change of that residual when the
  parameter moves by 5 % of its fitting range (``kdvfs.calibrate_joint.CARD_PARAMS``), the kernel's own parameters
  held.

Model-free part (``data``): for each group of kernels sharing a best setting, their repeat-weighted share of each
pass and the pass's change there that they alone contribute, next to the pass-level sweep's change at the same
setting. Nothing is fitted here: it reads the fits and the two tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.bundled import bundled_dir
from kdvfs.calibrate import read_table
from kdvfs.calibrate_joint import CARD_PARAMS, card_from_vector
from kdvfs.errors import FormatError
from kdvfs.gpus import AUTO, RTX3080TI, GpuSpec
from kdvfs.joint_structure import apply_structure
from kdvfs.model import KernelParams, evaluate
from kdvfs.passweep import pass_index, read_pass_sweep, study_settings
from kdvfs.trace import load_trace, read_json_document

__all__ = ["PASS_CONTEXT_TERM_SETS", "best_setting_diagnosis", "data_groups", "diagnose", "load_fit",
           "locked_memory_requirement", "pass_context_check", "pass_context_lines", "power_terms", "write_diagnosis"]

STEP = 0.05  # share of each card parameter's fitting range for the sensitivity

PASS_CONTEXT_TERM_SETS = (
    (), ("gap",), ("gap", "gapfwd"), ("automem",), ("autocore",), ("corepower",), ("automem", "autocore", "corepower"),
    ("gap", "gapfwd", "automem", "autocore"))
"""The pass-context term sets ``pass_context_check`` fits (``kdvfs.passcontext``)."""
_PASS_KEYS = ("median_abs_time_err", "median_abs_energy_err", "worst_main_time_err", "worst_main_energy_err")


def _read_fit(path: str | Path) -> dict[str, Any]:
    doc = read_json_document(Path(path), "calibration")
    if not isinstance(doc, dict) or not isinstance(doc.get("card_vector"), dict) or not isinstance(doc.get("params"), list):
        raise FormatError(f"calibration file {str(path)!r} has no 'card_vector' and 'params'; give a calibration JSON "
                          "written by `kdvfs profile calibrate spaan2026 --out DIR`")
    return doc


def _fmt(c: int) -> str:
    return "auto" if c == AUTO else str(int(c))


def power_terms(spec: GpuSpec, params: KernelParams, k: int, core: int, mem: int) -> dict:
    """The model's power at one kernel and setting, split into its terms (``kdvfs.model._power``'s order)."""
    ev = evaluate(spec, params, np.array([core]), np.array([mem]), kernel_index=np.array([k]))
    fc, fm, t = float(ev.core_mhz[0]), float(ev.mem_mhz[0]), float(ev.time_s[0])
    tm = params.tm_s[k] / (spec.auto_mem_bw_factor if mem == AUTO else 1.0)
    traffic = params.um[k] * tm / t
    mem_w = float(np.interp(fm, spec.mem_clocks_mhz, spec.mem_power_w))
    auto_w = 0.0
    if mem == AUTO:
        auto_w = float((spec.auto_mem_extra_w + spec.auto_mem_traffic_w * traffic) * spec.auto_mem_ramp(np.array(fc)))
    if spec.mem_traffic_scale:
        traffic = traffic * float(np.interp(fm, spec.mem_clocks_mhz, spec.mem_traffic_scale))
    out = {"core_mhz": fc, "throttled": bool(ev.throttled[0]), "time_s": t, "power_w": float(ev.power_w[0]),
           "base_w": spec.idle_power_w - spec.mem_power_w[-1], "mem_w": mem_w, "auto_mem_w": auto_w,
           "core_w": float(spec.core_power_w * params.uc[k] * spec.core_power_shape(np.array(fc))),
           "traffic_w": float(spec.mem_traffic_power_w * traffic)}
    return out


def load_fit(path: str | Path) -> tuple[GpuSpec, KernelParams]:
    """The card and kernel parameters of a calibration JSON (its ``card_vector``, ``structure`` and ``params``)."""
    doc = _read_fit(path)
    cv = doc["card_vector"]
    x = np.array([cv.get(c[0], c[3]) for c in CARD_PARAMS])
    spec = apply_structure(card_from_vector(RTX3080TI, x), doc.get("structure", {}))
    ps = doc["params"]
    t0, tc, tm, uc, um = (np.array([p[f] for p in ps]) for f in ("t0_s", "tc_s", "tm_s", "uc", "um"))
    params = KernelParams(tuple(p["kernel"] for p in ps), t0, tc, tm, uc, um, source="fitted")
    return spec, params


def _changes(spec, params, rows, C, M):
    ev = evaluate(spec, params, C, M)
    st = list(zip(C.tolist(), M.tolist()))
    ia = st.index((AUTO, AUTO))
    ib = np.array([st.index((r["best_core"], r["best_mem"])) for r in rows])
    k = np.arange(len(rows))
    T, E = ev.time_s, ev.energy_j
    return (100 * (T[k, ib] / T[:, ia] - 1), 100 * (E[k, ib] / E[:, ia] - 1), T, E, ia, ib)


def diagnose(path: str | Path, rows: list[dict], trace) -> dict:
    spec, params = load_fit(path)
    st = study_settings()
    C = np.array([s[0] for s in st])
    M = np.array([s[1] for s in st])
    dt, de, T, E, ia, ib = _changes(spec, params, rows, C, M)
    passes = pass_index(trace, "backward")
    rep = trace.repeats.astype(float)
    ta = np.array([r["t_auto"] for r in rows])
    share = np.array([rep[i] * ta[i] / np.sum(rep * ta * (passes == passes[i])) for i in range(len(rows))])
    # sensitivity of each kernel's best-setting changes to each card parameter
    cv = _read_fit(path)["card_vector"]
    x0 = np.array([cv.get(c[0], c[3]) for c in CARD_PARAMS])
    sens_t, sens_e = {}, {}
    for j, (name, lo, hi, _) in enumerate(CARD_PARAMS):
        if name == "best_price_w":
            continue
        x1 = x0.copy()
        h = STEP * (hi - lo)
        x1[j] = x0[j] + h if x0[j] + h <= hi else x0[j] - h
        s1 = apply_structure(card_from_vector(RTX3080TI, x1), _read_fit(path).get("structure", {}))
        d1t, d1e, *_ = _changes(s1, params, rows, C, M)
        sens_t[name], sens_e[name] = (d1t - dt) * np.sign(x1[j] - x0[j]), (d1e - de) * np.sign(x1[j] - x0[j])
    kernels = []
    for i, r in enumerate(rows):
        t_err = 100 * (T[i, ia] / r["t_auto"] - 1)
        e_err = 100 * (E[i, ia] / r["e_auto"] - 1)
        ext = {"t_min": 100 * (T[i].min() / r["t_min"] - 1), "t_max": 100 * (T[i].max() / r["t_max"] - 1),
               "e_min": 100 * (E[i].min() / r["e_min"] - 1), "e_max": 100 * (E[i].max() / r["e_max"] - 1)}
        misses = []
        if abs(t_err) > 1 or abs(e_err) > 1:
            misses.append("auto")
        if abs(dt[i] - r["dt_best"]) > 1 or abs(de[i] - r["de_best"]) > 2:
            misses.append("best")
        misses += [f"{k} {v:+.0f} %" for k, v in ext.items() if abs(v) > 25]
        bc, bm = r["best_core"], r["best_mem"]
        top = sorted(sens_e, key=lambda n: -abs(sens_e[n][i]))[:3]
        p_auto = r["e_auto"] / r["t_auto"]
        p_best = p_auto * (1 + r["de_best"] / 100) / (1 + r["dt_best"] / 100)
        kernels.append({
            "id": r["id"], "name": r["name"], "pass": "forward" if passes[i] == 0 else "backward",
            "repeat": r["repeat"], "pass_time_share_pct": 100 * share[i], "best": f"{_fmt(bc)}/{_fmt(bm)}",
            "misses": misses, "auto_time_err_pct": t_err, "auto_energy_err_pct": e_err,
            "best_time_change": {"table": r["dt_best"], "model": float(dt[i])},
            "best_energy_change": {"table": r["de_best"], "model": float(de[i])},
            "extremes_err_pct": ext,
            "table_power_w": {"auto": p_auto, "best": p_best},
            "model_at_auto": power_terms(spec, params, i, AUTO, AUTO),
            "model_at_best": power_terms(spec, params, i, bc, bm),
            "moves_best_energy": {n: float(sens_e[n][i]) for n in top},
            "moves_best_time": {n: float(sens_t[n][i]) for n in sorted(sens_t, key=lambda n: -abs(sens_t[n][i]))[:2]},
        })
    groups: dict[str, dict] = {}
    for k, r in zip(kernels, rows):
        g = ("core auto, memory 5001" if r["best_core"] == AUTO and r["best_mem"] == 5001 else
             "core auto, memory 9251/9501" if r["best_core"] == AUTO and r["best_mem"] in (9251, 9501) else
             "core locked, memory 5001" if r["best_mem"] == 5001 else
             "core locked, memory 9501/auto" if r["best_core"] != AUTO else "auto/auto")
        d = groups.setdefault(g, {"kernels": 0, "best_missed": 0, "time_share_pct": {"forward": 0.0, "backward": 0.0},
                                  "dt_err": [], "de_err": []})
        d["kernels"] += 1
        d["best_missed"] += "best" in k["misses"]
        d["time_share_pct"][k["pass"]] += k["pass_time_share_pct"]
        d["dt_err"].append(k["best_time_change"]["model"] - k["best_time_change"]["table"])
        d["de_err"].append(k["best_energy_change"]["model"] - k["best_energy_change"]["table"])
    for d in groups.values():
        for q in ("dt_err", "de_err"):
            v = d.pop(q)
            d[q + "_pt"] = {"min": float(min(v)), "median": float(np.median(v)), "max": float(max(v))}
    return {"fit": str(path), "groups": groups, "card_vector": dict(zip((c[0] for c in CARD_PARAMS), x0.tolist())),
            "best_missed": sum("best" in k["misses"] for k in kernels),
            "best_missed_time_share_pct": {p: float(sum(k["pass_time_share_pct"] for k in kernels
                                                        if "best" in k["misses"] and k["pass"] == p))
                                           for p in ("forward", "backward")},
            "kernels": kernels}


def _pass_totals(rows: list[dict], trace):
    """For the forward and the backward pass: (index, name, its kernels' row indices, their auto time and energy
    summed with repeats)."""
    passes = pass_index(trace, "backward")
    rep = trace.repeats.astype(float)
    for p, pname in enumerate(("forward", "backward")):
        sel = [i for i in range(len(rows)) if passes[i] == p]
        yield (p, pname, sel, sum(rep[i] * rows[i]["t_auto"] for i in sel),
               sum(rep[i] * rows[i]["e_auto"] for i in sel))


def data_groups(rows: list[dict], trace) -> list[dict]:
    """Model-free: kernels grouped by best setting, their share of each pass and what they alone contribute there,
    next to the sweep at that setting."""
    b = bundled_dir()
    sw = read_pass_sweep(b / "spaan2026_fig3_fig4_pass_level.csv", RTX3080TI)
    st = list(sw.settings)
    rep = trace.repeats.astype(float)
    out = []
    for p, pname, sel, tt, ee in _pass_totals(rows, trace):
        for s in sorted({(rows[i]["best_core"], rows[i]["best_mem"]) for i in sel}):
            g = [i for i in sel if (rows[i]["best_core"], rows[i]["best_mem"]) == s]
            ts = sum(rep[i] * rows[i]["t_auto"] for i in g) / tt
            es = sum(rep[i] * rows[i]["e_auto"] for i in g) / ee
            j = st.index(s)
            out.append({"pass": pname, "best": f"{_fmt(s[0])}/{_fmt(s[1])}", "kernels": [rows[i]["id"] for i in g],
                        "time_share_pct": 100 * ts, "energy_share_pct": 100 * es,
                        "their_time_contribution_pt": sum(rep[i] * rows[i]["t_auto"] * rows[i]["dt_best"] for i in g) / tt,
                        "their_energy_contribution_pt": sum(rep[i] * rows[i]["e_auto"] * rows[i]["de_best"] for i in g) / ee,
                        "sweep_time_change_pct": float(sw.time_change_pct[p, j]),
                        "sweep_energy_change_pct": float(sw.energy_change_pct[p, j])})
    return out


def locked_memory_requirement(rows: list[dict], trace) -> list[dict]:
    """Model-free: memory locked at 9501 MHz (the clock auto runs) with the core on auto, per pass.

    The kernels whose table best is (auto, 9501) give their change there exactly; those at (auto, 9251) are counted
    with their 9251 change (``with_9251``; the sweep puts the two memory clocks within 0.6 points of each other at
    core auto) or left out (``without_9251``). What the rest of the pass must then average at (auto, 9501) for the
    pass to show the sweep's change is the ``rest_*`` numbers: a change in time and energy against auto, in percent."""
    b = bundled_dir()
    sw = read_pass_sweep(b / "spaan2026_fig3_fig4_pass_level.csv", RTX3080TI)
    j = list(sw.settings).index((AUTO, 9501))
    rep = trace.repeats.astype(float)
    out = []
    for p, pname, sel, tt, ee in _pass_totals(rows, trace):
        for label, mems in (("with_9251", (9501, 9251)), ("without_9251", (9501,))):
            g = [i for i in sel if rows[i]["best_core"] == AUTO and rows[i]["best_mem"] in mems]
            ts = sum(rep[i] * rows[i]["t_auto"] for i in g) / tt
            es = sum(rep[i] * rows[i]["e_auto"] for i in g) / ee
            ct = sum(rep[i] * rows[i]["t_auto"] * rows[i]["dt_best"] for i in g) / tt
            ce = sum(rep[i] * rows[i]["e_auto"] * rows[i]["de_best"] for i in g) / ee
            st_, se_ = float(sw.time_change_pct[p, j]), float(sw.energy_change_pct[p, j])
            out.append({"pass": pname, "counted": label, "kernels": [rows[i]["id"] for i in g],
                        "time_share_pct": 100 * ts, "energy_share_pct": 100 * es,
                        "their_energy_change_pct": {"min": min(rows[i]["de_best"] for i in g),
                                                    "max": max(rows[i]["de_best"] for i in g)},
                        "their_time_change_pct": {"min": min(rows[i]["dt_best"] for i in g),
                                                  "max": max(rows[i]["dt_best"] for i in g)},
                        "sweep_time_change_pct": st_, "sweep_energy_change_pct": se_,
                        "rest_time_change_pct": (st_ - ct) / (1 - ts), "rest_energy_change_pct": (se_ - ce) / (1 - es)})
    return out


def _rounded(v):
    """Floats to 5 significant digits (the diagnosis reads points and watts, not the last bits)."""
    if isinstance(v, float):
        return float(f"{v:.5g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def best_setting_diagnosis(fits: list[str | Path]) -> dict:
    """The whole diagnosis: the model-free parts (``data``, ``locked_memory``) from the bundled per-kernel table and
    pass-level sweep, and one ``diagnose`` per calibration file in ``fits``."""
    b = bundled_dir()
    trace = load_trace(b / "gpt3xl-llmc-rtx3080ti.trace.json")
    rows = read_table(b / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    return {"data": data_groups(rows, trace), "locked_memory": locked_memory_requirement(rows, trace),
            "fits": [diagnose(f, rows, trace) for f in fits]}


def write_diagnosis(doc: dict, path: str | Path) -> Path:
    """``doc`` as one line of compact JSON, floats to 5 significant digits (the kept diagnosis files' layout)."""
    from kdvfs.fileio import write_atomic

    return write_atomic(Path(path), (json.dumps(_rounded(doc), separators=(",", ":")) + "\n").encode(), "diagnosis")


def pass_context_check() -> dict:
    """What the pass-context terms (``kdvfs.passcontext``) can do for the RTX 3080 Ti model without refitting kernels:
    the model-free bounds (``sweep_bounds``) for both placements of the loss kernels, and the bundled profile's kernels
    held while each term set of ``PASS_CONTEXT_TERM_SETS`` is fitted to the pass-level sweep (on all 132 points, and on
    the main region). From the study's two tables only."""
    from kdvfs.bundled import model_params
    from kdvfs.gpus import get_gpu
    from kdvfs.passcontext import fit_context, sweep_bounds
    from kdvfs.passweep import main_region, pass_errors

    b = bundled_dir()
    g = get_gpu("rtx3080ti")
    trace = load_trace(b / "gpt3xl-llmc-rtx3080ti.trace.json")
    rows = read_table(b / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sw = read_pass_sweep(b / "spaan2026_fig3_fig4_pass_level.csv", g)
    doc: dict = {"bounds": {}, "table_fit_with_terms": []}
    for loss_pass in ("backward", "forward"):
        doc["bounds"][f"loss_in_{loss_pass}"] = sweep_bounds(rows, sw.time_change_pct, sw.energy_change_pct,
                                                             pass_index(trace, loss_pass))
    st = study_settings()
    ev = evaluate(g, model_params(trace, g), np.array([s[0] for s in st]), np.array([s[1] for s in st]))
    passes = pass_index(trace, "backward")
    w = np.stack([trace.repeats * (passes == k) for k in range(2)])
    kt, ke = w @ ev.time_s, w @ ev.energy_j
    for terms, fitted_on in ((t, f) for f in ("all", "main") for t in PASS_CONTEXT_TERM_SETS):
        if fitted_on == "main" and not terms:
            continue
        ctx = fit_context(g, st, kt, ke, sw.time_change_pct, sw.energy_change_pct, terms,
                          mask=main_region(st) if fitted_on == "main" else None)
        r = pass_errors(ev.time_s, ev.energy_j, trace.repeats, passes, sw, ctx, g)
        row = {"terms": ",".join(terms) or "none", "fitted_on": fitted_on, **{k: round(float(r[k]), 3) for k in _PASS_KEYS},
               "context": {f: round(float(getattr(ctx, f)), 6) for f in ctx.__dataclass_fields__}}
        doc["table_fit_with_terms"].append(row)
    return doc


def pass_context_lines(doc: dict) -> list[str]:
    """One line per fitted term set, then one per pass and placement of the bounds."""
    out = [f"{row['terms']:24s} {row['fitted_on']:4s} median time/energy {row['median_abs_time_err']:6.2f} / "
           f"{row['median_abs_energy_err']:6.2f}  worst {row['worst_main_time_err']:6.2f} / "
           f"{row['worst_main_energy_err']:6.2f}  {row['context']}" for row in doc["table_fit_with_terms"]]
    for k, v in doc["bounds"].items():
        for p in v:
            out.append(f"{k} {p['pass']:8s} Σt_max {p['kernel_time_max_sum_pct']:7.1f} %, pass max {p['pass_time_max_pct']:7.1f} %"
                       f" → gap share ≤ {100 * p['gap_share_max']:.2f} %; Σe_min {p['kernel_energy_min_sum_pct']:.2f} %, "
                       f"pass min {p['pass_energy_min_pct']:.2f} % → gap power ≥ {p['gap_power_needed_w']:.0f} W or "
                       f"baseline overhead ≥ {100 * p['baseline_overhead_needed']:.2f} %")
    return out
