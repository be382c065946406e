"""The power limiter in the simulator: both paths run the same discrete-time controller (``kdvfs.limiter``).

Every ``period_s`` the controller reads the energy drawn since its last tick (kernels, switch stalls, all of it),
averages it in and moves the clock ceiling; between ticks the ceiling is constant, so each kernel runs at constant rate
and power until the next tick, the next clock landing or its end. A kernel runs at min(its requested clock, the
ceiling); its rate and power come from ``CeilingTables``.

- ``fast_limited`` — a plain loop over instances, split at ticks and landings (no simpy);
- ``engine_limited`` — simpy: a GPU process and a *limiter process* that wakes at every tick (urgent priority, so a
  tick is handled before a kernel piece that ends at the same instant reads the ceiling), interrupting nothing: the GPU
  splits its pieces at the tick times the limiter publishes.

Switching follows ``kdvfs.switching`` (sync / callback stalls at idle power, transitions running at the old setting,
predictive landings). ``mark``: instances before it are warm-up (the controller settles over earlier iterations of the
same step); totals, segments, switches and the clock record count from it. At the mark the setting in effect is the
mark's own, without a switch, as an isolated simulation starts its iteration. Neither path reads the wall clock.
"""

from __future__ import annotations

import math

import numpy as np
import simpy
from simpy.core import URGENT

from kdvfs.limiter import CeilingTables, ControllerState, LimiterModel, controller_step
from kdvfs.switching import SwitchCosts
from simulator.engine import Controller, GpuRun, SimConfig
from simulator.timeline import TimelineEvent

__all__ = ["engine_limited", "fast_limited", "run_limited", "weighted_median"]


class _Rates:
    """Per (kernel, setting) rate and power under the current ceiling, from the tables as plain lists."""

    def __init__(self, tables: CeilingTables):
        self.inv = tables.inv_time.tolist()
        self.pw = tables.power_w.tolist()
        self.req = tables.req_mhz.tolist()
        self.tables = tables
        self.nb = len(tables.bins_mhz)
        self.set_ceiling(tables.hi_mhz)

    def set_ceiling(self, f: float) -> None:
        self.ceiling = f
        j, w = self.tables.locate(f)
        self.j, self.j1, self.w = j, min(j + 1, self.nb - 1), w

    def rate_power(self, k: int, s: int) -> tuple[float, float]:
        a, b = self.inv[k][s], self.pw[k][s]
        w = self.w
        return (1 - w) * a[self.j] + w * a[self.j1], (1 - w) * b[self.j] + w * b[self.j1]

    def clock(self, s: int) -> float:
        return min(self.req[s], min(max(self.ceiling, self.tables.lo_mhz), self.tables.hi_mhz))


def _result(t_mark, e_mark, now, energy, seg_t, seg_e, switches, stall_s, clocks, state, ceiling0) -> dict:
    d = np.array([c[0] for c in clocks])
    f = np.array([c[1] for c in clocks])
    return {"time_s": now - t_mark, "energy_j": energy - e_mark, "segment_time_s": np.array(seg_t),
            "segment_energy_j": np.array(seg_e), "switches": switches, "switch_time_s": stall_s, "timeline": None,
            "clock_piece_s": d, "clock_piece_mhz": f, "state": state, "ceiling_start_mhz": ceiling0}


def fast_limited(run: GpuRun, tables: CeilingTables, lim: LimiterModel, cap_w: float, cfg: SimConfig,
                 state: ControllerState, mark: int = 0, late: dict[int, float] | None = None) -> dict:
    """The limiter, the switching and the kernels in one plain loop (``run.setting`` indexes ``tables.settings``)."""
    R = _Rates(tables)  # noqa: N806
    R.set_ceiling(state.ceiling_mhz)
    ceiling0 = state.ceiling_mhz
    lo, hi, h = tables.lo_mhz, tables.hi_mhz, lim.period_s
    costs: SwitchCosts = cfg.costs
    sw = cfg.switch
    stall_base = costs.stall_s(cfg.mechanism, sw)
    tr = sw.transition_s
    if sw.stall_while_relocking and cfg.mechanism != "predictive":
        stall_base, tr = stall_base + sw.transition_s, 0.0
    late = late or {}
    kl, sl, segl = run.kernel.tolist(), run.setting.tolist(), run.segment.tolist()
    nseg = len(run.names)
    seg_t, seg_e = [0.0] * nseg, [0.0] * nseg
    now = energy = tick_e = 0.0
    tick = 1
    next_tick = h
    clocks: list[tuple[float, float]] = []
    t_mark = e_mark = 0.0
    switches = 0
    stall_total = 0.0
    n = len(kl)
    eff = sl[0] if n else 0
    req = eff
    pending: tuple[int, float] | None = None
    counting = mark == 0

    def passes(until: float, p: float, rate: float, work: float, s_clock: int, seg: int) -> float:
        """Advance to ``until`` (at most the next tick) at constant power; returns the work left."""
        nonlocal now, energy, tick, next_tick, tick_e, state
        d = until - now
        if d > 0:
            energy += d * p
            if counting:
                seg_e[seg] += d * p
                clocks.append((d, R.clock(s_clock)))
            work -= d * rate
            now = until
        if now >= next_tick:
            state = controller_step(lim, cap_w, lo, hi, state, energy - tick_e)
            tick_e = energy
            R.set_ceiling(state.ceiling_mhz)
            tick += 1
            next_tick = tick * h
        return work

    for i in range(n):
        if i == mark and mark > 0:
            t_mark, e_mark, counting = now, energy, True
            eff = req = sl[i]
            pending = None
        k, new, seg = kl[i], sl[i], segl[i]
        if new != req:
            req = new
            if pending is not None:
                eff, pending = pending[0], None
            if counting:
                switches += 1
            if cfg.mechanism == "predictive":
                pending = (new, now + late.get(i, 0.0))
            else:
                end = now + stall_base
                while now < end:
                    passes(min(end, next_tick), costs.idle_power_w, 0.0, 0.0, eff, seg)
                if counting:
                    seg_t[seg] += stall_base
                    stall_total += stall_base
                pending = (new, now + tr)
        start = now
        work = 1.0
        while work > 1e-15:
            rate, p = R.rate_power(k, eff)
            end = now + work / rate
            land = pending[1] if pending is not None else math.inf
            bound = min(next_tick, land)
            if end < bound:
                energy += (end - now) * p
                if counting:
                    seg_e[seg] += (end - now) * p
                    clocks.append((end - now, R.clock(eff)))
                now, work = end, 0.0
                break
            at = max(bound, now)
            work = passes(at, p, rate, work, eff, seg)
            if pending is not None and pending[1] <= now:
                eff, pending = pending[0], None
        if counting:
            seg_t[seg] += now - start
    return _result(t_mark, e_mark, now, energy, seg_t, seg_e, switches, stall_total, clocks, state, ceiling0)


class _LimitedGpu:
    """A GPU for the engine whose kernels run at the ceiling the limiter process publishes."""

    def __init__(self, env: simpy.Environment, run: GpuRun, R: _Rates, cfg: SimConfig, mark: int):  # noqa: N803
        self.env, self.run, self.R, self.cfg, self.mark = env, run, R, cfg, mark
        self.energy_j = 0.0
        self.piece = (0.0, 0.0, 0.0)  # (start, power, clock) of what is in flight: the limiter reads it at a tick
        self.pending: tuple[int, float] | None = None
        self.next_tick = math.inf
        nseg = len(run.names)
        self.seg_t, self.seg_e = [0.0] * nseg, [0.0] * nseg
        self.counting = mark == 0
        self.timeline: list[TimelineEvent] | None = None  # the limiter path writes no timeline (the Controller checks)
        self.gid = 0
        self.clocks: list[tuple[float, float]] = []
        self.stall_total = 0.0
        self.switches = 0
        self.t_mark = self.e_mark = 0.0
        self.eff = int(run.setting[0]) if len(run.setting) else 0
        # the mechanism's own overhead beyond the host call (sync relaunch, callback), as the Controller charges it
        self.overhead_s = cfg.costs.stall_s(cfg.mechanism, cfg.switch) - cfg.switch.host_call_s

    def energy_at(self, now: float) -> float:
        return self.energy_j + (now - self.piece[0]) * self.piece[1]

    # Controller callbacks ---------------------------------------------------------------
    def land(self, new: int, at: float) -> None:
        self.pending = (new, at)

    def account_stall(self, i: int, dur: float) -> None:
        pass  # the stall's energy was accounted piece by piece in ``stall``

    def _open(self, power_w: float, s_clock: int) -> None:
        """A piece starts now at this power, at the clock of setting ``s_clock`` under the ceiling of the moment."""
        self.piece = (self.env.now, power_w, self.R.clock(s_clock))

    def _close(self, seg: int) -> float:
        """Account the piece in flight up to now; returns its duration."""
        now = self.env.now
        start, pw, mhz = self.piece
        d = now - start
        if d > 0:
            e = d * pw
            self.energy_j += e
            if self.counting:
                self.seg_e[seg] += e
                self.clocks.append((d, mhz))
        self.piece = (now, 0.0, mhz)
        return d

    def stall(self, dur: float, seg: int):
        env = self.env
        end = env.now + dur
        idle = self.cfg.costs.idle_power_w
        while env.now < end:
            self._open(idle, self.eff)
            yield env.timeout(min(end, self.next_tick) - env.now)
            self._close(seg)
        if self.counting:
            self.seg_t[seg] += dur
            self.stall_total += dur

    def process(self, ctl: Controller):
        env, R = self.env, self.R
        kl, sl, segl = self.run.kernel.tolist(), self.run.setting.tolist(), self.run.segment.tolist()
        req = sl[0] if sl else 0
        for i in range(len(kl)):
            if i == self.mark and self.mark > 0:
                self.t_mark, self.e_mark, self.counting = env.now, self.energy_j, True
                self.eff = req = sl[i]
                self.pending = None
            k, new, seg = kl[i], sl[i], segl[i]
            if new != req:
                req = new
                if self.pending is not None:
                    self.eff, self.pending = self.pending[0], None
                if self.counting:
                    self.switches += 1
                if self.cfg.mechanism == "predictive":
                    yield from ctl.switch(self, i, new)
                else:
                    host, tr = ctl.draw()
                    stall = host + self.overhead_s
                    if self.cfg.switch.stall_while_relocking:
                        stall, tr = stall + tr, 0.0
                    yield from self.stall(stall, seg)
                    self.land(new, env.now + tr)
            start = env.now
            work = 1.0
            while work > 1e-15:
                rate, p = R.rate_power(k, self.eff)
                dur = work / rate
                land = self.pending[1] if self.pending is not None else math.inf
                bound = min(self.next_tick, land)
                self._open(p, self.eff)
                if env.now + dur < bound:
                    yield env.timeout(dur)
                    self._close(seg)
                    work = 0.0
                    break
                d = max(bound - env.now, 0.0)
                if d > 0:
                    yield env.timeout(d)
                self._close(seg)
                work -= d * rate
                if self.pending is not None and self.pending[1] <= env.now:
                    self.eff, self.pending = self.pending[0], None
            if self.counting:
                self.seg_t[seg] += env.now - start


class _Urgent(simpy.events.Event):
    """A timeout processed before ordinary events at the same instant (the limiter's tick)."""

    def __init__(self, env: simpy.Environment, at: float):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, URGENT, max(at - env.now, 0.0))


def engine_limited(run: GpuRun, tables: CeilingTables, lim: LimiterModel, cap_w: float, cfg: SimConfig,
                   state: ControllerState, mark: int = 0, late: dict[int, float] | None = None) -> dict:
    """The same run in simpy: a GPU process and a limiter process ticking every ``lim.period_s``."""
    env = simpy.Environment()
    R = _Rates(tables)  # noqa: N806
    R.set_ceiling(state.ceiling_mhz)
    ceiling0 = state.ceiling_mhz
    gpu = _LimitedGpu(env, run, R, cfg, mark)
    rng = np.random.default_rng(cfg.seed)
    ctl = Controller(env, cfg, rng, late or {})
    box = {"state": state}

    def limiter():
        lo, hi, h = tables.lo_mhz, tables.hi_mhz, lim.period_s
        tick, last_e = 1, 0.0
        while True:
            gpu.next_tick = tick * h
            yield _Urgent(env, gpu.next_tick)
            e = gpu.energy_at(env.now)
            box["state"] = controller_step(lim, cap_w, lo, hi, box["state"], e - last_e)
            last_e = e
            R.set_ceiling(box["state"].ceiling_mhz)
            tick += 1

    env.process(limiter())
    done = env.process(gpu.process(ctl))
    env.run(until=done)
    return _result(gpu.t_mark, gpu.e_mark, env.now, gpu.energy_j, gpu.seg_t, gpu.seg_e, gpu.switches,
                   gpu.stall_total, gpu.clocks, box["state"], ceiling0)


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The value below which half the weight lies (time-weighted median of a clock record)."""
    return _weighted_quantile(values, weights, 0.5)


def run_limited(run: GpuRun, settings, spec, params, lim: LimiterModel, cfg: SimConfig, path: str = "fast",
                warmup: int = 1, profile=None, gap: tuple[float, float] | None = None) -> dict:
    """One iteration of ``run`` under the limiter, after ``warmup`` iterations of the same step.

    The controller starts in the steady state of the repeated step (``kdvfs.limiter.steady_state``: the ceiling at
    which the step's average power is the cap); the warm-up iterations let the dynamics inside the step settle from it.
    ``settings`` are the profile's settings that ``run.setting`` indexes; ``params`` the trace's kernel model, or
    None to interpolate the ``profile``'s own rows (``CeilingTables.from_profile``). ``gap``: (seconds, watts) of
    GPU idle at the end of each iteration (host time between steps), a last segment ``host gaps`` whose power the
    limiter's window sees like any other.
    """
    from kdvfs.limiter import steady_state
    from simulator.engine import planned_lateness

    used, local = np.unique(run.setting, return_inverse=True)
    want = [settings[i] for i in used]
    tables = (CeilingTables.from_params(spec, params, want) if params is not None
              else CeilingTables.from_profile(spec, profile, want))
    names = list(run.names)
    if gap is not None and gap[0] > 0:
        _, S, B = tables.inv_time.shape  # noqa: N806
        tables = CeilingTables(tables.bins_mhz, tables.settings, tables.req_mhz,
                               np.concatenate([tables.inv_time, np.full((1, S, B), 1.0 / gap[0])]),
                               np.concatenate([tables.power_w, np.full((1, S, B), float(gap[1]))]))
        run = GpuRun(kernel=np.append(run.kernel, tables.inv_time.shape[0] - 1), setting=run.setting,
                     T=run.T, P=run.P, segment=np.append(run.segment, len(names)), names=names + ["host gaps"])
        local = np.append(local, local[-1])
    cap = lim.cap_for(spec)
    counts = np.zeros(tables.inv_time.shape[:2])
    np.add.at(counts, (run.kernel, local), 1.0)
    ss = steady_state(tables, counts, cap)
    state = ControllerState(ss.ceiling_mhz, cap if ss.limited else ss.power_w)
    reps = warmup + 1
    n = len(run.kernel)
    T0, P0 = tables.at(ss.ceiling_mhz)  # noqa: N806
    tiled = GpuRun(kernel=np.tile(run.kernel, reps), setting=np.tile(local, reps), T=T0, P=P0,
                   segment=np.tile(run.segment, reps), names=list(run.names))
    late = planned_lateness(tiled, cfg.switch) if cfg.mechanism == "predictive" else {}
    fn = fast_limited if path == "fast" else engine_limited
    r = fn(tiled, tables, lim, cap, cfg, state, mark=n * warmup, late=late)
    d, f = r.pop("clock_piece_s"), r.pop("clock_piece_mhz")
    end = r.pop("state")
    r["limiter"] = {"steady_ceiling_mhz": ss.ceiling_mhz, "steady_limited": ss.limited,
                    "start_ceiling_mhz": r.pop("ceiling_start_mhz"), "end_ceiling_mhz": end.ceiling_mhz,
                    "median_core_mhz": weighted_median(f, d),
                    "mean_core_mhz": float((d * f).sum() / d.sum()) if d.sum() > 0 else float("nan"),
                    "p10_core_mhz": _weighted_quantile(f, d, 0.1), "p90_core_mhz": _weighted_quantile(f, d, 0.9),
                    "cap_w": cap, "model": lim.to_dict(), "warmup_iterations": warmup}
    return r


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if len(values) == 0:
        return float("nan")
    o = np.argsort(values, kind="stable")
    c = np.cumsum(weights[o])
    return float(values[o][min(int(np.searchsorted(c, q * c[-1])), len(c) - 1)])
