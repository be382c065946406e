"""One sync or callback switch-aware plan (``kdvfs.optimize.switchaware``'s ``_dp``) with a cheaper step where the
step's answer is provably the same for every new setting.

A step of the DP takes, for every new setting n, the previous setting o least in ``c[n, o] = (val[o] + stall) +
trans[n, o]``: a 48 × 48 table per instance. With ``f[o]`` the share of the kernel run at the old setting during the
transition (``min(1, transition / T[o])``), ``trans[n, o]`` is ``f[o]·(own[o] − own[n])`` up to rounding, so the rows
differ only by ``−f[o]·own[n]``: on 99 % of the benchmark trace's steps every row but one takes the same o*. The step
here finds that o* on a 48-vector, proves it is every other row's unique least with a margin far above the rounding
of the table (below), and then needs only row o*'s column of the table: seven calls on 48-vectors instead of three
passes over the 48 × 48 table. Where the proof fails (near-ties, or rows that really differ) the step is the full
table, so the plan is the full DP's bit for bit: the same values in every state and every back pointer the backtrack
reads (``tests/test_sync_onestep.py`` checks it against ``_dp_many`` on random problems with exact ties).

**The proof.** Let ``G[o] = val[o] + stall + f[o]·(own[o] − lo)`` with ``lo``, ``hi`` the kernel's least and
largest own cost over the candidates. For a row n ≠ o*, ``c[n, o] − c[n, o*] = G[o] − G[o*] − (f[o] − f[o*])·(own[n]
− lo)`` in exact arithmetic, and the last term is at most ``W[o*, o] = max(0, f[o] − f[o*])·(hi − lo)``. So when
``min over o ≠ o* of (G[o] − W[o*, o]) − G[o*]`` exceeds every rounding error of the table, its sums and of G
itself, o* is row n's unique least (``c[n, n]`` is INF), and ``argmin`` gives it whatever its tie order. The errors
are a few units in the last place of ``|G[o*]| + 2·max|own| + stall`` (an entry of the table is three roundings of
values that large; an o whose G is far larger has a margin that grows with it): the margin asked for is 2⁻³⁶ of
that, ~10⁴ times more. The same bound shows row o* stays (its every switch costs more than ``val[o*] + stall``), and
``trans[o*, o*]`` is INF, so the column written for row o* leaves it staying, as the full step does (its best switch
is read only where it is below staying).
"""

from __future__ import annotations

import logging

import numpy as np

from kdvfs.gpus import SwitchModel
from kdvfs.optimize.problem import Problem
from kdvfs.switching import SwitchCosts

log = logging.getLogger(__name__)

_MARGIN = 2.0**-36
"""The least relative margin (of ``|G[o*]| + 2·max|own| + stall``) by which o* must win for the cheap step."""


def _share_gaps(pb: Problem, cand: np.ndarray, transition_s: float) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The kernels whose share f differs between candidates, as a slot per kernel (−1 where f is the same at every
    candidate: their W is 0 off the diagonal) and as indices, and for those kernels ``max(0, f[o] − f[o*])`` as
    (slot, o*, o). It depends on neither λ nor the costs, so a search's plans share it (memoised on the problem)."""

    def make() -> tuple[list[int], np.ndarray, np.ndarray]:
        f = np.minimum(1.0, transition_s / pb.T[:, cand])
        uneven = np.flatnonzero(~(f == f[:, :1]).all(axis=1))
        slot = np.full(len(f), -1, dtype=np.int64)
        slot[uneven] = np.arange(len(uneven))
        fu = f[uneven]
        gaps = np.maximum(fu[:, None, :] - fu[:, :, None], 0.0)
        gaps.setflags(write=False)
        return slot.tolist(), uneven, gaps

    return pb.memo(("sync-share-gaps", cand.tobytes(), float(transition_s)), make)


def _transition_table_t(T: np.ndarray, E: np.ndarray, lam: float, transition_s: float,  # noqa: N803
                        out: np.ndarray) -> None:
    """``switchaware._transition_table`` laid out (kernel, old, new), written to ``out``: the same operations on the
    same operands element for element (only the broadcasts run along the other axis), so the same floats, and a
    contiguous write instead of a strided one."""
    ar = np.arange(T.shape[1])
    own = E + lam * T  # (K, S)
    frac = np.minimum(1.0, transition_s / T)  # (K, S_old)
    np.multiply((1 - frac)[:, :, None], own[:, None, :], out=out)
    np.add((frac * (E + lam * T))[:, :, None], out, out=out)
    np.subtract(out, own[:, None, :], out=out)
    out[:, ar, ar] = np.inf  # staying is not a switch


def dp_one(pb: Problem, cand: np.ndarray, lam: float, sw: SwitchModel, mechanism: str,
           costs: SwitchCosts) -> np.ndarray:
    """The setting index per instance of one sync/callback plan: ``_dp_many``'s plan for this one job, bit for bit."""
    inst = pb.trace.instances()
    T, E = pb.T[:, cand], pb.E[:, cand]  # noqa: N806
    n, S, K = len(inst), len(cand), T.shape[0]
    stall = costs.stall_s(mechanism, sw)
    st = stall * costs.idle_power_w + lam * stall
    own = E + lam * T  # as ``_dp_many`` and the transition table compute it
    tr = sw.host_call_s + sw.transition_s if mechanism == "predictive" else sw.transition_s
    # the table laid out (kernel, old, new): row o* of a kernel is then the contiguous column the cheap step reads
    trans_t = np.empty((K, S, S))
    _transition_table_t(T, E, lam, tr, trans_t)
    f = np.minimum(1.0, tr / T)
    lo, hi = own.min(axis=1), own.max(axis=1)
    g_add = list(f * own - f * lo[:, None] + st)  # G = val + g_add[k]
    # W for the kernels whose share differs between candidates; the others (most often f = 1 everywhere: the
    # transition outlasts the kernel) have W 0 but on the diagonal, so G with INF at o* is the minimum's operand
    slot, uneven, gaps = _share_gaps(pb, cand, tr)
    bound = gaps * (hi - lo)[uneven][:, None, None]  # W, (slot, o*, o)
    ar = np.arange(S)
    bound[:, ar, ar] = -np.inf  # o* itself is left out of the minimum (set after the product: 0·INF is NaN)
    scale = (2 * np.maximum(np.abs(lo), np.abs(hi)) + abs(st)).tolist()
    # a non-finite cost leaves the proof's arithmetic (INF − INF): every step is then the full table
    margin = _MARGIN if np.isfinite(own).all() and np.isfinite(st) else np.inf
    own_list, trans_list = list(own), list(trans_t)
    ks = inst.tolist()
    val = own_list[ks[0]].copy()
    # back pointers as ``_dp_many`` keeps them, except that a cheap step keeps its o* (an integer: every switching row
    # came from it) instead of an array
    from_prev: list[np.ndarray | np.intp] = [np.intp(0)]
    vals: list[np.ndarray] = [val]
    best_sws: list[np.ndarray] = [val]  # instance 0 has no predecessor: never read
    cost = np.empty((S, S))
    column = np.empty((S, 1))
    flat = cost.reshape(-1)
    room = np.empty(S)
    head = np.empty(1)
    add, subtract, minimum, inf = np.add, np.subtract, np.minimum, np.inf
    prev_append, best_append, val_append = from_prev.append, best_sws.append, vals.append
    full = 0
    for k in ks[1:]:
        g = add(val, g_add[k])
        o = g.argmin()
        g_o = g.item(o)
        at = slot[k]
        if at < 0:
            g[o] = inf
            least = g.item(g.argmin())
        else:
            subtract(g, bound[at, o], out=room)
            least = room.item(room.argmin())
        if least - g_o > (abs(g_o) + scale[k]) * margin:
            head[0] = val.item(o) + st  # val + stall at o*, as the full step's sum (Python floats are IEEE doubles)
            best_sw = add(trans_list[k][o], head)
            prev_append(o)
        else:  # the full step, on the (old, new) table: argmin down each column is the first least old setting
            full += 1
            add(val, st, out=column[:, 0])
            add(column, trans_list[k], out=cost)
            best_prev = cost.argmin(axis=0)
            best_sw = flat.take(best_prev * S + ar)
            prev_append(best_prev)
        best_append(best_sw)
        val = minimum(val, best_sw)
        val += own_list[k]
        val_append(val)
    log.debug("sync plan at lambda %.6g: %d of %d steps took the full table", lam, full, n - 1)
    seq = np.empty(n, dtype=np.int64)
    s = int(np.argmin(val))
    for i in range(n - 1, 0, -1):
        seq[i] = s
        if not vals[i - 1][s] <= best_sws[i][s]:
            p = from_prev[i]
            s = int(p[s]) if isinstance(p, np.ndarray) else int(p)
    seq[0] = s
    return cand[seq]
