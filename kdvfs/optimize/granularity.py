"""Objectives × granularities × scopes: one small strategy per objective for the kernel-level problem and one for the
grouped problem (static, pass), each returning an ``Allocation``; ``allocate`` checks the modes once and dispatches."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kdvfs.errors import InputError
from kdvfs.modes import Granularity, Objective, Scope
from kdvfs.optimize.knapsack import _Hulls, kernel_hulls, solve_fast, solve_local, solve_milp
from kdvfs.optimize.problem import Allocation, Problem, check_objective, check_slack
from kdvfs.schedule import Schedule

__all__ = ["GRANULARITIES", "SCOPES", "optimize", "allocate", "allocate_schedule", "problem_hulls"]

GRANULARITIES = Granularity.values()
SCOPES = Scope.values()
_EXP = {"edp": 1, "ed2p": 2}


def _groups(pb: Problem, granularity: str) -> list[np.ndarray]:
    """Kernel indices that must share one setting: all (static), per pass, or none (kernel)."""
    K = len(pb.r)
    if granularity == "static":
        return [np.arange(K)]
    if granularity == "pass":
        seg = pb.trace.kernel_segment
        passes = [pb.trace.segments[i].pass_name for i in seg]
        return [np.array([k for k in range(K) if passes[k] == p]) for p in dict.fromkeys(passes)]
    return []


def _group_tables(pb: Problem, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    T = np.array([pb.r[g] @ pb.T[g] for g in groups])
    E = np.array([pb.r[g] @ pb.E[g] for g in groups])
    return T, E


def _expand(pb: Problem, groups: list[np.ndarray], choice: list[int], solver: str, bound=None) -> Allocation:
    counts: list[dict[int, int]] = [dict() for _ in pb.r]
    for g, s in zip(groups, choice):
        for k in g:
            counts[k] = {int(s): int(pb.r[k])}
    return Allocation(tuple(counts), solver, bound)


def _edp_global(T: np.ndarray, E: np.ndarray, r: np.ndarray, n: int) -> list[dict[int, int]]:
    """Minimise (Σ E)(Σ T)^n over per-item choices: the optimum lies on the aggregate convex frontier, which a sweep
    of the Lagrange multiplier traces; each multiplier's choice is evaluated and the best kept."""
    hulls = kernel_hulls(T, E)
    best, best_c = np.inf, [int(h[0]) for h in hulls]  # λ = 0 below always improves on this start
    for lam in np.concatenate([[0.0], np.logspace(-3, 6, 600)]):
        ch = [int(h[np.argmin(E[k, h] + lam * T[k, h])]) for k, h in enumerate(hulls)]
        t = float(sum(r[k] * T[k, s] for k, s in enumerate(ch)))
        e = float(sum(r[k] * E[k, s] for k, s in enumerate(ch)))
        v = e * t ** n
        if v < best:
            best, best_c = v, ch
    return [{s: int(r[k])} for k, s in enumerate(best_c)]


@dataclass(frozen=True, slots=True)
class _Request:
    """One allocation request, checked: the problem and what is asked of it.

    Attributes:
        pb: the problem.
        objective, granularity, scope: the parsed modes.
        slack_pct: tolerated slowdown (waste objective).
        solver: ``fast`` or ``milp`` (kernel-level global waste only).
    """

    pb: Problem
    objective: Objective
    granularity: Granularity
    scope: Scope
    slack_pct: float
    solver: str

    @property
    def exponent(self) -> int:
        return _EXP[self.objective.value]


# kernel-level strategies: each kernel's instances choose freely ------------------------------------------------------
def _kernel_energy(q: _Request) -> Allocation:
    E, r = q.pb.E, q.pb.r
    return Allocation(tuple({int(np.argmin(E[k])): int(r[k])} for k in range(len(r))), "min energy")


def _kernel_edp(q: _Request) -> Allocation:
    T, E, r, n = q.pb.T, q.pb.E, q.pb.r, q.exponent
    if q.scope is Scope.LOCAL:
        return Allocation(tuple({int(np.argmin(E[k] * T[k] ** n)): int(r[k])} for k in range(len(r))),
                          f"local {q.objective}")
    return Allocation(tuple(_edp_global(T, E, r, n)), f"global {q.objective} (Lagrange sweep)")


def _kernel_waste(q: _Request) -> Allocation:
    pb = q.pb
    if q.scope is Scope.LOCAL:
        return solve_local(pb.T, pb.E, pb.r, pb.T[:, pb.auto] * (1 + q.slack_pct / 100.0))
    budget = pb.budget(q.slack_pct)
    if q.solver == "milp":
        return solve_milp(pb.T, pb.E, pb.r, budget, auto=pb.auto)
    return solve_fast(pb.T, pb.E, pb.r, budget, auto=pb.auto, hulls=problem_hulls(pb))


def problem_hulls(pb: Problem) -> _Hulls:
    """``kernel_hulls`` of the problem's tables, found once per problem (memoised on it: the switch-aware portfolio
    solves one problem at up to eight slacks, and each lookup in the shared cache hashes both tables)."""
    return pb.memo(("kernel-hulls",), lambda: kernel_hulls(pb.T, pb.E))


# grouped strategies (static, pass): the kernels of a group share one setting -------------------------------------------
def _group_energy(q: _Request, groups: list[np.ndarray], GT: np.ndarray, GE: np.ndarray) -> Allocation:
    return _expand(q.pb, groups, [int(np.argmin(GE[g])) for g in range(len(groups))], "min energy")


def _group_edp(q: _Request, groups: list[np.ndarray], GT: np.ndarray, GE: np.ndarray) -> Allocation:
    n, pb = q.exponent, q.pb
    if q.scope is Scope.LOCAL or len(groups) == 1:
        return _expand(pb, groups, [int(np.argmin(GE[g] * GT[g] ** n)) for g in range(len(groups))],
                       f"{q.scope} {q.objective}")
    if len(groups) <= 3:  # exhaustive over combinations
        best, bc = np.inf, tuple(0 for _ in groups)  # replaced by the first combination: every product < inf
        for combo in itertools.product(range(GT.shape[1]), repeat=len(groups)):
            t = sum(GT[g, s] for g, s in enumerate(combo))
            e = sum(GE[g, s] for g, s in enumerate(combo))
            if e * t ** n < best:
                best, bc = e * t ** n, combo
        return _expand(pb, groups, list(bc), f"global {q.objective} (exhaustive)")
    ones = np.ones(len(groups), dtype=np.int64)
    return _expand(pb, groups, [max(c, key=c.__getitem__) for c in _edp_global(GT, GE, ones, n)],
                   f"global {q.objective}")


def _group_waste(q: _Request, groups: list[np.ndarray], GT: np.ndarray, GE: np.ndarray) -> Allocation:
    pb, ones = q.pb, np.ones(len(groups), dtype=np.int64)
    if q.scope is Scope.LOCAL or len(groups) == 1:
        a = solve_local(GT, GE, ones, GT[:, pb.auto] * (1 + q.slack_pct / 100.0))
        return _expand(pb, groups, [next(iter(c)) for c in a.counts], f"{q.granularity} local")
    a = solve_milp(GT, GE, ones, pb.budget(q.slack_pct), auto=pb.auto)
    name = f"{q.granularity} global (MILP)" if a.solver.startswith("milp") else f"{q.granularity} global ({a.solver})"
    return _expand(pb, groups, [next(iter(c)) for c in a.counts], name, a.bound_energy_j)


_KERNEL_STRATEGIES: dict[Objective, Callable[[_Request], Allocation]] = {
    Objective.WASTE: _kernel_waste, Objective.EDP: _kernel_edp, Objective.ED2P: _kernel_edp,
    Objective.ENERGY: _kernel_energy,
}
_GROUP_STRATEGIES: dict[Objective, Callable[[_Request, list[np.ndarray], np.ndarray, np.ndarray], Allocation]] = {
    Objective.WASTE: _group_waste, Objective.EDP: _group_edp, Objective.ED2P: _group_edp,
    Objective.ENERGY: _group_energy,
}


def allocate(pb: Problem, objective: str = "waste", slack_pct: float = 0.0, granularity: str = "kernel",
             scope: str = "global", solver: str = "fast") -> Allocation:
    """The allocation for one objective/granularity/scope: the modes are checked once, then one small strategy per
    objective solves either the kernel-level problem or the grouped one (static, pass)."""
    check_slack(slack_pct)
    q = _Request(pb, check_objective(objective), Granularity.parse(granularity), Scope.parse(scope), slack_pct, solver)
    if solver not in ("fast", "milp"):
        raise InputError(f"solver {solver!r} is not fast or milp")
    if q.objective is Objective.WASTE:
        pb.budget(slack_pct)  # an infeasible slack is an error for every granularity and scope
    if q.granularity is Granularity.KERNEL:
        return _KERNEL_STRATEGIES[q.objective](q)
    groups = _groups(pb, q.granularity)
    GT, GE = _group_tables(pb, groups)
    return _GROUP_STRATEGIES[q.objective](q, groups, GT, GE)


def optimize(pb: Problem, objective: str = "waste", slack_pct: float = 0.0, granularity: str = "kernel",
             scope: str = "global", solver: str = "fast") -> Schedule:
    """A ``Schedule`` for the trace of ``pb``."""
    a = allocate(pb, objective, slack_pct, granularity, scope, solver)
    return pb.to_schedule(a, objective=objective, slack_pct=slack_pct, granularity=granularity, scope=scope)


def allocate_schedule(pb: Problem, granularity: str, slack_pct: float = 0.0, auto: bool = False) -> Schedule:
    """Shorthand: the global strict/relaxed-waste schedule at one granularity, or the all-auto schedule."""
    if auto:
        return pb.to_schedule(pb.uniform(pb.auto, "auto"), objective="waste", slack_pct=0.0, granularity="static",
                              scope="global")
    return optimize(pb, "waste", slack_pct, granularity, "global")
