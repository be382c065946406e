"""One home for the policies a comparison runs (``kdvfs compare``, the what-if grid, the demo).

``policy_schedule`` builds each policy's schedule: ``auto`` (the driver everywhere), ``pass`` (the pass-level global
waste optimum, planned with its switches paid for when a switch model is given), ``ideal`` and ``naive`` (both the kernel-level global waste optimum; they differ only in whether the
simulator charges its switches), ``switch-aware`` (planned for the switch model and mechanism). The first four do not
depend on the switch model or mechanism and are built once per (problem, policy, slack); a what-if grid asks for
them once per scenario.
"""

from __future__ import annotations

from kdvfs.gpus import SwitchModel
from kdvfs.modes import Mechanism, Policy
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem
from kdvfs.optimize.switchaware import coarse_switch_aware, switch_aware
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts

__all__ = ["FREE_SWITCHING", "Policy", "policy_schedule"]

FREE_SWITCHING = frozenset({Policy.IDEAL})
"""Policies whose result is the schedule's own prediction with switching free of cost (not simulated)."""


def _fixed(pb: Problem, policy: Policy, slack_pct: float) -> Schedule:
    if policy is Policy.AUTO:
        return pb.to_schedule(pb.uniform(pb.auto, "auto"), objective="waste", slack_pct=0.0, granularity="static",
                              scope="global")
    gran = "pass" if policy is Policy.PASS else "kernel"
    return pb.to_schedule(allocate(pb, "waste", slack_pct, gran, "global"), objective="waste", slack_pct=slack_pct,
                          granularity=gran, scope="global")


def policy_schedule(pb: Problem, policy: str, slack_pct: float = 0.0, sw: SwitchModel | None = None,
                    mechanism: str = "sync", costs: SwitchCosts | None = None) -> Schedule:
    """The schedule ``policy`` runs on this problem; ``sw``, ``mechanism`` and ``costs`` matter to ``switch-aware``
    only (which needs ``sw``)."""
    p = Policy.parse(policy)
    if p is Policy.SWITCH_AWARE:
        if sw is None:
            raise TypeError("policy_schedule: the switch-aware policy needs the switch model sw")
        return switch_aware(pb, sw, Mechanism.parse(mechanism), slack_pct, costs)
    if p is Policy.PASS and sw is not None:
        # planned with its switches paid for, so that it keeps the slack like every other policy (issue 13)
        return coarse_switch_aware(pb, "pass", sw, Mechanism.parse(mechanism), slack_pct, costs)
    if p is Policy.NAIVE:
        p = Policy.IDEAL  # the same schedule; only its evaluation differs
    key = ("policy-schedule", p.value, 0.0 if p is Policy.AUTO else float(slack_pct))
    return pb.memo(key, lambda: _fixed(pb, p, slack_pct))
