"""The discrete-event engine (simpy): GPUs executing kernel instances at the clocks in effect, a frequency
controller applying the schedule through a switch mechanism, and the driver's governor.

Semantics are those of ``kdvfs.switching`` (shared with the fast path), event by event, plus what only an engine can
do: seeded random spread of switch latencies, mis-predicted landings, a governor that reacts to the power cap after a
lag, several GPUs meeting at collectives (``simulator.parallel``). The engine never reads the wall clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import simpy

from kdvfs.errors import InputError
from kdvfs.gpus import SwitchModel
from kdvfs.switching import SwitchCosts, check_mechanism
from simulator.timeline import KERNEL_LANE, SWITCH_LANE, TimelineEvent

__all__ = ["SimConfig", "GpuRun", "Controller", "Gpu", "run_single"]


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Attributes:
        mechanism: ``sync``, ``callback`` or ``predictive``.
        switch: the switch-latency model.
        costs: mechanism overheads and idle power.
        seed: seed of the latency spread and of per-GPU power spread.
        governor_lag_s: how long the driver takes to throttle a setting over the cap (0 = at once); needs
            ``unthrottled`` tables.
        timeline: record a timeline.
    """

    mechanism: str = "sync"
    switch: SwitchModel = field(default_factory=lambda: SwitchModel(0.0, 0.0))
    costs: SwitchCosts = field(default_factory=SwitchCosts)
    seed: int = 0
    governor_lag_s: float = 0.0
    timeline: bool = False

    def __post_init__(self) -> None:
        check_mechanism(self.mechanism)
        if not np.isfinite(self.governor_lag_s) or self.governor_lag_s < 0:  # nan passed a bare `< 0`
            raise InputError(f"governor lag must be ≥ 0 s, got {self.governor_lag_s}")


@dataclass
class GpuRun:
    """Inputs of one GPU: per-instance kernel and requested setting, kernel × setting tables, segment ids and names,
    and (for timelines) the kernels' names."""

    kernel: np.ndarray
    setting: np.ndarray
    T: np.ndarray
    P: np.ndarray
    segment: np.ndarray
    names: list[str]
    unthrottled: tuple[np.ndarray, np.ndarray] | None = None
    power_scale: float = 1.0
    time_scale: np.ndarray | None = None  # per kernel × setting (stragglers, tensor-parallel split)
    kernel_names: Sequence[str] | None = None  # per kernel, labels the timeline's kernel events
    blocks: tuple[np.ndarray, np.ndarray] | None = None  # ``Trace.segment_blocks`` of ``segment``, where known


def _view(a: np.ndarray, dtype: type) -> memoryview:
    """A read-only memoryview of ``a`` as a C-contiguous array of ``dtype`` (no copy where it already is one)."""
    arr: np.ndarray = np.ascontiguousarray(a, dtype=dtype)
    return arr.data.toreadonly()


def _eps(now: float) -> float:
    return 1e-12 * max(1.0, abs(now))


class SwitchTarget(Protocol):
    """What the controller needs of a GPU process: the engine's :class:`Gpu` and the limiter's GPU both are one."""

    gid: int
    timeline: list[TimelineEvent] | None

    def land(self, new: int, at: float) -> None: ...

    def account_stall(self, i: int, dur: float) -> None: ...


class Controller:
    """The frequency controller: applies a switch request through the mechanism and lands the new clock.

    It runs inside the GPU's process (``yield from ctl.switch(...)``): a synchronous or callback switch blocks the
    stream for its host call, so the GPU can do nothing else meanwhile; a predictive switch was issued earlier on a
    host thread and only schedules its landing. Events are created only where simulated time passes.
    """

    def __init__(self, env: simpy.Environment, cfg: SimConfig, rng: np.random.Generator, planned_late: dict[int, float]):
        self.env, self.cfg, self.rng = env, cfg, rng
        self.planned_late = planned_late
        self.switches = 0
        self._extra = cfg.costs.sync_overhead_s if cfg.mechanism == "sync" else cfg.costs.callback_overhead_s

    def draw(self) -> tuple[float, float]:
        sw = self.cfg.switch
        if sw.spread > 0:
            return (sw.host_call_s * float(self.rng.lognormal(0, sw.spread)),
                    sw.transition_s * float(self.rng.lognormal(0, sw.spread)))
        return sw.host_call_s, sw.transition_s

    def switch(self, gpu: SwitchTarget, i: int, new: int):
        """Request setting ``new`` before instance ``i``."""
        cfg = self.cfg
        self.switches += 1
        host, tr = self.draw()
        if cfg.mechanism == "predictive":
            # issued early on a host thread: lands at the boundary plus its planned lateness, plus the error of
            # this draw against the mean latency; an early landing is clamped at the boundary
            err = (host + tr) - cfg.switch.total_s
            late = self.planned_late.get(i, 0.0) + err
            gpu.land(new, self.env.now + late)
            if late > 0 and gpu.timeline is not None:
                # the time lost: the kernels meanwhile run at the old setting
                gpu.timeline.append(TimelineEvent("switch lands late", gpu.gid, SWITCH_LANE, self.env.now, late,
                                                  setting=int(new)))
            return
        stall = host + self._extra
        if cfg.switch.stall_while_relocking:
            stall += tr
            tr = 0.0
        yield self.env.timeout(stall)
        gpu.account_stall(i, stall)
        gpu.land(new, self.env.now + tr)


class Gpu:
    """One GPU executing its instance sequence (an engine: holds the state of the run)."""

    def __init__(self, env: simpy.Environment, run: GpuRun, cfg: SimConfig, gid: int = 0,
                 timeline: list[TimelineEvent] | None = None):
        self.env, self.run, self.cfg, self.gid = env, run, cfg, gid
        n = len(run.kernel)
        self.seg_t = np.zeros(len(run.names))
        self.seg_e = np.zeros(len(run.names))
        self.energy_j = 0.0
        self.busy_s = 0.0
        self.switch_time_s = 0.0
        self.eff = int(run.setting[0]) if n else 0
        self.pending: tuple[int, float] | None = None  # (setting, landing time)
        self.landed_at = -1.0
        self.timeline = timeline
        self.n = n
        # memoryviews over the arrays: indexing one gives a Python number, several times faster than a numpy scalar
        # in the per-instance loop, without the 32 bytes per element of a Python list (a list of the K × S tables
        # took the engine to 630 MB at 934 k instances)
        T = run.T if run.time_scale is None else run.T * run.time_scale
        P = run.P if run.power_scale == 1.0 else run.P * run.power_scale
        self._T = _view(T, float)
        self._P = _view(P, float)
        self._k = _view(run.kernel, np.int64)
        self._s = _view(run.setting, np.int64)
        self._seg = _view(run.segment, np.int64)
        self._seg_t = [0.0] * len(run.names)
        self._seg_e = [0.0] * len(run.names)
        self._simple = not (cfg.governor_lag_s > 0 and run.unthrottled is not None) and timeline is None

    # controller callbacks -------------------------------------------------------
    def land(self, new: int, at: float) -> None:
        self.pending = (new, at)

    def account_stall(self, i: int, dur: float) -> None:
        e = dur * self.cfg.costs.idle_power_w
        s = self.run.segment[i]
        self.seg_t[s] += dur
        self.seg_e[s] += e
        self.energy_j += e
        self.switch_time_s += dur
        if self.timeline is not None:
            self.timeline.append(TimelineEvent("switch stall", self.gid, SWITCH_LANE, self.env.now - dur, dur))

    # helpers ----------------------------------------------------------------------
    def _rates(self, k: int, s: int, since_landing: float) -> tuple[float, float]:
        r = self.run
        sc = 1.0 if r.time_scale is None else r.time_scale[k, s]
        # (a tolerance, so that float rounding never leaves a sliver of lag no timeout can advance past)
        if r.unthrottled is not None and self.cfg.governor_lag_s > 0 and since_landing < self.cfg.governor_lag_s - _eps(self.env.now):
            return r.unthrottled[0][k, s] * sc, r.unthrottled[1][k, s] * r.power_scale
        return r.T[k, s] * sc, r.P[k, s] * r.power_scale

    def idle(self, dur: float, seg: int, label: str = "idle") -> None:
        e = dur * self.cfg.costs.idle_power_w
        self.seg_t[seg] += dur
        self.seg_e[seg] += e
        self.energy_j += e
        if self.timeline is not None and dur > 0:
            self.timeline.append(TimelineEvent(label, self.gid, SWITCH_LANE, self.env.now - dur, dur))

    def execute(self, i: int):
        """Run instance i to completion, in pieces where the setting in effect changes mid-kernel."""
        env, r = self.env, self.run
        k, seg = int(r.kernel[i]), int(r.segment[i])
        work = 1.0
        start = env.now
        while work > 1e-15:
            s = self.eff
            t_full, p = self._rates(k, s, env.now - self.landed_at)
            dur = work * t_full
            if self.pending is not None and self.pending[1] < env.now + dur:
                at = max(self.pending[1], env.now)
                d = at - env.now
                if d > 0:
                    yield env.timeout(d)
                    self.energy_j += d * p
                    self.seg_e[seg] += d * p
                    work -= d / t_full
                self.eff, self.landed_at = self.pending[0], at
                self.pending = None
                continue
            if self.cfg.governor_lag_s > 0 and r.unthrottled is not None:
                rest = self.cfg.governor_lag_s - (env.now - self.landed_at)
                if _eps(env.now) < rest < dur:
                    yield env.timeout(rest)
                    self.energy_j += rest * p
                    self.seg_e[seg] += rest * p
                    work -= rest / t_full
                    continue
            yield env.timeout(dur)
            self.energy_j += dur * p
            self.seg_e[seg] += dur * p
            work = 0.0
        self.seg_t[seg] += env.now - start
        self.busy_s += env.now - start
        if self.timeline is not None:
            c = r.setting[i]
            label = r.kernel_names[k] if r.kernel_names is not None else f"kernel {k}"
            self.timeline.append(TimelineEvent(label, self.gid, KERNEL_LANE, start, env.now - start, setting=int(c),
                                               segment=r.names[seg], kernel=int(k)))

    def process(self, ctl: Controller, hooks: dict | None = None):
        """Execute all instances; ``hooks`` maps an instance index to a generator run before it (collectives)."""
        env = self.env
        timeout = env.timeout
        Tl, Pl, kl, sl, segl = self._T, self._P, self._k, self._s, self._seg
        seg_t, seg_e = self._seg_t, self._seg_e
        hooks = hooks or {}
        req = sl[0] if self.n else 0
        energy = 0.0
        for i in range(self.n):
            if i in hooks:
                self.energy_j += energy
                energy = 0.0
                yield from hooks[i](self)
            new = sl[i]
            if new != req:
                req = new
                if self.pending is not None:  # a new switch first completes the one still pending
                    self.eff, self.landed_at = self.pending[0], env.now
                    self.pending = None
                yield from ctl.switch(self, i, new)
            if self._simple and (self.pending is None or self.pending[1] >= env.now + Tl[kl[i], self.eff]):
                # common case: the whole kernel at the setting in effect, one event
                k, sg = kl[i], segl[i]
                dur = Tl[k, self.eff]
                yield timeout(dur)
                e = dur * Pl[k, self.eff]
                energy += e
                seg_e[sg] += e
                seg_t[sg] += dur
                self.busy_s += dur
            else:
                self.energy_j += energy
                energy = 0.0
                yield from self.execute(i)
        self.energy_j += energy
        self.seg_t += np.array(seg_t)
        self.seg_e += np.array(seg_e)
        self._seg_t = [0.0] * len(seg_t)
        self._seg_e = [0.0] * len(seg_e)
        if self.n in hooks:
            yield from hooks[self.n](self)


def planned_lateness(run: GpuRun, sw: SwitchModel) -> dict[int, float]:
    """Predictive switching: per switch point, how late it lands when it follows the previous one too closely."""
    t_inst = run.T[run.kernel, run.setting]
    change = np.nonzero(np.diff(run.setting) != 0)[0] + 1
    out = {}
    for j, i in enumerate(change):
        if j == 0:
            continue
        gap = float(t_inst[change[j - 1]:i].sum())
        out[int(i)] = max(0.0, sw.total_s - gap)
    return out


def run_single(run: GpuRun, cfg: SimConfig) -> dict:
    """Simulate one GPU; returns totals, per-segment values, switches and an optional timeline."""
    env = simpy.Environment()
    rng = np.random.default_rng(cfg.seed)
    tl: list[TimelineEvent] | None = [] if cfg.timeline else None
    gpu = Gpu(env, run, cfg, 0, tl)
    ctl = Controller(env, cfg, rng, planned_lateness(run, cfg.switch) if cfg.mechanism == "predictive" else {})
    done = env.process(gpu.process(ctl))
    env.run(until=done)
    ideal = float(run.T[run.kernel, run.setting].sum()) if run.time_scale is None else float(
        (run.T * run.time_scale)[run.kernel, run.setting].sum())
    return {"time_s": env.now, "energy_j": gpu.energy_j, "segment_time_s": gpu.seg_t, "segment_energy_j": gpu.seg_e,
            "switches": ctl.switches, "switch_time_s": env.now - ideal, "timeline": tl}
