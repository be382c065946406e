"""The card's power limiter: a windowed controller that holds average power at the cap by moving one core clock.

DESIGN.md "the power limiter": the driver does not throttle each kernel on its own; it watches power averaged over a
window of tens of milliseconds and moves a single clock *ceiling* for whatever runs. A kernel that asks for less than
the ceiling keeps its clock; every other kernel runs at the ceiling. In a mixed stream each kernel therefore runs at the
clock the window's mix allows, not at the clock it would reach alone. Isolated per-kernel throttling
(``kdvfs.model.evaluate``) is the special case of one kernel type held for longer than the window.

- ``LimiterModel`` — the controller's parameters (cap as held, window, gain, slew, tick); ``limiter_for(spec)`` gives
  a preset's fitted model or None (then everything stays isolated-and-summed, as before).
- ``CeilingTables`` — each kernel's time and power at each requested setting as a function of a continuous ceiling,
  from the kernel model at ``cap_w=inf``. Between two clock bins the driver dithers, so a ceiling between bins is a
  time share of the two: progress rate and power are linear in the share.
- ``controller_step`` — one tick of the discrete-time controller; the simulator's engine and fast path both call it,
  so the two agree to rounding.
- ``steady_state`` — for a step repeated many times, the ceiling f* at which the step's average power equals the cap
  (vectorised; what the optimiser uses where the dynamics inside a step do not matter).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.model import KernelParams, evaluate

__all__ = ["LIMITERS", "CeilingTables", "ControllerState", "LimiterModel", "SteadyState", "anchor_to_limiter", "controller_step",
           "limiter_for", "limiter_params", "steady_state"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LimiterModel:
    """Parameters of the windowed power limiter.

    Attributes:
        window_s: time constant of the exponential average of power the controller watches, seconds.
        gain_mhz_per_ws: integral gain: how fast the ceiling moves per watt of averaged excess, MHz per (W·s).
        slew_mhz_per_s: the fastest the ceiling moves, either way, MHz per second.
        period_s: the controller's tick: it reads energy and moves the ceiling once per tick.
        cap_w: average power held, watts; None = the card's ``cap_w``.
        source: where the numbers come from (a fit file and its command, or an assumption).
    """

    window_s: float
    gain_mhz_per_ws: float
    slew_mhz_per_s: float
    period_s: float = 1e-3
    cap_w: float | None = None
    source: str = "assumption"

    def __post_init__(self) -> None:
        for nm in ("window_s", "gain_mhz_per_ws", "slew_mhz_per_s", "period_s"):
            v = getattr(self, nm)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InputError(f"limiter model: {nm} must be a positive finite number, got {v!r}; "
                                 "e.g. window_s=0.03, gain_mhz_per_ws=60, slew_mhz_per_s=8000, period_s=0.001")
        if self.cap_w is not None and (not math.isfinite(self.cap_w) or self.cap_w <= 0):
            raise InputError(f"limiter model: cap_w must be a positive number of watts or None, got {self.cap_w!r}")

    def cap_for(self, spec: GpuSpec) -> float:
        return float(spec.cap_w if self.cap_w is None else self.cap_w)

    def to_dict(self) -> dict:
        return {"window_s": self.window_s, "gain_mhz_per_ws": self.gain_mhz_per_ws,
                "slew_mhz_per_s": self.slew_mhz_per_s, "period_s": self.period_s, "cap_w": self.cap_w,
                "source": self.source}

    @classmethod
    def from_dict(cls, d: dict) -> LimiterModel:
        try:
            return cls(float(d["window_s"]), float(d["gain_mhz_per_ws"]), float(d["slew_mhz_per_s"]),
                       float(d.get("period_s", 1e-3)), None if d.get("cap_w") is None else float(d["cap_w"]),
                       str(d.get("source", "")))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"limiter model: {e!r} in {d!r}; it needs window_s, gain_mhz_per_ws, slew_mhz_per_s") from None


@dataclass(frozen=True, slots=True)
class ControllerState:
    """The limiter's state between ticks.

    Attributes:
        ceiling_mhz: the clock ceiling in effect (time average over the driver's dithering between bins).
        avg_power_w: the exponentially averaged power the controller watches.
    """

    ceiling_mhz: float
    avg_power_w: float


def controller_step(lim: LimiterModel, cap_w: float, lo_mhz: float, hi_mhz: float, state: ControllerState,
                    energy_j: float) -> ControllerState:
    """One tick: average in the tick's power, move the ceiling against the excess (slew-limited, clamped).

    The one definition both simulator paths use; plain floats so that both compute the same bits.
    """
    h = lim.period_s
    alpha = -math.expm1(-h / lim.window_s)
    avg = state.avg_power_w + alpha * (energy_j / h - state.avg_power_w)
    step = -lim.gain_mhz_per_ws * (avg - cap_w) * h
    cap_step = lim.slew_mhz_per_s * h
    step = min(max(step, -cap_step), cap_step)
    return ControllerState(min(max(state.ceiling_mhz + step, lo_mhz), hi_mhz), avg)


@dataclass(frozen=True, slots=True)
class CeilingTables:
    """Time and power of each kernel at each requested setting, on the card's clock bins as ceilings.

    Attributes:
        bins_mhz: ceiling grid (the card's core clocks up to the boost clock), ascending.
        settings: the requested (core, mem) settings, ``AUTO`` allowed; axis 1 of the tables.
        req_mhz: the core clock each setting asks the hardware for (auto → boost), per setting.
        inv_time: 1 / time of one invocation, shape (kernels, settings, bins), per second.
        power_w: power, shape (kernels, settings, bins).
    """

    bins_mhz: np.ndarray
    settings: tuple[tuple[int, int], ...]
    req_mhz: np.ndarray
    inv_time: np.ndarray
    power_w: np.ndarray

    def __post_init__(self) -> None:
        for nm in ("bins_mhz", "req_mhz", "inv_time", "power_w"):
            a = np.array(getattr(self, nm), dtype=float)
            a.setflags(write=False)
            object.__setattr__(self, nm, a)  # frozen: the arrays are copied once, here, and made read-only

    @classmethod
    def from_params(cls, spec: GpuSpec, params: KernelParams, settings) -> CeilingTables:
        """From the kernel model without the cap: a kernel under ceiling f runs at min(requested, f)."""
        settings = tuple((int(c), int(m)) for c, m in settings)
        bins = np.array([c for c in spec.core_clocks_mhz if c <= spec.boost_core_mhz], dtype=float)
        req, inv, pw = [], [], []
        for c, m in settings:
            r = float(spec.boost_core_mhz if c == AUTO else min(c, spec.boost_core_mhz))
            req.append(r)
            # a core clock below the boost is passed as a number; the memory side keeps its AUTO meaning
            core = np.minimum(bins, r)
            ev = evaluate(spec, params, core, np.full(len(bins), m), cap_w=float("inf"))
            inv.append(1.0 / ev.time_s)
            pw.append(ev.power_w)
        return cls(bins, settings, np.array(req), np.stack(inv, axis=1), np.stack(pw, axis=1))

    @classmethod
    def from_profile(cls, spec: GpuSpec, profile, settings) -> CeilingTables:
        """From a profile's own rows (a measured one has no model parameters): under ceiling f a setting runs at the
        profile's row of min(requested, f) and the same memory clock, rate and power interpolated linearly between
        the core clocks the profile has. Rows measured at the cap are already throttled alone, so above a kernel's
        isolated throttle point these tables under-state what the limiter would let it draw; prefer the model."""
        settings = tuple((int(c), int(m)) for c, m in settings)
        bins = np.array([c for c in spec.core_clocks_mhz if c <= spec.boost_core_mhz], dtype=float)
        req, inv, pw = [], [], []
        for c, m in settings:
            r = float(spec.boost_core_mhz if c == AUTO else min(c, spec.boost_core_mhz))
            rows = sorted((cc, i) for i, (cc, mm) in enumerate(profile.settings) if mm == m and cc != AUTO)
            if len(rows) < 2:
                raise InputError(f"profile {profile.trace or ''} has {len(rows)} core clock(s) at memory "
                                 f"{'auto' if m == AUTO else m} MHz; the limiter needs at least two to interpolate "
                                 "between — sweep more core clocks or build the profile from the model")
            cc = np.array([x[0] for x in rows], dtype=float)
            idx = [x[1] for x in rows]
            f = np.minimum(bins, r)
            inv_k = 1.0 / profile.time_s[:, idx]
            pw_k = profile.power_w[:, idx]
            req.append(r)
            inv.append(np.stack([np.interp(f, cc, row) for row in inv_k]))
            pw.append(np.stack([np.interp(f, cc, row) for row in pw_k]))
        return cls(bins, settings, np.array(req), np.stack(inv, axis=1), np.stack(pw, axis=1))

    @property
    def lo_mhz(self) -> float:
        return float(self.bins_mhz[0])

    @property
    def hi_mhz(self) -> float:
        return float(self.bins_mhz[-1])

    def locate(self, ceiling_mhz: float) -> tuple[int, float]:
        """Lower bin index j and the time share w at bin j+1 for a ceiling (w = 0 at or below the lowest bin)."""
        b = self.bins_mhz
        f = min(max(float(ceiling_mhz), float(b[0])), float(b[-1]))
        j = int(np.searchsorted(b, f, side="right")) - 1
        if j >= len(b) - 1:
            return len(b) - 2 if len(b) > 1 else 0, 1.0 if len(b) > 1 else 0.0
        return j, (f - float(b[j])) / float(b[j + 1] - b[j])

    def at(self, ceiling_mhz: float) -> tuple[np.ndarray, np.ndarray]:
        """Time and power of every (kernel, setting) under one ceiling, each (kernels, settings)."""
        j, w = self.locate(ceiling_mhz)
        j1 = min(j + 1, len(self.bins_mhz) - 1)
        rate = (1 - w) * self.inv_time[:, :, j] + w * self.inv_time[:, :, j1]
        pw = (1 - w) * self.power_w[:, :, j] + w * self.power_w[:, :, j1]
        return 1.0 / rate, pw

    def effective_mhz(self, ceiling_mhz: float) -> np.ndarray:
        """Effective core clock of each setting under a ceiling."""
        return np.minimum(self.req_mhz, min(max(float(ceiling_mhz), self.lo_mhz), self.hi_mhz))


@dataclass(frozen=True, slots=True)
class SteadyState:
    """The limiter's steady state for a repeated step.

    Attributes:
        ceiling_mhz: f*, the ceiling at which the step's average power equals the cap (the top bin when the step stays
            under the cap there, the lowest bin when it cannot get under).
        time_s, energy_j: one step at that ceiling (switching not included).
        power_w: the step's average power.
        limited: whether the cap binds (f* below the top bin).
    """

    ceiling_mhz: float
    time_s: float
    energy_j: float
    power_w: float
    limited: bool


def _step_at(tables: CeilingTables, counts: np.ndarray, f: float) -> tuple[float, float]:
    t, p = tables.at(f)
    return float((counts * t).sum()), float((counts * t * p).sum())


def steady_state(tables: CeilingTables, counts: np.ndarray, cap_w: float, extra_time_s: float = 0.0,
                 extra_energy_j: float = 0.0) -> SteadyState:
    """f* for a step with ``counts[k, s]`` invocations of kernel k at setting s (plus time and energy at fixed
    power, e.g. stalls), by bisection on the monotone average power; 60 halvings of the bin range."""
    counts = np.asarray(counts, dtype=float)
    if counts.shape != tables.inv_time.shape[:2]:
        raise InputError(f"steady state: counts have shape {counts.shape}, the tables {tables.inv_time.shape[:2]}")

    def avg(f):
        t, e = _step_at(tables, counts, f)
        return (e + extra_energy_j) / (t + extra_time_s), t, e

    hi = tables.hi_mhz
    p_hi, t, e = avg(hi)
    if p_hi <= cap_w:
        return SteadyState(hi, t + extra_time_s, e + extra_energy_j, p_hi, False)
    lo = tables.lo_mhz
    p_lo, t, e = avg(lo)
    if p_lo > cap_w:
        return SteadyState(lo, t + extra_time_s, e + extra_energy_j, p_lo, True)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if avg(mid)[0] <= cap_w:
            lo = mid
        else:
            hi = mid
    p, t, e = avg(lo)
    return SteadyState(lo, t + extra_time_s, e + extra_energy_j, p, True)


def anchor_to_limiter(spec: GpuSpec, params: KernelParams, times_s: np.ndarray, repeats: np.ndarray,
                      lim: LimiterModel, gap: tuple[float, float] | None = None, rounds: int = 20) -> tuple[KernelParams, float]:
    """Kernel parameters whose times, under the limiter's steady ceiling of the recorded all-auto step, equal the
    recorded durations ``times_s``; and that ceiling.

    A trace recorded on a card with a limiter ran every kernel at the clock the step's mix allowed, not at the clock
    each kernel reaches alone, so anchoring recorded durations at the isolated throttled clocks (as
    ``default_params`` does without a limiter) makes a throttled-alone GEMM too slow and everything under the
    limiter too fast. Times are homogeneous in (t0, tc, tm) and power depends on their ratios only, so each kernel's
    three times are scaled by one factor; the ceiling moves with them, hence a few rounds (a fixed point).
    ``gap``: (seconds, watts) of GPU idle per step that the limiter's window also saw.
    """
    cap = lim.cap_for(spec)
    counts = np.asarray(repeats, dtype=float)[:, None]
    times_s = np.asarray(times_s, dtype=float)
    extra_t, extra_e = (gap[0], gap[0] * gap[1]) if gap else (0.0, 0.0)
    p = params
    f = float(spec.boost_core_mhz)
    for _ in range(rounds):
        tab = CeilingTables.from_params(spec, p, [(AUTO, AUTO)])
        f = steady_state(tab, counts, cap, extra_t, extra_e).ceiling_mhz
        t = tab.at(f)[0][:, 0]
        s = times_s / t
        p = KernelParams(p.keys, p.t0_s * s, p.tc_s * s, p.tm_s * s, p.uc, p.um, p.source, p.p0_w)
        if np.max(np.abs(s - 1)) < 1e-9:
            break
    return p, f


# Fitted limiter models are bundled beside the traces as ``<preset>.limiter.json`` (written by ``kdvfs limiter fit``;
# validation/h200/limiter/README.md names the data and the command). Cards without one keep isolated throttling.
LIMITERS: dict[str, LimiterModel | None] = {}


def limiter_for(spec: GpuSpec) -> LimiterModel | None:
    """The preset's fitted limiter, or None (then simulations throttle each kernel on its own, as before)."""
    if spec.name not in LIMITERS:
        import json

        from kdvfs.bundled import bundled_dir

        p = bundled_dir() / f"{spec.name}.limiter.json"
        LIMITERS[spec.name] = LimiterModel.from_dict(json.loads(p.read_text())["model"]) if p.exists() else None
    return LIMITERS[spec.name]


def gap_power_for(spec: GpuSpec) -> float | None:
    """The card's power with the GPU idle but clocked between kernels (host gaps): the bundled card fit's
    ``gap_power_w`` (the zoo's gap entries, ``kdvfs calibrate-h200``), else the limiter fit's idle plant, else None."""
    import json

    from kdvfs.bundled import bundled_dir

    card, lim = bundled_dir() / f"{spec.name}.fit.json", bundled_dir() / f"{spec.name}.limiter.json"
    g = json.loads(card.read_text()).get("params", {}).get("gap_power_w") if card.exists() else None
    if g is None and lim.exists():
        g = json.loads(lim.read_text()).get("plants", {}).get("idle", {}).get("a_w")
    return None if g is None else float(g)


def limiter_params(trace, spec: GpuSpec, lim: LimiterModel) -> KernelParams:
    """The trace's kernel model (``kdvfs.bundled.model_params``) with its recorded durations anchored at the clock
    the limiter allowed the recorded all-auto step (``anchor_to_limiter``): what the simulator uses under the limiter,
    so that the auto step takes the recorded time in both worlds."""
    from kdvfs.bundled import model_params

    return anchor_to_limiter(spec, model_params(trace, spec), trace.times_s, trace.repeats, lim)[0]
