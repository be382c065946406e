"""``_Hulls.sorted_segments`` takes every hull's segments at once: the same segments, in the same order, as the
loop it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from kdvfs.optimize import knapsack
from kdvfs.optimize.knapsack import _Hulls, kernel_hulls, lower_hull


def _old_segments(hulls, T, E):  # noqa: N803
    """``sorted_segments`` as it stood before (d262411): one kernel, then one segment, at a time."""
    segs = []
    for k, h in enumerate(hulls):
        th, eh = T[k, h].tolist(), E[k, h].tolist()
        for j in range(len(h) - 1):
            dt = th[j + 1] - th[j]
            de = eh[j] - eh[j + 1]
            segs.append((de / max(dt, 1e-300), k, j))
    segs.sort(key=lambda x: -x[0])
    return segs


def _tables(seed: int, K: int, S: int, ties: bool):  # noqa: N803
    rng = np.random.default_rng(seed)
    if ties:  # few distinct values: equal times, equal energies and equal rates between kernels
        T = rng.integers(1, 6, (K, S)).astype(float) * 1e-3
        E = rng.integers(1, 6, (K, S)).astype(float)
        T[1::2] = T[0]  # whole rows alike: equal segment rates across kernels
        E[1::2] = E[0]
    else:
        T = rng.uniform(1e-4, 1e-2, (K, S))
        E = rng.uniform(0.1, 5.0, (K, S))
    return T, E


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
def test_segments_are_the_loop_they_replaced(seed, ties):
    knapsack._HULL_CACHE.clear()
    T, E = _tables(seed, 9 + seed, 1 + 7 * seed, ties)
    hulls = kernel_hulls(T, E)
    assert all(np.array_equal(h, lower_hull(T[k], E[k])) for k, h in enumerate(hulls))
    assert isinstance(hulls, _Hulls)
    new = hulls.sorted_segments(T, E)
    old = _old_segments(list(hulls), T, E)
    assert new == old and all(type(a) is type(b) for x, y in zip(new, old) for a, b in zip(x, y))


def test_bundled_problem_segments_are_the_loop_they_replaced(spaan_problem):
    knapsack._HULL_CACHE.clear()
    pb = spaan_problem
    hulls = kernel_hulls(pb.T, pb.E)
    assert hulls.sorted_segments(pb.T, pb.E) == _old_segments(list(hulls), pb.T, pb.E)


def test_degenerate_tables():
    knapsack._HULL_CACHE.clear()
    for T, E in ((np.zeros((0, 4)), np.zeros((0, 4))), (np.ones((3, 1)), np.ones((3, 1)))):
        hulls = kernel_hulls(T, E)
        assert len(hulls) == T.shape[0]
        assert hulls.sorted_segments(T, E) == _old_segments(list(hulls), T, E) == []


def test_hulls_given_to_the_fast_solver_change_nothing_and_are_found_once(spaan_problem, monkeypatch):
    """``solve_fast(..., hulls=kernel_hulls(T, E))`` is ``solve_fast(...)``; a problem's kernel-level waste
    allocations look its hulls up once (``problem_hulls``), not once per slack."""
    from kdvfs.optimize import Problem, granularity

    pb = spaan_problem
    for slack in (-1.0, 0.0, 2.0):
        b = pb.budget(slack)
        given = knapsack.solve_fast(pb.T, pb.E, pb.r, b, auto=pb.auto, hulls=kernel_hulls(pb.T, pb.E))
        assert given == knapsack.solve_fast(pb.T, pb.E, pb.r, b, auto=pb.auto)
    calls = []
    real = knapsack.kernel_hulls
    monkeypatch.setattr(granularity, "kernel_hulls", lambda T, E: calls.append(1) or real(T, E))
    monkeypatch.setattr(knapsack, "kernel_hulls", lambda T, E: calls.append(1) or real(T, E))
    fresh = Problem(pb.trace, pb.profile)
    for slack in (-1.0, -0.5, 0.0, 1.0):
        granularity.allocate(fresh, "waste", slack, "kernel", "global")
    assert len(calls) == 1
