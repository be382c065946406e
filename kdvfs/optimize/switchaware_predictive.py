"""The predictive switch-aware DP (``kdvfs.optimize.switchaware``'s ``predictive`` mechanism), in a module of its own.

The host issues a switch ahead of the kernel it is for; a switch lands late when the kernels run between its issue and
its target are shorter than the transition, and the late part of the target kernel runs at the old setting. The DP's
state is (setting, age: kernels since the last switch was issued); a step's late fractions depend only on the
setting pair and the age, never on λ, so they are made once per search (``_late_fractions``, ``_LateSteps``) and
every plan of the bisection reuses them. Split from ``switchaware`` (session 11) because that module had grown past
the style's ~600 lines; the functions are unchanged and ``switchaware`` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.gpus import SwitchModel
from kdvfs.optimize.problem import Problem


@dataclass(frozen=True, slots=True)
class _History:
    """Every instance's states of one predictive plan, kept to the plan's end (a scratch the search's plans reuse: a
    fresh one each plan would cost its page faults). Keeping them all, rather than the instance before and this one in
    two buffers used in turn, lets the backtrack read which of the capped age's two predecessors was kept from the
    values themselves instead of a comparison made at every step (~7 % of a plan).

    Attributes:
        states: per instance, its states' values (setting, age), shape (n, S, ages).
        rows: per instance, its (S, ages) view (indexing a list is cheaper than slicing, per step).
        cap: per instance, its capped age as an (S,) view.
        age0: per instance, its age 0 as an (S,) view.
        older: per instance, its flat (setting, age) values but the last.
        newer: per instance, its flat values but the first.
    """

    states: np.ndarray
    rows: list[np.ndarray]
    cap: list[np.ndarray]
    age0: list[np.ndarray]
    older: list[np.ndarray]
    newer: list[np.ndarray]


def _history(n: int, settings: int, ages: int) -> _History:
    """A ``_History`` for ``n`` instances of ``settings`` × ``ages`` states (its values unset)."""
    states = np.empty((n, settings, ages))
    flat = states.reshape(n, -1)
    return _History(states, list(states), list(states[:, :, ages - 1]), list(states[:, :, 0]), list(flat[:, :-1]),
                    list(flat[:, 1:]))


@dataclass(frozen=True, slots=True)
class _LateSteps:
    """What the predictive DP reads of the late fractions at each step, made once per search: none of it depends on
    λ, and making it took ~0.7 ms of each ~10 ms plan.

    The product of a step's late fractions with its kernel's cost differences is most of what a step costs, and the
    same (kernel, late fractions) pair recurs: the layers of a transformer run the same kernels after the same kernels
    (on the benchmark's trace 566 of the 677 steps where a switch can land late share 60 pairs). Each plan multiplies
    each shared pair once (``_pair_products``, into ``products``), and their steps add the product; a pair of one
    step only is multiplied by its step, as before.

    Attributes:
        frac: the late fractions (``_late_fractions``), shape (n, S, ages).
        rows: per instance, its fractions as a (1, S, ages) view (indexing a list is cheaper than slicing, per step).
        age0: per instance, its age-0 fractions as a (1, S) view.
        kind: per instance, 0 where no switch can land late, 1 where one lands late only after a run of one instance
            (age 0), 2 otherwise.
        pair: per instance, its shared (kernel, late fractions) pair's row in ``pair_frac``, or −1 (none shared).
        pair_kernel: per shared pair, its kernel.
        pair_frac: per shared pair, its late fractions as a (1, S, ages) row, shape (pairs, 1, S, ages).
        products: scratch for one plan's products of the shared pairs, shape (pairs, S, S, ages) (a buffer kept
            across the search's plans: a fresh one each plan costs its page faults).
        history: scratch for one plan's states (``_History``), kept across the search's plans likewise.
    """

    frac: np.ndarray
    rows: list[np.ndarray]
    age0: list[np.ndarray]
    kind: list[int]
    pair: list[int]
    pair_kernel: np.ndarray
    pair_frac: np.ndarray
    products: np.ndarray
    history: _History


_SHARED_BYTES = 32 * 2**20
"""The most memory a search's shared products take (``_LateSteps.products``; ~1.7 MB on the benchmark's trace)."""


def _late_steps(frac_all: np.ndarray, inst: np.ndarray) -> _LateSteps:
    """``_LateSteps`` of the late fractions ``frac_all`` of the instances ``inst`` (kernel per instance)."""
    late = frac_all != 0
    later = late[:, :, 1:].any(axis=(1, 2))
    kind = np.where(later, 2, np.where(late[:, :, 0].any(axis=1), 1, 0)).tolist()
    ks = np.asarray(inst).tolist()
    n, S, A = frac_all.shape  # noqa: N806
    # pairs by the fractions' bytes: a product is shared only where its fractions are the same floats (each
    # instance's row as one bytes object, all made in one call)
    row_bytes = np.ascontiguousarray(frac_all).reshape(n, S * A).view(np.dtype((np.void, S * A * 8))).ravel().tolist()
    steps_of: dict[tuple[int, bytes], list[int]] = {}
    for i, kd in enumerate(kind):
        if kd:
            steps_of.setdefault((ks[i], row_bytes[i]), []).append(i)
    # the most used pairs first, as many as the scratch's bound allows (the rest stay with the per-step product:
    # sharing changes how a product is made, never its value)
    shared = sorted((at for at in steps_of.values() if len(at) > 1), key=len, reverse=True)
    shared = shared[:max(0, _SHARED_BYTES // (S * S * A * 8))]
    pair = [-1] * len(kind)
    first: list[int] = []
    for at in sorted(shared, key=lambda at: at[0]):
        for i in at:
            pair[i] = len(first)
        first.append(at[0])
    rows = np.array(first, dtype=np.int64)
    return _LateSteps(frac_all, list(frac_all[:, None]), list(frac_all[:, :, 0][:, None]), kind, pair,
                      np.asarray(inst, dtype=np.int64)[rows], frac_all[rows][:, None], np.empty((len(rows), S, S, A)),
                      _history(n, S, A))


def _pair_products(steps: _LateSteps, diff_rep: np.ndarray) -> list[np.ndarray]:
    """One plan's late products of the shared pairs (``_LateSteps``), written to ``steps.products``: frac·(own_old −
    own_new) from ``diff_rep`` (K, new, old, age), with the diagonal INF (staying is not a switch). These are the
    products the steps made one by one (the same operands, elementwise). A step adds its pair's product to the states'
    values: on the diagonal INF + val is the INF the step wrote there (val is never −INF or NaN), and where a fraction
    is 0, 0·diff + val is val bit for bit (val is never −0.0: it sums positive costs), as the steps that copied val
    there (age-0 steps) gave."""
    out = steps.products
    idx = np.arange(out.shape[1])
    diff_rep.take(steps.pair_kernel, axis=0, out=out, mode="clip")  # "clip": out unbuffered (the indices are valid)
    np.multiply(out, steps.pair_frac, out=out)
    out[:, idx, idx] = np.inf
    return list(out)


def _dp_predictive(pb: Problem, cand: np.ndarray, lam: float, sw: SwitchModel, ages: int = 6,
                   frac_all: np.ndarray | None = None, steps: _LateSteps | None = None) -> np.ndarray:
    """Predictive switching: a switch lands late when the run before it was shorter than the switch latency, and the
    next kernel's head then runs at the old setting. The state is (setting, instances in the current run, capped at
    ``ages``); a run's duration comes from prefix sums per setting, so the lateness of each possible switch is exact
    for runs shorter than the cap. ``frac_all`` (from ``_late_fractions``) and ``steps`` (``_late_steps`` of it) do not
    depend on λ: the bisection over λ passes them in instead of recomputing them."""
    inst = pb.trace.instances()
    T = pb.T[:, cand]
    own_all = pb.E[:, cand] + lam * T  # (K, S)
    n, S, A = len(inst), len(cand), ages
    if steps is None:
        steps = _late_steps(_late_fractions(pb, cand, sw, ages) if frac_all is None else frac_all, inst)
    INF = np.inf
    # every instance's states, each with the views a step needs made once per search (no per-step slicing or
    # allocation)
    hist = steps.history
    hist.states[0] = INF
    hist.states[0, :, 0] = own_all[inst[0]]
    # back pointers, compactly (one array per instance in a list: appending is cheaper than storing a row): a run of
    # age 0 came from the flattened (setting, age) `from_switch[i]`; a run of age a in 1 … A−2 from (same setting,
    # a − 1); the capped age from (same setting, A − 1) where that state's value was below A − 2's, else A − 2 (read
    # from the states by the backtrack)
    from_switch: list[np.ndarray] = [np.zeros(S, dtype=np.int64)]
    idx = np.arange(S)
    # per kernel: own_old − own_new for every (new, old) pair; laid out (new, old, age) so that the minimum over
    # (old, age) runs along contiguous memory. The diagonal is excluded (staying is not a switch).
    # repeated along the age axis, so that the product with the late fractions runs along (S', age) in one inner loop
    # per new setting rather than one per (new, old) pair (2.4× faster; the same products)
    diff2 = own_all[:, None, :] - own_all[:, :, None]  # (K, S, S')
    diff_rep = np.repeat(diff2[:, :, :, None], A, axis=3)  # (K, S, S', A)
    diff_k = list(diff_rep)
    diff2_k = list(diff2)
    prods = _pair_products(steps, diff_rep)
    # each kernel's own cost repeated along the ages: adding it is one contiguous pass instead of a broadcast column
    # (the same sums; ~7 % of a plan)
    own_rep = list(np.repeat(own_all[:, :, None], A, axis=2))  # K × (S, A)
    # instances where a switch can land late only after a run of one instance (age 0) and whose pair is not shared:
    # the other ages' entries are 0·diff + val = val, so the table is val copied into every row, and the product
    # added at age 0 alone, on an (S, S') slice (the same products and sums as the full table)
    frac_l, late_age0, kind, pair = steps.rows, steps.age0, steps.kind, steps.pair
    tmp = np.empty((S, S))
    self_flat = ((idx * S + idx)[:, None] * A + np.arange(A)[None, :]).ravel()  # the (s, s, ·) entries
    cost = np.empty((S, S, A))
    flat = cost.reshape(S, S * A)
    line = cost.reshape(-1)
    cost0 = cost[:, :, 0]
    row_start = idx * (S * A)
    multiply, add, minimum = np.multiply, np.add, np.minimum
    val_b, cap_b, age0_b = hist.rows, hist.cap, hist.age0
    # the growing ages as one contiguous copy: the flat (setting, age) values from position 1 on take the previous
    # instance's up to its last but one, which puts age a − 1 at age a (the age-0 entries it also writes, from the
    # setting before, are then overwritten by the switch step)
    older_b, newer_b = hist.older, hist.newer
    # instances before which no switch can land late (a quarter of the bundled RTX trace's): every switch costs the
    # state's own value there (0·diff + val is val, bit for bit), so each row's best is the first least state outside
    # its own setting's block, found without the (S, S', A) table
    ks = inst.tolist()
    argmin, take = flat.argmin, line.take  # looked up once, not per step
    switch_append = from_switch.append
    fills = np.repeat(np.arange(S * A)[:, None], S, axis=1)
    for i in range(1, n):
        k = ks[i]
        o, c = i - 1, i  # the states of the instance before and of this one
        val = val_b[o]
        newer_b[c][...] = older_b[o]  # stay: the age grows …
        if not kind[i]:
            best = _on_time_switches(val, age0_b[c], fills)
        else:
            # switching from (s', a') to s: val + frac·(own_old − own_new), (S', A) broadcast over the new settings
            if pair[i] >= 0:  # the product made once for every step of the pair, its diagonal INF
                add(prods[pair[i]], val, out=cost)
            else:
                if kind[i] == 1:
                    cost[...] = val
                    multiply(late_age0[i], diff2_k[k], out=tmp)
                    add(tmp, cost0, out=cost0)
                else:
                    multiply(frac_l[i], diff_k[k], out=cost)
                    add(cost, val, out=cost)
                line[self_flat] = INF
            best = argmin(axis=1)
            age0_b[c][...] = take(row_start + best)  # switch: a fresh run of age 0 (flat[idx, best])
        # … up to the cap: where(cap < prev, cap, prev), as minimum(cap, prev) (the same values); prev is the copy's
        minimum(cap_b[o], cap_b[c], out=cap_b[c])
        val_b[c] += own_rep[k]
        switch_append(best)
    return cand[_backtrack_history(from_switch, hist.states)]


def _backtrack_history(from_switch: list[np.ndarray], states: np.ndarray) -> np.ndarray:
    """One predictive plan's setting (candidate position) per instance, from every instance's states (``_History``),
    back through the pointers ``_dp_predictive`` kept: the capped age came from the
    capped age where ``states[i − 1, s, A − 1] < states[i − 1, s, A − 2]`` (the comparison the step's minimum made, on
    the same two values), else from age A − 2."""
    n, S, A = states.shape  # noqa: N806
    seq = np.empty(n, dtype=np.int64)
    s_, a_ = (int(x) for x in np.unravel_index(int(np.argmin(states[n - 1])), (S, A)))
    for i in range(n - 1, 0, -1):
        seq[i] = s_
        if a_ == 0:
            s_, a_ = divmod(int(from_switch[i][s_]), A)
        elif a_ < A - 1:
            a_ -= 1
        elif not states[i - 1, s_, A - 1] < states[i - 1, s_, A - 2]:
            a_ = A - 2
    seq[0] = s_
    return seq


def _on_time_switches(val: np.ndarray, out: np.ndarray, fills: np.ndarray | None = None) -> np.ndarray:
    """The predictive DP's switch step where no switch can land late (every late fraction 0): each new setting's best
    previous state (flat (setting, age) index) and, written to ``out``, its value. The full table's entry is
    0·(own_old − own_new) + val = val, so row s takes the first least state outside setting s's block: the first
    least state overall, except in that state's own row, which takes the first least of the others (INF, at index 0,
    where none is reachable, as the full table's argmin gives). ``fills``: row g holds g for every setting (copying
    a row is cheaper than ``np.full``, per step)."""
    S, A = val.shape  # noqa: N806
    vflat = val.reshape(-1)
    g = int(vflat.argmin())
    best = np.full(S, g, dtype=np.int64) if fills is None else fills[g].copy()
    out.fill(vflat[g])
    own = g // A
    rest = vflat.copy()
    rest[own * A:(own + 1) * A] = np.inf
    best[own] = j = int(rest.argmin())
    out[own] = rest[j]
    return best


_BATCH_PREDICTIVE = 8
"""Predictive plans computed together at most (``_dp_predictive_many``): their tables (K × 8 × S × S × ages and
n × 8 × S × ages floats) stay ~20 MB."""


def _dp_predictive_many(pb: Problem, cand: np.ndarray, jobs: list[tuple[float, np.ndarray]], ages: int = 6
                        ) -> list[np.ndarray]:
    """``_dp_predictive`` for several (λ, late fractions) at once, one plan each: the same dynamic programme with a
    leading batch axis, every element through the same operations as alone, so each plan is bit-identical to its own
    ``_dp_predictive``."""
    inst = pb.trace.instances()
    T = pb.T[:, cand]
    n, S, A, B, K = len(inst), len(cand), ages, len(jobs), T.shape[0]
    INF = np.inf
    own_all = np.stack([pb.E[:, cand] + lam * T for lam, _ in jobs], axis=1)  # (K, B, S)
    diff = np.empty((K, B, S, S, A))
    for j in range(B):  # as alone: own_old − own_new per (new, old), repeated along the age axis
        diff[:, j] = np.repeat(own_all[:, j, None, :, None] - own_all[:, j, :, None, None], A, axis=3)
    diff_k = list(diff)  # K × (B, S, S', A)
    own_col = list(own_all[:, :, :, None])  # K × (B, S, 1)
    frac_l = list(np.stack([f for _, f in jobs], axis=1)[:, :, None])  # n × (B, 1, S', A)
    val = np.full((B, S, A), INF)
    val[:, :, 0] = own_all[inst[0]]
    from_switch: list[np.ndarray] = [np.zeros((B, S), dtype=np.int64)]
    from_cap: list[np.ndarray] = [np.zeros((B, S), dtype=bool)]
    idx = np.arange(S)
    one = ((idx * S + idx)[:, None] * A + np.arange(A)[None, :]).ravel()  # the (s, s, ·) entries of one plan
    self_flat = (np.arange(B)[:, None] * (S * S * A) + one[None, :]).ravel()
    cost = np.empty((B, S, S, A))
    flat = cost.reshape(B, S, S * A)
    line = cost.reshape(-1)
    row_start = (np.arange(B * S) * (S * A)).reshape(B, S)
    multiply, add, less, minimum = np.multiply, np.add, np.less, np.minimum
    for i, k in enumerate(inst.tolist()):
        if i == 0:
            continue
        multiply(frac_l[i], diff_k[k], out=cost)
        add(cost, val[:, None], out=cost)
        line[self_flat] = INF
        best = flat.argmin(axis=2)
        new = np.empty((B, S, A))
        new[:, :, 0] = line.take(row_start + best)
        new[:, :, 1:A - 1] = val[:, :, :A - 2]
        cap, prev = val[:, :, A - 1], val[:, :, A - 2]
        from_cap.append(less(cap, prev))
        new[:, :, A - 1] = minimum(cap, prev)
        new += own_col[k]
        val = new
        from_switch.append(best)
    plans = []
    for j in range(B):
        seq = np.empty(n, dtype=np.int64)
        s_, a_ = (int(x) for x in np.unravel_index(int(np.argmin(val[j])), (S, A)))
        for i in range(n - 1, -1, -1):
            seq[i] = s_
            if i == 0:
                break
            if a_ == 0:
                s_, a_ = divmod(int(from_switch[i][j, s_]), A)
            elif a_ < A - 1:
                a_ -= 1
            elif not from_cap[i][j, s_]:
                a_ = A - 2
        plans.append(cand[seq])
    return plans


def _late_fractions(pb: Problem, cand: np.ndarray, sw: SwitchModel, ages: int) -> np.ndarray:
    """Per instance i ≥ 1, old setting and age of the run before it: the share of kernel i's time run at the old
    setting when a predictive switch lands late before it, shape (n, S, ages)."""
    inst = pb.trace.instances()
    T = pb.T[:, cand]
    L = sw.host_call_s + sw.transition_s
    n, S, A = len(inst), len(cand), ages
    prefix = np.vstack([np.zeros((1, S)), np.cumsum(T[inst], axis=0)])  # (n + 1, S)
    i = np.arange(n)
    ar = np.arange(A)
    # duration of the current run in each state (a + 1 instances, the cap standing for "at least")
    start = np.maximum(i[:, None] - (ar[None, :] + 1), 0)  # (n, A)
    run_t = prefix[i][:, :, None] - prefix[start].transpose(0, 2, 1)  # (n, S, A)
    late = np.maximum(0.0, L - run_t)
    return np.minimum(1.0, late / T[inst][:, :, None])
