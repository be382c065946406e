"""Objectives × granularities × scopes, each a small function returning an ``Allocation``; ``optimize`` dispatches."""

from __future__ import annotations

import itertools

import numpy as np

from kdvfs.errors import InputError
from kdvfs.optimize.knapsack import lower_hull, solve_fast, solve_local, solve_milp
from kdvfs.optimize.problem import Allocation, Problem, check_objective
from kdvfs.schedule import Schedule

__all__ = ["GRANULARITIES", "SCOPES", "optimize", "allocate", "allocate_schedule"]

GRANULARITIES = ("static", "pass", "kernel")
SCOPES = ("local", "global")
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
    hulls = [lower_hull(T[k], E[k]) for k in range(T.shape[0])]
    best, best_c = np.inf, None
    for lam in np.concatenate([[0.0], np.logspace(-3, 6, 600)]):
        ch = [int(h[np.argmin(E[k, h] + lam * T[k, h])]) for k, h in enumerate(hulls)]
        t = float(sum(r[k] * T[k, s] for k, s in enumerate(ch)))
        e = float(sum(r[k] * E[k, s] for k, s in enumerate(ch)))
        v = e * t ** n
        if v < best:
            best, best_c = v, ch
    return [{s: int(r[k])} for k, s in enumerate(best_c)]


def allocate(pb: Problem, objective: str = "waste", slack_pct: float = 0.0, granularity: str = "kernel",
             scope: str = "global", solver: str = "fast") -> Allocation:
    """The allocation for one objective/granularity/scope."""
    check_objective(objective)
    if granularity not in GRANULARITIES:
        raise InputError(f"granularity {granularity!r} is not one of {', '.join(GRANULARITIES)}")
    if scope not in SCOPES:
        raise InputError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if solver not in ("fast", "milp"):
        raise InputError(f"solver {solver!r} is not fast or milp")
    if objective == "waste":
        budget = pb.budget(slack_pct)
    if granularity == "kernel":
        T, E, r = pb.T, pb.E, pb.r
        if objective == "energy":
            return Allocation(tuple({int(np.argmin(E[k])): int(r[k])} for k in range(len(r))), "min energy")
        if objective in _EXP:
            n = _EXP[objective]
            if scope == "local":
                return Allocation(tuple({int(np.argmin(E[k] * T[k] ** n)): int(r[k])} for k in range(len(r))),
                                  f"local {objective}")
            return Allocation(tuple(_edp_global(T, E, r, n)), f"global {objective} (Lagrange sweep)")
        if scope == "local":
            return solve_local(T, E, r, T[:, pb.auto] * (1 + slack_pct / 100.0))
        return solve_milp(T, E, r, budget) if solver == "milp" else solve_fast(T, E, r, budget)
    # static and pass-level: groups share one setting
    groups = _groups(pb, granularity)
    GT, GE = _group_tables(pb, groups)
    ones = np.ones(len(groups), dtype=np.int64)
    if objective == "energy":
        return _expand(pb, groups, [int(np.argmin(GE[g])) for g in range(len(groups))], "min energy")
    if objective in _EXP:
        n = _EXP[objective]
        if scope == "local" or len(groups) == 1:
            return _expand(pb, groups, [int(np.argmin(GE[g] * GT[g] ** n)) for g in range(len(groups))], f"{scope} {objective}")
        if len(groups) <= 3:  # exhaustive over combinations
            best, bc = np.inf, None
            for combo in itertools.product(range(GT.shape[1]), repeat=len(groups)):
                t = sum(GT[g, s] for g, s in enumerate(combo))
                e = sum(GE[g, s] for g, s in enumerate(combo))
                if e * t ** n < best:
                    best, bc = e * t ** n, combo
            return _expand(pb, groups, list(bc), f"global {objective} (exhaustive)")
        return _expand(pb, groups, [max(c, key=c.get) for c in _edp_global(GT, GE, ones, n)], f"global {objective}")
    if scope == "local" or len(groups) == 1:
        bound = GT[:, pb.auto] * (1 + slack_pct / 100.0)
        a = solve_local(GT, GE, ones, bound)
        return _expand(pb, groups, [next(iter(c)) for c in a.counts], f"{granularity} local")
    # group times are sums of kernel times: at zero slack the all-fastest choice can exceed the bound by rounding
    # (1e-17 s seen), which HiGHS then calls infeasible; a relative 1e-12 is far below anything measurable
    a = solve_milp(GT, GE, ones, budget * (1 + 1e-12))
    return _expand(pb, groups, [next(iter(c)) for c in a.counts], f"{granularity} global (MILP)", a.bound_energy_j)


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
