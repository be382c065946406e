"""Where one plan of the switch-aware DP spends its time, operation by operation: ``python benchmarks/dp_step_costs.py``.

On the benchmark's problem (GPT-3 XL llm.c, 897 instances, RTX 3080 Ti profile, Hopper switch model, λ = the search's
first), runs the loop of ``_dp_many`` (sync, one plan, 48 settings) and of ``_dp_predictive`` (24 settings × 6 run
ages) as the package writes them, with ``perf_counter_ns`` around each numpy call, and prints each operation's share
of a plan (the minimum over 5 plans; the timers themselves add ~0.1 µs a call). The loops below copy the package's
step for step; ``main`` checks that they return the package's plans, so they cannot drift from it unnoticed.

Nothing here changes the planner; it reads its private pieces.
"""

from __future__ import annotations

import os
from time import perf_counter_ns as clock

import numpy as np
import workloads as w

import kdvfs.optimize.switchaware as sa
import kdvfs.optimize.switchaware_predictive as sp
from kdvfs.switching import SwitchCosts


def _sync(pb, cand, lam, costs, acc: dict[str, float]) -> np.ndarray:
    inst = pb.trace.instances()
    S = len(cand)  # noqa: N806
    stall = costs.stall_s("sync", w.HOPPER)
    st = stall * costs.idle_power_w + lam * stall
    own = pb.E[:, cand] + lam * pb.T[:, cand]
    trans = np.empty((own.shape[0], S, S))
    sa._transition_table(pb, cand, lam, w.HOPPER, "sync", trans)
    trans_l, own_l, ks = list(trans), list(own), inst.tolist()
    val = own_l[ks[0]].copy()
    from_prev, vals, best_sws = [np.arange(S)], [val], [val]
    sw_cost, from_val = np.empty((S, S)), np.empty((S, S))
    flat, row_start = sw_cost.reshape(-1), np.arange(S) * S
    for k in ks[1:]:
        t0 = clock()
        from_val[...] = val + st
        t1 = clock()
        np.add(from_val, trans_l[k], out=sw_cost)
        t2 = clock()
        best_prev = sw_cost.argmin(axis=-1)
        t3 = clock()
        best_sw = flat.take(row_start + best_prev)
        t4 = clock()
        val = np.minimum(val, best_sw)
        val += own_l[k]
        t5 = clock()
        from_prev.append(best_prev)
        best_sws.append(best_sw)
        vals.append(val)
        t6 = clock()
        for name, dt in (("val + stall into every row", t1 - t0), ("add the transition table", t2 - t1),
                         ("argmin per row", t3 - t2), ("take the row minima", t4 - t3),
                         ("stay or switch, add own", t5 - t4), ("back pointers", t6 - t5)):
            acc[name] = acc.get(name, 0.0) + dt
    return cand[sa._backtrack(vals, best_sws, from_prev, int(np.argmin(val)))]


def _predictive(pb, cand, lam, steps, acc: dict[str, float]) -> np.ndarray:
    inst = pb.trace.instances()
    own_all = pb.E[:, cand] + lam * pb.T[:, cand]
    n, S, A = len(inst), len(cand), steps.frac.shape[2]  # noqa: N806
    bufs = np.empty((2, S, A))
    bufs[0] = np.inf
    bufs[0, :, 0] = own_all[inst[0]]
    idx = np.arange(S)
    diff2 = own_all[:, None, :] - own_all[:, :, None]
    diff_rep = np.repeat(diff2[:, :, :, None], A, axis=3)
    diff_k, diff2_k = list(diff_rep), list(diff2)
    t = clock()
    prods = sp._pair_products(steps, diff_rep)  # the shared pairs' products, once per plan
    acc["shared pairs' products (once a plan)"] = acc.get("shared pairs' products (once a plan)", 0.0) + clock() - t
    fills = np.repeat(np.arange(S * A)[:, None], S, axis=1)
    own_rep = list(np.repeat(own_all[:, :, None], A, axis=2))
    self_flat = ((idx * S + idx)[:, None] * A + np.arange(A)[None, :]).ravel()
    cost, tmp = np.empty((S, S, A)), np.empty((S, S))
    flat, line, cost0, row_start = cost.reshape(S, S * A), cost.reshape(-1), cost[:, :, 0], idx * (S * A)
    val_b, cap_b, age0_b = list(bufs), list(bufs[:, :, A - 1]), list(bufs[:, :, 0])
    older_b, newer_b = list(bufs.reshape(2, -1)[:, :-1]), list(bufs.reshape(2, -1)[:, 1:])
    from_switch, from_cap = [np.zeros(S, dtype=np.int64)], [np.zeros(S, dtype=bool)]
    ks = inst.tolist()
    for i in range(1, n):
        k, o, c = ks[i], (i - 1) & 1, i & 1
        val = val_b[o]
        t0 = clock()
        newer_b[c][...] = older_b[o]
        t1 = clock()
        kind = steps.kind[i]
        if not kind:
            best = sa._on_time_switches(val, age0_b[c], fills)
            t2 = t3 = t4 = clock()
        else:
            if steps.pair[i] >= 0:
                np.add(prods[steps.pair[i]], val, out=cost)
            else:
                if kind == 1:
                    cost[...] = val
                    np.multiply(steps.age0[i], diff2_k[k], out=tmp)
                    np.add(tmp, cost0, out=cost0)
                else:
                    np.multiply(steps.rows[i], diff_k[k], out=cost)
                    np.add(cost, val, out=cost)
                line[self_flat] = np.inf
            t2 = clock()
            best = flat.argmin(axis=1)
            t3 = clock()
            age0_b[c][...] = line.take(row_start + best)
            t4 = clock()
        from_cap.append(np.less(cap_b[o], cap_b[c]))
        np.minimum(cap_b[o], cap_b[c], out=cap_b[c])
        t5 = clock()
        val_b[c] += own_rep[k]
        from_switch.append(best)
        t6 = clock()
        table = ("switch table, on time (no late fraction)" if not kind else
                 "switch table, a shared pair's product + val" if steps.pair[i] >= 0 else
                 "switch table, late at age 0 only" if kind == 1 else "switch table, late at older ages")
        for name, dt in (("ages grow (copy)", t1 - t0), (table, t2 - t1), ("argmin per row", t3 - t2),
                         ("take the row minima", t4 - t3), ("capped age (less, minimum)", t5 - t4),
                         ("add own, back pointer", t6 - t5)):
            acc[name] = acc.get(name, 0.0) + dt
    return cand[_backtrack_predictive(from_switch, from_cap, val_b[(n - 1) & 1])]


def _backtrack_predictive(from_switch: list[np.ndarray], from_cap: list[np.ndarray], last: np.ndarray) -> np.ndarray:
    """Session 12's backtrack of one predictive plan (the library keeps every instance's states instead,
    ``switchaware_predictive._backtrack_history``): the setting per instance, from the least state of the last instance
    (``last``, shape (S, ages)) back through the pointers the loop kept."""
    n, (S, A) = len(from_switch), last.shape  # noqa: N806
    seq = np.empty(n, dtype=np.int64)
    s_, a_ = (int(x) for x in np.unravel_index(int(np.argmin(last)), (S, A)))
    for i in range(n - 1, 0, -1):
        seq[i] = s_
        if a_ == 0:
            s_, a_ = divmod(int(from_switch[i][s_]), A)
        elif a_ < A - 1:
            a_ -= 1
        elif not from_cap[i][s_]:
            a_ = A - 2
    seq[0] = s_
    return seq


def _report(title: str, runs: list[dict[str, float]]) -> None:
    best = min(runs, key=lambda r: sum(r.values()))
    total = sum(best.values())
    print(f"{title}: {total / 1e6:.2f} ms of timed operations a plan (minimum of {len(runs)})")
    for name, ns in sorted(best.items(), key=lambda x: -x[1]):
        print(f"  {name:44s} {ns / 1e6:6.2f} ms  {100 * ns / total:4.1f} %")


def main() -> None:
    pb = w.spaan_problem()
    costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
    lam = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    cand = sa.candidate_settings(pb)
    runs: list[dict[str, float]] = []
    for _ in range(5):
        runs.append({})
        plan = _sync(pb, cand, lam, costs, runs[-1])
    assert np.array_equal(plan, sa._dp(pb, cand, lam, w.HOPPER, "sync", costs)), "the copy drifted from _dp_many"
    _report("sync, 897 steps of a 48 × 48 table", runs)
    cand24 = cand[:24]
    steps = sa._late_steps(sa._late_fractions(pb, cand24, w.HOPPER, 6), pb.trace.instances())
    runs = []
    for _ in range(5):
        runs.append({})
        plan = _predictive(pb, cand24, lam, steps, runs[-1])
    assert np.array_equal(plan, sa._dp_predictive(pb, cand24, lam, w.HOPPER, 6, None, steps)), "drifted"
    kinds = np.bincount(steps.kind[1:], minlength=3).tolist()
    shared = sum(p >= 0 for p in steps.pair[1:])
    _report(f"predictive, 897 steps of a 24 × 24 × 6 table ({kinds[0]} on time, {kinds[1]} late at age 0 only, "
            f"{kinds[2]} late at older ages; {shared} of the late ones share {len(steps.pair_kernel)} pairs)", runs)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
