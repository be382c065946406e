"""Fitting the kernel model to measured sweeps, completing the grid, and cross-validating the fit.

A sweep CSV has at least ``kernel, core_mhz, mem_mhz, time_s`` and ``power_w`` or ``energy_j``; an optional
``core_actual_mhz`` (the clock the card really ran) is used when present; other columns are ignored. Several rows for
the same (kernel, setting) are repeats and are averaged.

With a known card (``gpu``) the fit uses its catalog constants and solves each kernel's five parameters. For a card
the catalog does not know (``crossval`` without ``--gpu``), a generic card is built from the sweep itself: its
clocks, a generic voltage curve, and a power cap when many settings pile up at one highest power (throttling); each
kernel then also gets a power offset.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from kdvfs.blas import single_threaded_blas
from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.model import KernelParams, evaluate
from kdvfs.profile import Profile, parse_clock, read_csv_rows

__all__ = ["SweepPoint", "Sweep", "read_sweep", "generic_spec", "fit_params", "fit_profile", "crossval"]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """Attributes: core_mhz / mem_mhz requested (``AUTO`` allowed), measured time_s and power_w (averaged over
    repeats), core_actual_mhz when recorded, repeats."""

    core_mhz: int
    mem_mhz: int
    time_s: float
    power_w: float
    core_actual_mhz: float | None = None
    repeats: int = 1


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
            ps.append(SweepPoint(c, m, float(a[:, 0].mean()), float(a[:, 1].mean()),
                                 float(np.mean(acts)) if acts else None, len(vals)))
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


def _fit_one(spec: GpuSpec, key: str, pts: tuple[SweepPoint, ...], with_offset: bool) -> KernelParams:
    core = np.array([p.core_actual_mhz if p.core_actual_mhz else p.core_mhz for p in pts], dtype=float)
    use_actual = all(p.core_actual_mhz for p in pts)
    mem = np.array([p.mem_mhz for p in pts])
    t = np.array([p.time_s for p in pts])
    pw = np.array([p.power_w for p in pts])
    cap = float("inf") if use_actual else None
    one_mem = len(set(mem.tolist())) == 1
    tmin = float(t.min())

    def unpack(x):
        p0 = np.array([x[5]]) if with_offset else None
        t0, tc, tm, uc, um = (np.exp(x[j:j + 1]) for j in range(5))
        return KernelParams((key,), t0, tc, tm, uc, um, "fitted", p0)

    def resid(x):
        p = unpack(x)
        ev = evaluate(spec, p, core.astype(int) if not use_actual else core, mem, kernel_index=np.zeros(len(pts), int),
                      cap_w=cap)
        r = [np.log(ev.time_s / t) / 0.02, np.log(ev.power_w / pw) / 0.02,
             # weak priors keep unidentifiable parts (fixed time, memory activity with one memory clock) put
             0.05 * (x[0] - math.log(0.01 * tmin)) * np.ones(1),
             0.05 * x[4] * np.ones(1)]
        if one_mem:
            r.append(0.3 * (x[2] - math.log(0.3 * tmin)) * np.ones(1))
        return np.concatenate(r)

    x0 = [math.log(0.01 * tmin), math.log(0.7 * tmin), math.log(0.3 * tmin), math.log(0.8), 0.0]
    if with_offset:
        x0.append(0.3 * float(pw.min()))
    fits = []
    for uc0 in (0.3, 1.0):
        x0[3] = math.log(uc0)
        # robust loss: a point more than ~2 % off (a bad measurement, a clock the form cannot follow) weighs linearly,
        # not quadratically, so one bad point does not bend every prediction
        fits.append(least_squares(resid, np.array(x0), method="trf", max_nfev=300, loss="soft_l1", f_scale=1.0))
    return unpack(min(fits, key=lambda r: r.cost).x)  # the first of equal costs, as before


def _fit_all(spec: GpuSpec, sweep: Sweep, generic: bool) -> tuple[list[KernelParams], float]:
    parts, cost = [], 0.0
    for k, ps in sweep.points.items():
        p = _fit_one(spec, k, ps, generic)
        parts.append(p)
        core = np.array([q.core_actual_mhz or q.core_mhz for q in ps])
        ev = evaluate(spec, p, core, np.array([q.mem_mhz for q in ps]), kernel_index=np.zeros(len(ps), int))
        cost += float(np.sum(np.log(ev.time_s / [q.time_s for q in ps]) ** 2 + np.log(ev.power_w / [q.power_w for q in ps]) ** 2))
    return parts, cost


def fit_params(sweep: Sweep, spec: GpuSpec | None = None) -> tuple[GpuSpec, KernelParams]:
    """Fit every kernel of the sweep; ``spec=None`` builds a generic card from the sweep.

    For a generic card the voltage curve's shape (knee, lowest voltage) and the idle power are chosen from a small
    grid by the total residual over all kernels: they are properties of the card, shared by every kernel.
    """
    with single_threaded_blas():  # many small solves: a BLAS thread pool only thrashes (kdvfs.blas)
        return _fit_params(sweep, spec)


def _fit_params(sweep: Sweep, spec: GpuSpec | None) -> tuple[GpuSpec, KernelParams]:
    spec = spec or generic_spec(sweep)
    generic = spec.name == "generic"  # a card the catalog does not know: each kernel also gets a power offset
    if generic:
        best: tuple[float, GpuSpec, list[KernelParams]] | None = None
        pmin = min(q.power_w for ps in sweep.points.values() for q in ps)
        for knee in (0.45, 0.6):
            for vmin in (0.7, 0.85):
                for idle in (0.4, 0.6, 0.8):
                    cand = replace(spec, vf_knee_mhz=knee * spec.max_core_mhz, v_min=vmin, idle_power_w=idle * pmin,
                                   mem_power_w=tuple(0.0 for _ in spec.mem_clocks_mhz))
                    parts, cost = _fit_all(cand, sweep, False)
                    if best is None or cost < best[0]:
                        best = (cost, cand, parts)
        assert best is not None  # the grid above is not empty
        _, spec, parts = best
        # time growing faster than 1/f below some clock is a property of the card: one slowdown for every kernel
        for frac in (0.25, 0.33, 0.42):
            cand = replace(spec, slow_core_mhz=frac * spec.max_core_mhz)
            parts_c, cost = _fit_all(cand, sweep, False)
            if cost < best[0]:
                best = (cost, cand, parts_c)
        _, spec, parts = best
    else:
        parts, _ = _fit_all(spec, sweep, False)
    cat = lambda f: np.concatenate([getattr(p, f) for p in parts])  # noqa: E731
    return spec, KernelParams(tuple(sweep.points), cat("t0_s"), cat("tc_s"), cat("tm_s"), cat("uc"), cat("um"), "fitted")


def fit_profile(sweep: Sweep, spec: GpuSpec, trace_name: str = "") -> Profile:
    """Fit the model to the sweep and complete the card's whole grid (source ``fitted``)."""
    spec, params = fit_params(sweep, spec)
    settings = tuple(spec.settings())
    ev = evaluate(spec, params, np.array([s[0] for s in settings]), np.array([s[1] for s in settings]))
    src = np.full(ev.time_s.shape, "fitted", dtype=object)
    return Profile(params.keys, settings, ev.time_s, ev.power_w, src, spec.name, trace_name, eff_core_mhz=ev.core_mhz)


def _spread(n: int, k: int) -> list[int]:
    """k indices spread evenly from the 10th percentile of range(n) to its end: over the whole range, but not
    pinned to the lowest clock, so that a lowest clock that behaves unlike the rest (low-clock slowdown, a bad point)
    does not set every prediction alone."""
    if k >= n:
        return list(range(n))
    qs = [1.0] if k == 1 else [0.1 + 0.9 * i / (k - 1) for i in range(k)]
    idx = sorted({min(n - 1, int(math.floor(q * (n - 1) + 0.5))) for q in qs})
    extra = [i for i in range(n) if i not in idx]
    return sorted(idx + extra[: k - len(idx)])


def crossval(sweep: Sweep, train_points: int = 3, spec: GpuSpec | None = None) -> dict:
    """For each kernel: fit on ``train_points`` settings spread over its sweep (``_spread``), predict the rest; MAPE
    per kernel and overall, and every point's signed error (``points``: training points marked)."""
    if train_points < 2:
        raise InputError(f"--train-points must be at least 2 (a time and a power curve need two points), got {train_points}")
    train, tests = {}, {}
    for key, pts in sweep.points.items():
        if len(pts) <= train_points:
            raise InputError(
                f"kernel {key!r} has {len(pts)} settings: cross-validation needs more than --train-points "
                f"({train_points}) so that some are left to predict"
            )
        order = sorted(range(len(pts)), key=lambda i: (pts[i].mem_mhz, pts[i].core_actual_mhz or pts[i].core_mhz))
        tr = [order[i] for i in _spread(len(order), train_points)]
        train[key] = tuple(pts[i] for i in tr)
        tests[key] = [pts[i] for i in range(len(pts)) if i not in tr]
    # the card is built and its voltage curve chosen from the training points only
    spec, params = fit_params(Sweep(train), spec)
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
        is_train = np.array([p in train[key] for p in pts])
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
    return {"train_points": train_points, "kernels": rows, "card": spec.name, "slow_core_mhz": spec.slow_core_mhz,
            "time_mape_pct": float(np.mean(all_t)), "power_mape_pct": float(np.mean(all_p)),
            "energy_mape_pct": float(np.mean(all_e))}
