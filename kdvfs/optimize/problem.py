"""The optimisation problem: per-kernel time and energy over the profile's settings, repeats, and the auto reference."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kdvfs.errors import InfeasibleError, InputError
from kdvfs.modes import Objective
from kdvfs.prediction import Prediction, SwitchPlan
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.trace import Trace

__all__ = ["Problem", "Allocation", "OBJECTIVES"]

OBJECTIVES = Objective.values()


@dataclass(frozen=True, slots=True)
class Allocation:
    """How many instances of each kernel run at each setting: ``counts[k]`` maps setting index → count.

    Attributes:
        counts: per kernel, {setting index: instances}.
        solver: which solver produced it.
        bound_energy_j: proven lower bound on the optimum (or None).
    """

    counts: tuple[dict[int, int], ...]
    solver: str
    bound_energy_j: float | None = None


@dataclass(frozen=True)
class Problem:
    """Attributes:
        trace: the trace.
        profile: the profile, rows in the trace's kernel order.
        T, E: time and energy per kernel and setting (kernels × settings).
        r: instances per kernel.
        auto: index of the (auto, auto) setting.
    """

    trace: Trace
    profile: Profile

    def __post_init__(self) -> None:
        object.__setattr__(self, "profile", self.profile.for_trace(self.trace))

    # derived once: solvers read these per kernel inside loops
    @cached_property
    def T(self) -> np.ndarray:
        return self.profile.time_s

    @cached_property
    def E(self) -> np.ndarray:
        return self.profile.energy_j

    @cached_property
    def r(self) -> np.ndarray:
        return self.trace.repeats

    @property
    def auto(self) -> int:
        return self.profile.auto_index

    @property
    def auto_time_s(self) -> float:
        return float(self.r @ self.T[:, self.auto])

    @property
    def auto_energy_j(self) -> float:
        return float(self.r @ self.E[:, self.auto])

    @property
    def fastest_time_s(self) -> float:
        return float(self.r @ self.T.min(axis=1))

    def budget(self, slack_pct: float) -> float:
        """Time bound for a tolerated slowdown; a clear error when no schedule can meet it."""
        slack_pct = check_slack(slack_pct)
        b = self.auto_time_s * (1 + slack_pct / 100.0)
        fastest = self.fastest_time_s
        if b < fastest * (1 - 1e-12):
            lo = round(100 * (fastest / self.auto_time_s - 1), 3) + 0.0  # + 0.0: "≥ 0.000", not "≥ -0.000"
            raise InfeasibleError(
                f"slack {slack_pct:+.3f} % asks for {b:.6g} s, below the fastest possible {fastest:.6g} s "
                f"({lo:+.3f} % vs auto) over this profile's settings; use --slack ≥ {lo:.3f}"
            )
        return b

    def evaluate(self, alloc: Allocation) -> tuple[float, float]:
        t = e = 0.0
        for k, cnt in enumerate(alloc.counts):
            for s, n in cnt.items():
                t += n * self.T[k, s]
                e += n * self.E[k, s]
        return t, e

    def allocation_setting_index(self, alloc: Allocation) -> np.ndarray:
        """Setting index of every instance: each kernel's instances take its settings in order of the allocation
        (most instances first, ties in the allocation's order)."""
        inst = self.trace.instances()
        r = self.r.tolist()
        if all(len(c) == 1 for c in alloc.counts) and all(n >= r[k] for k, c in enumerate(alloc.counts)
                                                           for n in c.values()):
            # one setting per kernel (static, pass, uniform, most kernel-level kernels): a lookup per instance
            return np.array([next(iter(c)) for c in alloc.counts], dtype=np.int64)[inst]
        flat: list[int] = []
        lengths = []
        for cnt in alloc.counts:
            for s in sorted(cnt, key=lambda s: -cnt[s]):
                flat += [s] * cnt[s]
            lengths.append(sum(cnt.values()))
        length = np.array(lengths, dtype=np.int64)
        offset = np.concatenate([[0], np.cumsum(length)[:-1]]) if len(length) else np.zeros(0, dtype=np.int64)
        # the n-th instance of kernel k takes seqs[k][n]
        rank = self.memo(("instance-rank",), self._instance_rank)
        if np.any(rank >= length[inst]):
            raise ValueError("allocation covers fewer instances than the trace has")  # a solver bug, not user input
        return np.array(flat, dtype=np.int64)[offset[inst] + rank]

    def _instance_rank(self) -> np.ndarray:
        """Each instance's rank among its kernel's instances (0 for the first)."""
        inst = self.trace.instances()
        K = len(self.r)  # noqa: N806
        order = np.argsort(inst, kind="stable")
        first = np.concatenate([[0], np.cumsum(np.bincount(inst, minlength=K))[:-1]])
        rank = np.empty(len(inst), dtype=np.int64)
        rank[order] = np.arange(len(inst)) - first[inst[order]]
        rank.setflags(write=False)
        return rank

    def to_schedule(self, alloc: Allocation, *, objective: str, slack_pct: float, granularity: str, scope: str,
                    switch_plan: SwitchPlan | None = None) -> Schedule:
        """Per-instance clocks: each kernel's instances take its settings in order of the allocation."""
        sidx = self.allocation_setting_index(alloc)
        st = np.array(self.profile.settings)
        t, e = self.evaluate(alloc)
        core, mem = st[sidx, 0], st[sidx, 1]
        sw = int(((np.diff(core) != 0) | (np.diff(mem) != 0)).sum())
        pred = Prediction.against(t, e, self.auto_time_s, self.auto_energy_j, sw)
        gap = None
        if alloc.bound_energy_j:
            gap = 100 * max(e - alloc.bound_energy_j, 0.0) / alloc.bound_energy_j
        from kdvfs.identity import trace_sha

        return Schedule(trace=self.trace.name, trace_sha=trace_sha(self.trace), gpu=self.profile.gpu, core_mhz=core,
                        mem_mhz=mem, objective=objective,
                        slack_pct=slack_pct, granularity=granularity, scope=scope, solver=alloc.solver, predicted=pred,
                        auto={"time_s": self.auto_time_s, "energy_j": self.auto_energy_j},
                        bound_energy_j=alloc.bound_energy_j, gap_pct=gap, switch_plan=switch_plan)

    def uniform(self, setting: int, solver: str) -> Allocation:
        return Allocation(tuple({setting: int(n)} for n in self.r), solver)

    def instance_setting_index(self, sched: Schedule) -> np.ndarray:
        """Profile setting index of every instance of a schedule (error for settings the profile lacks)."""
        return self.profile.settings_index(sched.core_mhz, sched.mem_mhz)

    def memo(self, key: tuple, make):
        """``make()`` computed once per key for this problem (solutions that several policies or scenarios share; the
        problem's tables never change, so neither do they). Callers must not mutate what they get back."""
        cache = self._memo
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def memoised(self, key: tuple) -> bool:
        """Whether ``memo`` holds ``key`` already."""
        return key in self._memo

    @cached_property
    def _memo(self) -> dict:
        return {}


SLACK_RANGE_PCT = (-100.0, 1000.0)
"""Tolerated slowdowns outside (−100 %, +1000 %] describe no real training run (−100 % is zero time; +1000 % is
eleven times slower), so they are refused as typos rather than silently solved."""


def check_slack(slack_pct) -> float:
    """``slack_pct`` as a float, or an ``InputError`` naming the rule and the fix."""
    import math

    lo, hi = SLACK_RANGE_PCT
    try:
        v = float(slack_pct)
    except (TypeError, ValueError):
        v = math.nan
    if not (lo < v <= hi):
        raise InputError(f"slack {slack_pct!r} % is not a number in ({lo:g}, {hi:g}] (a tolerated slowdown in percent "
                         "of the auto time); give e.g. --slack 0 or --slack 5")
    return v


def check_objective(obj: str) -> Objective:
    return Objective.parse(obj)

