"""``simulate``: trace + profile + schedule + card → ``SimResult``."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import GpuSpec
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Trace
from simulator.engine import GpuRun, SimConfig, run_single
from simulator.fastpath import fast_applies, fast_single
from simulator.parallel import ParallelConfig, run_parallel
from simulator.timeline import TimelineEvent

__all__ = ["LimiterStats", "SegmentResult", "SimResult", "build_run", "simulate", "scaling_report"]


@dataclass(frozen=True, slots=True)
class SegmentResult:
    """Attributes: time_s (the slowest GPU) and energy_j (all GPUs) of one trace segment in one iteration."""

    time_s: float
    energy_j: float

    def to_dict(self) -> dict[str, float]:
        return {"time_s": self.time_s, "energy_j": self.energy_j}


@dataclass(frozen=True, slots=True)
class LimiterStats:
    """What the card's power limiter did in the measured iteration (``simulator.limiter.run_limited``).

    Attributes:
        steady_ceiling_mhz, steady_limited: the steady-state ceiling of the schedule and whether the cap binds there.
        start_ceiling_mhz, end_ceiling_mhz: the ceiling at the start and end of the measured iteration.
        median_core_mhz, mean_core_mhz, p10_core_mhz, p90_core_mhz: the clock record, weighted by time.
        cap_w: the cap as held.
        model: the limiter model's parameters (``LimiterModel.to_dict``).
        warmup_iterations: iterations run before the measured one.
    """

    steady_ceiling_mhz: float
    steady_limited: bool
    start_ceiling_mhz: float
    end_ceiling_mhz: float
    median_core_mhz: float
    mean_core_mhz: float
    p10_core_mhz: float
    p90_core_mhz: float
    cap_w: float
    model: dict
    warmup_iterations: int

    def to_dict(self) -> dict:
        return {"steady_ceiling_mhz": self.steady_ceiling_mhz, "steady_limited": self.steady_limited,
                "start_ceiling_mhz": self.start_ceiling_mhz, "end_ceiling_mhz": self.end_ceiling_mhz,
                "median_core_mhz": self.median_core_mhz, "mean_core_mhz": self.mean_core_mhz,
                "p10_core_mhz": self.p10_core_mhz, "p90_core_mhz": self.p90_core_mhz, "cap_w": self.cap_w,
                "model": self.model, "warmup_iterations": self.warmup_iterations}


@dataclass(frozen=True, slots=True)
class SimResult:
    """Attributes:
        time_s, energy_j: one iteration.
        segments: per segment name, its time and energy.
        switches: clock switches (all GPUs).
        switch_time_s: time lost to switching (mean over GPUs); under the limiter, the time stalled for switches.
        path: ``engine`` or ``fast`` (``profile`` for the study's no-switching-cost view in ``hw_backend.validate``).
        gpus: number of GPUs.
        timeline: engine events, when asked for.
        limiter: what the power limiter did, when it is on; None otherwise.
    """

    time_s: float
    energy_j: float
    segments: dict[str, SegmentResult]
    switches: int
    switch_time_s: float
    path: str
    gpus: int = 1
    timeline: tuple[TimelineEvent, ...] | None = field(default=None, repr=False)
    limiter: LimiterStats | None = None

    def to_dict(self) -> dict:
        d: dict = {"time_s": self.time_s, "energy_j": self.energy_j, "switches": self.switches,
                   "switch_time_s": self.switch_time_s, "path": self.path, "gpus": self.gpus,
                   "segments": {k: v.to_dict() for k, v in self.segments.items()}}
        if self.limiter is not None:
            d["limiter"] = self.limiter.to_dict()
        return d


def _segments(names: list[str], r: dict) -> dict[str, SegmentResult]:
    seg_t, seg_e = np.asarray(r["segment_time_s"], dtype=float), np.asarray(r["segment_energy_j"], dtype=float)
    return {nm: SegmentResult(t, e) for nm, t, e in zip(names, seg_t.tolist(), seg_e.tolist())}


def build_run(trace: Trace, profile: Profile, schedule: Schedule, spec: GpuSpec | None = None) -> GpuRun:
    """Per-instance arrays for the engine and the fast path; checks the schedule against trace, card and profile."""
    schedule.check_for(trace, spec)
    prof = profile.for_trace(trace)
    pairs, inverse = schedule.setting_pairs()
    setting = prof.pairs_index(pairs)[inverse]
    return GpuRun(kernel=trace.instances(), setting=setting, T=prof.time_s, P=prof.power_w,
                  segment=trace.instance_segments(), names=[s.name for s in trace.segments],
                  kernel_names=trace.kernel_names, blocks=trace.segment_blocks())


def _rep_index(trace: Trace) -> np.ndarray:
    out = []
    for s in trace.segments:
        out += [r for r in range(s.repeat) for _ in s.kernels]
    return np.array(out)


def _straggler(run: GpuRun, f: float, cap_w: float) -> GpuRun:
    """A GPU drawing f× the power: capped kernels run slower (P ∝ f³ near the top of the curve), others draw more."""
    capped = 0.98 * cap_w <= run.P
    T = np.where(capped, run.T * f ** (1 / 3), run.T)
    P = np.where(capped, run.P, run.P * f)
    return replace(run, T=T, P=P)


BYTES_PER_GPU_INSTANCE = 4096
"""Memory the multi-GPU engine holds per simulated GPU and kernel instance (measured: ~3 KB on the bundled trace at 16
and 64 GPUs, `/usr/bin/time -f %M kdvfs simulate --gpus N`), rounded up."""
MAX_GPU_INSTANCES = 20_000_000
"""Simulated GPU × instances beyond which a run would take hours (~50 µs per GPU-instance on one core)."""


def check_resources(gpus: int, instances: int) -> None:
    """Refuse, before any work, a simulation that would exhaust memory or run for hours (``--gpus 100000``)."""
    need = gpus * instances
    avail = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if need > MAX_GPU_INSTANCES or (avail and need * BYTES_PER_GPU_INSTANCE > 0.5 * avail):
        most = max(1, min(MAX_GPU_INSTANCES, int(0.5 * (avail or 1e18) / BYTES_PER_GPU_INSTANCE)) // max(instances, 1))
        raise InputError(
            f"simulating {gpus} GPUs × {instances} kernel instances needs ~{need * BYTES_PER_GPU_INSTANCE / 2**30:.1f} "
            f"GiB and hours; this machine allows at most {most} GPUs for this trace — the savings per GPU settle by "
            "16–64 GPUs (`--scaling 1,2,4,8,16,32,64`)")


def simulate(trace: Trace, profile: Profile, schedule: Schedule, spec: GpuSpec, cfg: SimConfig | None = None,
             parallel: ParallelConfig | None = None, path: str = "auto",
             unthrottled: tuple[np.ndarray, np.ndarray] | None = None, limiter=None, params=None,
             warmup: int = 1) -> SimResult:
    """Replay ``trace`` under ``schedule``; ``path`` is ``auto`` (fast path where it applies), ``engine`` or ``fast``.

    ``unthrottled``: time and power tables (kernels × the profile's settings, trace order) at the requested clocks
    without the power cap; with ``cfg.governor_lag_s > 0`` the governor lets each newly landed setting run
    unthrottled for that long before it throttles.

    ``limiter`` (a ``kdvfs.limiter.LimiterModel``) with ``params`` (the trace's ``KernelParams``; None: interpolate the
    profile's own rows): the card's windowed power limiter instead of per-kernel throttling (``simulator.limiter``);
    one GPU, after ``warmup`` iterations.
    """
    cfg = cfg or SimConfig(switch=spec.switch, costs=SwitchCosts.for_gpu(spec))
    pc = parallel or ParallelConfig()
    check_resources(pc.gpus, len(trace.instances()))
    run = build_run(trace, profile, schedule, spec)
    if cfg.governor_lag_s > 0:
        if unthrottled is None:
            raise InputError("a governor reaction lag needs the unthrottled time and power tables (from the kernel "
                             "model); give unthrottled=, or use --governor-lag on a trace with model parameters")
        run = replace(run, unthrottled=unthrottled)
    if pc.mode == "tp" and pc.gpus > 1:
        run = replace(run, time_scale=np.full(run.T.shape, 1.0 / pc.gpus))
    names = run.names
    if limiter is not None:
        return _simulate_limited(run, profile.for_trace(trace), spec, cfg, pc, path, limiter, params, warmup)
    if pc.gpus == 1:
        use_fast = path == "fast" or (path == "auto" and fast_applies(cfg) and not cfg.timeline)
        if path == "fast" and not fast_applies(cfg):
            raise InputError("the fast path needs one GPU, zero latency spread and no governor lag; use the engine")
        r = fast_single(run, cfg) if use_fast else run_single(run, cfg)
        used = "fast" if use_fast else "engine"
    else:
        rng = np.random.default_rng(cfg.seed)
        f = 1 + pc.power_spread * rng.standard_normal(pc.gpus)
        runs = [_straggler(run, float(fi), spec.cap_w) for fi in f]
        r = run_parallel(runs, cfg, pc, _rep_index(trace))
        used = "engine"
    tl = r.get("timeline")
    return SimResult(float(r["time_s"]), float(r["energy_j"]), _segments(names, r), int(r["switches"]),
                     float(r["switch_time_s"]), used, pc.gpus, None if tl is None else tuple(tl))


def _simulate_limited(run, profile, spec, cfg, pc, path, limiter, params, warmup) -> SimResult:
    from simulator.limiter import run_limited

    if pc.gpus != 1:
        raise InputError("the power limiter is simulated for one GPU; use --no-limiter with --gpus > 1")
    if params is not None and len(params.keys) != run.T.shape[0]:
        raise InputError(f"the power limiter needs one set of kernel model parameters per kernel of the trace; got "
                         f"{len(params.keys)} for {run.T.shape[0]} kernels")
    if cfg.governor_lag_s > 0:
        raise InputError("the governor lag and the power limiter are two models of the same driver; use one")
    use_fast = path == "fast" or (path == "auto" and fast_applies(cfg) and not cfg.timeline)
    if path == "fast" and not fast_applies(cfg):
        raise InputError("the fast path needs zero latency spread; use the engine (--path engine)")
    r = run_limited(run, profile.settings, spec, params, limiter, cfg, "fast" if use_fast else "engine", warmup,
                    profile if params is None else None)
    return SimResult(float(r["time_s"]), float(r["energy_j"]), _segments(run.names, r), int(r["switches"]),
                     float(r["switch_time_s"]), "fast" if use_fast else "engine", 1, None, LimiterStats(**r["limiter"]))


def scaling_report(trace: Trace, profile: Profile, schedule: Schedule, auto: Schedule, spec: GpuSpec, cfg: SimConfig,
                   gpu_counts: list[int], mode: str = "dp", **pc_kwargs) -> list[dict]:
    """How a schedule's savings against auto hold as the number of GPUs grows."""
    rows = []
    for n in gpu_counts:
        pc = ParallelConfig(gpus=n, mode=mode, **pc_kwargs)
        a = simulate(trace, profile, auto, spec, cfg, pc)
        s = simulate(trace, profile, schedule, spec, cfg, pc)
        rows.append({"gpus": n, "parallel": mode, "auto_time_s": a.time_s, "auto_energy_j": a.energy_j,
                     "time_s": s.time_s, "energy_j": s.energy_j, "time_change_pct": 100 * (s.time_s / a.time_s - 1),
                     "energy_change_pct": 100 * (s.energy_j / a.energy_j - 1)})
    return rows
