"""Calibration of the RTX 3080 Ti model to the study's published per-kernel table (Spaan et al. 2026).

Fit targets per kernel (and nothing aggregate — the optimiser results of Table 2 are the check, not the fit):
time and energy at (auto, auto); time and energy change at the published best setting; minimum and maximum time and
energy over the study's 66 settings. Card-level constants (boost clock, effective cap, idle power, voltage curve,
memory-clock power, bandwidth in the 405/810 MHz low-power modes) are fitted jointly with the per-kernel parameters.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.sparse import lil_matrix

from kdvfs.gpus import AUTO, RTX3080TI, GpuSpec
from kdvfs.model import KernelParams, evaluate

__all__ = ["STUDY_CORES", "STUDY_MEMS", "study_settings", "CalibrationResult", "calibrate", "read_table", "report"]

log = logging.getLogger(__name__)

STUDY_CORES = (210, 420, 630, 840, 1050, 1260, 1470, 1680, 1890, 2100, AUTO)
STUDY_MEMS = (405, 810, 5001, 9251, 9501, AUTO)


def study_settings() -> list[tuple[int, int]]:
    """The study's 66 measured settings (core × memory, ``AUTO`` included; 405 MHz memory above 420 MHz core is
    what the driver turns into 810 MHz, and is evaluated so)."""
    return [(c, m) for m in STUDY_MEMS for c in STUDY_CORES]


def _clock(v: str) -> int:
    return AUTO if v.strip() == "auto" else int(v)


def read_table(path: str | Path) -> list[dict]:
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        out.append({
            "id": int(r["kernel_id"]), "name": r["name"],
            "t_auto": float(r["time_auto_s"]), "e_auto": float(r["energy_auto_j"]),
            "t_min": float(r["time_min_s"]), "t_max": float(r["time_max_s"]),
            "e_min": float(r["energy_min_j"]), "e_max": float(r["energy_max_j"]),
            "best_mem": _clock(r["best_mem_mhz"]), "best_core": _clock(r["best_core_mhz"]),
            "dt_best": float(r["best_time_change_pct"]), "de_best": float(r["best_energy_change_pct"]),
        })
    return sorted(out, key=lambda r: r["id"])


_CARD = ("boost_core_mhz", "cap_w", "idle_base_w", "v_min", "vf_knee_mhz", "mem_share_405", "mem_share_810",
         "mem_share_5001", "mem_share_9251", "auto_mem_extra_w", "bw405", "bw810", "smooth_p", "mem_power_9501")
# Bounds: the boost clock is where a GA102 runs sustained loads at ~77 °C (1900–2000 MHz; the study's kernels at
# 5001 MHz memory ran 2–3 % faster than at auto, which needs head-room above the throttled clock); the cap at or just
# below the 350 W limit, no lower than 342 W because kernels were measured at up to 348 W at auto.
# memory power is parameterised as shares of the next higher clock's, so that it never falls as the clock rises
_CARD_X0 = np.array([1960.0, 343.0, 30.0, 0.70, 1100.0, 0.5, 0.5, 0.6, 0.9, 10.0, 25.0, 60.0, 6.0, 60.0])
_CARD_LO = np.array([1900.0, 342.0, 10.0, 0.45, 600.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 10.0, 1.5, 10.0])
_CARD_HI = np.array([2000.0, 350.0, 90.0, 0.95, 1700.0, 1.0, 1.0, 1.0, 1.0, 60.0, 100.0, 300.0, 20.0, 160.0])
_NC = len(_CARD)


def card_from_vector(base: GpuSpec, x: np.ndarray) -> GpuSpec:
    bw = list(base.mem_bandwidth_gbs)
    bw[0], bw[1] = float(x[10]), float(x[11])
    m9501 = float(x[13])
    m9251 = m9501 * float(x[8])
    m5001 = m9251 * float(x[7])
    m810 = m5001 * float(x[6])
    mp = (m810 * float(x[5]), m810, m5001, m9251, m9501)
    return replace(base, boost_core_mhz=float(x[0]), cap_w=float(x[1]), idle_power_w=float(x[2]) + m9501, v_min=float(x[3]),
                   v_max=1.0, vf_knee_mhz=float(x[4]), mem_power_w=mp, auto_mem_extra_w=float(x[9]),
                   mem_bandwidth_gbs=tuple(bw), smooth_p=float(x[12]))


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """Attributes:
        spec: the fitted card.
        params: fitted per-kernel parameters (trace order = table order).
        rows: the published table.
        cost: final least-squares cost.
    """

    spec: GpuSpec
    params: KernelParams
    rows: list
    cost: float


def _predict(spec: GpuSpec, params: KernelParams, rows: list[dict]) -> dict[str, np.ndarray]:
    st = study_settings()
    c = np.array([s[0] for s in st])
    m = np.array([s[1] for s in st])
    ev = evaluate(spec, params, c, m)
    ia = st.index((AUTO, AUTO))
    n = len(rows)
    ki = np.arange(n)
    best = evaluate(spec, params, np.array([r["best_core"] for r in rows]), np.array([r["best_mem"] for r in rows]),
                    kernel_index=ki)
    t_auto, e_auto = ev.time_s[:, ia], ev.energy_j[:, ia]
    return {
        "t_auto": t_auto, "e_auto": e_auto,
        "dt_best": 100 * (best.time_s / t_auto - 1), "de_best": 100 * (best.energy_j / e_auto - 1),
        "t_min": ev.time_s.min(1), "t_max": ev.time_s.max(1), "e_min": ev.energy_j.min(1), "e_max": ev.energy_j.max(1),
    }


def calibrate(table_path: str | Path, keys: tuple[str, ...], base: GpuSpec = RTX3080TI, max_nfev: int = 1500,
              restarts: int = 3) -> CalibrationResult:
    """Fit card and kernel parameters to the table (rows in ``kernel_id`` order = the trace's kernel order)."""
    rows = read_table(table_path)
    n = len(rows)
    tgt = {k: np.array([r[k] for r in rows]) for k in ("t_auto", "e_auto", "dt_best", "de_best", "t_min", "t_max", "e_min", "e_max")}

    # per-kernel start: memory-bound kernels (time nearly flat in core clock at the best setting) get a large tm
    memb = np.array([r["best_core"] not in (AUTO,) and r["best_core"] <= 1260 for r in rows])
    share_c = np.where(memb, 0.05, 0.95)
    share_m = np.where(memb, 0.95, 0.45)
    x_k = np.column_stack([np.log(0.01 * tgt["t_auto"]), np.log(share_c * tgt["t_auto"]), np.log(share_m * tgt["t_auto"]),
                           np.log(np.where(memb, 0.9, 1.1)), np.log(np.ones(n))])
    x0 = np.concatenate([(_CARD_X0 - _CARD_LO) / (_CARD_HI - _CARD_LO), x_k.ravel()])

    def unpack(x):
        xc = _CARD_LO + np.clip(x[:_NC], 0, 1) * (_CARD_HI - _CARD_LO)
        spec = card_from_vector(base, xc)
        xk = x[_NC:].reshape(n, 5)
        p = KernelParams(keys, np.exp(xk[:, 0]), np.exp(xk[:, 1]), np.exp(xk[:, 2]), np.exp(xk[:, 3]), np.exp(xk[:, 4]), "fitted")
        return spec, p

    def resid(x, spec_fixed=None, sub=None):
        if spec_fixed is None:
            spec, p = unpack(x)
        else:
            spec = spec_fixed
            xk = x.reshape(-1, 5)
            p = KernelParams(tuple(keys[i] for i in sub), *(np.exp(xk[:, j]) for j in range(5)), "fitted")
        rws = rows if sub is None else [rows[i] for i in sub]
        tg = tgt if sub is None else {k: v[sub] for k, v in tgt.items()}
        pr = _predict(spec, p, rws)
        def hinge(e, tol):  # flat inside 60 % of the tolerance, so the fit spends its freedom where targets fail
            return np.sign(e) * np.maximum(np.abs(e) - 0.6 * tol, 0.0) / tol + 0.15 * e / tol

        r = [
            hinge(100 * np.log(pr["t_auto"] / tg["t_auto"]), 1.0) * 3,
            hinge(100 * np.log(pr["e_auto"] / tg["e_auto"]), 1.0) * 3,
            hinge(pr["dt_best"] - tg["dt_best"], 1.0),
            hinge(pr["de_best"] - tg["de_best"], 2.0),
            hinge(100 * (pr["t_min"] / tg["t_min"] - 1), 25.0) * 2,
            hinge(100 * (pr["t_max"] / tg["t_max"] - 1), 25.0) * 2,
            hinge(100 * (pr["e_min"] / tg["e_min"] - 1), 25.0) * 2,
            hinge(100 * (pr["e_max"] / tg["e_max"] - 1), 25.0) * 2,
            # weak prior: the fixed time t0 stays small (launch overhead and tails) unless the data need it
            np.log(np.maximum(p.t0_s / (0.02 * tg["t_auto"]), 1.0)) / 10.0,
        ]
        return np.concatenate(r)

    nres = 9 * n
    sp = lil_matrix((nres, _NC + 5 * n), dtype=int)
    sp[:, :_NC] = 1
    for j in range(9):
        for i in range(n):
            sp[j * n + i, _NC + 5 * i: _NC + 5 * i + 5] = 1
    lo = np.concatenate([np.zeros(_NC), np.full(5 * n, -np.inf)])
    hi = np.concatenate([np.ones(_NC), np.full(5 * n, np.inf)])
    # the fixed time and the memory activity are bounded to plausible ranges
    for i in range(n):
        lo[_NC + 5 * i + 4], hi[_NC + 5 * i + 4] = np.log(0.05), np.log(3.0)
        lo[_NC + 5 * i + 3], hi[_NC + 5 * i + 3] = np.log(0.05), np.log(3.0)
        hi[_NC + 5 * i + 0] = np.log(tgt["t_auto"][i])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    res = least_squares(resid, x0, jac_sparsity=sp, bounds=(lo, hi), max_nfev=max_nfev, x_scale="jac", ftol=1e-12, xtol=1e-12, gtol=1e-12)
    spec, p = unpack(res.x)
    # second pass: card fixed, each kernel refitted alone from several starts; keep the start that meets most targets
    xk_all = res.x[_NC:].reshape(n, 5).copy()
    rng = np.random.default_rng(0)
    for i in range(n):
        lo_i, hi_i = lo[_NC + 5 * i: _NC + 5 * i + 5], hi[_NC + 5 * i: _NC + 5 * i + 5]
        best = (_score(spec, xk_all[i], keys[i], rows[i]), xk_all[i])
        for k in range(restarts * 5):
            if k >= restarts and best[0][:2] == (2, 1):
                break  # all three targets met: no need for more starts
            start = xk_all[i] if k == 0 else xk_all[i] + rng.normal(0, 0.5, 5)
            start = np.clip(start, lo_i + 1e-9, hi_i - 1e-9)
            r_i = least_squares(resid, start, args=(spec, [i]), bounds=(lo_i, hi_i), max_nfev=400)
            cand = (_score(spec, r_i.x, keys[i], rows[i]), r_i.x)
            if cand[0] > best[0]:
                best = cand
        xk_all[i] = best[1]
    p = KernelParams(keys, *(np.exp(xk_all[:, j]) for j in range(5)), "fitted")
    return CalibrationResult(spec=spec, params=p, rows=rows, cost=float(res.cost))


def _score(spec: GpuSpec, xk: np.ndarray, key: str, row: dict) -> tuple:
    """How well one kernel meets the targets: (all-kernel targets met, best-setting target met, −total error)."""
    p = KernelParams((key,), *(np.exp(xk[j:j + 1]) for j in range(5)), "fitted")
    pr = {k: float(v[0]) for k, v in _predict(spec, p, [row]).items()}
    e_auto = max(abs(pr["t_auto"] / row["t_auto"] - 1), abs(pr["e_auto"] / row["e_auto"] - 1)) / 0.01
    e_best = max(abs(pr["dt_best"] - row["dt_best"]) / 1.0, abs(pr["de_best"] - row["de_best"]) / 2.0)
    e_ext = max(abs(pr[k] / row[k] - 1) / 0.25 for k in ("t_min", "t_max", "e_min", "e_max"))
    # auto and extremes are targets for every kernel, the best setting for 80 % of them: rank in that order
    return ((e_auto <= 1) + (e_ext <= 1), int(e_best <= 1), -(e_auto + e_best + e_ext))


def report(result: CalibrationResult) -> dict:
    """Per-kernel comparison with the table and whether the issue's targets hold."""
    pr = _predict(result.spec, result.params, result.rows)
    rows = []
    for i, r in enumerate(result.rows):
        d = {"id": r["id"], "name": r["name"]}
        for k in ("t_auto", "e_auto", "t_min", "t_max", "e_min", "e_max"):
            d[k + "_err_pct"] = 100 * (pr[k][i] / r[k] - 1)
        d["dt_best_model"], d["dt_best_paper"] = pr["dt_best"][i], r["dt_best"]
        d["de_best_model"], d["de_best_paper"] = pr["de_best"][i], r["de_best"]
        d["auto_ok"] = abs(d["t_auto_err_pct"]) <= 1 and abs(d["e_auto_err_pct"]) <= 1
        d["best_ok"] = abs(d["dt_best_model"] - d["dt_best_paper"]) <= 1 and abs(d["de_best_model"] - d["de_best_paper"]) <= 2
        d["extremes_ok"] = all(abs(d[k + "_err_pct"]) <= 25 for k in ("t_min", "t_max", "e_min", "e_max"))
        rows.append(d)
    n = len(rows)
    summary = {
        "kernels": n,
        "auto_within_1pct": sum(r["auto_ok"] for r in rows),
        "best_within_target": sum(r["best_ok"] for r in rows),
        "best_share": sum(r["best_ok"] for r in rows) / n,
        "extremes_within_25pct": sum(r["extremes_ok"] for r in rows),
    }
    summary["targets_met"] = (summary["auto_within_1pct"] == n and summary["best_share"] >= 0.8
                              and summary["extremes_within_25pct"] == n)
    return {"summary": summary, "kernels": rows, "card": {k: getattr(result.spec, k) for k in
            ("boost_core_mhz", "cap_w", "idle_power_w", "v_min", "v_max", "vf_knee_mhz", "mem_power_w", "auto_mem_extra_w",
             "mem_bandwidth_gbs", "core_power_w", "mem_traffic_power_w", "smooth_p")}}


def load_params(path: str | Path) -> KernelParams:
    """Kernel parameters stored by the calibration script (``…calibration.json``)."""
    import json

    rows = json.loads(Path(path).read_text())["params"]
    col = lambda f: np.array([r[f] for r in rows])  # noqa: E731
    return KernelParams(tuple(r["kernel"] for r in rows), col("t0_s"), col("tc_s"), col("tm_s"), col("uc"), col("um"), "fitted")
