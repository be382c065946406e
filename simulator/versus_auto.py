"""One schedule simulated against auto (``kdvfs simulate``): the reference it is compared with, and the unthrottled
tables a governor reaction lag needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.bundled import model_params
from kdvfs.gpus import GpuSpec
from kdvfs.limiter import LimiterModel, limiter_params
from kdvfs.model import evaluate
from kdvfs.optimize import allocate_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.schedule import Schedule
from simulator.api import SimResult, simulate
from simulator.engine import SimConfig
from simulator.parallel import ParallelConfig

__all__ = ["AgainstAuto", "simulate_against_auto", "unthrottled_tables"]


def unthrottled_tables(pb: Problem, spec: GpuSpec) -> tuple[np.ndarray, np.ndarray]:
    """Time and power at the requested clocks without the cap, from the kernel model of the trace (the calibrated
    parameters for the bundled RTX 3080 Ti trace, the category model otherwise)."""
    params = model_params(pb.trace, spec)
    st = pb.profile.settings
    ev = evaluate(spec, params, np.array([c for c, _ in st]), np.array([m for _, m in st]), cap_w=float("inf"))
    return ev.time_s, ev.power_w


@dataclass(frozen=True, slots=True)
class AgainstAuto:
    """A schedule's simulated iteration beside auto's.

    Attributes:
        result: the schedule's simulation.
        auto_time_s, auto_energy_j: the reference: auto simulated under the same limiter when one runs, else the
            schedule's own ``auto`` (its planner's), else the problem's auto.
        time_change_pct, energy_change_pct: against it; None on several GPUs (the reference is one GPU's).
    """

    result: SimResult
    auto_time_s: float
    auto_energy_j: float
    time_change_pct: float | None
    energy_change_pct: float | None


def simulate_against_auto(pb: Problem, sched: Schedule, spec: GpuSpec, cfg: SimConfig, pc: ParallelConfig,
                          path: str = "auto", unthrottled: tuple[np.ndarray, np.ndarray] | None = None,
                          limiter: LimiterModel | None = None) -> AgainstAuto:
    """Simulate ``sched`` (under ``limiter`` when given) and compare it with auto (see ``AgainstAuto``)."""
    lim_kw: dict = {}
    if limiter is not None:
        lim_kw = {"limiter": limiter, "params": limiter_params(pb.trace, spec, limiter)}
    r = simulate(pb.trace, pb.profile, sched, spec, cfg, pc, path=path, unthrottled=unthrottled, **lim_kw)
    if limiter is not None:  # against auto under the same limiter
        ra = simulate(pb.trace, pb.profile, allocate_schedule(pb, "static", auto=True), spec, cfg, pc, path=path,
                      **lim_kw)
        auto = {"time_s": ra.time_s, "energy_j": ra.energy_j}
    else:
        auto = sched.auto or {"time_s": pb.auto_time_s, "energy_j": pb.auto_energy_j}
    one = pc.gpus == 1
    return AgainstAuto(r, auto["time_s"], auto["energy_j"],
                       100 * (r.time_s / (auto["time_s"]) - 1) if one else None,
                       100 * (r.energy_j / auto["energy_j"] - 1) if one else None)
