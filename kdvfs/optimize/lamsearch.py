"""The switch-aware planner's search over λ, several bisection steps per dynamic programme.

``switch_aware`` bisects λ until the plan at λ meets the time bound; each step is one pass of the DP over all
instances, and the bisection's steps, not the DP's arithmetic, are where a cold plan spends its time (897 instances ×
13 steps). Which λ the bisection tries next depends only on whether the plan at the current λ met the bound, so the
λ it can try in its next ``d`` steps are the nodes of a binary tree of depth ``d`` (``tree``). One batched DP plans all
of them (``dp_lazy``, laid out so that numpy's per-row cost is shared), and the walk down the tree (the search's own
``step``) takes exactly the path the bisection takes, one node per step, reading each node's plan only when it gets
there. No assumption about the predicate (monotone in λ or not) is made: a node's outcome is always the exact
evaluation of its own plan, so the λ tried, their plans and the order they are considered in are the bisection's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["LazyPlans", "bisect_next", "dp_lazy", "tree"]

State = tuple[float, float, float | None, int]
"""A bisection's state: (lo, λ, hi or None before a feasible λ is found, steps left)."""


def bisect_next(state: State, feasible: bool) -> State:
    """The state after the plan at ``state``'s λ was found feasible (its time within the bound) or not: λ moves towards
    0 when it keeps the bound, away otherwise (×4 / ÷4 until bracketed, then halving); the search ends when its
    bracket is within 0.1 % or its steps are spent (``left`` 0)."""
    lo, lam, hi, left = state
    if feasible:
        hi = lam
        lam = 0.5 * (lo + lam) if lo > 0 else lam / 4
    else:
        lo = lam
        lam = lam * 4 if hi is None else 0.5 * (lam + hi)
    left -= 1
    if hi is not None and lo > 0 and (hi - lo) / hi < 1e-3:
        left = 0
    return lo, lam, hi, left


def tree(state: State, depth: int) -> list[State | None]:
    """The states the bisection can be in during its next ``depth`` steps from ``state``, in heap order: ``state``
    first, node j's successors at 2j + 1 (its plan missed the bound) and 2j + 2 (it kept it). A state with no step
    left (the search ended there) is None, and so is everything below it; the others' λ are the ones to plan."""
    nodes: list[State | None] = [state if state[3] > 0 else None]
    for j in range(2 ** (depth - 1) - 1):  # the parents of the last level
        x = nodes[j]
        nodes += [None, None] if x is None else [
            s if s[3] > 0 else None for s in (bisect_next(x, False), bisect_next(x, True))]
    return nodes


class LazyPlans:
    """The batched DP's back pointers: ``plan(j)`` walks job j's (setting positions per instance) on demand, so that
    a node the bisection never reaches costs no backtracking."""

    def __init__(self, stayed: list[np.ndarray], from_prev: list[np.ndarray], last: np.ndarray) -> None:
        self.stayed, self.from_prev, self.last = stayed, from_prev, last

    def plan(self, j: int) -> np.ndarray:
        stayed, from_prev = self.stayed, self.from_prev
        n = len(stayed)
        seq = np.empty(n, dtype=np.int64)
        s = int(self.last[j])
        for i in range(n - 1, -1, -1):
            seq[i] = s
            if not stayed[i][s, j]:
                s = int(from_prev[i][s, j])
        return seq


def dp_lazy(inst: np.ndarray, own: np.ndarray, trans: np.ndarray, stall_cost: np.ndarray) -> LazyPlans:
    """The sync/callback planner's DP (``switchaware._dp_many``) for B jobs at once, the tables laid out with the new
    setting first: ``own`` (K, B, S), ``trans`` (K, S_new, B, S_old), ``stall_cost`` (B, 1). Adding the previous
    values (B, S_old) to a kernel's table then runs one inner loop of B·S per new setting (the (B, S, S) layout of
    ``_dp_many`` runs one of S per row, and a batch there costs about B single plans). Every element is the same
    expression on the same operands, and minima are taken along the same rows (first least old setting), so each
    job's plan is bit-identical to ``_dp_many``'s."""
    S, B = trans.shape[1], trans.shape[2]
    trans_list, own_list = list(trans), list(own)
    ks = inst.tolist()
    val = own_list[ks[0]].copy()  # (B, S)
    from_prev: list[np.ndarray] = [np.zeros((S, B), dtype=np.int64)]
    stayed: list[np.ndarray] = [np.ones((S, B), dtype=bool)]
    sw_cost = np.empty((S, B, S))
    flat = sw_cost.reshape(-1)
    row_start = np.arange(S * B).reshape(S, B) * S
    add, minimum, less_equal = np.add, np.minimum, np.less_equal
    argmin: Callable[..., np.ndarray] = sw_cost.argmin
    for k in ks[1:]:
        add(val + stall_cost, trans_list[k], out=sw_cost)
        best_prev = argmin(axis=2)  # (S_new, B)
        best_sw = flat.take(row_start + best_prev).T  # (B, S_new)
        stayed.append(less_equal(val, best_sw).T)
        from_prev.append(best_prev)
        val = minimum(val, best_sw)
        val += own_list[k]
    return LazyPlans(stayed, from_prev, val.argmin(axis=1))
