"""The time–energy frontier: relaxed-waste optima over a range of tolerated slowdowns (the study's relaxed figure)."""

from __future__ import annotations

import numpy as np

from kdvfs.errors import InputError
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem

__all__ = ["check_range", "frontier", "frontier_points"]


def check_range(slack_min: float, slack_max: float, slack_step: float) -> int:
    """The number of slack values from ``slack_min`` to ``slack_max`` in steps of ``slack_step``; refuses a range
    that is not one (its message named three bare numbers, "got 0.0, nan, 1.0", without saying which was which)."""
    got = f"--slack-min {slack_min:g}, --slack-max {slack_max:g}, --slack-step {slack_step:g}"
    if not all(np.isfinite([slack_min, slack_max, slack_step])) or slack_step <= 0 or slack_max < slack_min:
        raise InputError(f"{got}: the slack range needs finite numbers, a step > 0 and --slack-max ≥ --slack-min; "
                         "give e.g. --slack-min 0 --slack-max 20 --slack-step 1")
    n = int(np.floor((slack_max - slack_min) / slack_step + 1e-9)) + 1
    if n > 10000:
        raise InputError(f"{got}: {n} slack values is too many (at most 10000); raise --slack-step")
    from kdvfs.optimize.problem import check_slack

    for s in (slack_min, slack_max):
        check_slack(s)
    return n


def frontier_points(pb: Problem, scope: str = "global", slack_min: float = 0.0, slack_max: float = 20.0,
                    slack_step: float = 1.0, granularity: str = "kernel"):
    """For each tolerated slowdown, the row ``slack_pct, time_change_pct, energy_change_pct`` and the allocation
    solved for it (a caller that also wants the points' schedules, `kdvfs frontier`'s low-clock caution, makes them
    from these instead of solving every point again)."""
    n = check_range(slack_min, slack_max, slack_step)
    for i in range(n):
        s = round(slack_min + i * slack_step, 10)
        a = allocate(pb, "waste", s, granularity, scope)
        t, e = pb.evaluate(a)
        yield ({"slack_pct": s, "time_change_pct": 100 * (t / pb.auto_time_s - 1),
                "energy_change_pct": 100 * (e / pb.auto_energy_j - 1)}, a)


def frontier(pb: Problem, scope: str = "global", slack_min: float = 0.0, slack_max: float = 20.0,
             slack_step: float = 1.0, granularity: str = "kernel") -> list[dict]:
    """Rows ``slack_pct, time_change_pct, energy_change_pct`` for each tolerated slowdown (``frontier_points``)."""
    return [row for row, _ in frontier_points(pb, scope, slack_min, slack_max, slack_step, granularity)]
