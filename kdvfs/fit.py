"""Fitting the kernel model to measured sweeps, completing the grid, and cross-validating the fit.

A sweep CSV has at least ``kernel, core_mhz, mem_mhz, time_s`` and ``power_w`` or ``energy_j``; an optional
``core_actual_mhz`` (the clock the card really ran) is used when present; other columns are ignored. Several rows for
the same (kernel, setting) are repeats and are averaged.

With a known card (``gpu``) the fit uses its catalog constants and solves each kernel's five parameters. For a card
the catalog does not know (``crossval`` without ``--gpu``), a generic card is built from the sweep itself: its
clocks, a power cap when many settings pile up at one highest power (throttling), and a voltage curve, idle power and
low-clock slowdown fitted together with every kernel (docs/fit.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares, nnls
from scipy.sparse import csr_matrix

from kdvfs.blas import single_threaded_blas
from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.model import KernelParams, evaluate
from kdvfs.profile import Profile, parse_clock, read_csv_rows

__all__ = ["SweepPoint", "Sweep", "read_sweep", "generic_spec", "fit_params", "fit_profile", "crossval", "noise",
           "sparse_next", "sparse_probes", "train_indices"]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """Attributes: core_mhz / mem_mhz requested (``AUTO`` allowed), measured time_s and power_w (averaged over
    repeats), core_actual_mhz when recorded, repeats; log_time_var / log_power_var: the sample variance of the
    repeats' log time and log power (``None`` with one repeat)."""

    core_mhz: int
    mem_mhz: int
    time_s: float
    power_w: float
    core_actual_mhz: float | None = None
    repeats: int = 1
    log_time_var: float | None = None
    log_power_var: float | None = None


@dataclass(frozen=True, slots=True)
class Sweep:
    """Measured points per kernel, in first-seen kernel order."""

    points: dict[str, tuple[SweepPoint, ...]]
    path: str = ""

    @property
    def kernels(self) -> list[str]:
        return list(self.points)


def read_sweep(path: str | Path, min_points: int = 2) -> Sweep:
    """Read and validate a sweep CSV."""
    rows, meta = read_csv_rows(path, "sweep")
    cols = set(rows[0])
    need = {"kernel", "core_mhz", "mem_mhz", "time_s"}
    if not need <= cols or not ({"power_w", "energy_j"} & cols):
        raise FormatError(
            f"sweep {str(path)!r} needs columns kernel, core_mhz, mem_mhz, time_s and power_w or energy_j; "
            f"it has {', '.join(rows[0])}"
        )
    acc: dict[str, dict[tuple[int, int], list]] = defaultdict(lambda: defaultdict(list))
    seen: dict[tuple, int] = {}
    for i, r in enumerate(rows, start=int(meta.get("_first_line", 2))):
        where = f"sweep {str(path)!r} line {i}"
        try:
            c, m = parse_clock(r["core_mhz"], "core_mhz"), parse_clock(r["mem_mhz"], "mem_mhz")
            t = float(r["time_s"])
            p = float(r["power_w"]) if r.get("power_w") not in (None, "") else float(r["energy_j"]) / t
            ca = float(r["core_actual_mhz"]) if r.get("core_actual_mhz") not in (None, "") else None
        except (ValueError, TypeError, ZeroDivisionError, FormatError) as e:
            raise FormatError(f"{where}: {e}") from None
        for nm, v in (("time_s", t), ("power_w", p)):
            if not math.isfinite(v) or v <= 0:
                raise FormatError(f"{where}: {nm} is {v!r}; measured values must be positive numbers — drop or redo that row")
        if r.get("source") == "model":  # a profile from `profile build`: crossval scored the model against itself
            raise FormatError(f"{where}: source is 'model', a prediction of the kernel model (a profile from `kdvfs "
                              "profile build`), not a measurement; give the sweep CSV that `kdvfs sweep` wrote")
        if r.get("repeat") not in (None, ""):
            # the same (kernel, setting, repeat) twice is two sweeps written into one file, not a repeat: refuse
            # rather than average two runs silently
            cell = (r["kernel"], c, m, r["repeat"])
            if cell in seen:
                raise FormatError(
                    f"{where}: kernel {r['kernel']!r} at {r['core_mhz']}/{r['mem_mhz']} MHz repeat {r['repeat']} was "
                    f"already measured on line {seen[cell]}: two sweeps were written into one file; keep one of them "
                    "(or sweep again into a new file)")
            seen[cell] = i
        acc[r["kernel"]][(c, m)].append((t, p, ca))
    pts = {}
    for k, by in acc.items():
        ps = []
        for (c, m), vals in by.items():
            a = np.array([(t, p) for t, p, _ in vals])
            acts = [x for _, _, x in vals if x is not None]
            var = np.log(a).var(axis=0, ddof=1) if len(vals) > 1 else (None, None)
            ps.append(SweepPoint(c, m, float(a[:, 0].mean()), float(a[:, 1].mean()),
                                 float(np.mean(acts)) if acts else None, len(vals),
                                 *(None if v is None else float(v) for v in var)))
        if len(ps) < min_points:
            raise FormatError(
                f"sweep {str(path)!r}: kernel {k!r} has {len(ps)} measured setting(s); fitting needs at least "
                f"{min_points} different settings per kernel (3 or more recommended)"
            )
        pts[k] = tuple(ps)
    return Sweep(pts, str(path))


def generic_spec(sweep: Sweep) -> GpuSpec:
    """A card built from the sweep alone: its clocks, a generic voltage curve and, if evident, its power cap."""
    cores = sorted({p.core_mhz for ps in sweep.points.values() for p in ps if p.core_mhz != AUTO})
    mems = sorted({p.mem_mhz for ps in sweep.points.values() for p in ps if p.mem_mhz != AUTO}) or [1000]
    if not cores:
        raise InputError("the sweep has no explicit core clocks; a fit needs settings with numeric core clocks")
    powers = np.array([p.power_w for ps in sweep.points.values() for p in ps])
    pmax = float(powers.max())
    # Throttling shows as several settings sitting at one highest power (within sensor noise): take their median.
    top = powers[powers >= 0.95 * pmax]
    cap = float(np.median(top)) if len(top) >= 3 else float("inf")
    hi = cores[-1]
    return GpuSpec(
        name="generic", full_name="card fitted from the sweep", arch="unknown", core_clocks_mhz=tuple(cores),
        mem_clocks_mhz=tuple(mems), boost_core_mhz=hi, power_limit_w=cap, cap_w=cap,
        idle_power_w=0.0, v_min=0.75, v_max=1.0, vf_knee_mhz=0.55 * hi,
        mem_bandwidth_gbs=tuple(float(m) for m in mems), core_power_w=pmax, mem_power_w=tuple(0.0 for _ in mems),
        mem_traffic_power_w=0.1 * pmax, smooth_p=4.0, switch=SwitchModel(0.0, 0.0),
    )


# The generic card's constants, fitted together with every kernel: (name, start, lower bound, upper bound). The voltage
# knee as a share of the highest clock, the lowest voltage (the highest is 1), the idle power as a share of the lowest
# measured power, and the low-clock slowdown ``s(f) = 1 + a·(f_low/f)^k`` of the core term: a the extra core time at
# the sweep's lowest clock f_low, k how fast it fades (kdvfs.model._time's ``1 + (f_slow/f)^k`` with
# f_slow = f_low·a^(1/k)). The slowdown is written through a, not f_slow: "no slowdown" (a = 0) is then not a flat
# spot of the loss, and a fitted a reads directly ("compute-bound kernels 90 % slower than 1/f at the lowest clock").
_CARD = (("knee", 0.55, 0.2, 0.9), ("v_min", 0.8, 0.5, 0.98), ("idle", 0.6, 0.0, 0.95),
         ("slow_a", 0.1, 0.0, 10.0), ("slow_k", 3.0, 1.0, 12.0))
# The robust loss: residuals are log-ratios in units of the measurement noise (time and power apart, ``noise``); a
# point more than ``_ROBUST`` noise widths off (a bad measurement, a clock the form cannot follow) weighs linearly, not
# quadratically, so one bad point does not bend every prediction.
_ROBUST = 2.0
# Relative time and power noise of one point when the sweep has no repeats to measure it: an assumption, the same as the
# fake device's in scripts/sparse_vs_exhaustive.py; a sweep with repeats measures its own (``noise``).
_NOISE_DEFAULT = (0.01, 0.02)
_NOISE_FLOOR = 0.002  # a loss scale of zero would call every point an outlier
# Stop when the loss changes by less than this share: 10⁻⁵ of a sum of squared noise-scaled residuals is far below
# what the noise can tell apart, and the solver's default (10⁻⁸) only spends iterations on flat directions.
_TOL = 1e-5
# A budget of loss evaluations: on the six crossval sweeps of tests/test_fit.py the fits converge within it or, where
# they crawl along a flat valley, change no MAPE by 0.01 points between 100 and 300 evaluations
_MAX_NFEV = 100
_EXACT_MAX_PARAMS = 400  # above this many parameters the trust-region step uses the sparse solver (lsmr)


@dataclass(frozen=True, slots=True)
class _Flat:
    """Every point of a sweep in flat arrays, for one vectorised fit of all kernels.

    Attributes:
        keys: kernel keys, in sweep order.
        kernel: index into ``keys`` of each point.
        core_mhz: the clock each point is evaluated at (the recorded actual clock where every point of the kernel has
            one, else the requested clock, ``AUTO`` allowed).
        mem_mhz: requested memory clock.
        time_s, power_w: measured.
        uncapped: the point's clock is the actual one (no power cap applies).
    """

    keys: tuple[str, ...]
    kernel: np.ndarray
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    time_s: np.ndarray
    power_w: np.ndarray
    uncapped: np.ndarray


def _flatten(sweep: Sweep) -> _Flat:
    kern, core, mem, t, pw, unc = [], [], [], [], [], []
    for k, ps in enumerate(sweep.points.values()):
        actual = all(p.core_actual_mhz for p in ps)
        for p in ps:
            kern.append(k)
            core.append(float(p.core_actual_mhz or p.core_mhz) if actual else float(p.core_mhz))
            mem.append(p.mem_mhz)
            t.append(p.time_s)
            pw.append(p.power_w)
            unc.append(actual)
    return _Flat(tuple(sweep.points), np.array(kern, int), np.array(core), np.array(mem, int), np.array(t),
                 np.array(pw), np.array(unc, bool))


def noise(sweep: Sweep) -> tuple[float, float]:
    """Relative (time, power) noise of one averaged point: from the spread of repeats where the sweep has them (the
    pooled variance of the repeats' log values over the number of repeats), else ``_NOISE_DEFAULT``; never below
    0.2 %."""
    pts = [p for ps in sweep.points.values() for p in ps if p.repeats > 1 and p.log_time_var is not None]
    if not pts:
        return _NOISE_DEFAULT
    reps = float(np.mean([p.repeats for p in pts]))
    vt = float(np.mean([p.log_time_var for p in pts]))
    vp = float(np.mean([p.log_power_var for p in pts]))
    return max(math.sqrt(vt / reps), _NOISE_FLOOR), max(math.sqrt(vp / reps), _NOISE_FLOOR)


def _params(keys, x: np.ndarray) -> KernelParams:
    e = np.exp(x)
    return KernelParams(keys, e[:, 0], e[:, 1], e[:, 2], e[:, 3], e[:, 4], "fitted")


def _card(base: GpuSpec, z: np.ndarray, f_low: float, p_low: float) -> GpuSpec:
    knee, vmin, idle, a, k = (float(v) for v in z)
    return replace(base, vf_knee_mhz=knee * base.max_core_mhz, v_min=vmin, idle_power_w=idle * p_low,
                   slow_core_mhz=f_low * a ** (1.0 / k) if a > 0 else 0.0, slow_exponent=k,
                   mem_power_w=tuple(0.0 for _ in base.mem_clocks_mhz))


def _model(spec: GpuSpec, params: KernelParams, fl: _Flat) -> tuple[np.ndarray, np.ndarray]:
    t, pw = np.empty(len(fl.kernel)), np.empty(len(fl.kernel))
    for unc in (False, True):
        m = fl.uncapped == unc
        if m.any():
            ev = evaluate(spec, params, fl.core_mhz[m], fl.mem_mhz[m], kernel_index=fl.kernel[m],
                          cap_w=float("inf") if unc else None)
            t[m], pw[m] = ev.time_s, ev.power_w
    return t, pw


def _start(spec: GpuSpec, fl: _Flat) -> np.ndarray:
    """Each kernel's start from closed forms: its time as ``a + b·F/f`` by least squares (b the core term, a the
    rest), then its core and memory activity from its power by non-negative least squares at those times."""
    n = len(fl.keys)
    x = np.zeros((n, 5))
    fc, fm = spec.effective_request(fl.core_mhz, fl.mem_mhz)
    top = float(spec.boost_core_mhz)
    for k in range(n):
        m = fl.kernel == k
        f, t, pw = fc[m].astype(float), fl.time_s[m], fl.power_w[m]
        tmin = float(t.min())
        a, b = np.linalg.lstsq(np.column_stack([np.ones(len(t)), top / f]), t, rcond=None)[0]
        tc, tm = max(float(b), 0.05 * tmin), max(float(a), 0.05 * tmin)
        x[k, :3] = math.log(0.01 * tmin), math.log(tc), math.log(tm)
        idle = spec.idle_power_w - spec.mem_power_w[-1] + np.interp(fm[m], spec.mem_clocks_mhz, spec.mem_power_w)
        cols = np.column_stack([spec.core_power_w * spec.core_power_shape(f),
                                spec.mem_traffic_power_w * tm / np.maximum(t, tm)])
        (uc, um), _ = nnls(cols, np.maximum(pw - idle, 0.0))
        x[k, 3:] = math.log(min(max(uc, 0.05), 3.0)), math.log(min(max(um, 0.05), 3.0))
    return x


def _solve(base: GpuSpec, fl: _Flat, generic: bool, noise_rel: tuple[float, float]) -> tuple[GpuSpec, KernelParams]:
    """One least-squares fit of every kernel's five parameters, and for a generic card of the card's ``_CARD``
    constants, to every point at once. A kernel's parameters move only its own points, so the Jacobian costs one
    model evaluation per kernel parameter (all kernels together) and one per card constant."""
    n, npts = len(fl.keys), len(fl.kernel)
    explicit = fl.core_mhz[fl.core_mhz != AUTO]
    f_low = float(explicit.min()) if len(explicit) else float(base.core_clocks_mhz[0])
    p_low = float(fl.power_w.min())
    z0 = np.array([c[1] for c in _CARD]) if generic else np.zeros(0)
    tmin = np.array([fl.time_s[fl.kernel == k].min() for k in range(n)])
    tmax = np.array([fl.time_s[fl.kernel == k].max() for k in range(n)])
    one_mem = np.array([len(set(fl.mem_mhz[fl.kernel == k].tolist())) == 1 for k in range(n)])
    st, sp = noise_rel
    pri = 0.02 / st  # the priors' weights were set against residuals in units of 2 %: keep their share of the loss

    last: dict = {}

    def resid(v):
        if last.get("v") is not None and np.array_equal(last["v"], v):
            return last["f"].copy()
        x = v[: 5 * n].reshape(n, 5)
        spec = _card(base, v[5 * n:], f_low, p_low) if generic else base
        t, pw = _model(spec, _params(fl.keys, x), fl)
        f = np.concatenate([
            np.log(t / fl.time_s) / st, np.log(pw / fl.power_w) / sp,
            # weak priors keep unidentifiable parts (fixed time, memory activity, the memory term with one memory
            # clock) put. With one memory clock the memory activity rests only on the power's curvature over a few
            # core clocks, which the power noise cannot resolve: there its prior holds log um within about ±1 of 0
            # for about one noise width (weight 0.5; at 0.05 it ran to its bound on slowdown sweeps and mispredicted
            # the power between training clocks by tens of percent)
            pri * 0.05 * (x[:, 0] - np.log(0.01 * tmin)), pri * np.where(one_mem, 0.5, 0.05) * x[:, 4],
            pri * np.where(one_mem, 0.3 * (x[:, 2] - np.log(0.3 * tmin)), 0.0)])
        last["v"], last["f"] = v.copy(), f.copy()
        return f

    # which kernel each residual belongs to (points, then the three priors), and which parameter each prior reads
    owner = np.concatenate([fl.kernel, fl.kernel, np.arange(n), np.arange(n), np.arange(n)])
    prior_of = np.concatenate([np.full(2 * npts, -1), np.zeros(n, int), np.full(n, 4), np.full(n, 2)])
    nz = 5 * n + len(z0)
    # bounds: a kernel's times from 10⁻⁴ of its shortest to 10× its longest measured time, activities 10⁻³ … 10
    klo = np.column_stack([np.log(1e-4 * tmin)] * 3 + [np.full(n, math.log(1e-3))] * 2)
    khi = np.column_stack([np.log(10 * tmax)] * 3 + [np.full(n, math.log(10.0))] * 2)
    lo = np.concatenate([klo.ravel(), [c[2] for c in _CARD] if generic else []])
    hi = np.concatenate([khi.ravel(), [c[3] for c in _CARD] if generic else []])
    x0 = np.clip(_start(_card(base, z0, f_low, p_low) if generic else base, fl), klo + 1e-9, khi - 1e-9)
    exact = nz <= _EXACT_MAX_PARAMS
    rows = np.arange(len(owner))

    def jac(v):
        # forward differences; a step that would leave the bounds goes the other way
        f0 = resid(v)
        cols, vals = [], []
        for j in range(5):
            sl = slice(j, 5 * n, 5)
            h = 1e-7 * np.maximum(1.0, np.abs(v[sl]))
            h = np.where(v[sl] + h > hi[sl], -h, h)
            w = v.copy()
            w[sl] += h
            d = (resid(w) - f0) / h[owner]
            keep = (prior_of < 0) | (prior_of == j)
            cols.append(np.where(keep, 5 * owner + j, -1))
            vals.append(np.where(keep, d, 0.0))
        J = np.zeros((len(f0), nz)) if exact else None
        dense = []
        for c in range(5 * n, nz):
            h = 1e-7 * max(1.0, abs(v[c]))
            h = -h if v[c] + h > hi[c] else h
            w = v.copy()
            w[c] += h
            dense.append((resid(w) - f0) / h)
        ci, cv = np.concatenate(cols), np.concatenate(vals)
        ri = np.tile(rows, 5)
        ok = ci >= 0
        if exact:
            assert J is not None
            J[ri[ok], ci[ok]] = cv[ok]
            for c, d in zip(range(5 * n, nz), dense):
                J[:, c] = d
            return J
        for c, d in zip(range(5 * n, nz), dense):
            ri, ci, cv, ok = (np.concatenate([ri, rows]), np.concatenate([ci, np.full(len(rows), c)]),
                              np.concatenate([cv, d]), np.concatenate([ok, np.ones(len(rows), bool)]))
        return csr_matrix((cv[ok], (ri[ok], ci[ok])), shape=(len(f0), nz))

    r = least_squares(resid, np.concatenate([x0.ravel(), z0]), jac=jac, bounds=(lo, hi), method="trf",
                      loss="soft_l1", f_scale=_ROBUST, x_scale="jac", tr_solver="exact" if exact else "lsmr",
                      ftol=_TOL, xtol=_TOL, max_nfev=_MAX_NFEV)
    spec = _card(base, r.x[5 * n:], f_low, p_low) if generic else base
    return spec, _params(fl.keys, r.x[: 5 * n].reshape(n, 5))


def fit_params(sweep: Sweep, spec: GpuSpec | None = None) -> tuple[GpuSpec, KernelParams]:
    """Fit every kernel of the sweep; ``spec=None`` builds a generic card from the sweep.

    For a generic card the voltage curve's shape (knee, lowest voltage), the idle power and the low-clock slowdown
    are fitted with the kernels: they are properties of the card, shared by every kernel.
    """
    with single_threaded_blas():  # one process, small dense solves: a BLAS thread pool only thrashes (kdvfs.blas)
        base = spec or generic_spec(sweep)
        try:
            return _solve(base, _flatten(sweep), base.name == "generic", noise(sweep))
        except np.linalg.LinAlgError as e:  # the trust-region step's SVD on a near-singular problem (few, noisy points)
            counts = [len(ps) for ps in sweep.points.values()]
            raise InputError(
                f"sweep {sweep.path or '(in memory)'!r}: the model fit did not converge ({e}) on {len(counts)} kernels "
                f"with {min(counts, default=0)}–{max(counts, default=0)} measured settings each; measure more settings "
                "per kernel (3 or more spread over the grid; a sparse sweep: more probes) and fit again") from None


def fit_profile(sweep: Sweep, spec: GpuSpec, trace_name: str = "") -> Profile:
    """Fit the model to the sweep and complete the card's whole grid (source ``fitted``)."""
    spec, params = fit_params(sweep, spec)
    settings = tuple(spec.settings())
    ev = evaluate(spec, params, np.array([s[0] for s in settings]), np.array([s[1] for s in settings]))
    src = np.full(ev.time_s.shape, "fitted", dtype=object)
    return Profile(params.keys, settings, ev.time_s, ev.power_w, src, spec.name, trace_name, eff_core_mhz=ev.core_mhz)


# Roberts' R2 sequence (the plastic number's powers): kernel i's two shifts (low end, interior) fill the unit square
# evenly for any number of kernels, deterministically
_R2 = (0.7548776662466927, 0.5698402909980532)


def train_indices(n: int, k: int, i: int = 0, rotate: bool = True) -> list[int]:
    """The k of a kernel's n settings (ordered by memory clock, then core clock) that ``crossval`` trains on, for the
    kernel in position i of the sweep.

    Always the top setting; a low end in the lowest 10 % of the range; k − 2 interior settings, one per equal part of
    the range between them, each within the middle half of its part. The low end and the interior positions move from
    kernel to kernel (``_R2``): each kernel's own fit interpolates over its whole range (no part wider than ¾ of it
    with k = 3) while the card's shared constants (voltage curve, low-clock slowdown) see every clock of the sweep,
    and no single clock — the lowest, where a card slows down most and measurements are noisiest — trains every
    kernel. ``rotate=False``: the lowest, evenly spaced interior and the top for every kernel (the fixed layout, for
    comparison)."""
    if k >= n:
        return list(range(n))
    u, v = ((0.5 + (i + 1) * _R2[0]) % 1.0, (0.5 + (i + 1) * _R2[1]) % 1.0) if rotate else (0.0, 0.5)
    lo = int(math.floor(0.1 * u * (n - 1) + 0.5))
    qs = [lo, n - 1] + [lo + (j + 0.25 + 0.5 * v) / (k - 2) * (n - 1 - lo) for j in range(k - 2)]
    idx = sorted({min(n - 1, int(math.floor(q + 0.5))) for q in qs})
    extra = [j for j in range(n) if j not in idx]
    return sorted(idx + extra[: k - len(idx)])


def crossval(sweep: Sweep, train_points: int = 3, spec: GpuSpec | None = None, *, rotate: bool = True) -> dict:
    """For each kernel: fit on ``train_points`` settings (``train_indices``), predict the rest; MAPE per kernel and
    overall (over the points not trained on), and every point's signed error (``points``, training points marked)."""
    if train_points < 2:
        raise InputError(f"--train-points must be at least 2 (a time and a power curve need two points), got {train_points}")
    train = {}
    for i, (key, pts) in enumerate(sweep.points.items()):
        if len(pts) <= train_points:
            raise InputError(
                f"kernel {key!r} has {len(pts)} settings: cross-validation needs more than --train-points "
                f"({train_points}) so that some are left to predict"
            )
        order = sorted(range(len(pts)), key=lambda j: (pts[j].mem_mhz or math.inf,
                                                       pts[j].core_actual_mhz or pts[j].core_mhz or math.inf))
        train[key] = frozenset(order[j] for j in train_indices(len(order), train_points, i, rotate))
    # the card is built, and its constants fitted, from the training points only
    spec, params = fit_params(Sweep({k: tuple(sweep.points[k][j] for j in sorted(tr)) for k, tr in train.items()}), spec)
    rows = []
    all_t, all_p, all_e = [], [], []
    for k, key in enumerate(sweep.points):
        pts = sweep.points[key]
        use_actual = all(q.core_actual_mhz for q in pts)
        core = np.array([p.core_actual_mhz if use_actual else p.core_mhz for p in pts])
        mem = np.array([p.mem_mhz for p in pts])
        ev = evaluate(spec, params, core, mem, kernel_index=np.full(len(pts), k), cap_w=float("inf") if use_actual else None)
        t = np.array([p.time_s for p in pts])
        pw = np.array([p.power_w for p in pts])
        st, sp_, se = 100 * (ev.time_s / t - 1), 100 * (ev.power_w / pw - 1), 100 * (ev.energy_j / (t * pw) - 1)
        is_train = np.array([j in train[key] for j in range(len(pts))])
        et, ep, ee = np.abs(st[~is_train]), np.abs(sp_[~is_train]), np.abs(se[~is_train])
        all_t += et.tolist()
        all_p += ep.tolist()
        all_e += ee.tolist()
        points = [{"core_mhz": p.core_mhz, "mem_mhz": p.mem_mhz, "train": bool(tr), "time_err_pct": float(a),
                   "power_err_pct": float(b), "energy_err_pct": float(c)}
                  for p, tr, a, b, c in zip(pts, is_train, st, sp_, se)]
        rows.append({"kernel": key, "train": train_points, "test": int((~is_train).sum()),
                     "time_mape_pct": float(et.mean()), "power_mape_pct": float(ep.mean()),
                     "energy_mape_pct": float(ee.mean()), "points": points})
    return {"train_points": train_points, "layout": "rotated" if rotate else "fixed", "kernels": rows,
            "card": spec.name, "noise_rel": list(noise(sweep)),
            "slow_core_mhz": spec.slow_core_mhz, "slow_exponent": spec.slow_exponent if spec.slow_core_mhz else None,
            "time_mape_pct": float(np.mean(all_t)), "power_mape_pct": float(np.mean(all_p)),
            "energy_mape_pct": float(np.mean(all_e))}


def sparse_probes(spec: GpuSpec, settings: list[tuple[int, int]], first: int) -> list[tuple[int, int]]:
    """The settings a sparse sweep measures first, for every kernel: auto, a lower core clock at the highest memory
    clock, a lower memory clock at a high core clock, then more spread over the grid (at most ``first`` besides auto).
    Together they show each kernel's core and memory sensitivity, which the fit needs."""
    grid = [s for s in settings if s != (AUTO, AUTO)]
    mems = sorted({m for _, m in grid if m != AUTO})
    cores = sorted({c for c, _ in grid if c != AUTO})
    out = [(AUTO, AUTO)] if (AUTO, AUTO) in settings else []

    def nearest(c, m):
        cand = [s for s in grid if s[1] == m] or grid
        return min(cand, key=lambda s: abs((s[0] or spec.boost_core_mhz) - c))

    if cores and mems:
        out.append(nearest(0.55 * spec.boost_core_mhz, mems[-1]))
        if len(mems) > 1:
            hi = [m for m in mems if spec.bandwidth_gbs(np.array(m)) > 0.3 * spec.mem_bandwidth_gbs[-1]]
            out.append(nearest(spec.boost_core_mhz, hi[0] if hi else mems[-2]))
    explicit = sorted(grid, key=lambda s: (s[1], s[0]))
    for i in np.linspace(0, len(explicit) - 1, max(first - 2, 0) + 2).round().astype(int)[1:-1]:
        if len(out) >= first + 1:
            break
        if explicit[i] not in out:
            out.append(explicit[i])
    return list(dict.fromkeys(out))[: first + 1]


def sparse_next(sweep: Sweep, spec: GpuSpec, settings: list[tuple[int, int]], units: list[tuple[str, str]],
                repeats: dict[str, int] | None = None) -> dict[str, list[tuple[int, int]]]:
    """Which settings a sparse sweep measures next: a pure function of the measurements so far.

    Fits the model to ``sweep``, solves the global strict-waste problem over ``settings`` on the fitted times and
    energies (each unit weighted by its kernel's repeat count in ``repeats``, 1 where absent or without ``repeats``), and
    returns, per unit name, its chosen setting where that unit's kernel has not been measured there yet. ``units`` are
    (unit name, the kernel key that stands for it) in the sweep's unit order. An empty answer: nothing left to measure.
    """
    from kdvfs.optimize.knapsack import solve_fast

    _, params = fit_params(sweep, spec)
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    ev = evaluate(spec, params, c, m)
    key_idx = {k: i for i, k in enumerate(params.keys)}
    idx = [key_idx[key] for _, key in units]
    T, E = ev.time_s[idx], ev.energy_j[idx]
    r = np.array([(repeats or {}).get(key, 1) for _, key in units])
    ia = settings.index((AUTO, AUTO)) if (AUTO, AUTO) in settings else int(np.argmax(c))
    alloc = solve_fast(T, E, r, float(r @ T[:, ia]))
    done = {(k, p.core_mhz, p.mem_mhz) for k, ps in sweep.points.items() for p in ps}
    nxt: dict[str, list[tuple[int, int]]] = {}
    for (name, key), cnt in zip(units, alloc.counts):
        st = settings[max(cnt, key=cnt.__getitem__)]
        if (key, st[0], st[1]) not in done:
            nxt[name] = [st]
    return nxt
