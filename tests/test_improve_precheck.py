"""The fast solver's repair pass skips a pass that would move nothing (``knapsack._can_move``, issue 15 item 7, session
12): the same allocations as the loop without the check, on random problems where moves happen and where they do
not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kdvfs.optimize.knapsack import _improve
from kdvfs.optimize.problem import Allocation


def _old_improve(T, E, r, budget, alloc):  # noqa: N803
    """``_improve`` as it was before the check (session 11)."""
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


def _case(seed: int, levels: bool, room_frac: float):
    rng = np.random.default_rng(seed)
    K, S = int(rng.integers(1, 6)), int(rng.integers(2, 9))  # noqa: N806
    if levels:  # equal times and energies: the ties the comparisons break
        T = rng.choice([1.0, 2.0, 3.0], size=(K, S))  # noqa: N806
        E = rng.choice([1.0, 2.0, 4.0], size=(K, S))  # noqa: N806
    else:
        T = rng.uniform(0.1, 2.0, size=(K, S))  # noqa: N806
        E = rng.uniform(0.1, 2.0, size=(K, S))  # noqa: N806
    r = rng.integers(1, 5, K)
    counts = []
    for k in range(K):  # each kernel's instances over one or two settings, some with a zero count
        s1, s2 = (int(x) for x in rng.integers(0, S, 2))
        n1 = int(rng.integers(0, r[k] + 1))
        c = {s1: n1}
        c[s2] = c.get(s2, 0) + int(r[k]) - n1
        counts.append(c)
    t = sum(n * T[k, s] for k, c in enumerate(counts) for s, n in c.items())
    budget = t + room_frac * float(T.max()) * 2
    return T, E, r, budget, Allocation(tuple(counts), "test", 0.0)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), levels=st.booleans(), room_frac=st.sampled_from([-0.5, 0.0, 0.1, 0.5, 2.0]))
def test_the_check_leaves_the_repair_as_it_was(seed, levels, room_frac):
    T, E, r, budget, alloc = _case(seed, levels, room_frac)  # noqa: N806
    assert _improve(T, E, r, budget, alloc).counts == _old_improve(T, E, r, budget, alloc).counts


def test_the_random_cases_move_and_stay():
    """The cases above include repairs that move instances (over one pass and more) and ones that move nothing."""
    moved = still = 0
    for seed in range(60):
        T, E, r, budget, alloc = _case(seed, seed % 2 == 0, [0.0, 0.5, 2.0][seed % 3])  # noqa: N806
        out = _old_improve(T, E, r, budget, alloc).counts
        same = [{s: n for s, n in c.items() if n} for c in alloc.counts] == [{s: n for s, n in c.items() if n}
                                                                          for c in out]
        moved += not same
        still += same
    assert moved >= 5 and still >= 5
