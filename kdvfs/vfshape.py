"""Where the RTX 3080 Ti's energy minima lie along the core clock, in the data and in fits (issue 11, session 8).

    python -m scripts.vf_shape_check [CALIBRATION.json …] [--out FILE.json]   (``vf_shape_check`` returns the document)

Model-free part (``data``; nothing fitted, from the two tables of Spaan et al. 2026 only):

- ``pass_power``: along each memory clock, the pass's power against auto, ``(1 + ΔE) / (1 + Δt)`` from the pass-level
  sweep, in watts with the pass's auto power from the per-kernel table (Σ repeat · energy / Σ repeat · time). A straight
  line through core 420–1260 MHz (slope in W per 100 MHz, value at 0 MHz) and how far each higher clock lies above it:
  where the voltage starts to rise, the power leaves the line (``knee_mhz``: the lowest clock more than 3 % of the auto
  power above it). 210 MHz is left out: the card runs it faster than asked (``core_floor_mhz``).
- ``pass_minimum``: each pass's lowest energy along the core clock at each memory clock, and its time there.
- ``time_times_clock_vs_1680`` (in ``pass_power``): the pass's time at core f over its time at 1680 MHz, times
  f / 1680: 1 where time goes as 1/f, above 1 where it grows faster than 1/f at low clocks (the older datacentre
  card's sweeps of issue 11), below 1 where part of the time does not scale with the core clock.
- ``memory_bound``: the kernels whose table best setting locks the core at 630–1260 MHz with the memory at 9501 MHz or
  auto and changes their time by ≤ 2 %: their power at that setting (the table's energy and time), their power at
  auto, and how far their minimum energy lies below the best setting's (points). Where that gap is ≤ 1.5 points the
  kernel's minimum is at (or as cheap as) its best setting: the table then says where it is.

For each calibration JSON (written by ``kdvfs profile calibrate spaan2026 … --out DIR``; the bundled one when none is
given), the same numbers from the model: its pass power along the clocks, its passes' minima, and each kernel's
energy-minimal setting of the 66 with the time there (``every_kernel_at_min``: energy and time of the whole iteration
with every kernel at its own minimum; the study's text gives −36.9 % at +84 %, the −36.9 % being the table's minima).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kdvfs.bundled import bundled_dir
from kdvfs.calibrate import read_table
from kdvfs.diagnosis import load_fit
from kdvfs.gpus import AUTO
from kdvfs.joint_structure import pass_requests
from kdvfs.model import evaluate
from kdvfs.passweep import PASSES, STUDY_CORES, STUDY_MEMS, pass_index, read_pass_sweep, study_settings
from kdvfs.trace import load_trace

__all__ = ["KNEE_SHARE", "LINE_CORES", "data_part", "fit_part", "vf_shape_check"]

log = logging.getLogger(__name__)

LINE_CORES = (420, 630, 840, 1050, 1260)  # the straight part of the pass power (voltage flat)
KNEE_SHARE = 0.03  # share of the auto power above the line that marks the voltage's rise


def _fmt(c) -> str:
    return "auto" if c == AUTO else str(int(c))


def _curves(time_pct: np.ndarray, energy_pct: np.ndarray, auto_w: np.ndarray) -> dict:
    """Pass power, its straight part, the knee and the minima, from changes shaped (2 passes, 66 study settings)."""
    st = study_settings()
    out: dict = {"pass_power": {}, "pass_minimum": {}}
    for k, p in enumerate(PASSES):
        for m in STUDY_MEMS:
            idx = [st.index((c, m)) for c in STUDY_CORES]
            ratio = (1 + energy_pct[k, idx] / 100) / (1 + time_pct[k, idx] / 100)
            watts = ratio * auto_w[k]
            key = f"{p} mem {_fmt(m)}"
            row = {"core_mhz": [_fmt(c) for c in STUDY_CORES], "power_w": [round(float(w), 1) for w in watts]}
            if m not in (405,):  # the 405 MHz rows all run as (420, 405)
                sel = [STUDY_CORES.index(c) for c in LINE_CORES]
                slope, icpt = np.polyfit(np.array(LINE_CORES, float), watts[sel], 1)
                above = {c: float(watts[STUDY_CORES.index(c)] - (icpt + slope * c)) for c in (1470, 1680, 1890)}
                knee = next((c for c in (1470, 1680, 1890) if above[c] > KNEE_SHARE * auto_w[k]), None)
                row.update(line_slope_w_per_100mhz=round(float(100 * slope), 2), line_at_0mhz_w=round(float(icpt), 1),
                           above_line_w={str(c): round(v, 1) for c, v in above.items()},
                           knee_mhz=(f"≤ {knee}" if knee is not None else "> 1890"))
            out["pass_power"][key] = row
            if m in (5001, 9501, AUTO):
                # time against 1/f, from 1680 MHz down: (t(f)/t(1680)) · (f/1680) above 1 means faster than 1/f
                i0 = STUDY_CORES.index(1680)
                tr = (1 + time_pct[k, idx] / 100) / (1 + time_pct[k, idx][i0] / 100)
                row["time_times_clock_vs_1680"] = {str(c): round(float(tr[STUDY_CORES.index(c)] * c / 1680), 3)
                                                   for c in (420, 630, 840, 1050, 1260, 1470)}
            j = int(np.argmin(energy_pct[k, idx]))
            out["pass_minimum"][key] = {"core_mhz": _fmt(STUDY_CORES[j]), "energy_pct": round(float(energy_pct[k, idx][j]), 2),
                                        "time_pct": round(float(time_pct[k, idx][j]), 2)}
    return out


def data_part(rows, sweep, passes, rep) -> dict:
    t_auto = np.array([r["t_auto"] for r in rows])
    e_auto = np.array([r["e_auto"] for r in rows])
    auto_w = np.array([(rep * (passes == k)) @ e_auto / ((rep * (passes == k)) @ t_auto) for k in range(2)])
    out: dict = {"pass_auto_power_w": {p: round(float(w), 1) for p, w in zip(PASSES, auto_w)}}
    out.update(_curves(sweep.time_change_pct, sweep.energy_change_pct, auto_w))
    mb = []
    for r in rows:
        c, m = r["best_core"], r["best_mem"]
        if c != AUTO and 630 <= c <= 1260 and m in (9501, AUTO) and abs(r["dt_best"]) <= 2:
            p_auto = r["e_auto"] / r["t_auto"]
            p_best = p_auto * (1 + r["de_best"] / 100) / (1 + r["dt_best"] / 100)
            gap = 100 * (r["e_min"] / r["e_auto"] - 1) - r["de_best"]
            mb.append({"id": r["id"], "name": r["name"], "best": f"{_fmt(c)}/{_fmt(m)}", "power_auto_w": round(p_auto, 1),
                       "power_best_w": round(p_best, 1), "min_below_best_points": round(gap, 2)})
    locked = [x for x in mb if x["best"].endswith("/9501")]
    cs = np.array([int(x["best"].split("/")[0]) for x in locked], float)
    pw = np.array([x["power_best_w"] for x in locked])
    slope = float(np.polyfit(cs, pw, 1)[0]) if len(set(cs.tolist())) > 1 else float("nan")
    out["memory_bound"] = {
        "kernels": mb,
        "minimum_at_best_within_1_5_points": sum(abs(x["min_below_best_points"]) <= 1.5 for x in mb),
        "memory_9501_power_slope_w_per_100mhz": round(100 * slope, 2),
        "memory_9501_power_w": {"min": round(float(pw.min()), 1), "max": round(float(pw.max()), 1)},
        "auto_power_w": {"min": round(min(x["power_auto_w"] for x in mb), 1),
                         "max": round(max(x["power_auto_w"] for x in mb), 1)},
    }
    return out


def fit_part(path: Path, rows, sweep, trace, passes, rep) -> dict:
    spec, params = load_fit(path)
    doc = json.loads(path.read_text())
    struct = doc.get("structure", {})
    st = study_settings()
    C, M = np.array([s[0] for s in st]), np.array([s[1] for s in st])
    ia = st.index((AUTO, AUTO))
    alone = evaluate(spec, params, C, M)
    inpass = evaluate(spec, params, pass_requests(C, struct, spec.boost_core_mhz), M, cap_w=struct.get("pass_cap_w"))
    w = np.stack([rep * (passes == k) for k in range(2)])
    pt, pe = w @ inpass.time_s, w @ inpass.energy_j
    mt, me = 100 * (pt / pt[:, ia:ia + 1] - 1), 100 * (pe / pe[:, ia:ia + 1] - 1)
    out = _curves(mt, me, pe[:, ia] / pt[:, ia])
    j = alone.energy_j.argmin(1)
    k = np.arange(len(rows))
    t_at, e_at = alone.time_s[k, j], alone.energy_j[k, j]
    ta, ea = alone.time_s[:, ia], alone.energy_j[:, ia]
    out["every_kernel_at_min"] = {"energy_pct": round(float(100 * (rep @ e_at / (rep @ ea) - 1)), 2),
                                  "time_pct": round(float(100 * (rep @ t_at / (rep @ ta) - 1)), 2)}
    out["kernel_minima"] = [{"id": r["id"], "name": r["name"], "setting": f"{_fmt(st[jj][0])}/{_fmt(st[jj][1])}",
                             "effective_core_mhz": round(float(alone.core_mhz[i, jj]), 1),
                             "energy_pct": round(float(100 * (e_at[i] / ea[i] - 1)), 2),
                             "table_energy_pct": round(100 * (r["e_min"] / r["e_auto"] - 1), 2),
                             "time_pct": round(float(100 * (t_at[i] / ta[i] - 1)), 2)}
                            for i, (r, jj) in enumerate(zip(rows, j))]
    # the data's memory-bound kernels (``data_part``): is the model's minimum as cheap as their best setting, as the
    # table says (within 1.5 points), and how slow is the model at its minimum
    ib = np.array([st.index((r["best_core"], r["best_mem"])) for r in rows])
    e_best = 100 * (alone.energy_j[k, ib] / ea - 1)
    mb = [i for i, r in enumerate(rows) if r["best_core"] != AUTO and 630 <= r["best_core"] <= 1260
          and r["best_mem"] in (9501, AUTO) and abs(r["dt_best"]) <= 2]
    out["memory_bound"] = {
        "minimum_at_best_within_1_5_points": int(sum(e_best[i] - 100 * (e_at[i] / ea[i] - 1) <= 1.5 for i in mb)),
        "of": len(mb),
        "time_at_min_pct": {"min": round(float(min(100 * (t_at[i] / ta[i] - 1) for i in mb)), 1),
                            "max": round(float(max(100 * (t_at[i] / ta[i] - 1) for i in mb)), 1)}}
    err = np.abs(np.concatenate([mt - sweep.time_change_pct, me - sweep.energy_change_pct]))
    mid = np.array([(c in (1050, 1260, 1470)) and m in (9501, AUTO) for c, m in st])
    out["mid_clock_energy_err_points"] = {  # the core 1050–1470 MHz, memory auto or 9501
        "max": round(float(np.abs(me - sweep.energy_change_pct)[:, mid].max()), 2),
        "mean": round(float((me - sweep.energy_change_pct)[:, mid].mean()), 2)}
    out["median_abs_err_points"] = round(float(np.median(err)), 2)
    out["card"] = {"vf_knee_mhz": round(spec.vf_knee_mhz, 1), "v_min": round(spec.v_min, 4),
                   "vf_exponent": round(spec.vf_exponent, 3), "vf_low_drop": round(spec.vf_low_drop, 4),
                   "leak_w": round(spec.leak_w, 2), "leak_exponent": round(spec.leak_exponent, 3),
                   "idle_power_w": round(spec.idle_power_w, 2), "boost_core_mhz": round(spec.boost_core_mhz, 1),
                   "slow_core_mhz": round(spec.slow_core_mhz, 1), "slow_exponent": round(spec.slow_exponent, 3)}
    return out


def vf_shape_check(fits: Sequence[str | Path] = ()) -> dict:
    """The document of ``python -m scripts.vf_shape_check``: ``data`` (``data_part``, the two tables alone) and, per
    calibration JSON of ``fits`` (the bundled one when none is given), ``fit_part`` under the file's name (bundled) or
    its path as given."""
    b = bundled_dir()
    rows = read_table(b / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sweep = read_pass_sweep(b / "spaan2026_fig3_fig4_pass_level.csv")
    trace = load_trace(b / "gpt3xl-llmc-rtx3080ti.trace.json")
    passes = pass_index(trace, "backward")
    rep = trace.repeats.astype(float)
    paths = [Path(f) for f in fits] or [b / "gpt3xl-llmc-rtx3080ti.calibration.json"]
    log.info("V/f shape check: the two tables and %d fit(s)", len(paths))
    return {"data": data_part(rows, sweep, passes, rep),
            "fits": {f.name if f.parent == b else str(f): fit_part(f, rows, sweep, trace, passes, rep) for f in paths}}
