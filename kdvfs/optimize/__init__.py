"""Optimisers: clock schedules from a trace and a profile.

- ``problem`` — the per-kernel time/energy tables and the auto reference (``Problem``, ``Allocation``).
- ``knapsack`` — kernel-level choice: fast Lagrangian-hull solver, exact MILP, local choice.
- ``granularity`` — objectives (waste, EDP, ED²P, energy) × granularities (static, pass, kernel) × scopes.
- ``switchaware`` — joint choice of clocks and switch points under a switch-latency model (dynamic programming).
- ``frontier`` — the time–energy curve over a range of tolerated slowdowns.
- ``policies`` — the schedule of each policy a comparison runs (auto, pass, ideal, naive, switch-aware).
- ``limited`` — choices under the card's power limiter (its steady state), where one ceiling couples the kernels.
"""

from kdvfs.optimize.frontier import frontier
from kdvfs.optimize.granularity import GRANULARITIES, SCOPES, allocate, allocate_schedule, optimize
from kdvfs.optimize.policies import policy_schedule
from kdvfs.optimize.problem import OBJECTIVES, Allocation, Problem
from kdvfs.optimize.switchaware import coarse_switch_aware, evaluate_with_switching, switch_aware

__all__ = [
    "Allocation", "GRANULARITIES", "OBJECTIVES", "Problem", "SCOPES", "allocate", "allocate_schedule",
    "coarse_switch_aware", "evaluate_with_switching", "frontier", "optimize", "policy_schedule", "switch_aware",
]
