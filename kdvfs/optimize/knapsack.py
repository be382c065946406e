"""Kernel-level clock choice as a multiple-choice knapsack: a fast Lagrangian solver on per-kernel convex hulls
with repair, and an exact MILP (scipy / HiGHS) to check it.

Items are kernels with ``r_k`` identical instances; an allocation may split a kernel's instances between settings
("repeated layers allowed to share a choice", and to differ where the optimum needs it).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from kdvfs.optimize.problem import Allocation

__all__ = ["pareto_front", "lower_hull", "solve_fast", "solve_milp", "solve_local"]


def pareto_front(t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Indices of settings not dominated in (time, energy), sorted by time."""
    order = np.lexsort((e, t))
    keep = []
    best_e = np.inf
    for i in order:
        if e[i] < best_e - 1e-18:
            keep.append(i)
            best_e = e[i]
    return np.array(keep, dtype=np.int64)


def lower_hull(t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Indices of the lower-left convex hull of the Pareto front, sorted by time (energy falling)."""
    pf = pareto_front(t, e)
    hull: list[int] = []
    for i in pf:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is above the segment a→i: drop it
            if (e[b] - e[a]) * (t[i] - t[a]) >= (e[i] - e[a]) * (t[b] - t[a]):
                hull.pop()
            else:
                break
        hull.append(int(i))
    return np.array(hull, dtype=np.int64)


TIME_TIE_REL = 1e-6
"""Relative time difference below which a kernel counts as no slower (profiles store times to 7 significant digits; a
memory-bound kernel at a lower core clock is modelled slower by ~1e-8, which no measurement could tell apart). Without
it the local optimum would depend on whether a profile was rounded on its way through a file."""


def solve_local(T: np.ndarray, E: np.ndarray, r: np.ndarray, bound_t: np.ndarray) -> Allocation:
    """Each kernel: the least energy with its own time ≤ its bound (times within ``TIME_TIE_REL`` count as equal)."""
    counts = []
    for k in range(T.shape[0]):
        ok = np.nonzero(T[k] <= bound_t[k] * (1 + TIME_TIE_REL))[0]
        s = int(ok[np.argmin(E[k, ok])]) if len(ok) else int(np.argmin(T[k]))
        counts.append({s: int(r[k])})
    return Allocation(tuple(counts), "local")


def solve_fast(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float) -> Allocation:
    """Lagrangian on the per-kernel hulls, the boundary kernel split integrally, then greedy use of the slack.

    The Lagrangian dual value is a proven lower bound on the optimum energy.
    """
    K = T.shape[0]
    hulls = [lower_hull(T[k], E[k]) for k in range(K)]
    # segments between consecutive hull points: (kernel, from, to, dt<0, de>0 … ) sorted by energy saved per time
    # Start at each kernel's fastest hull point; moving along the hull trades time for energy at falling rates.
    pos = [0] * K
    t_tot = float(sum(r[k] * T[k, hulls[k][0]] for k in range(K)))
    segs = []
    for k in range(K):
        h = hulls[k]
        for j in range(len(h) - 1):
            dt = T[k, h[j + 1]] - T[k, h[j]]
            de = E[k, h[j]] - E[k, h[j + 1]]
            segs.append((de / max(dt, 1e-300), k, j))
    segs.sort(key=lambda x: -x[0])
    counts = [dict({int(hulls[k][0]): int(r[k])}) for k in range(K)]
    bound = None
    lam = 0.0
    for rate, k, j in segs:
        if pos[k] != j:
            continue  # hull rates fall along each hull, so segments of one kernel come in order
        a, b = int(hulls[k][j]), int(hulls[k][j + 1])
        dt = T[k, b] - T[k, a]
        room = budget - t_tot
        n_all = int(r[k])
        if n_all * dt <= room + 1e-15:
            counts[k] = {b: n_all}
            t_tot += n_all * dt
            pos[k] = j + 1
            continue
        # the boundary kernel: move as many instances as fit
        n = int(np.floor(room / dt + 1e-12)) if dt > 0 else n_all
        if n > 0:
            counts[k] = {a: n_all - n, b: n}
            t_tot += n * dt
        lam = rate
        break
    # Lagrangian lower bound: sum_k r_k min_s (E + lam T) - lam * budget
    if lam > 0:
        bound = float(sum(r[k] * np.min(E[k] + lam * T[k]) for k in range(K)) - lam * budget)
    else:
        bound = float(sum(r[k] * np.min(E[k]) for k in range(K)))
    alloc = Allocation(tuple(counts), "fast (Lagrangian hull + repair)", bound)
    return _improve(T, E, r, budget, alloc)


def _improve(T, E, r, budget, alloc: Allocation) -> Allocation:
    """Spend any slack left: repeatedly move single instances to any setting that saves energy and still fits."""
    counts = [dict(c) for c in alloc.counts]
    t_tot = sum(n * T[k, s] for k, c in enumerate(counts) for s, n in c.items())
    for _ in range(3):
        moved = False
        for k, c in enumerate(counts):
            for s in list(c):
                if c.get(s, 0) == 0:
                    continue
                room = budget - t_tot
                dt = T[k] - T[k, s]
                de = E[k] - E[k, s]
                ok = np.nonzero((dt <= room + 1e-15) & (de < -1e-15))[0]
                if len(ok):
                    b = int(ok[np.argmin(de[ok])])
                    c[s] -= 1
                    if c[s] == 0:
                        del c[s]
                    c[b] = c.get(b, 0) + 1
                    t_tot += dt[b]
                    moved = True
        if not moved:
            break
    return Allocation(tuple(counts), alloc.solver, alloc.bound_energy_j)


@contextmanager
def _native_stdout_silenced():
    """Send what compiled code writes to file descriptor 1 to the null device meanwhile (Python's own output is flushed
    first and unaffected afterwards). Where descriptor 1 cannot be redirected, nothing is silenced."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def solve_milp(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float, time_limit_s: float = 60.0) -> Allocation:
    """Exact integer optimum (HiGHS through ``scipy.optimize.milp``) over each kernel's Pareto-efficient settings."""
    K = T.shape[0]
    cand = [pareto_front(T[k], E[k]) for k in range(K)]
    var = [(k, int(s)) for k in range(K) for s in cand[k]]
    n = len(var)
    c = np.array([E[k, s] for k, s in var])
    A = lil_matrix((K + 1, n))
    for j, (k, s) in enumerate(var):
        A[k, j] = 1.0
        A[K, j] = T[k, s]
    lo = np.concatenate([r.astype(float), [-np.inf]])
    hi = np.concatenate([r.astype(float), [budget]])
    ub = np.array([r[k] for k, _ in var], dtype=float)
    A = A.tocsr()
    bound = None
    for _ in range(4):
        with _native_stdout_silenced():  # HiGHS prints debugging lines on some instances, which would break --json
            res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(n), bounds=Bounds(0, ub),
                       options={"time_limit": time_limit_s, "mip_rel_gap": 1e-9})
        if res.x is None:
            if bound is not None:  # infeasible once tightened below a tie at the bound: see the fallback below
                break
            raise RuntimeError(f"MILP found no solution: {res.message}")
        if bound is None:  # the first solve's bound is the one for the problem as posed
            b = getattr(res, "mip_dual_bound", None)
            bound = float(b) if b is not None and np.isfinite(b) else float(res.fun)
        counts = [dict() for _ in range(K)]
        for j, (k, s) in enumerate(var):
            v = int(round(res.x[j]))
            if v:
                counts[k][s] = v
        t = sum(v * T[k, s] for k in range(K) for s, v in counts[k].items())
        if t <= budget:
            break
        # HiGHS honours the constraint to its feasibility tolerance (~1e-7 relative seen): tighten by twice the excess
        hi[-1] -= 2 * (t - budget)
    if t > budget:
        # a budget at the fastest possible time (strict waste where nothing is faster than auto): HiGHS keeps
        # returning a tie slower by its tolerance; the fastest choice (least energy among ties) meets it exactly
        fast = [int(np.lexsort((E[k], T[k]))[0]) for k in range(K)]
        if sum(r[k] * T[k, s] for k, s in enumerate(fast)) <= budget:
            return Allocation(tuple({s: int(r[k])} for k, s in enumerate(fast)), "milp (HiGHS); fastest at the bound",
                              bound)
        raise RuntimeError(f"MILP could not keep the time budget {budget:.9g} s within its tolerance (got {t:.9g} s)")
    return Allocation(tuple(counts), "milp (HiGHS)", bound)
