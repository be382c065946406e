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
from kdvfs.passweep import restrict_settings
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


def _problem(trace_ref: str, profile_ref: str, settings: str = "all") -> Problem:
    key = (trace_ref, profile_ref, settings)
    if key not in _CACHE:
        tr = load_trace(resolve_trace_path(trace_ref))
        prof = restrict_settings(load_profile(resolve_profile_path(profile_ref)).for_trace(tr), settings)
        _CACHE[key] = Problem(tr, prof)
    return _CACHE[key]


def _switch(sc: Scenario) -> SwitchModel:
    preset = get_gpu(sc.gpu).switch
    base = preset if sc.switch_latency_s is None else SwitchModel.from_latency(
        sc.switch_latency_s, preset.host_call_s / preset.total_s if preset.total_s > 0 else 0.25)
    return dataclasses.replace(base, spread=0.0)


def run_scenario(trace_ref: str, profile_ref: str, card: str, sc: Scenario, settings: str = "all") -> dict:
    """One row: the policy's schedule simulated under the scenario's switch model (pure function of its inputs);
    ``settings``: the profile's settings to choose from (``kdvfs.passweep.restrict_settings``)."""
    pb = _problem(trace_ref, profile_ref, settings)
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
    if sc.policy == "ideal":
        t, e, n = sched.predicted["time_s"], sched.predicted["energy_j"], sched.switches
    else:
        r = simulate(pb.trace, pb.profile, sched, spec, cfg, path="fast")
        t, e, n = r.time_s, r.energy_j, r.switches
    return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
            "slack_pct": sc.slack_pct, "time_change_pct": 100 * (t / pb.auto_time_s - 1),
            "energy_change_pct": 100 * (e / pb.auto_energy_j - 1), "switches": int(n)}


def run_grid(trace_ref: str, profile_ref: str, card: str, scenarios: list[Scenario], executor: Executor,
             progress: Callable[[int], None] | None = None, settings: str = "all") -> list[dict]:
    rows = []
    for r in executor.map(run_scenario, [(trace_ref, profile_ref, card, sc, settings) for sc in scenarios]):
        rows.append(r)
        if progress:
            progress(1)
    return rows
