"""Joint calibration of the RTX 3080 Ti model on the study's per-kernel table and its pass-level sweep.

Data (Spaan et al. 2026, CC BY 4.0), and nothing else: the per-kernel table (Table 1 / Figure 5: each kernel's time
and energy at auto, its change at the published best setting, its extremes over the 66 settings) and the pass-level
sweep (Figures 3/4: forward and backward pass, time and energy change at all 66 settings). Table 2, the relaxed-waste
curve and the batch / tensor-parallel trends are held out: they are computed by the optimisers on the fitted model.

Free parameters (``docs/model.md``): 20 for the card (``CARD_PARAMS``), 5 per kernel (t0, tc, tm, uc, um); none
belongs to a single setting.

Loss: a sum of squares of normalised residuals, each a model-minus-data difference divided by its tolerance:

- per kernel (46 each): auto time and auto energy (log ratio, tolerance 1 %, weight 3), change at the best setting
  (tolerance 1 point time / 2 points energy, weight ``best_weight``), the four extremes (tolerance 25 %, weight 2);
  these pass through a hinge (slope 0.15 inside 60 % of the tolerance, 1.15 beyond), as in ``kdvfs.calibrate``;
- per pass and setting (2 × 66 each, time and energy): the change in points divided by ``1 + |data| / 100`` (one point
  near auto, relative 1 % far from it), weight ``pass_weight``;
- a weak prior keeping each kernel's fixed time t0 below 2 % of its auto time unless the data need more.

The Jacobian is found by finite differences in blocks (every kernel's parameter j moved at once: a kernel's values
depend only on its own parameters and the card's), so one Jacobian costs 25 model evaluations.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, RTX3080TI, GpuSpec
from kdvfs.joint_structure import (
    LIMITER_TERMS,
    apply_structure,
    band_residual,
    parse_drop,
    parse_structure,
    pass_eval,
    pass_requests,
    structure_params,
)
from kdvfs.limiter_pass import PassLimit
from kdvfs.model import KernelParams, evaluate
from kdvfs.passcontext import PassContext, apply_context, context_params, parse_terms
from kdvfs.passweep import PassSweep, pass_index, study_settings

__all__ = ["CARD_PARAMS", "METHODS", "PASS_LOSSES", "JointOptions", "JointResult", "calibrate_joint", "calibrate_table",
           "card_from_vector", "check_table", "table_base", "vector_of"]

log = logging.getLogger(__name__)

# name, lower bound, upper bound, start. Memory power is parameterised as shares of the next higher clock's, so it
# never falls as the clock rises; 9251 MHz at least half the 9501 MHz power (same voltage, 2.6 % lower clock).
CARD_PARAMS: tuple[tuple[str, float, float, float], ...] = (
    ("boost_core_mhz", 1650.0, 2000.0, 1800.0),   # the clock GEMMs run at when no cap binds (GA102 at ~77 °C)
    ("cap_w", 325.0, 350.0, 342.0),                # the power the driver holds (at or below the 350 W limit)
    ("idle_base_w", 10.0, 120.0, 40.0),            # card power with memory off and the core idle
    ("v_min", 0.40, 0.98, 0.70),                   # relative core voltage below the knee
    ("vf_knee_mhz", 500.0, 1800.0, 1300.0),        # core clock where the voltage starts to rise
    ("vf_exponent", 0.5, 3.0, 1.5),                # shape of the rise
    ("mem_power_9501", 5.0, 160.0, 50.0),          # memory power at 9501 MHz, no traffic
    ("share_9251", 0.5, 1.0, 0.95),
    ("share_5001", 0.0, 1.0, 0.6),
    ("share_810", 0.0, 1.0, 0.3),
    ("share_405", 0.0, 1.0, 0.5),
    ("auto_mem_extra_w", 0.0, 80.0, 15.0),         # what the driver's auto memory costs, every kernel
    ("auto_mem_traffic_w", 0.0, 150.0, 10.0),      # … and per unit of memory traffic
    ("auto_mem_onset_mhz", 600.0, 1640.0, 1400.0),  # core clock above which the auto memory starts to cost
    ("bw405", 2.0, 120.0, 30.0),                   # effective bandwidth in the 405/810 MHz low-power modes, GB/s
    ("bw810", 10.0, 400.0, 176.0),
    ("smooth_p", 1.5, 20.0, 6.0),                  # smooth maximum of core and memory time
    ("smooth_p_405", 1.0, 20.0, 1.5),              # … in the 405 and 810 MHz low-power memory modes
    ("smooth_p_810", 1.0, 20.0, 1.5),
    ("core_floor_mhz", 0.0, 400.0, 200.0),         # lowest clock the core really runs under load
    ("auto_mem_bw_factor", 1.0, 1.05, 1.01),       # auto memory's bandwidth over the same clock locked
    # not a card constant: the price of time (W) at which the table's best settings are each kernel's cheapest, i.e.
    # the Lagrange multiplier of the study's global strict-waste choice (the table's best columns sum to it)
    ("best_price_w", 0.0, 2000.0, 400.0),
)
_NC = len(CARD_PARAMS)
_LO = np.array([c[1] for c in CARD_PARAMS])
_HI = np.array([c[2] for c in CARD_PARAMS])
_X0 = np.array([c[3] for c in CARD_PARAMS])
_NK = 5  # per-kernel parameters: log t0, log tc, log tm, log uc, log um
_NKR = 10  # per-kernel residuals (``_Problem.kres``)
_ILAM = [c[0] for c in CARD_PARAMS].index("best_price_w")


def card_from_vector(base: GpuSpec, x: np.ndarray) -> GpuSpec:
    """The card of a parameter vector in physical units (``CARD_PARAMS`` order)."""
    v = dict(zip((c[0] for c in CARD_PARAMS), map(float, x)))
    m9501 = v["mem_power_9501"]
    m9251 = m9501 * v["share_9251"]
    m5001 = m9251 * v["share_5001"]
    m810 = m5001 * v["share_810"]
    bw = list(base.mem_bandwidth_gbs)
    bw[0], bw[1] = v["bw405"], v["bw810"]
    return replace(base, boost_core_mhz=v["boost_core_mhz"], cap_w=v["cap_w"], idle_power_w=v["idle_base_w"] + m9501,
                   v_min=v["v_min"], v_max=1.0, vf_knee_mhz=v["vf_knee_mhz"], vf_exponent=v["vf_exponent"],
                   mem_power_w=(m810 * v["share_405"], m810, m5001, m9251, m9501),
                   auto_mem_extra_w=v["auto_mem_extra_w"], auto_mem_traffic_w=v["auto_mem_traffic_w"],
                   auto_mem_onset_mhz=v["auto_mem_onset_mhz"],
                   mem_bandwidth_gbs=tuple(bw), smooth_p=v["smooth_p"],
                   smooth_p_mem=tuple((m, v[f"smooth_p_{m}"]) for m in (405, 810) if v[f"smooth_p_{m}"] != v["smooth_p"]),
                   core_floor_mhz=v["core_floor_mhz"],
                   auto_mem_bw_factor=v["auto_mem_bw_factor"],
                   quirk_core_clamp_mhz=((405, 420),), quirk_mem_fallback_mhz=())


@dataclass(frozen=True, slots=True)
class JointOptions:
    """Attributes:
        pass_weight: weight of the pass-level residuals against the per-kernel ones.
        emin_tol_pct: tolerance of each kernel's minimum energy in the loss, percent (the report's target stays 25 %).
        time_sigma_floor, pass_rel_sigma: a pass-level residual is the error in points divided by
            ``floor + rel · |study|`` (time; energy uses floor 1).
        hull_weight: weight of the best-setting optimality residual (``kdvfs.calibrate.FitOptions.hull_weight``),
            with the price of time as one more fitted number (``best_price_w``).
        start: a calibration JSON (``card_vector`` and ``params``) to start from instead of the table-derived start.
        method: ``table`` or ``joint`` (``METHODS``).
        best_weight: weight of the best-setting residuals.
        loss_pass: which pass the loss kernels belong to in the pass-level sweep (``backward``: llm.c's split).
        max_nfev: iterations of the joint least-squares solve.
        prefit_nfev: iterations of the first stage, on the per-kernel table alone (0: none).
        polish_starts: last stage: each kernel refitted alone (card and other kernels fixed, same loss) from this many
            starts around its joint-fit values (seeded), keeping the lowest loss (0: none); then ``refine_nfev``
            iterations of the joint solve again.
        pass_terms: the card-level pass-context terms fitted with the sweep (``kdvfs.passcontext.PASS_TERMS``, a
            comma list: ``gap``, ``gapfwd``, ``automem``, ``autocore``, ``corepower``; "" none): what a pass holds
            beyond its kernels alone.
        pass_loss: ``linear`` (squares of the pass-level residuals) or ``soft_l1`` (each residual r enters as
            ``2(√(1 + r²) − 1)``: a few pass points that the per-kernel table contradicts cost linearly, not
            quadratically, e.g. the forward pass at (210, 405), 25 % faster than its kernels' slowest times summed).
        kernel_loss: ``hinge`` (slope 0.15 inside 60 % of each per-kernel target's tolerance, 1.15 beyond) or ``band``
            (no penalty inside 90 % of the tolerance, slope ``BAND_SLOPE`` beyond it: the per-kernel targets as bands,
            the pass-level sweep takes whatever freedom is left inside them).
        structure: structural card terms fitted with the rest (``STRUCTURE_TERMS``, a comma list; "" none):
            ``memtraffic``, memory traffic power per memory clock (3 parameters: 9251, 5001 and the low-power modes,
            each a share of the next higher clock's); ``passcap``, the cap a kernel meets inside a pass (1 parameter:
            the limiter averages over a window of mixed kernels, so in a pass a kernel throttles against a higher
            effective cap than alone); ``passboost``, the top core clock in a pass as a share of the boost clock (1
            parameter: with the core on auto or above it, a pass's kernels run at it, GPU Boost's clock in a sustained
            pass rather than in a kernel's own loop).
        pass_drop: a diagnosis, not a calibration: pass-level settings left out of the loss (both passes), a comma
            list of ``core/memory`` (``auto/9501,1890/9251``); the report still checks every setting.
    """

    pass_weight: float = 1.0
    hull_weight: float = 0.0
    start: str = ""
    method: str = "table"
    emin_tol_pct: float = 25.0
    time_sigma_floor: float = 1.0
    pass_rel_sigma: float = 0.01
    best_weight: float = 1.0
    loss_pass: str = "backward"
    max_nfev: int = 400
    prefit_nfev: int = 50
    polish_starts: int = 4
    refine_nfev: int = 100
    pass_terms: str = ""
    pass_loss: str = "linear"
    kernel_loss: str = "hinge"
    structure: str = ""
    pass_drop: str = ""


@dataclass(frozen=True, slots=True)
class JointResult:
    """Attributes:
        spec: the fitted card.
        params: per-kernel parameters (trace order = table order).
        x: the fitted card vector in physical units (``CARD_PARAMS`` order).
        cost: final loss (half the sum of squared residuals).
        nfev: model evaluations of the solve.
        seconds: wall time of the fit.
        context: the fitted pass-context terms (``kdvfs.passcontext``; neutral unless ``pass_terms`` chose some).
        structure: the fitted structural terms (``STRUCTURE_TERMS``), name → value; ``pass_cap_w`` is the cap the
            kernels of a pass throttle against (the spec's memory traffic scale is already in ``spec``).
    """

    spec: GpuSpec
    params: KernelParams
    x: tuple[float, ...]
    cost: float
    nfev: int
    seconds: float
    context: PassContext = PassContext()
    structure: tuple[tuple[str, float], ...] = ()


PASS_LOSSES = ("linear", "soft_l1")
METHODS = ("table", "joint")
"""``table``: the per-kernel table alone (``kdvfs.calibrate.calibrate``, the bundled fit), the pass-level sweep only
checked; ``joint``: the table and the pass-level sweep together (``calibrate_joint``)."""

# The table method's card structure: what the per-kernel table can identify. The pass-level shape parameters stay
# neutral (linear voltage rise, no core floor, the auto-memory cost at every core clock and without a traffic part):
# the table pins each kernel at auto, its best setting and its extremes only, so it cannot tell them apart. (Fitting
# the floor and the auto-memory onset to the pass-level sweep afterwards, kernels held, moved its median by 1 point
# and cost 2 kernels' auto and best targets; the best settings' optimality residual, hull_weight=1, cost 2 kernels'
# extremes and did not bring the kernel-global row within its target: neither is used.)


def table_base(base: GpuSpec = RTX3080TI) -> GpuSpec:
    """``base`` with the fields the table method does not fit set neutral (their defaults)."""
    return replace(base, vf_exponent=1.0, core_floor_mhz=0.0, auto_mem_traffic_w=0.0, auto_mem_onset_mhz=0.0,
                   smooth_p_mem=(), auto_mem_bw_factor=1.0, slow_core_mhz=0.0)


def vector_of(spec: GpuSpec, best_price_w: float = 400.0) -> np.ndarray:
    """The ``CARD_PARAMS`` vector of a card (the inverse of ``card_from_vector`` on the fields it sets)."""
    mp = spec.mem_power_w
    sp = dict(spec.smooth_p_mem)
    v = {"boost_core_mhz": spec.boost_core_mhz, "cap_w": spec.cap_w, "idle_base_w": spec.idle_power_w - mp[4],
         "v_min": spec.v_min, "vf_knee_mhz": spec.vf_knee_mhz, "vf_exponent": spec.vf_exponent,
         "mem_power_9501": mp[4], "share_9251": mp[3] / mp[4], "share_5001": mp[2] / mp[3], "share_810": mp[1] / mp[2],
         "share_405": mp[0] / mp[1], "auto_mem_extra_w": spec.auto_mem_extra_w,
         "auto_mem_traffic_w": spec.auto_mem_traffic_w, "auto_mem_onset_mhz": spec.auto_mem_onset_mhz,
         "bw405": spec.mem_bandwidth_gbs[0], "bw810": spec.mem_bandwidth_gbs[1], "smooth_p": spec.smooth_p,
         "smooth_p_405": sp.get(405, spec.smooth_p), "smooth_p_810": sp.get(810, spec.smooth_p),
         "core_floor_mhz": spec.core_floor_mhz, "auto_mem_bw_factor": spec.auto_mem_bw_factor,
         "best_price_w": best_price_w}
    return np.array([float(v[c[0]]) for c in CARD_PARAMS])


def calibrate_table(rows: list[dict], trace, table_path: str | Path, base: GpuSpec = RTX3080TI,
                    structure: str = "", emin_tol_pct: float = 25.0) -> JointResult:
    """The table method: ``kdvfs.calibrate.calibrate`` (the per-kernel targets) on the neutral card structure, as a
    ``JointResult``; ``rows`` already passed ``check_table`` (``calibrate_spaan2026``). ``structure`` (default none,
    the bundled fit) adds card shape terms (``CARD_SHAPE_TERMS``) to the fitted card constants; ``emin_tol_pct``
    is the loss's tolerance of each kernel's minimum energy (``FitOptions.emin_tol_pct``)."""
    from kdvfs.calibrate import FitOptions, calibrate

    t_start = time.perf_counter()
    shape = structure_params(parse_structure(structure))
    res = calibrate(table_path, trace.kernel_keys, base=table_base(base),
                    options=FitOptions(shape=shape, emin_tol_pct=emin_tol_pct))
    return JointResult(res.spec, res.params, tuple(float(v) for v in vector_of(res.spec)), res.cost, 0,
                       time.perf_counter() - t_start,
                       structure=tuple((q[0], float(getattr(res.spec, q[0]))) for q in shape))


def check_table(rows: list[dict], spec: GpuSpec, trace) -> None:
    """Refuse a per-kernel table with NaN, non-positive values, extremes that do not bracket auto, clocks the card
    lacks, or kernels that are not the trace's (in order, by name and repeat count)."""
    if len(rows) != len(trace.kernel_keys):
        raise InputError(f"kernel table has {len(rows)} kernels, trace {trace.name!r} has {len(trace.kernel_keys)}; "
                         "give the table the trace was built from")
    for i, (r, k) in enumerate(zip(rows, trace.kernels)):
        name = k.name.split(":", 1)[-1]
        if r["id"] != i or r["name"] != name or r["repeat"] != int(trace.repeats[i]):
            raise InputError(f"kernel table: row {i} is kernel {r['id']} ({r['name']}, repeat {r['repeat']}) but the "
                             f"trace's kernel {i} is {name} (repeat {int(trace.repeats[i])}); give the table the trace "
                             "was built from, one row per kernel_id in order")
        for k in ("t_auto", "e_auto", "t_min", "t_max", "e_min", "e_max"):
            if not np.isfinite(r[k]) or r[k] <= 0:
                raise InputError(f"kernel table: kernel {r['id']} ({r['name']}) has {k} = {r[k]!r}; times and energies "
                                 "must be positive numbers — fix that row")
        for k in ("dt_best", "de_best"):
            if not np.isfinite(r[k]):
                raise InputError(f"kernel table: kernel {r['id']} ({r['name']}) has {k} = {r[k]!r}; fix that row")
        c, m = r["best_core"], r["best_mem"]
        if (c != AUTO and c not in spec.core_clocks_mhz) or (m != AUTO and m not in spec.mem_clocks_mhz):
            raise InputError(f"kernel table: kernel {r['id']} best setting {c}/{m} MHz is not a clock pair {spec.name} "
                             f"has ({spec.describe_clocks()}); fix that row")
        if (c, m) not in study_settings():
            raise InputError(f"kernel table: kernel {r['id']} best setting {c}/{m} MHz is not one of the study's 66")
    for r in rows:  # after the finite checks above
        for lo, mid, hi in (("t_min", "t_auto", "t_max"), ("e_min", "e_auto", "e_max")):
            if np.isfinite(r[lo]) and np.isfinite(r[hi]) and not r[lo] <= r[mid] <= r[hi]:
                raise InputError(f"kernel table: kernel {r['id']} ({r['name']}) has {lo} {r[lo]:g}, {mid} {r[mid]:g}, "
                                 f"{hi} {r[hi]:g}; the extremes must bracket the auto value — fix that row")


def _hinge(e, tol):
    """Flat-ish inside 60 % of the tolerance, so the fit spends its freedom where targets fail."""
    return np.sign(e) * np.maximum(np.abs(e) - 0.6 * tol, 0.0) / tol + 0.15 * e / tol


class _Problem:
    """The residual function of the joint fit over (card vector scaled to [0, 1], per-kernel log parameters)."""

    def __init__(self, rows, sweep: PassSweep, trace, base: GpuSpec, opt: JointOptions):
        self.rows, self.sweep, self.base, self.opt = rows, sweep, base, opt
        self.keys = trace.kernel_keys
        self.n = len(rows)
        st = list(sweep.settings)
        self.C = np.array([s[0] for s in st])
        self.M = np.array([s[1] for s in st])
        self.ia = st.index((AUTO, AUTO))
        self.ib = np.array([st.index((r["best_core"], r["best_mem"])) for r in rows])
        self.rep = trace.repeats.astype(float)
        self.passes = pass_index(trace, opt.loss_pass)
        self.tg = {k: np.array([r[k] for r in rows]) for k in
                   ("t_auto", "e_auto", "dt_best", "de_best", "t_min", "t_max", "e_min", "e_max")}
        self.sig_t = opt.time_sigma_floor + np.abs(sweep.time_change_pct) * opt.pass_rel_sigma
        self.sig_e = 1 + np.abs(sweep.energy_change_pct) * opt.pass_rel_sigma
        # the pass-context parameters sit after the kernels' in the vector, scaled to [0, 1] like the card's
        self.pp = context_params(parse_terms(opt.pass_terms))
        self.np_ = len(self.pp)
        self.ctx = PassContext()
        self.spec = base
        # the structural terms sit after the pass-context parameters, scaled to [0, 1] the same way
        self.sp = structure_params(parse_structure(opt.structure))
        self.struct: dict = {}
        self.target_loss = band_residual if opt.kernel_loss == "band" else _hinge  # of the per-kernel targets
        drop = parse_drop(opt.pass_drop)
        self.keep = np.array([0.0 if s in drop else 1.0 for s in st])
        # session 10: the passes as mixed steps under the limiter (``kdvfs.limiter_pass``), the kernels alone isolated
        self.limiter = any(t in LIMITER_TERMS for t in parse_structure(opt.structure))
        self.W = np.stack([self.rep * (self.passes == k) for k in range(2)])
        self.plim: PassLimit | None = None  # the limiter's state of the last ``model`` call

    def context_of(self, x) -> PassContext:
        z = np.clip(x[_NC + _NK * self.n:_NC + _NK * self.n + self.np_], 0, 1)
        return PassContext(**{p[0]: float(p[1] + v * (p[2] - p[1])) for p, v in zip(self.pp, z)})

    def structure_of(self, x) -> dict:
        z = np.clip(x[_NC + _NK * self.n + self.np_:], 0, 1)
        out = {p[0]: float(p[1] + v * (p[2] - p[1])) for p, v in zip(self.sp, z)}
        if self.limiter:
            out["pass_limiter"] = 1.0  # a flag, not a fitted value: the report evaluates the passes the same way
        return out

    def unpack(self, x):
        xc = _LO + np.clip(x[:_NC], 0, 1) * (_HI - _LO)
        xk = x[_NC:_NC + _NK * self.n].reshape(self.n, _NK)
        self.ctx = self.context_of(x)
        self.struct = self.structure_of(x)
        return xc, xk

    def params(self, xk) -> KernelParams:
        return _kernel_params(self.keys, xk)

    def model(self, xc, xk):
        """(T, E) of every kernel alone at the 66 settings, and (TP, EP) as each runs inside a pass."""
        self.lam = float(xc[_ILAM])
        self.spec = apply_structure(card_from_vector(self.base, xc), self.struct)
        return self.kernel_eval(self.spec, self.params(xk))

    def kernel_eval(self, spec: GpuSpec, kp: KernelParams):
        ev = evaluate(spec, kp, self.C, self.M)
        if self.limiter:
            tp, ep, self.plim = pass_eval(spec, kp, self.C, self.M, self.struct, self.W)
            return ev.time_s, ev.energy_j, tp, ep
        if "pass_cap_w" not in self.struct and "pass_boost_share" not in self.struct:
            return ev.time_s, ev.energy_j, ev.time_s, ev.energy_j
        # inside a pass: the pass's top clock (passboost) and the cap the limiter's mixed window gives (passcap)
        evp = evaluate(spec, kp, pass_requests(self.C, self.struct, spec.boost_core_mhz), self.M,
                       cap_w=self.struct.get("pass_cap_w"))
        return ev.time_s, ev.energy_j, evp.time_s, evp.energy_j

    def kres(self, T, E, xk) -> np.ndarray:
        """Per-kernel residuals, shape (10, kernels): each kernel's depend only on its own row and parameters (and the
        price of time ``self.lam``)."""
        tg, ia, ib, k = self.tg, self.ia, self.ib, np.arange(T.shape[0])
        ta, ea = T[:, ia], E[:, ia]
        bw = self.opt.best_weight
        # the table's best setting is the kernel's pick in the study's global choice: at one price of time it is the
        # kernel's cheapest (energy + price · time) of the 66 settings; the residual is how much cheaper another is
        cost = E + self.lam * T
        gap = (cost[k, ib] - cost.min(1)) / (0.01 * tg["e_auto"])
        return np.stack([
            self.opt.hull_weight * gap,
            self.target_loss(100 * np.log(ta / tg["t_auto"]), 1.0) * 3,
            self.target_loss(100 * np.log(ea / tg["e_auto"]), 1.0) * 3,
            self.target_loss(100 * (T[k, ib] / ta - 1) - tg["dt_best"], 1.0) * bw,
            self.target_loss(100 * (E[k, ib] / ea - 1) - tg["de_best"], 2.0) * bw,
            self.target_loss(100 * (T.min(1) / tg["t_min"] - 1), 25.0) * 2,
            self.target_loss(100 * (T.max(1) / tg["t_max"] - 1), 25.0) * 2,
            self.target_loss(100 * (E.min(1) / tg["e_min"] - 1), self.opt.emin_tol_pct) * 2,
            self.target_loss(100 * (E.max(1) / tg["e_max"] - 1), 25.0) * 2,
            np.log(np.maximum(np.exp(xk[:, 0]) / (0.02 * tg["t_auto"]), 1.0)) / 10.0,
        ])

    def kres_one(self, i: int, Ti: np.ndarray, Ei: np.ndarray, zi: np.ndarray) -> np.ndarray:
        """Kernel i's residuals from its own row (the per-kernel part of ``kres``)."""
        sub = _Problem.__new__(_Problem)
        sub.opt, sub.ia, sub.lam, sub.target_loss = self.opt, self.ia, self.lam, self.target_loss
        sub.ib = self.ib[i:i + 1]
        sub.tg = {k: v[i:i + 1] for k, v in self.tg.items()}
        return sub.kres(Ti[None, :], Ei[None, :], zi[None, :]).ravel()

    def sums(self, T, E):
        w = np.stack([self.rep * (self.passes == k) for k in range(2)])
        return w @ T, w @ E

    def pres(self, PT, PE) -> np.ndarray:
        """Pass-level residuals from the pass sums (..., 2, settings) → (..., 2 · 2 · settings)."""
        ia, w = self.ia, self.opt.pass_weight
        PT, PE = apply_context(self.ctx, self.spec, self.sweep.settings, PT, PE)
        mt = 100 * (PT / PT[..., ia:ia + 1] - 1)
        me = 100 * (PE / PE[..., ia:ia + 1] - 1)
        rt = w * self.keep * (mt - self.sweep.time_change_pct) / self.sig_t
        re = w * self.keep * (me - self.sweep.energy_change_pct) / self.sig_e
        lead = PT.shape[:-2]
        r = np.concatenate([rt.reshape(*lead, -1), re.reshape(*lead, -1)], axis=-1)
        if self.opt.pass_loss == "soft_l1":  # ½ Σ of the squares below = Σ (√(1 + r²) − 1)
            r = np.sign(r) * np.sqrt(2.0 * (np.sqrt(1.0 + r * r) - 1.0))
        return r

    def fun(self, x):
        xc, xk = self.unpack(x)
        T, E, TP, EP = self.model(xc, xk)
        return np.concatenate([self.kres(T, E, xk).ravel(), self.pres(*self.sums(TP, EP))])

    def jac(self, x):
        xc, xk = self.unpack(x)
        T, E, TP, EP = self.model(xc, xk)
        K0 = self.kres(T, E, xk)
        PT, PE = self.sums(TP, EP)
        P0 = self.pres(PT, PE)
        r0 = np.concatenate([K0.ravel(), P0])
        n = self.n
        spec0, plim0 = self.spec, self.plim  # the card columns below move both
        J = np.zeros((len(r0), len(x)))
        for j in [*range(_NC), *range(_NC + _NK * n, len(x))]:
            h = 1e-6 if x[j] < 1 - 1e-6 else -1e-6
            x1 = x.copy()
            x1[j] += h
            J[:, j] = (self.fun(x1) - r0) / h
        self.ctx = self.context_of(x)  # fun(x1) left the last column's context behind
        self.struct = self.structure_of(x)
        h = 1e-6
        rows_k = np.arange(_NKR)[:, None] * n + np.arange(n)[None, :]
        onehot = np.stack([(self.passes == k) for k in range(2)], axis=1).astype(float)  # (n, 2)
        for q in range(_NK):
            xk1 = xk.copy()
            xk1[:, q] += h
            if self.limiter:
                self.lam, self.spec, self.plim = float(xc[_ILAM]), spec0, plim0
                kp1 = self.params(xk1)
                ev1 = evaluate(spec0, kp1, self.C, self.M)
                T1, E1 = ev1.time_s, ev1.energy_j
            else:
                T1, E1, TP1, EP1 = self.model(xc, xk1)
            cols = _NC + _NK * np.arange(n) + q
            dK = (self.kres(T1, E1, xk1) - K0) / h  # kernel i's residuals move with kernel i's parameter only
            J[rows_k, cols[None, :]] = dK
            if self.limiter:
                # kernel i moved alone: its row at the pass's ceiling held, then the ceiling's first-order answer
                from kdvfs.limiter_pass import at_ceilings, replaced_sums

                assert plim0 is not None  # set by ``model`` whenever the limiter is on

                tf, ef = at_ceilings(spec0, kp1, self.C, self.M, self.W, plim0)
                RT, RE = replaced_sums(plim0, self.W, tf - TP, ef - EP)  # noqa: N806
                J[_NKR * n:, cols] = ((self.pres(RT, RE) - P0[None]) / h).T
                continue
            # pass sums with kernel i's row replaced, for every i at once: (n, 2, settings)
            dT = (self.rep[:, None] * (TP1 - TP))[:, None, :] * onehot[:, :, None]
            dE = (self.rep[:, None] * (EP1 - EP))[:, None, :] * onehot[:, :, None]
            dP = (self.pres(PT[None] + dT, PE[None] + dE) - P0[None]) / h
            J[_NKR * n:, cols] = dP.T
        return J


def _kernel_params(keys, xk: np.ndarray) -> KernelParams:
    """Kernel parameters from log values, one row (t0, tc, tm, uc, um) per kernel."""
    e = np.exp(np.asarray(xk, dtype=float).reshape(len(keys), _NK))
    return KernelParams(tuple(keys), e[:, 0], e[:, 1], e[:, 2], e[:, 3], e[:, 4], "fitted")


def _polish(pb: _Problem, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, starts: int) -> np.ndarray:
    """Each kernel in turn refitted alone under the joint loss (card and the other kernels fixed): a kernel whose
    joint-fit values sit in a poor local minimum gets other starts (seeded, so the result is deterministic)."""
    x = x.copy()
    xc, xk = pb.unpack(x)
    T, E, TP, EP = pb.model(xc, xk)
    spec = pb.spec
    PT, PE = pb.sums(TP, EP)
    rng = np.random.default_rng(0)
    n = pb.n
    for i in range(n):
        sl = slice(_NC + _NK * i, _NC + _NK * (i + 1))
        lo_i, hi_i = lo[sl], hi[sl]
        pi = pb.passes[i]
        base_t, base_e = PT.copy(), PE.copy()
        base_t[pi] -= pb.rep[i] * TP[i]
        base_e[pi] -= pb.rep[i] * EP[i]

        plim, tp_i, ep_i = pb.plim, TP[i].copy(), EP[i].copy()

        def resid(z, i=i, pi=pi, base_t=base_t, base_e=base_e, plim=plim, tp_i=tp_i, ep_i=ep_i):
            kp = _kernel_params((pb.keys[i],), z[None, :])
            if pb.limiter:  # kernel i moved alone: at its pass's ceiling held, the ceiling answering to first order
                from kdvfs.limiter_pass import at_ceilings, replaced_sums

                ev = evaluate(spec, kp, pb.C, pb.M)
                tf, ef = at_ceilings(spec, kp, pb.C, pb.M, pb.W[:, i:i + 1], plim)
                pt, pe = replaced_sums(plim, pb.W, tf - tp_i, ef - ep_i, rows=[i])
                return np.concatenate([pb.kres_one(i, ev.time_s[0], ev.energy_j[0], z), pb.pres(pt[0], pe[0])])
            Ti, Ei, TPi, EPi = pb.kernel_eval(spec, kp)
            k = pb.kres_one(i, Ti[0], Ei[0], z)
            pt, pe = base_t.copy(), base_e.copy()
            pt[pi] += pb.rep[i] * TPi[0]
            pe[pi] += pb.rep[i] * EPi[0]
            return np.concatenate([k, pb.pres(pt, pe)])

        best_z = xk[i].copy()
        best_c = 0.5 * np.sum(resid(best_z) ** 2)
        for k in range(starts):
            z0 = best_z if k == 0 else xk[i] + rng.normal(0.0, 0.7, _NK)
            z0 = np.clip(z0, lo_i + 1e-9, hi_i - 1e-9)
            r = least_squares(resid, z0, bounds=(lo_i, hi_i), max_nfev=40)
            if r.cost < best_c - 1e-12:
                best_c, best_z = r.cost, r.x
        if not np.array_equal(best_z, xk[i]):
            xk[i] = best_z
            if pb.limiter:  # the whole pass again: every kernel's clock answers kernel i's change
                T, E, TP, EP = pb.kernel_eval(spec, pb.params(xk))
            else:
                kp = _kernel_params((pb.keys[i],), best_z[None, :])
                Ti, Ei, TPi, EPi = pb.kernel_eval(spec, kp)
                T[i], E[i], TP[i], EP[i] = Ti[0], Ei[0], TPi[0], EPi[0]
            PT, PE = pb.sums(TP, EP)
    x[_NC:_NC + _NK * n] = xk.ravel()
    return x


def calibrate_joint(rows: list[dict], sweep: PassSweep, trace, base: GpuSpec = RTX3080TI,
                    options: JointOptions = JointOptions(), progress=None) -> JointResult:
    """Fit the card and every kernel of ``trace`` (rows in the trace's kernel order) to the table and the sweep.

    Deterministic: a fixed start from the data and a deterministic solver; the same inputs give the same bytes."""
    check_table(rows, base, trace)
    t_start = time.perf_counter()
    pb = _Problem(rows, sweep, trace, base, options)
    n = pb.n
    tg = pb.tg
    # start: kernels whose best setting lowers the core a lot are memory-bound (large tm), the others compute-bound
    memb = np.array([r["best_core"] != AUTO and r["best_core"] <= 1260 for r in rows])
    share_c = np.where(memb, 0.05, 0.95)
    share_m = np.where(memb, 0.95, 0.45)
    xk0 = np.column_stack([np.log(0.01 * tg["t_auto"]), np.log(share_c * tg["t_auto"]), np.log(share_m * tg["t_auto"]),
                           np.log(np.where(memb, 0.9, 1.1)), np.zeros(n)])
    xp0 = np.array([(p[3] - p[1]) / (p[2] - p[1]) for p in pb.pp] + [(p[3] - p[1]) / (p[2] - p[1]) for p in pb.sp])
    x0 = np.concatenate([(_X0 - _LO) / (_HI - _LO), xk0.ravel(), xp0])
    if options.start:
        import json

        try:
            st = json.loads(Path(options.start).read_text())
            st["card_vector"], st["params"]  # noqa: B018 — both needed
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"--fit-option start={options.start}: cannot use it as a start ({type(e).__name__}: {e}); "
                             "give a calibration JSON with card_vector and params (written by --method joint --out)"
                             ) from None
        xc_s = np.array([st["card_vector"].get(c[0], c[3]) for c in CARD_PARAMS])
        xk_s = np.log(np.array([[p["t0_s"], p["tc_s"], p["tm_s"], p["uc"], p["um"]] for p in st["params"]]))
        x0 = np.concatenate([np.clip((xc_s - _LO) / (_HI - _LO), 0, 1), xk_s.ravel(), xp0])
    lo = np.concatenate([np.zeros(_NC), np.tile([-np.inf, -np.inf, -np.inf, np.log(0.05), np.log(0.05)], n),
                         np.zeros(pb.np_ + len(pb.sp))])
    hi = np.concatenate([np.ones(_NC), np.tile([np.inf, np.inf, np.inf, np.log(3.0), np.log(3.0)], n), np.ones(pb.np_ + len(pb.sp))])
    ks = slice(_NC, _NC + _NK * n)
    hi[ks][::_NK] = np.log(tg["t_auto"])
    for j in (1, 2):  # core and memory time between 1e-4 and 20 times the auto time (keeps steps finite)
        lo[ks][j::_NK] = np.log(1e-4 * tg["t_auto"])
        hi[ks][j::_NK] = np.log(20 * tg["t_auto"])
    lo[ks][::_NK] = np.log(1e-6 * tg["t_auto"])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    calls = [0]
    total = options.prefit_nfev + options.max_nfev + (options.refine_nfev if options.polish_starts else 0)

    def jac_of(p):
        def jac(x):
            calls[0] += 1
            if progress is not None:
                progress(min(calls[0], total), total)
            return p.jac(x)
        return jac

    nfev = 0
    if options.prefit_nfev:
        # stage 1: the per-kernel table alone (pass weight 0) puts every kernel near its own data
        pre = _Problem(rows, sweep, trace, base, replace(options, pass_weight=0.0))
        r1 = least_squares(pre.fun, x0, jac=jac_of(pre), bounds=(lo, hi), x_scale="jac", max_nfev=options.prefit_nfev,
                           ftol=1e-10, xtol=1e-10, gtol=1e-10)
        x0, nfev = np.clip(r1.x, lo + 1e-12, hi - 1e-12), r1.nfev
        calls[0] = options.prefit_nfev
    res = least_squares(pb.fun, x0, jac=jac_of(pb), bounds=(lo, hi), x_scale="jac", max_nfev=options.max_nfev,
                        ftol=1e-10, xtol=1e-10, gtol=1e-10)
    log.info("joint fit: cost %.4g after %d + %d evaluations", res.cost, nfev, res.nfev)
    x, nfev = res.x, nfev + res.nfev
    if options.polish_starts:
        x = _polish(pb, x, lo, hi, options.polish_starts)
        # the kernels moved one at a time: one more joint solve rebalances the card and the pass-level sums
        res = least_squares(pb.fun, np.clip(x, lo + 1e-12, hi - 1e-12), jac=jac_of(pb), bounds=(lo, hi),
                            x_scale="jac", max_nfev=options.refine_nfev, ftol=1e-10, xtol=1e-10, gtol=1e-10)
        x, nfev = res.x, nfev + res.nfev
    xc, xk = pb.unpack(x)
    struct = pb.structure_of(x)
    spec = apply_structure(card_from_vector(base, xc), struct)
    return JointResult(spec, pb.params(xk), tuple(float(v) for v in xc), float(0.5 * np.sum(pb.fun(x) ** 2)),
                       int(nfev), time.perf_counter() - t_start, pb.context_of(x), tuple(struct.items()))
