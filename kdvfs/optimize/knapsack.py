"""Kernel-level clock choice as a multiple-choice knapsack: a fast Lagrangian solver on per-kernel convex hulls
with repair, and an exact MILP (scipy / HiGHS) to check it.

Items are kernels with ``r_k`` identical instances; an allocation may split a kernel's instances between settings
("repeated layers allowed to share a choice", and to differ where the optimum needs it).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sys
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from kdvfs.optimize.problem import Allocation

# scipy.optimize is imported inside solve_milp: it takes ~0.3 s to import and the default (fast) solver never needs it

__all__ = ["fastest_allocation", "kernel_hulls", "pareto_front", "lower_hull", "solve_fast", "solve_milp", "solve_local"]

log = logging.getLogger(__name__)

FASTEST_REL = 1e-12
"""A budget within this relative distance of the fastest total time leaves no room to trade: the fastest allocation is
the only answer, and handing it to a solver only invites its feasibility tolerance to say "infeasible"."""


def fastest_allocation(T: np.ndarray, E: np.ndarray, r: np.ndarray, auto: int | None = None) -> Allocation:
    """Every kernel at its fastest setting: among the settings of exactly the least time, the least energy (``auto``
    where it is one of them and no tied setting uses less). Meets any budget at or above the fastest total time.

    Exact ties are real: a memory-bound kernel at a lower core clock often takes the same time as at auto (stored
    profiles keep seven digits), and taking the cheaper one keeps the bound while saving energy."""
    counts = []
    for k in range(T.shape[0]):
        tmin = T[k].min()
        ok = np.flatnonzero(T[k] <= tmin)
        s = int(ok[np.argmin(E[k, ok])])
        if auto is not None and T[k, auto] <= tmin and E[k, auto] <= E[k, s]:
            s = int(auto)
        counts.append({s: int(r[k])})
    # no bound is claimed: the allocation is optimal for the budget it is given only when no trade is possible
    return Allocation(tuple(counts), "fastest (budget at the fastest time)")


def _at_fastest(T: np.ndarray, r: np.ndarray, budget: float) -> bool:
    return budget <= float(r @ T.min(axis=1)) * (1 + FASTEST_REL)


def pareto_front(t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Indices of settings not dominated in (time, energy), sorted by time."""
    order = np.lexsort((e, t))
    eo = e[order]
    # kept: strictly below every energy seen at a smaller (or equal, earlier) time — a running minimum, vectorised
    prev_min = np.concatenate([[np.inf], np.minimum.accumulate(eo)[:-1]])
    return order[eo < prev_min - 1e-18].astype(np.int64)


def lower_hull(t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Indices of the lower-left convex hull of the Pareto front, sorted by time (energy falling)."""
    pf = pareto_front(t, e)
    # the front's values as Python floats: the same IEEE products and differences as numpy's scalars, ~5× cheaper
    idx, tf, ef = pf.tolist(), t[pf].tolist(), e[pf].tolist()
    hull: list[int] = []  # positions on the front
    for i in range(len(idx)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is above the segment a→i: drop it
            if (ef[b] - ef[a]) * (tf[i] - tf[a]) >= (ef[i] - ef[a]) * (tf[b] - tf[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.array([idx[j] for j in hull], dtype=np.int64)


class _Hulls(tuple):
    """The per-kernel hulls of a pair of tables, with the hull segments sorted for the fast solver's walk (built on
    first use: they depend on the tables only, not on the budget or the instance counts)."""

    segments: list[tuple[float, int, int]] | None = None

    def sorted_segments(self, T: np.ndarray, E: np.ndarray) -> list[tuple[float, int, int]]:  # noqa: N803
        """(energy saved per second, kernel, position on its hull) of every hull segment, steepest first."""
        if self.segments is None:
            # every hull's consecutive points at once, the same differences and quotients as one at a time; then a
            # stable sort on the negated rates, which keeps equal rates in kernel, then hull, order as Python's sort
            # on the key -rate did (the rates are finite: hull times rise and profiles hold finite values)
            lens = np.array([len(h) for h in self], dtype=np.int64)
            if not len(lens) or lens.sum() == 0:
                self.segments = []
                return self.segments
            row = np.repeat(np.arange(len(lens)), lens)
            col = np.concatenate(self)
            th, eh = T[row, col], E[row, col]
            last = np.cumsum(lens) - 1  # a segment starts at every point but a hull's last
            start = np.ones(len(col), dtype=bool)
            start[last[lens > 0]] = False
            at = np.flatnonzero(start)
            rate = (eh[at] - eh[at + 1]) / np.maximum(th[at + 1] - th[at], 1e-300)
            pos = at - np.repeat(np.cumsum(lens) - lens, lens)[at]
            order = np.argsort(-rate, kind="stable")
            self.segments = list(zip(rate[order].tolist(), row[at][order].tolist(), pos[order].tolist()))
        return self.segments


_HULL_CACHE: OrderedDict[bytes, _Hulls] = OrderedDict()
_HULL_CACHE_SIZE = 16


def kernel_hulls(T: np.ndarray, E: np.ndarray) -> _Hulls:
    """``lower_hull`` of every row of the kernel × setting tables, memoised by the tables' contents.

    The switch-aware portfolio and a what-if grid solve the same problem many times: the hulls (a Python loop over
    every setting of every kernel) are built once per pair of tables instead of once per solve. The returned arrays
    are read-only because they are shared.
    """
    T = np.ascontiguousarray(T, dtype=float)
    E = np.ascontiguousarray(E, dtype=float)
    h = hashlib.blake2b(digest_size=20)
    h.update(repr(T.shape).encode())
    h.update(T.data)
    h.update(E.data)
    key = h.digest()
    hit = _HULL_CACHE.get(key)
    if hit is not None:
        _HULL_CACHE.move_to_end(key)
        return hit
    hulls = []
    for k in range(T.shape[0]):
        hk = lower_hull(T[k], E[k])
        hk.setflags(write=False)
        hulls.append(hk)
    out = _Hulls(hulls)
    _HULL_CACHE[key] = out
    if len(_HULL_CACHE) > _HULL_CACHE_SIZE:
        _HULL_CACHE.popitem(last=False)
    return out


TIME_TIE_REL = 1e-6
"""Relative time difference below which a kernel counts as no slower (profiles store times to 7 significant digits; a
memory-bound kernel at a lower core clock is modelled slower by ~1e-8, which no measurement could tell apart). Without
it the local optimum would depend on whether a profile was rounded on its way through a file."""


def solve_local(T: np.ndarray, E: np.ndarray, r: np.ndarray, bound_t: np.ndarray) -> Allocation:
    """Each kernel: the least energy with its own time ≤ its bound (times within ``TIME_TIE_REL`` count as equal).

    The tie band may not cost time overall: where the choices sum past ``r · bound_t`` (the slack asked for), the kernels
    that used the band go back, largest excess first, to their least energy strictly within their bound.
    """
    choice = []
    for k in range(T.shape[0]):
        ok = np.nonzero(T[k] <= bound_t[k] * (1 + TIME_TIE_REL))[0]
        choice.append(int(ok[np.argmin(E[k, ok])]) if len(ok) else int(np.argmin(T[k])))
    total = float(sum(r[k] * bound_t[k] for k in range(T.shape[0])))
    t = float(sum(r[k] * T[k, s] for k, s in enumerate(choice)))
    if t > total:
        banded = sorted((k for k, s in enumerate(choice) if T[k, s] > bound_t[k]),
                        key=lambda k: -r[k] * (T[k, choice[k]] - bound_t[k]))
        for k in banded:
            ok = np.nonzero(T[k] <= bound_t[k])[0]
            s = int(ok[np.argmin(E[k, ok])]) if len(ok) else int(np.argmin(T[k]))
            t += r[k] * (T[k, s] - T[k, choice[k]])
            choice[k] = s
            if t <= total:
                break
    return Allocation(tuple({s: int(r[k])} for k, s in enumerate(choice)), "local")


def unique_rows(T: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group, group of each row) for kernels whose time and energy rows are identical — the same
    kernel (name and shapes) launched in several places of a flat trace is one item with the summed count."""
    both = np.ascontiguousarray(np.hstack([T, E]))
    view = both.view(np.dtype((np.void, both.dtype.itemsize * both.shape[1]))).ravel()
    _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _split(counts: list[dict[int, int]], group: np.ndarray, r: np.ndarray) -> list[dict[int, int]]:
    """Hand each group's instances per setting back to its member kernels, in kernel order (deterministic)."""
    left = [sorted(c.items()) for c in counts]
    out: list[dict[int, int]] = []
    for k, g in enumerate(group.tolist()):
        need = int(r[k])
        mine: dict[int, int] = {}
        items = left[g]
        while need:
            s, n = items[0]
            take = min(n, need)
            mine[s] = mine.get(s, 0) + take
            need -= take
            if take == n:
                items.pop(0)
            else:
                items[0] = (s, n - take)
        out.append(mine)
    return out


def solve_fast(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float, auto: int | None = None,
               hulls: _Hulls | None = None) -> Allocation:
    """Lagrangian on the per-kernel hulls, the boundary kernels split integrally, then greedy use of the slack.

    Hull segments are taken in order of falling energy saved per second; a kernel whose next segment does not fit
    whole moves as many instances as fit and stops there, and later (cheaper) segments of other kernels still use
    the room left. The Lagrangian dual value at the first segment that did not fit is a proven lower bound on the
    optimum energy. Kernels with identical rows are solved as one item (``unique_rows``) and split back afterwards.

    A budget at (or below) the fastest total time returns ``fastest_allocation`` (``auto`` preferred where it is
    fastest). ``hulls``: ``kernel_hulls(T, E)`` where the caller holds it already (``kernel_hulls`` hashes both
    tables on every call to find its cache entry); used where every row is distinct.
    """
    if _at_fastest(T, r, budget):
        return fastest_allocation(T, E, r, auto)
    first, group = unique_rows(T, E)
    if len(first) < len(r):
        rr = np.bincount(group, weights=r, minlength=len(first)).astype(np.int64)
        a = _solve_fast(T[first], E[first], rr, budget)
        return Allocation(tuple(_split([dict(c) for c in a.counts], group, r)), a.solver, a.bound_energy_j)
    return _solve_fast(T, E, r, budget, hulls)


def _solve_fast(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float,
                hulls: _Hulls | None = None) -> Allocation:
    """The fast solver on distinct kernels (see ``solve_fast``)."""
    K = T.shape[0]
    hulls = kernel_hulls(T, E) if hulls is None else hulls
    # the walk reads Python floats and ints (the same IEEE values and operations as numpy's scalars, ~3× cheaper)
    hl = [h.tolist() for h in hulls]
    th = [T[k, h].tolist() for k, h in enumerate(hulls)]
    rl = r.tolist()
    # segments between consecutive hull points sorted by energy saved per time; start at each kernel's fastest hull
    # point: moving along the hull trades time for energy at falling rates
    pos = [0] * K
    t_tot = float(sum(rl[k] * th[k][0] for k in range(K)))
    segs = hulls.sorted_segments(T, E) if isinstance(hulls, _Hulls) else _Hulls(hulls).sorted_segments(T, E)
    counts = [dict({hl[k][0]: int(rl[k])}) for k in range(K)]
    lam = 0.0
    stopped = [False] * K
    for rate, k, j in segs:
        if pos[k] != j or stopped[k]:
            continue  # hull rates fall along each hull, so segments of one kernel come in order
        a, b = hl[k][j], hl[k][j + 1]
        dt = th[k][j + 1] - th[k][j]
        room = budget - t_tot
        n_all = int(rl[k])
        if n_all * dt <= room + 1e-15:
            counts[k] = {b: n_all}
            t_tot += n_all * dt
            pos[k] = j + 1
            continue
        # a boundary kernel: move as many instances as fit; it goes no further along its hull. Stopping the whole
        # walk here (as the plain Lagrangian rounding does) left up to 0.03 % energy to the MILP at 1 % slack
        n = math.floor(room / dt + 1e-12) if dt > 0 else n_all
        if n > 0:
            counts[k] = {a: n_all - n, b: n}
            t_tot += n * dt
        if lam == 0.0:
            lam = rate
        stopped[k] = True
    # Lagrangian lower bound: sum_k r_k min_s (E + lam T) - lam * budget (row minima at once, summed in kernel order)
    if lam > 0:
        bound = float(sum((r * (E + lam * T).min(axis=1)).tolist()) - lam * budget)
    else:
        bound = float(sum((r * E.min(axis=1)).tolist()))
    alloc = Allocation(tuple(counts), "fast (Lagrangian hull + repair)", bound)
    return _improve(T, E, r, budget, alloc)


def _improve(T, E, r, budget, alloc: Allocation) -> Allocation:
    """Spend any slack left: repeatedly move single instances to any setting that saves energy and still fits."""
    counts = [dict(c) for c in alloc.counts]
    t_tot = sum(n * T[k, s] for k, c in enumerate(counts) for s, n in c.items())
    for _ in range(3):
        if not _can_move(T, E, counts, budget - t_tot):
            break  # the pass below would move nothing: room stays as it is while nothing moves
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


def _can_move(T: np.ndarray, E: np.ndarray, counts: list[dict[int, int]], room: float) -> bool:
    """Whether a pass of ``_improve`` that starts with ``room`` left moves anything: every (kernel, setting) it would
    look at, all at once, with the same differences and comparisons (on the benchmark's problems no pass moves
    anything, and the pass's Python loop over ~60 pairs of 664-setting rows cost ~0.5 ms a solve)."""
    pairs = [(k, s) for k, c in enumerate(counts) for s, n in c.items() if n != 0]
    if not pairs:
        return False
    kk, ss = np.array(pairs, dtype=np.int64).T
    dt = T[kk] - T[kk, ss][:, None]
    de = E[kk] - E[kk, ss][:, None]
    return bool(((dt <= room + 1e-15) & (de < -1e-15)).any())


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


def solve_milp(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float, time_limit_s: float = 60.0,
               auto: int | None = None) -> Allocation:
    """Exact integer optimum (HiGHS through ``scipy.optimize.milp``) over each kernel's Pareto-efficient settings.

    Never raises for a budget at or above the fastest time: at the fastest time it returns ``fastest_allocation``;
    where HiGHS finds nothing, or cannot keep the budget within its tolerance, or fails, it falls back to
    ``solve_fast`` (solver named ``fast (HiGHS fallback: …)``), whose Lagrangian bound keeps the gap reported.
    """
    if _at_fastest(T, r, budget):
        return fastest_allocation(T, E, r, auto)
    try:
        return _solve_highs(T, E, r, budget, time_limit_s)
    except _HighsFailed as e:
        log.warning("HiGHS: %s; using the fast solver instead", e)
        a = solve_fast(T, E, r, budget, auto)
        return Allocation(a.counts, f"fast (HiGHS fallback: {e})", a.bound_energy_j)


class _HighsFailed(Exception):
    """HiGHS returned no usable answer (infeasible within its tolerances, over budget, or an error)."""


def _solve_highs(T: np.ndarray, E: np.ndarray, r: np.ndarray, budget: float, time_limit_s: float) -> Allocation:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

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
        try:
            with _native_stdout_silenced():  # HiGHS prints debugging lines on some instances, which would break --json
                res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(n), bounds=Bounds(0, ub),
                           options={"time_limit": time_limit_s, "mip_rel_gap": 1e-9})
        except (ValueError, RuntimeError, MemoryError) as e:
            raise _HighsFailed(f"HiGHS failed: {e}") from e
        if res.x is None:
            if bound is not None:  # infeasible once tightened below a tie at the bound: see the fallback below
                break
            raise _HighsFailed(f"no solution ({res.message})")
        if bound is None:  # the first solve's bound is the one for the problem as posed
            b = getattr(res, "mip_dual_bound", None)
            bound = float(b) if b is not None and np.isfinite(b) else float(res.fun)
        counts: list[dict[int, int]] = [dict() for _ in range(K)]
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
        raise _HighsFailed(f"could not keep the time budget {budget:.9g} s within its tolerance (got {t:.9g} s)")
    return Allocation(tuple(counts), "milp (HiGHS)", bound)
