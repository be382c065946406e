"""The one evaluator of policies under a switch model: ``kdvfs compare``, the what-if grid and the demo all call it.

A policy's schedule (``kdvfs.optimize.policies``) is replayed on the fast path under the switch model with mean
latencies (no spread), except the ``ideal`` policy, whose switches are free by definition: its own prediction is the
result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.modes import Mechanism, Policy
from kdvfs.optimize.policies import FREE_SWITCHING, policy_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.switching import SwitchCosts
from simulator.api import simulate
from simulator.engine import SimConfig

__all__ = ["COMPARE_ROWS", "PolicyResult", "compare_rows", "evaluate_policy"]


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's iteration under one switch model.

    Attributes:
        policy: the policy.
        time_s, energy_j: one iteration.
        switches: clock switches per iteration.
        time_change_pct, energy_change_pct: against the problem's auto reference.
    """

    policy: Policy
    time_s: float
    energy_j: float
    switches: int
    time_change_pct: float
    energy_change_pct: float


def evaluate_policy(pb: Problem, spec: GpuSpec, policy: str, sw: SwitchModel, mechanism: str = "sync",
                    slack_pct: float = 0.0, costs: SwitchCosts | None = None) -> PolicyResult:
    """Build ``policy``'s schedule and replay it under ``sw`` (spread ignored) on card ``spec``."""
    p = Policy.parse(policy)
    mech = Mechanism.parse(mechanism)
    sw = dataclasses.replace(sw, spread=0.0)
    costs = costs or SwitchCosts.for_gpu(spec)
    sched = policy_schedule(pb, p, slack_pct, sw, mech, costs)
    if p in FREE_SWITCHING:
        assert sched.predicted is not None  # the policy module's schedules always carry one
        t, e, n = sched.predicted.time_s, sched.predicted.energy_j, sched.switches
    else:
        r = simulate(pb.trace, pb.profile, sched, spec, SimConfig(mechanism=mech, switch=sw, costs=costs), path="fast")
        t, e, n = r.time_s, r.energy_j, r.switches
    return PolicyResult(p, float(t), float(e), int(n), 100 * (t / pb.auto_time_s - 1), 100 * (e / pb.auto_energy_j - 1))


COMPARE_ROWS = (("auto", "auto"), ("pass-level", "pass"), ("kernel ideal (free switching)", "ideal"),
                ("kernel naive", "naive"), ("switch-aware", "switch-aware"))
"""The rows of ``kdvfs compare``: label and policy."""


def compare_rows(pb: Problem, spec: GpuSpec, sw: SwitchModel, mechanism: str, slack_pct: float) -> list[dict]:
    """auto / pass-level / kernel ideal / kernel naive / switch-aware under one switch model (mean latencies): one
    row per policy with its label, time and energy change against auto and switches (``kdvfs compare``)."""
    rows = []
    for label, policy in COMPARE_ROWS:
        r = evaluate_policy(pb, spec, policy, sw, mechanism, slack_pct)
        rows.append({"policy": label, "time_change_pct": r.time_change_pct, "energy_change_pct": r.energy_change_pct,
                     "switches": r.switches})
    return rows
