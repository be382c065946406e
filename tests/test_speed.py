"""Fast rewrites against the slow code they replaced: same results, bit for bit (or better where a bug was fixed).

The reference implementations below are the per-instance loops as they stood before the speed work (issue 15); they
are kept here, not in the package, only to pin the rewrites to them.
"""

import dataclasses

import numpy as np
import pytest

from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize.knapsack import kernel_hulls, lower_hull, solve_fast, solve_milp
from kdvfs.optimize.problem import Allocation
from kdvfs.optimize.switchaware import _dp, _dp_predictive, candidate_settings
from kdvfs.switching import SwitchCosts

HOPPER = dataclasses.replace(get_gpu("h200").switch, spread=0.0)


def _old_dp(pb, cand, lam, sw, mechanism, costs):
    inst = pb.trace.instances()
    T = pb.T[:, cand]
    E = pb.E[:, cand]
    stall = costs.stall_s(mechanism, sw)
    stall_cost = stall * costs.idle_power_w + lam * stall
    tr = sw.host_call_s + sw.transition_s if mechanism == "predictive" else sw.transition_s
    n, S = len(inst), len(cand)
    back = np.empty((n, S), dtype=np.int32)
    k0 = inst[0]
    val = E[k0] + lam * T[k0]
    back[0] = np.arange(S)
    for i in range(1, n):
        k = inst[i]
        own = E[k] + lam * T[k]
        frac = np.minimum(1.0, tr / T[k])[:, None]
        trans = frac * (E[k][:, None] + lam * T[k][:, None]) + (1 - frac) * own[None, :] - own[None, :]
        sw_cost = val[:, None] + stall_cost + trans
        np.fill_diagonal(sw_cost, np.inf)
        best_prev = np.argmin(sw_cost, axis=0)
        best_sw = sw_cost[best_prev, np.arange(S)]
        take_stay = val <= best_sw
        back[i] = np.where(take_stay, np.arange(S), best_prev)
        val = np.where(take_stay, val, best_sw) + own
    seq = np.empty(n, dtype=np.int64)
    s = int(np.argmin(val))
    for i in range(n - 1, -1, -1):
        seq[i] = s
        s = int(back[i, s])
    return cand[seq]


def _old_dp_predictive(pb, cand, lam, sw, ages=6):
    inst = pb.trace.instances()
    T = pb.T[:, cand]
    own_all = pb.E[:, cand] + lam * T
    L = sw.host_call_s + sw.transition_s
    n, S, A = len(inst), len(cand), ages
    prefix = np.vstack([np.zeros((1, S)), np.cumsum(T[inst], axis=0)])
    val = np.full((S, A), np.inf)
    val[:, 0] = own_all[inst[0]]
    back_s = np.empty((n, S, A), dtype=np.int16)
    back_a = np.empty((n, S, A), dtype=np.int8)
    back_s[0] = np.arange(S)[:, None]
    back_a[0] = 0
    ar = np.arange(A)
    for i in range(1, n):
        k = inst[i]
        own = own_all[k]
        start = np.maximum(i - (ar + 1), 0)
        run_t = prefix[i][:, None] - prefix[start].T
        late = np.maximum(0.0, L - run_t)
        frac = np.minimum(1.0, late / T[k][:, None])
        cost = val[:, :, None] + frac[:, :, None] * (own[:, None, None] - own[None, None, :])
        idx = np.arange(S)
        cost[idx, :, idx] = np.inf
        flat = cost.reshape(S * A, S)
        best = np.argmin(flat, axis=0)
        best_val = flat[best, idx]
        new = np.full((S, A), np.inf)
        bs = np.empty((S, A), dtype=np.int16)
        ba = np.empty((S, A), dtype=np.int8)
        new[:, 1:] = val[:, :-1]
        bs[:, 1:] = idx[:, None]
        ba[:, 1:] = ar[None, :-1]
        cap = val[:, A - 1]
        better = cap < new[:, A - 1]
        new[:, A - 1] = np.where(better, cap, new[:, A - 1])
        ba[:, A - 1] = np.where(better, A - 1, ba[:, A - 1])
        new[:, 0] = best_val
        bs[:, 0] = best // A
        ba[:, 0] = best % A
        val = new + own[:, None]
        back_s[i], back_a[i] = bs, ba
    seq = np.empty(n, dtype=np.int64)
    s_, a_ = np.unravel_index(int(np.argmin(val)), val.shape)
    for i in range(n - 1, -1, -1):
        seq[i] = s_
        s_, a_ = int(back_s[i, s_, a_]), int(back_a[i, s_, a_])
    return cand[seq]


def _old_to_schedule_index(pb, alloc):
    inst = pb.trace.instances()
    seen = np.zeros(len(pb.r), dtype=np.int64)
    seqs = []
    for cnt in alloc.counts:
        seq = []
        for s in sorted(cnt, key=lambda s: -cnt[s]):
            seq += [s] * cnt[s]
        seqs.append(seq)
    sidx = np.empty(len(inst), dtype=np.int64)
    for i, k in enumerate(inst):
        sidx[i] = seqs[k][seen[k]]
        seen[k] += 1
    return sidx


@pytest.mark.parametrize("mechanism", ["sync", "callback"])
@pytest.mark.parametrize("sw", [HOPPER, SwitchModel.from_latency(2e-5)], ids=["hopper", "20us"])
def test_dp_is_the_per_instance_loop_it_replaced(spaan_problem, mechanism, sw):
    pb = spaan_problem
    cand = candidate_settings(pb)
    costs = SwitchCosts(sync_overhead_s=1e-5, callback_overhead_s=5e-6)
    lam0 = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    switches = 0
    for lam in (lam0 / 16, lam0):
        new = _dp(pb, cand, lam, sw, mechanism, costs)
        assert np.array_equal(new, _old_dp(pb, cand, lam, sw, mechanism, costs))
        switches += int((np.diff(new) != 0).sum())
    if sw is not HOPPER:
        assert switches > 0  # plans that switch: the comparison covers the switching branch


def test_predictive_dp_is_the_per_instance_loop_it_replaced(spaan_problem):
    pb = spaan_problem
    cand = candidate_settings(pb)[:24]
    lam0 = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    switches = 0
    for lam in (lam0 / 16, lam0):
        new = _dp_predictive(pb, cand, lam, HOPPER)
        assert np.array_equal(new, _old_dp_predictive(pb, cand, lam, HOPPER))
        switches += int((np.diff(new) != 0).sum())
    assert switches > 0


def test_allocation_expansion_is_the_loop_it_replaced(spaan_problem):
    pb = spaan_problem
    rng = np.random.default_rng(3)
    counts = []
    for n in pb.r.tolist():  # random splits of every kernel's instances over up to three settings
        cut = np.sort(rng.integers(0, n + 1, 2))
        parts = [cut[0], cut[1] - cut[0], n - cut[1]]
        st = rng.choice(len(pb.profile.settings), 3, replace=False)
        counts.append({int(s): int(c) for s, c in zip(st, parts) if c})
    alloc = Allocation(tuple(counts), "test")
    assert np.array_equal(pb.allocation_setting_index(alloc), _old_to_schedule_index(pb, alloc))
    # one setting per kernel (the lookup), also where a count exceeds the kernel's instances
    one = Allocation(tuple({int(rng.integers(len(pb.profile.settings))): n + (k % 2)}
                           for k, n in enumerate(pb.r.tolist())), "test")
    new = pb.allocation_setting_index(one)
    assert new.dtype == np.int64 and np.array_equal(new, _old_to_schedule_index(pb, one))
    short = Allocation(tuple({0: n - (k == 5)} for k, n in enumerate(pb.r.tolist())), "test")
    with pytest.raises(ValueError, match="fewer instances"):
        pb.allocation_setting_index(short)


def test_kernel_hulls_are_lower_hull_per_row_and_shared(spaan_problem):
    pb = spaan_problem
    h = kernel_hulls(pb.T, pb.E)
    assert all(np.array_equal(h[k], lower_hull(pb.T[k], pb.E[k])) for k in range(len(pb.r)))
    assert kernel_hulls(pb.T.copy(), pb.E.copy()) is h  # keyed by contents, not identity
    with pytest.raises(ValueError):
        h[0][0] = 1  # shared: read-only


@pytest.mark.slow
def test_fast_solver_within_a_hundredth_of_a_percent_of_the_milp(spaan_problem):
    pb = spaan_problem
    for slack in (0.0, 1.0, 2.0, 5.0, 10.0):
        budget = pb.budget(slack)
        tf, ef = pb.evaluate(solve_fast(pb.T, pb.E, pb.r, budget))
        _, em = pb.evaluate(solve_milp(pb.T, pb.E, pb.r, budget))
        assert tf <= budget * (1 + 1e-12)
        assert ef <= em * (1 + 1e-4), f"slack {slack} %: fast {ef} J vs MILP {em} J"


def test_unique_pairs_is_numpy_unique_over_rows():
    from kdvfs.arrays import unique_pairs

    rng = np.random.default_rng(5)
    for a, b in ((rng.integers(0, 4, 500), rng.integers(0, 3, 500)),  # many short runs
                 (np.repeat([5, 0, 5, 2], 50), np.repeat([1, 0, 1, 9], 50)),  # few long runs, a pair recurring
                 (np.array([-1, 3, -1]), np.array([2**40, 0, 2**40]))):  # outside the packed range
        pairs, inv = unique_pairs(a, b)
        ref, ref_inv = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
        assert pairs == [tuple(p) for p in ref.tolist()]
        assert np.array_equal(inv, ref_inv.ravel())
    pairs, inv = unique_pairs([], [])
    assert pairs == [] and len(inv) == 0


def _old_lower_hull(t, e):
    """``lower_hull`` as it stood before it read the front's values as Python floats (b493a4d)."""
    from kdvfs.optimize.knapsack import pareto_front

    pf = pareto_front(t, e)
    hull: list[int] = []
    for i in pf:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (e[b] - e[a]) * (t[i] - t[a]) >= (e[i] - e[a]) * (t[b] - t[a]):
                hull.pop()
            else:
                break
        hull.append(int(i))
    return np.array(hull, dtype=np.int64)


def test_lower_hull_is_the_loop_it_replaced(spaan_problem):
    rng = np.random.default_rng(0)
    rows = [(spaan_problem.T[k], spaan_problem.E[k]) for k in range(spaan_problem.T.shape[0])]
    for _ in range(400):
        n = int(rng.integers(1, 30))
        t, e = rng.random(n), rng.random(n)
        if rng.random() < 0.4:  # ties in time, energy or both
            t, e = np.round(t, 1), np.round(e, 1)
        rows.append((t, e))
    for t, e in rows:
        new, old = lower_hull(t, e), _old_lower_hull(t, e)
        assert new.dtype == old.dtype and np.array_equal(new, old)


def _old_solve_fast_walk(T, E, r, budget):
    """``knapsack._solve_fast`` as it stood before its walk read Python floats (b493a4d), ``_improve`` left out."""
    from kdvfs.optimize.knapsack import _Hulls

    K = T.shape[0]
    hulls = kernel_hulls(T, E)
    pos = [0] * K
    t_tot = float(sum(r[k] * T[k, hulls[k][0]] for k in range(K)))
    segs = hulls.sorted_segments(T, E) if isinstance(hulls, _Hulls) else _Hulls(hulls).sorted_segments(T, E)
    counts = [dict({int(hulls[k][0]): int(r[k])}) for k in range(K)]
    lam = 0.0
    stopped = [False] * K
    for rate, k, j in segs:
        if pos[k] != j or stopped[k]:
            continue
        a, b = int(hulls[k][j]), int(hulls[k][j + 1])
        dt = T[k, b] - T[k, a]
        room = budget - t_tot
        n_all = int(r[k])
        if n_all * dt <= room + 1e-15:
            counts[k] = {b: n_all}
            t_tot += n_all * dt
            pos[k] = j + 1
            continue
        n = int(np.floor(room / dt + 1e-12)) if dt > 0 else n_all
        if n > 0:
            counts[k] = {a: n_all - n, b: n}
            t_tot += n * dt
        if lam == 0.0:
            lam = rate
        stopped[k] = True
    if lam > 0:
        bound = float(sum(r[k] * np.min(E[k] + lam * T[k]) for k in range(K)) - lam * budget)
    else:
        bound = float(sum(r[k] * np.min(E[k]) for k in range(K)))
    return Allocation(tuple(counts), "fast (Lagrangian hull + repair)", bound)


def test_fast_solver_walk_is_the_loop_it_replaced(spaan_problem, monkeypatch):
    import kdvfs.optimize.knapsack as ks

    monkeypatch.setattr(ks, "_improve", lambda T, E, r, budget, alloc: alloc)  # the walk alone
    pb = spaan_problem
    lo = 100 * (pb.fastest_time_s / pb.auto_time_s - 1)
    cases = [(pb.T, pb.E, pb.r, pb.budget(s)) for s in np.concatenate([np.linspace(lo + 1e-6, 0, 6), [0.5, 2, 10, 40]])]
    rng = np.random.default_rng(0)
    for _ in range(150):
        K, S = int(rng.integers(1, 12)), int(rng.integers(1, 15))
        T, E, r = rng.random((K, S)) + 0.1, rng.random((K, S)), rng.integers(1, 30, K)
        if rng.random() < 0.3:  # ties
            T, E = np.round(T, 1), np.round(E, 1)
        cases.append((T, E, r, float(r @ T.min(axis=1)) * (1 + rng.random() * 0.5)))
    for T, E, r, b in cases:
        new, old = ks._solve_fast(T, E, r, b), _old_solve_fast_walk(T, E, r, b)
        assert [list(c.items()) for c in new.counts] == [list(c.items()) for c in old.counts]
        assert new.bound_energy_j == old.bound_energy_j and new.solver == old.solver


def _old_candidate_settings(pb, limit):
    """``switchaware._candidate_settings`` as it stood before it summed Python floats (b493a4d)."""
    votes = {pb.auto: np.inf}
    for k, hull in enumerate(kernel_hulls(pb.T, pb.E)):
        for s in hull:
            votes[int(s)] = votes.get(int(s), 0.0) + pb.r[k] * pb.E[k, pb.auto]
    order = sorted(votes, key=lambda s: -votes[s])
    return np.array(order[:limit], dtype=np.int64)


@pytest.mark.parametrize("name", ["gpt3xl-llmc-rtx3080ti", "gpt3xl-torch-h200-bf16", "gpt3xl-torch-h200-fp32"])
def test_candidate_settings_are_the_votes_they_replaced(name):
    from kdvfs.bundled import load_trace_by_name, resolve_profile_path
    from kdvfs.optimize import Problem
    from kdvfs.optimize.switchaware import _candidate_settings
    from kdvfs.profile import load_profile

    pb = Problem(load_trace_by_name(name), load_profile(resolve_profile_path(name)))
    for limit in (24, 48, 10_000):
        assert np.array_equal(_candidate_settings(pb, limit), _old_candidate_settings(pb, limit))
