"""The time–energy frontier: relaxed-waste optima over a range of tolerated slowdowns (the study's relaxed figure)."""

from __future__ import annotations

import numpy as np

from kdvfs.errors import InputError
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem

__all__ = ["frontier"]


def frontier(pb: Problem, scope: str = "global", slack_min: float = 0.0, slack_max: float = 20.0,
             slack_step: float = 1.0, granularity: str = "kernel") -> list[dict]:
    """Rows ``slack_pct, time_change_pct, energy_change_pct`` for each tolerated slowdown."""
    if not all(np.isfinite([slack_min, slack_max, slack_step])) or slack_step <= 0 or slack_max < slack_min:
        raise InputError(f"need slack-step > 0 and slack-max ≥ slack-min, got {slack_min}, {slack_max}, {slack_step}")
    n = int(np.floor((slack_max - slack_min) / slack_step + 1e-9)) + 1
    if n > 10000:
        raise InputError(f"{n} slack values is too many; raise --slack-step")
    rows = []
    for i in range(n):
        s = round(slack_min + i * slack_step, 10)
        a = allocate(pb, "waste", s, granularity, scope)
        t, e = pb.evaluate(a)
        rows.append({"slack_pct": s, "time_change_pct": 100 * (t / pb.auto_time_s - 1),
                     "energy_change_pct": 100 * (e / pb.auto_energy_j - 1)})
    return rows
