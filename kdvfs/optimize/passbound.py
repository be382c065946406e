"""A proven floor under the energy of a pass-level schedule, its switches paid for, without solving for it.

The switch-aware portfolio tries the pass-level waste optimum at several slacks, each an exact MILP (~7 ms each,
most of a cold plan's set-up). A try can only win where its energy, switches paid for, is below the best feasible
energy found; ``pass_member_floor`` gives a floor under that energy that needs no MILP, so that tries whose floor is
above the best are skipped and the plan stays the same.

The argument. A pass-level schedule runs one setting per pass, so it switches only where the pass changes between
consecutive instances. In ``kdvfs.switching.sequence_cost`` an instance's energy with switching is its own energy
plus its extra: a stall at idle power (≥ 0) and, during a transition, a share ``frac ≤ 1`` of it run at the old
setting, which gives back at most that share of its own energy: each instance costs at least ``1 − frac`` of its own
energy, and one no transition reaches at least all of it. A transition lasts at most host call + transition (the
longest lag of any mechanism), so ``frac ≤ lag / (the instance's fastest time)``, and it reaches only the instances
that start within it after a pass boundary (at their fastest settings, the most it can reach). The energy is
therefore at least the least of these shares' energy over every combination of one setting per pass within the time
budget — enumerated over the passes' Pareto fronts (time, energy of those shares), a few thousand combinations for
the two passes of a training step. Both sides carry a relative margin far above the rounding of the sums (1e-9, against ~1e-13).
"""

from __future__ import annotations

import numpy as np

from kdvfs.gpus import SwitchModel
from kdvfs.optimize.granularity import _groups
from kdvfs.optimize.knapsack import pareto_front
from kdvfs.optimize.problem import Problem

__all__ = ["pass_member_floor", "reached_instances"]

MARGIN_REL = 1e-9
"""Relative margin on each side of a floor (sums in another order differ by ~n·ε ≈ 1e-13 relative)."""

MAX_COMBINATIONS = 200_000
"""Above this many combinations of the passes' Pareto points no floor is given (the tries are then all solved)."""


def reached_instances(pb: Problem, lag_s: float) -> np.ndarray:
    """Whether each instance can be reached by a transition of at most ``lag_s`` begun at a pass boundary: it starts
    within ``lag_s`` of the boundary with every instance before it (from the boundary) at its fastest setting."""
    inst = pb.trace.instances()
    group_of = np.full(len(pb.r), -1, dtype=np.int64)
    for g, ks in enumerate(pb.memo(("pass-groups",), lambda: _groups(pb, "pass"))):
        group_of[ks] = g
    g_inst = group_of[inst]
    t_min = pb.T.min(axis=1)[inst].tolist()
    reached = np.zeros(len(inst), dtype=bool)
    for c in (np.flatnonzero(g_inst[1:] != g_inst[:-1]) + 1).tolist():
        before = 0.0
        for i in range(c, len(t_min)):
            if before >= lag_s:
                break
            reached[i] = True
            before += t_min[i]
    return reached


def _tables(pb: Problem, lag_s: float) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per pass: its Pareto front, its time (all instances) and the energy its instances keep at the least."""
    groups = pb.memo(("pass-groups",), lambda: _groups(pb, "pass"))
    inst = pb.trace.instances()
    # an instance a transition can reach keeps at least 1 − frac of its energy, frac ≤ lag / (its fastest time)
    share = np.where(reached_instances(pb, lag_s), 1.0 - np.minimum(1.0, lag_s / pb.T.min(axis=1)[inst]), 1.0)
    r_kept = np.bincount(inst, weights=share, minlength=len(pb.r))
    gt = np.array([pb.r[g] @ pb.T[g] for g in groups])  # as the pass-level solver sums them (granularity)
    ge = np.array([r_kept[g] @ pb.E[g] for g in groups])
    fronts = [pareto_front(gt[g], ge[g]) for g in range(len(groups))]
    return fronts, gt, ge


def pass_member_floor(pb: Problem, budget_s: float, sw: SwitchModel, stall_s: float, idle_power_w: float
                      ) -> float | None:
    """Floor (J) under the energy, switches paid for, of any one-setting-per-pass schedule whose ideal time is within
    ``budget_s``; ``None`` where none can be given: one pass (solved by the local rule), no combination within the
    budget, too many combinations, or a negative stall, idle power or latency (hand-made) that breaks the argument."""
    if stall_s < 0 or idle_power_w < 0 or sw.transition_s < 0 or sw.host_call_s < 0:
        return None
    if len(pb.memo(("pass-groups",), lambda: _groups(pb, "pass"))) < 2:
        return None
    lag_s = float(sw.host_call_s + sw.transition_s)
    fronts, gt, ge = pb.memo(("pass-floor-tables", lag_s), lambda: _tables(pb, lag_s))
    if np.prod([float(len(f)) for f in fronts]) > MAX_COMBINATIONS:
        return None
    t = np.zeros(1)
    e = np.zeros(1)
    for g, f in enumerate(fronts):  # every combination's time and energy, passes added in order
        t = np.add.outer(t, gt[g, f]).ravel()
        e = np.add.outer(e, ge[g, f]).ravel()
    ok = t <= budget_s * (1 + MARGIN_REL)
    if not ok.any():
        return None
    return float(e[ok].min()) * (1 - MARGIN_REL)
