"""What-if grids: savings against auto under switch latency × GPU preset × mechanism × policy × slack.

Policies: ``auto`` (the driver), ``pass`` (pass-level optimum), ``ideal`` (kernel-level global optimum with free
switching), ``naive`` (the ideal schedule with every switch paid for), ``switch-aware`` (planned for the latency).
Each scenario is a pure task (``run_scenario``), run through an executor; rows come back in grid order.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from kdvfs.bundled import resolve_profile_path, resolve_trace_path
from kdvfs.errors import InputError
from kdvfs.executor import Executor
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.modes import Mechanism, Policy
from kdvfs.optimize.problem import Problem
from kdvfs.profile import load_profile
from kdvfs.switching import SwitchCosts
from kdvfs.trace import load_trace
from simulator.evaluate import evaluate_policy

__all__ = ["POLICIES", "Scenario", "default_latencies", "grid", "run_scenario", "run_grid"]

POLICIES = Policy.values()


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
    if not isinstance(n, int) or not 1 <= n <= 1000:
        raise InputError(f"--latency-points {n!r} must be a whole number in 1–1000; give e.g. --latency-points 13")
    return [float(x) for x in np.logspace(np.log10(1e-7), np.log10(0.2), n)]


def grid(gpus: list[str], latencies: Sequence[float | None], mechanisms: list[str], policies: list[str],
         slacks: list[float]) -> list[Scenario]:
    for m in mechanisms:
        Mechanism.parse(m)
    for p in policies:
        Policy.parse(p)
    for lat in latencies:
        if lat is not None and (not np.isfinite(lat) or lat <= 0 or lat > 10.0):
            raise InputError(f"switch latency must be in (0, 10] s, got {lat!r}; e.g. 6e-3 for Hopper")
    for g in gpus:
        get_gpu(g)
    from kdvfs.optimize.problem import check_slack

    for s in slacks:
        check_slack(s)
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


def run_scenario(trace_ref: str, profile_ref: str, card: str, sc: Scenario, limiter: bool = False) -> dict:
    """One row: the policy's schedule simulated under the scenario's switch model (pure function of its inputs).

    ``limiter``: under the card's power limiter, with the limiter-aware choices (``simulator.limited_whatif``)."""
    pb = _problem(trace_ref, profile_ref)
    spec = get_gpu(card)
    sw = _switch(sc)
    if limiter:
        from simulator.limited_whatif import limited_scenario_row

        r = limited_scenario_row(trace_ref, pb, card, sc.policy, sw, sc.mechanism, sc.slack_pct)
        return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
                "slack_pct": sc.slack_pct, "time_change_pct": r["time_change_pct"],
                "energy_change_pct": r["energy_change_pct"], "switches": int(r["switches"])}
    r = evaluate_policy(pb, spec, sc.policy, sw, sc.mechanism, sc.slack_pct, SwitchCosts.for_gpu(spec))
    return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
            "slack_pct": sc.slack_pct, "time_change_pct": r.time_change_pct,
            "energy_change_pct": r.energy_change_pct, "switches": r.switches}


def run_grid(trace_ref: str, profile_ref: str, card: str, scenarios: list[Scenario], executor: Executor,
             progress: Callable[[int], None] | None = None, limiter: bool = False) -> list[dict]:
    rows = []
    for r in executor.map(run_scenario, [(trace_ref, profile_ref, card, sc, limiter) for sc in scenarios]):
        rows.append(r)
        if progress:
            progress(1)
    return rows
