"""Calibration of the RTX 3080 Ti model to the study's published per-kernel table alone (Spaan et al. 2026).

This is the table method of ``kdvfs profile calibrate spaan2026`` and the bundled fit (``kdvfs.calibrate_joint.
calibrate_table`` calls it); the joint method (table and pass-level sweep together) is ``kdvfs.calibrate_joint``, which
uses the table reader and the per-kernel report of this module too.

Fit targets per kernel (and nothing aggregate — the optimiser results of Table 2 are the check, not the fit):
time and energy at (auto, auto); time and energy change at the published best setting; minimum and maximum time and
energy over the study's 66 settings. Card-level constants (boost clock, effective cap, idle power, voltage curve,
memory-clock power, bandwidth in the 405/810 MHz low-power modes) are fitted jointly with the per-kernel parameters.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares
from scipy.optimize._numdiff import approx_derivative, group_columns
from scipy.sparse import csr_matrix, lil_matrix, vstack

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, RTX3080TI, GpuSpec
from kdvfs.joint_structure import apply_structure
from kdvfs.model import KernelParams, evaluate

__all__ = ["STUDY_CORES", "STUDY_MEMS", "study_settings", "FitOptions", "CALIBRATION_REVISION", "CalibrationResult", "calibrate", "fitted_profile", "read_table",
           "report"]

log = logging.getLogger(__name__)

# the study's settings live with the pass-level sweep; re-exported here for older callers
from kdvfs.passweep import STUDY_CORES, STUDY_MEMS, study_settings  # noqa: E402


def _five(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows t0, tc, tm, uc, um of a (5, kernels) array of model parameters."""
    return a[0], a[1], a[2], a[3], a[4]


def _clock(v: str) -> int:
    return AUTO if v.strip() == "auto" else int(v)


def read_table(path: str | Path) -> list[dict]:
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        out.append({
            "id": int(r["kernel_id"]), "name": r["name"], "repeat": int(r["repeat"]),
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

# 9251 and 9501 MHz differ by 2.6 % in clock at one memory voltage: the interface's power scales at most with f·V²
# (≤ f³), so P(9251)/P(9501) ∈ [(9251/9501)³, 1]. Unbounded, the fit reads the study's 9251 MHz best picks (−4 … −8 %
# energy at ~−1 % time) as a memory-power step of ~40 %.
SHARE_9251_PHYSICAL = (9251 / 9501) ** 3

# The study's text (not its per-kernel table, not Table 2): "the largest energy reduction of any setting mix is −36.9 %,
# at +84 % time". The −36.9 % is the sum of the table's per-kernel minimum energies; the +84 % says where those minima
# lie, which the table does not, and so constrains the voltage curve below the boost clock.
EMIN_MIX_TIME_CHANGE_PCT = 84.0


@dataclass(frozen=True, slots=True)
class FitOptions:
    """Choices of the table-only fit (the variants once compared in ``validation/rtx3080ti-calibration/``, retired
    with the joint calibration).

    Attributes:
        pool: weight of the partial pooling of kernels that share a name (GEMM, Permute, …): each kernel's shape
            parameters are pulled towards its group's mean (0: every kernel on its own).
        emin_tol_pct: relative error of a kernel's minimum energy that counts as one unit of misfit (the report's
            acceptance threshold stays 25 %).
        emin_time_weight: weight of the card-level target ``EMIN_MIX_TIME_CHANGE_PCT`` (0: not fitted).
        best_weight: weight of the best-setting targets relative to the others.
        bound_mem_9251: bound the 9251 MHz memory power by ``SHARE_9251_PHYSICAL`` of the 9501 MHz power.
        boost_min_mhz: lowest boost clock the fit may choose (the upper end is 2000 MHz).
        hull_weight: weight of the best-setting optimality residual (0: not fitted): the table's best settings are
            the kernels' picks in the study's global strict-waste choice (its best columns sum to Table 2's kernel-global
            row), so at one price of time λ each is its kernel's cheapest ``energy + λ·time`` of the 66 settings; the
            residual is how much cheaper (in % of the kernel's auto energy) the model makes another setting. λ is
            profiled after the joint stage (the value that fits best, on a grid) and held while kernels are refitted
            one at a time; the residual enters that stage only.
        shape: card shape terms fitted with the 14 card constants (``kdvfs.joint_structure.CARD_SHAPE_TERMS``'
            parameters: name, lower, upper, start; empty: none, the bundled fit): static power that follows the core
            voltage, the voltage below the knee, the low-clock time form.
    """

    pool: float = 0.0
    emin_tol_pct: float = 25.0
    emin_time_weight: float = 0.0
    best_weight: float = 1.0
    bound_mem_9251: bool = False
    boost_min_mhz: float = 1900.0
    hull_weight: float = 0.0
    shape: tuple[tuple[str, float, float, float], ...] = ()

    def card_bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo, hi, x0 = _CARD_LO.copy(), _CARD_HI.copy(), _CARD_X0.copy()
        if self.shape:
            lo, hi, x0 = (np.concatenate([v, [q[j] for q in self.shape]]) for v, j in ((lo, 1), (hi, 2), (x0, 3)))
        lo[0] = self.boost_min_mhz
        if self.bound_mem_9251:
            lo[8], x0[8] = SHARE_9251_PHYSICAL, 0.97
        if not lo[0] < hi[0]:
            raise InputError(f"calibration: boost_min_mhz must be below {hi[0]:.0f} MHz, got {self.boost_min_mhz}")
        return lo, hi, np.clip(x0, lo, hi)


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


# Bumped when the fitting procedure changes, so that stored fits (validation/rtx3080ti-calibration/) are redone.
# 2: kernels that miss their auto or extremes targets are refitted with the best-setting residuals weakened.
CALIBRATION_REVISION = 2

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


def _predict(spec: GpuSpec, params: KernelParams, rows: list[dict], emin_time: bool = False) -> dict[str, np.ndarray]:
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
    out = {
        "T": ev.time_s, "E": ev.energy_j, "ib": np.array([st.index((r["best_core"], r["best_mem"])) for r in rows]),
        "t_auto": t_auto, "e_auto": e_auto,
        "dt_best": 100 * (best.time_s / t_auto - 1), "de_best": 100 * (best.energy_j / e_auto - 1),
        "t_min": ev.time_s.min(1), "t_max": ev.time_s.max(1), "e_min": ev.energy_j.min(1), "e_max": ev.energy_j.max(1),
    }
    if emin_time:  # only fits that place the energy-minimal mix need it
        out["t_at_emin"] = _soft_argmin_time(ev.time_s, ev.energy_j)
    return out


def _soft_argmin_time(t: np.ndarray, e: np.ndarray, width: float = 0.01) -> np.ndarray:
    """Time at each row's energy-minimal setting, softened (weights fall by e per 1 % of extra energy) so that a fit
    sees a smooth function of the parameters."""
    z = -(e / e.min(1, keepdims=True) - 1) / width
    w = np.exp(z - z.max(1, keepdims=True))
    return (w * t).sum(1) / w.sum(1)


def calibrate(table_path: str | Path, keys: tuple[str, ...], base: GpuSpec = RTX3080TI, max_nfev: int = 1500,
              restarts: int = 3, options: FitOptions = FitOptions()) -> CalibrationResult:
    """Fit card and kernel parameters to the table (rows in ``kernel_id`` order = the trace's kernel order)."""
    # trial steps of the solvers overflow or divide by zero far from the data; their residuals are large and finite
    # enough to be rejected, so numpy's warnings about them only alarm the user
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _calibrate(table_path, keys, base, max_nfev, restarts, options)


def _calibrate(table_path, keys, base, max_nfev, restarts, options) -> CalibrationResult:
    pool, emin_time_weight, bw = options.pool, options.emin_time_weight, options.best_weight
    card_lo, card_hi, card_x0 = options.card_bounds()
    nc = len(card_lo)  # the 14 card constants, then the shape terms' (``FitOptions.shape``)
    rows = read_table(table_path)
    n = len(rows)
    tgt = {k: np.array([r[k] for r in rows]) for k in ("t_auto", "e_auto", "dt_best", "de_best", "t_min", "t_max", "e_min", "e_max")}
    groups = _name_groups(rows)
    logt = np.log(tgt["t_auto"])[:, None] * np.array([1, 1, 1, 0, 0])  # shape = parameters relative to the auto time

    grouped = np.array([len(groups[r["name"]]) > 1 for r in rows])

    def shape_dev(xk, mu, sub):
        """Pooling residuals: each kernel's shape minus its group's mean shape (kernels alone in a group: none)."""
        z = xk - logt[sub]
        return (pool * (z - mu[sub]) * grouped[sub, None]).ravel()

    def group_means(xk_all):
        z = xk_all - logt
        mu = np.zeros_like(z)
        for members in groups.values():
            mu[members] = z[members].mean(0)
        return mu

    # per-kernel start: memory-bound kernels (time nearly flat in core clock at the best setting) get a large tm
    memb = np.array([r["best_core"] not in (AUTO,) and r["best_core"] <= 1260 for r in rows])
    share_c = np.where(memb, 0.05, 0.95)
    share_m = np.where(memb, 0.95, 0.45)
    x_k = np.column_stack([np.log(0.01 * tgt["t_auto"]), np.log(share_c * tgt["t_auto"]), np.log(share_m * tgt["t_auto"]),
                           np.log(np.where(memb, 0.9, 1.1)), np.log(np.ones(n))])
    x0 = np.concatenate([(card_x0 - card_lo) / (card_hi - card_lo), x_k.ravel()])

    def unpack(x):
        xc = card_lo + np.clip(x[:nc], 0, 1) * (card_hi - card_lo)
        spec = card_from_vector(base, xc)
        if options.shape:
            spec = apply_structure(spec, {q[0]: float(v) for q, v in zip(options.shape, xc[_NC:])})
        xk = x[nc:].reshape(n, 5)
        p = KernelParams(keys, np.exp(xk[:, 0]), np.exp(xk[:, 1]), np.exp(xk[:, 2]), np.exp(xk[:, 3]), np.exp(xk[:, 4]), "fitted")
        return spec, p

    def resid(x, spec_fixed=None, sub=None, mu=None, best_scale=1.0):
        if spec_fixed is None:
            spec, p = unpack(x)
            xk_now = x[nc:].reshape(n, 5)
        else:
            spec = spec_fixed
            xk = x.reshape(-1, 5)
            p = KernelParams(tuple(keys[i] for i in sub), *_five(np.exp(xk.T)), "fitted")
        rws = rows if sub is None else [rows[i] for i in sub]
        tg = tgt if sub is None else {k: v[sub] for k, v in tgt.items()}
        pr = _predict(spec, p, rws, emin_time=sub is None and emin_time_weight > 0)
        def hinge(e, tol):  # flat inside 60 % of the tolerance, so the fit spends its freedom where targets fail
            return np.sign(e) * np.maximum(np.abs(e) - 0.6 * tol, 0.0) / tol + 0.15 * e / tol

        r = [
            hinge(100 * np.log(pr["t_auto"] / tg["t_auto"]), 1.0) * 3,
            hinge(100 * np.log(pr["e_auto"] / tg["e_auto"]), 1.0) * 3,
            hinge(pr["dt_best"] - tg["dt_best"], 1.0) * bw * best_scale,
            hinge(pr["de_best"] - tg["de_best"], 2.0) * bw * best_scale,
            hinge(100 * (pr["t_min"] / tg["t_min"] - 1), 25.0) * 2,
            hinge(100 * (pr["t_max"] / tg["t_max"] - 1), 25.0) * 2,
            hinge(100 * (pr["e_min"] / tg["e_min"] - 1), options.emin_tol_pct) * 2,
            hinge(100 * (pr["e_max"] / tg["e_max"] - 1), 25.0) * 2,
            # weak prior: the fixed time t0 stays small (launch overhead and tails) unless the data need it
            np.log(np.maximum(p.t0_s / (0.02 * tg["t_auto"]), 1.0)) / 10.0,
        ]
        if options.hull_weight > 0 and sub is not None:
            r.append(options.hull_weight * _hull_gap(pr, tg["e_auto"], lam_fixed[0]))
        if sub is None and emin_time_weight > 0:
            # card level: where the energy-minimal mix lies (one unit of misfit = 5 points). Returned as per-kernel
            # terms whose sum is the residual, so that the Jacobian is still found from few evaluations (see jac)
            r.append(emin_time_weight * 100 / 5.0 * (rep * pr["t_at_emin"] - (1 + EMIN_MIX_TIME_CHANGE_PCT / 100)
                                                      * rep * tg["t_auto"]) / (rep @ tg["t_auto"]))
        if pool > 0:
            if sub is None:
                r.append(shape_dev(xk_now, group_means(xk_now), np.arange(n)))
            else:
                r.append(shape_dev(x.reshape(-1, 5), mu, sub))
        return np.concatenate(r)

    lam_fixed = [0.0]
    rep = np.array([r["repeat"] for r in rows], dtype=float)
    nres = 9 * n + (n if emin_time_weight > 0 else 0) + (5 * n if pool > 0 else 0)
    sp = lil_matrix((nres, nc + 5 * n), dtype=int)
    sp[:, :nc] = 1
    for j in range(9):
        for i in range(n):
            sp[j * n + i, nc + 5 * i: nc + 5 * i + 5] = 1
    if emin_time_weight > 0:
        for i in range(n):
            sp[9 * n + i, nc + 5 * i: nc + 5 * i + 5] = 1
    off = 9 * n + (n if emin_time_weight > 0 else 0)
    if pool > 0:
        for members in groups.values():
            for i in members:
                for m in members:
                    sp[off + 5 * i: off + 5 * i + 5, nc + 5 * m: nc + 5 * m + 5] = 1
    lo = np.concatenate([np.zeros(nc), np.full(5 * n, -np.inf)])
    hi = np.concatenate([np.ones(nc), np.full(5 * n, np.inf)])
    # the fixed time and the memory activity are bounded to plausible ranges
    for i in range(n):
        lo[nc + 5 * i + 4], hi[nc + 5 * i + 4] = np.log(0.05), np.log(3.0)
        lo[nc + 5 * i + 3], hi[nc + 5 * i + 3] = np.log(0.05), np.log(3.0)
        hi[nc + 5 * i + 0] = np.log(tgt["t_auto"][i])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    if emin_time_weight > 0:
        # the aggregate target's n per-kernel terms are summed into one residual, in the residuals and in the Jacobian
        agg = slice(9 * n, 10 * n)
        sp_csr = sp.tocsr()
        col_groups = group_columns(sp_csr)

        def summed(v):
            return np.concatenate([v[:agg.start], [v[agg].sum()], v[agg.stop:]])

        def fun(x):
            return summed(resid(x))

        def jac(x):
            j = approx_derivative(resid, x, bounds=(lo, hi), sparsity=(sp_csr, col_groups)).tocsr()
            return vstack([j[:agg.start], csr_matrix(j[agg].sum(axis=0)), j[agg.stop:]]).tocsr()

        res = least_squares(fun, x0, jac=jac, bounds=(lo, hi), max_nfev=max_nfev, x_scale="jac", ftol=1e-12,
                            xtol=1e-12, gtol=1e-12)
    else:
        res = least_squares(resid, x0, jac_sparsity=sp, bounds=(lo, hi), max_nfev=max_nfev, x_scale="jac", ftol=1e-12,
                            xtol=1e-12, gtol=1e-12)
    spec, p = unpack(res.x)
    if options.hull_weight > 0:
        lam_fixed[0] = _best_price(_predict(spec, p, rows), tgt["e_auto"])
        log.info("price of time at which the best settings are cheapest: %.1f W", lam_fixed[0])
    # second pass: card fixed, each kernel refitted alone from several starts; keep the start that meets most targets
    xk_all = res.x[nc:].reshape(n, 5).copy()
    mu = group_means(xk_all)
    rng = np.random.default_rng(0)
    for i in range(n):
        lo_i, hi_i = lo[nc + 5 * i: nc + 5 * i + 5], hi[nc + 5 * i: nc + 5 * i + 5]
        dev = partial(shape_dev, mu=mu, sub=[i]) if pool > 0 else None
        best = (_score(spec, xk_all[i], keys[i], rows[i], dev), xk_all[i])
        for k in range(restarts * 5):
            if k >= restarts and best[0][:2] == (2, 1):
                break  # all three targets met: no need for more starts
            start = xk_all[i] if k == 0 else xk_all[i] + rng.normal(0, 0.5, 5)
            start = np.clip(start, lo_i + 1e-9, hi_i - 1e-9)
            r_i = least_squares(resid, start, args=(spec, [i], mu), bounds=(lo_i, hi_i), max_nfev=400)
            cand = (_score(spec, r_i.x, keys[i], rows[i], dev), r_i.x)
            if cand[0] > best[0]:
                best = cand
        if best[0][0] < 2:
            # auto or extremes still missed: they are targets for every kernel, the best setting only for 80 % of them,
            # so try again with the best-setting residuals weakened
            for scale in (0.3, 0.1, 0.0):
                for k in range(restarts * 2):
                    start = np.clip(best[1] if k == 0 else xk_all[i] + rng.normal(0, 0.7, 5), lo_i + 1e-9, hi_i - 1e-9)
                    r_i = least_squares(resid, start, args=(spec, [i], mu, scale), bounds=(lo_i, hi_i), max_nfev=400)
                    cand = (_score(spec, r_i.x, keys[i], rows[i], dev), r_i.x)
                    if cand[0] > best[0]:
                        best = cand
        xk_all[i] = best[1]
    p = KernelParams(keys, *_five(np.exp(xk_all.T)), "fitted")
    return CalibrationResult(spec=spec, params=p, rows=rows, cost=float(res.cost))


_PRICES_W = np.linspace(0.0, 1500.0, 151)


def _gaps(pr: dict, e_auto: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(prices, kernels): how much cheaper than the best setting the cheapest setting is at each price of time, in
    % of the kernel's auto energy."""
    k = np.arange(pr["T"].shape[0])
    cost = pr["E"][None] + lam[:, None, None] * pr["T"][None]
    return 100 * (cost[:, k, pr["ib"]] - cost.min(2)) / e_auto[None]


def _best_price(pr: dict, e_auto: np.ndarray) -> float:
    g = _gaps(pr, e_auto, _PRICES_W)
    return float(_PRICES_W[np.argmin((g ** 2).sum(1))])


def _hull_gap(pr: dict, e_auto: np.ndarray, lam: float) -> np.ndarray:
    """Per kernel, the best-setting optimality gap at price ``lam`` (%, one unit per point)."""
    return _gaps(pr, e_auto, np.array([lam]))[0]


def _name_groups(rows: list[dict]) -> dict[str, list[int]]:
    """Kernels that share a name (GEMM, Permute, GELU …) share their physics up to what their own data say."""
    out: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        out.setdefault(r["name"], []).append(i)
    return out


def _score(spec: GpuSpec, xk: np.ndarray, key: str, row: dict, dev=None) -> tuple:
    """How well one kernel meets the targets: (all-kernel targets met, best-setting target met, −total error)."""
    p = KernelParams((key,), *_five(np.exp(xk[:, None])), "fitted")
    pr = {k: float(v[0]) for k, v in _predict(spec, p, [row]).items() if k not in ("T", "E", "ib")}
    e_auto = max(abs(pr["t_auto"] / row["t_auto"] - 1), abs(pr["e_auto"] / row["e_auto"] - 1)) / 0.01
    e_best = max(abs(pr["dt_best"] - row["dt_best"]) / 1.0, abs(pr["de_best"] - row["de_best"]) / 2.0)
    e_ext = max(abs(pr[k] / row[k] - 1) / 0.25 for k in ("t_min", "t_max", "e_min", "e_max"))
    # auto and extremes are targets for every kernel, the best setting for 80 % of them: rank in that order
    pooled = 0.0 if dev is None else float(np.sum(dev(xk.reshape(1, 5)) ** 2))
    return ((e_auto <= 1) + (e_ext <= 1), int(e_best <= 1), -(e_auto + e_best + e_ext + pooled))


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
    # a check, not a target: each kernel at its own minimum energy, summed over the iteration (the table's minima sum
    # to −36.9 % of the auto energy); the per-kernel 25 % tolerance lets errors that all lean one way add up
    rep = np.array([r["repeat"] for r in result.rows], dtype=float)
    summary["min_energy_mix_pct"] = float(100 * (rep @ pr["e_min"] / (rep @ pr["e_auto"]) - 1))
    summary["min_energy_mix_paper_pct"] = float(100 * (rep @ np.array([r["e_min"] for r in result.rows])
                                                       / (rep @ np.array([r["e_auto"] for r in result.rows])) - 1))
    # card constants as JSON values (tuples as lists), as the calibration files store them
    card = {k: getattr(result.spec, k) for k in
            ("boost_core_mhz", "cap_w", "idle_power_w", "v_min", "v_max", "vf_knee_mhz", "mem_power_w", "auto_mem_extra_w",
             "mem_bandwidth_gbs", "core_power_w", "mem_traffic_power_w", "smooth_p")}
    return {"summary": summary, "kernels": rows,
            "card": {k: (list(v) if isinstance(v, tuple) else float(v)) for k, v in card.items()}}


def load_params(path: str | Path) -> KernelParams:
    """Kernel parameters stored by the calibration script (``…calibration.json``)."""
    import json

    return params_from_rows(json.loads(Path(path).read_text())["params"])


def fitted_profile(trace, card: dict, params_rows: list[dict], base: GpuSpec = RTX3080TI):
    """The profile of a stored fit: card constants as ``report`` returns them (JSON values) and per-kernel parameters
    as ``KernelParams.as_rows()`` gives them (e.g. one entry of validation/rtx3080ti-calibration/variants.json)."""
    from kdvfs.profile import build_profile

    fields: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in card.items()}
    spec = replace(base, **fields)
    return build_profile(trace, spec, params_from_rows(params_rows), source="fitted")


def params_from_rows(rows: list[dict]) -> KernelParams:
    """Kernel parameters from ``KernelParams.as_rows()`` output."""
    col = lambda f: np.array([r[f] for r in rows])  # noqa: E731
    return KernelParams(tuple(r["kernel"] for r in rows), col("t0_s"), col("tc_s"), col("tm_s"), col("uc"), col("um"), "fitted")
