"""What-if grids: savings against auto under switch latency × GPU preset × mechanism × policy × slack.

Policies: ``auto`` (the driver), ``pass`` (pass-level optimum), ``ideal`` (kernel-level global optimum with free
switching), ``naive`` (the ideal schedule with every switch paid for), ``switch-aware`` (planned for the latency).
Each scenario is a pure task (``run_scenario``), run through an executor; rows come back in grid order.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from kdvfs.bundled import resolve_profile_path, resolve_trace_path
from kdvfs.errors import InputError
from kdvfs.executor import Executor
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem
from kdvfs.optimize.switchaware import switch_aware
from kdvfs.profile import load_profile
from kdvfs.switching import MECHANISMS, SwitchCosts
from kdvfs.trace import load_trace
from simulator.api import simulate
from simulator.engine import SimConfig

__all__ = ["POLICIES", "Scenario", "default_latencies", "grid", "run_scenario", "run_grid"]

POLICIES = ("auto", "pass", "ideal", "naive", "switch-aware")


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """Attributes: gpu (preset whose switch model is used, or ``custom``), switch_latency_s (None: the preset's),
    mechanism, policy, slack_pct."""

    gpu: str
    switch_latency_s: float | None
    mechanism: str
    policy: str
    slack_pct: float


def default_latencies(n: int = 13) -> list[float]:
    """Log-spaced from 100 ns to 200 ms."""
    return [float(x) for x in np.logspace(np.log10(1e-7), np.log10(0.2), n)]


def grid(gpus: list[str], latencies: list[float | None], mechanisms: list[str], policies: list[str],
         slacks: list[float]) -> list[Scenario]:
    for m in mechanisms:
        if m not in MECHANISMS:
            raise InputError(f"mechanism {m!r} is not one of {', '.join(MECHANISMS)}")
    for p in policies:
        if p not in POLICIES:
            raise InputError(f"policy {p!r} is not one of {', '.join(POLICIES)}")
    for lat in latencies:
        if lat is not None and (not np.isfinite(lat) or lat <= 0):
            raise InputError(f"switch latency must be > 0 s, got {lat!r}; e.g. 6e-3 for Hopper")
    for g in gpus:
        get_gpu(g)
    return [Scenario(g, lat, m, p, s) for g, lat, m, p, s in itertools.product(gpus, latencies, mechanisms, policies, slacks)]


_CACHE: dict = {}


def _problem(trace_ref: str, profile_ref: str) -> Problem:
    key = (trace_ref, profile_ref)
    if key not in _CACHE:
        _CACHE[key] = Problem(load_trace(resolve_trace_path(trace_ref)), load_profile(resolve_profile_path(profile_ref)))
    return _CACHE[key]


def _switch(sc: Scenario) -> SwitchModel:
    preset = get_gpu(sc.gpu).switch
    base = preset if sc.switch_latency_s is None else SwitchModel.from_latency(
        sc.switch_latency_s, preset.host_call_s / preset.total_s if preset.total_s > 0 else 0.25)
    return dataclasses.replace(base, spread=0.0)


def run_scenario(trace_ref: str, profile_ref: str, card: str, sc: Scenario,
                 size: tuple[int | None, int] | None = None) -> dict:
    """One row: the policy's schedule simulated under the scenario's switch model (pure function of its inputs).

    ``size``: (per-GPU batch, tensor-parallel degree): the schedule is chosen at the trace's own size and simulated
    at this one, against auto there (``kdvfs.scaling``; the shard's all-reduces are charged to both)."""
    pb = _problem(trace_ref, profile_ref)
    sim_pb, extra_t, extra_e = pb, 0.0, 0.0
    if size is not None:
        key = (trace_ref, profile_ref, card, size)
        if key not in _CACHE:
            from kdvfs.scaling import scaled_for

            _CACHE[key] = scaled_for(pb, get_gpu(card), size[0], size[1])
        sim_pb, scl = _CACHE[key]
        extra_t, extra_e = scl.collective_time_s, scl.collective_energy_j
    spec = get_gpu(card)
    sw = _switch(sc)
    costs = SwitchCosts(idle_power_w=spec.idle_power_w)
    cfg = SimConfig(mechanism=sc.mechanism, switch=sw, costs=costs)
    if sc.policy == "auto":
        sched = pb.to_schedule(pb.uniform(pb.auto, "auto"), objective="waste", slack_pct=0, granularity="static", scope="global")
    elif sc.policy == "pass":
        sched = pb.to_schedule(allocate(pb, "waste", sc.slack_pct, "pass", "global"), objective="waste",
                               slack_pct=sc.slack_pct, granularity="pass", scope="global")
    elif sc.policy in ("ideal", "naive"):
        sched = pb.to_schedule(allocate(pb, "waste", sc.slack_pct, "kernel", "global"), objective="waste",
                               slack_pct=sc.slack_pct, granularity="kernel", scope="global")
    else:
        sched = switch_aware(pb, sw, sc.mechanism, sc.slack_pct, costs)
    if sc.policy == "ideal" and size is None:
        t, e, n = sched.predicted["time_s"], sched.predicted["energy_j"], sched.switches
    elif sc.policy == "ideal":
        t, e = _free(sim_pb, sched)
        n = sched.switches
    else:
        r = simulate(sim_pb.trace, sim_pb.profile, sched, spec, cfg, path="fast")
        t, e, n = r.time_s, r.energy_j, r.switches
    at, ae = sim_pb.auto_time_s + extra_t, sim_pb.auto_energy_j + extra_e
    t, e = t + extra_t, e + extra_e
    row = {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
           "slack_pct": sc.slack_pct, "time_change_pct": 100 * (t / at - 1),
           "energy_change_pct": 100 * (e / ae - 1), "switches": int(n)}
    if size is not None:
        row.update(batch=size[0] or pb.trace.batch_size, tp=size[1])
    return row


def _free(pb: Problem, sched) -> tuple[float, float]:
    """Time and energy of a schedule with free switching."""
    s = pb.instance_setting_index(sched)
    inst = pb.trace.instances()
    return float(pb.T[inst, s].sum()), float(pb.E[inst, s].sum())


def run_grid(trace_ref: str, profile_ref: str, card: str, scenarios: list[Scenario], executor: Executor,
             progress: Callable[[int], None] | None = None, size: tuple[int | None, int] | None = None) -> list[dict]:
    rows = []
    for r in executor.map(run_scenario, [(trace_ref, profile_ref, card, sc, size) for sc in scenarios]):
        rows.append(r)
        if progress:
            progress(1)
    return rows
