"""Whole passes as mixed steps under the card's power limiter, in its steady state (issue 11, session 10).

The study's per-kernel table measured each kernel alone: a kernel held for longer than the limiter's window throttles
against the cap by itself (``kdvfs.model.evaluate``). Its pass-level sweep measured whole passes with every kernel
locked to one setting: there the driver holds the *average* power of the mix at the cap by moving one clock ceiling for
whatever runs (``kdvfs.limiter``, DESIGN.md "the power limiter"), so the memory-bound kernels' unused power buys clock
for the GEMMs beside them. With locked clocks the ceiling can only lower a kernel's core clock below the requested one.

For a pass repeated many times the ceiling settles at f*, where the pass's average power equals the cap
(``kdvfs.limiter.steady_state``). Here f* is continuous (the driver dithers between bins, as the isolated throttle of
``kdvfs.model.evaluate`` assumes too) and solved for every pass and setting at once, so that a least-squares fit can call
it thousands of times. In a steady state the window, gain and slew do not enter; ``simulator.pass_limiter`` runs the
same passes through the discrete-time controller with a window to see how far a finite window moves them.

Everything here is off unless asked for (``--fit-option structure=limiter``); the isolated-and-summed model is
unchanged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.model import KernelParams, evaluate

__all__ = ["PassLimit", "at_ceilings", "pass_table2", "replaced_sums", "solve_passes"]

log = logging.getLogger(__name__)

_TOL_MHZ = 1e-9  # f* to well below what a finite-difference Jacobian step moves it by
_DF_MHZ = 1e-3  # step of the derivative along the ceiling (the pass sums are smooth in it)


@dataclass(frozen=True, slots=True)
class PassLimit:
    """Each pass at each setting in the limiter's steady state.

    Attributes:
        ceiling_mhz: f*, shape (2, settings): the clock ceiling (forward, backward); the requested core clock (the
            boost clock for auto) where the pass stays under the cap there.
        limited: shape (2, settings): whether the cap binds (f* below the request).
        time_s, energy_j: shape (kernels, settings): one invocation of each kernel as it runs in its own pass.
        dtime_df, denergy_df: their derivatives along the ceiling at f*, per MHz; zero where the cap does not bind.
        cap_w: the average power held.
    """

    ceiling_mhz: np.ndarray
    limited: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    dtime_df: np.ndarray
    denergy_df: np.ndarray
    cap_w: float


def _requests(spec: GpuSpec, core_mhz: np.ndarray) -> np.ndarray:
    """The core clock each setting asks for, numerically (auto → the boost clock)."""
    c = np.asarray(core_mhz, dtype=float)
    return np.where(c == AUTO, spec.boost_core_mhz, np.minimum(c, spec.boost_core_mhz))


def _under(core_mhz, req_mhz, f_mhz):
    """A request under ceiling f: unchanged where f reaches it (auto stays auto, for the auto-memory terms), else f."""
    return np.where(f_mhz >= req_mhz, core_mhz, np.minimum(req_mhz, f_mhz))


def _eval_at(spec, params, kern, core, mem, req, f):
    ev = evaluate(spec, params, _under(core, req, f), mem, kernel_index=kern, cap_w=float("inf"))
    return ev.time_s, ev.energy_j


def solve_passes(spec: GpuSpec, params: KernelParams, core_mhz, mem_mhz, weights: np.ndarray,
                 cap_w: float | None = None) -> PassLimit:
    """f* for every pass and setting, and every kernel's time and energy as it runs there.

    Args:
        spec, params: the card and its kernels.
        core_mhz, mem_mhz: the requested settings (``AUTO`` allowed), shape (settings,).
        weights: shape (2, kernels): invocations of each kernel in the forward and the backward pass (repeats, zero
            for the other pass); every kernel belongs to one pass.
        cap_w: the average power the limiter holds (default the card's cap, the one its kernels meet alone).
    """
    C = np.asarray(core_mhz)  # noqa: N806
    M = np.asarray(mem_mhz)  # noqa: N806
    W = np.asarray(weights, dtype=float)  # noqa: N806
    n = len(params.keys)
    if W.shape != (2, n) or np.any((W > 0).sum(0) > 1):
        raise InputError(f"pass limiter: weights must have shape (2, {n}) with each kernel in one pass, got {W.shape}")
    cap = float(spec.cap_w if cap_w is None else cap_w)
    S = len(C)  # noqa: N806
    req = _requests(spec, C)
    pk = np.argmax(W > 0, axis=0)  # each kernel's pass
    wk = W[pk, np.arange(n)]
    # at the request, no cap: which (pass, setting) pairs exceed the cap on average
    ev = evaluate(spec, params, C, M, cap_w=float("inf"))
    T, E = ev.time_s.copy(), ev.energy_j.copy()  # noqa: N806
    g_req = W @ (E - cap * T)  # (2, S): > 0 where the cap binds
    lo_f = float(spec.core_clocks_mhz[0])
    bind = np.argwhere(g_req > 0)
    f_star = np.broadcast_to(req, (2, S)).astype(float).copy()
    dT = np.zeros((n, S))  # noqa: N806
    dE = np.zeros((n, S))  # noqa: N806
    if len(bind):
        # one row per (binding pass-setting, kernel of that pass)
        items = []
        for b, (p, s) in enumerate(bind):
            ks = np.flatnonzero(pk == p)
            items.append((np.full(len(ks), b), ks, np.full(len(ks), s)))
        grp, kern, sidx = (np.concatenate(z) for z in zip(*items))
        core, mem, rq, w = C[sidx], M[sidx], req[sidx], wk[kern]
        nb = len(bind)

        def g(fb):
            t, e = _eval_at(spec, params, kern, core, mem, rq, fb[grp])
            return np.bincount(grp, weights=w * (e - cap * t), minlength=nb)

        a = np.full(nb, lo_f)
        b_ = req[bind[:, 1]].astype(float)
        ga, gb = g(a), g_req[bind[:, 0], bind[:, 1]]
        stuck = ga > 0  # over the cap even at the lowest clock: the lowest clock
        # Illinois regula falsi on the bracket [lowest clock, request]: g rises with f; deterministic, fixed rules
        side = np.zeros(nb, dtype=int)
        x = a.copy()
        for _ in range(200):
            live = (b_ - a > _TOL_MHZ) & ~stuck
            if not live.any():
                break
            x = np.where(live, (a * gb - b_ * ga) / np.where(gb - ga != 0, gb - ga, 1.0), x)
            x = np.where(live, np.clip(x, a, b_), x)
            # guard against a stalled secant: fall back to halving when the step does not shrink the bracket
            x = np.where(live & ((x <= a) | (x >= b_)), 0.5 * (a + b_), x)
            gx = g(x)
            up = live & (gx <= 0)
            dn = live & (gx > 0)
            a, ga = np.where(up, x, a), np.where(up, gx, ga)
            b_, gb = np.where(dn, x, b_), np.where(dn, gx, gb)
            gb = np.where(up & (side == 1), 0.5 * gb, gb)
            ga = np.where(dn & (side == -1), 0.5 * ga, ga)
            side = np.where(up, 1, np.where(dn, -1, side))
            # a root hit exactly: close the bracket there
            hit = live & (gx == 0)
            a, b_ = np.where(hit, x, a), np.where(hit, x, b_)
        fs = np.where(stuck, lo_f, a)  # the highest ceiling at or under the cap
        f_star[bind[:, 0], bind[:, 1]] = fs
        t0, e0 = _eval_at(spec, params, kern, core, mem, rq, fs[grp])
        t1, e1 = _eval_at(spec, params, kern, core, mem, rq, fs[grp] - _DF_MHZ)
        T[kern, sidx], E[kern, sidx] = t0, e0
        dT[kern, sidx] = np.where(stuck[grp], 0.0, (t0 - t1) / _DF_MHZ)
        dE[kern, sidx] = np.where(stuck[grp], 0.0, (e0 - e1) / _DF_MHZ)
        if stuck.any():
            log.warning("pass limiter: %d pass/setting pairs stay over the %.0f W cap at the lowest clock", stuck.sum(), cap)
    limited = np.zeros((2, S), dtype=bool)
    if len(bind):
        limited[bind[:, 0], bind[:, 1]] = True
    return PassLimit(f_star, limited, T, E, dT, dE, cap)


def at_ceilings(spec: GpuSpec, params: KernelParams, core_mhz, mem_mhz, weights: np.ndarray, state: PassLimit
                ) -> tuple[np.ndarray, np.ndarray]:
    """Time and energy, (kernels, settings), of ``params`` run at the ceilings of ``state`` held fixed (the kernels
    of a finite-difference step, before the ceiling answers them)."""
    C = np.asarray(core_mhz)  # noqa: N806
    M = np.asarray(mem_mhz)  # noqa: N806
    n, S = len(params.keys), len(C)  # noqa: N806
    pk = np.argmax(np.asarray(weights) > 0, axis=0)
    f = state.ceiling_mhz[pk]  # (n, S)
    req = np.broadcast_to(_requests(spec, C), (n, S))
    kern = np.broadcast_to(np.arange(n)[:, None], (n, S))
    t, e = _eval_at(spec, params, kern, np.broadcast_to(C, (n, S)), np.broadcast_to(M, (n, S)), req,
                    np.where(state.limited[pk], f, np.inf))
    return t, e


def replaced_sums(state: PassLimit, weights: np.ndarray, d_time: np.ndarray, d_energy: np.ndarray,
                  rows=None) -> tuple[np.ndarray, np.ndarray]:
    """Pass sums with kernel i's row changed by (``d_time``, ``d_energy``) at fixed ceilings, for every i at once
    (``rows``: the kernels the changes are for, default all), the ceiling answering to first order: shape
    (len(rows), 2, settings) each.

    Where the cap binds, g(f) = Σ w (E − cap·T) = 0 at f*; kernel i's change moves g by w_i (ΔE_i − cap·ΔT_i) and f*
    by that over −g'(f*). This is what a finite-difference Jacobian of a fit needs for every kernel at once."""
    W = np.asarray(weights, dtype=float)  # noqa: N806
    n = W.shape[1]
    rows = np.arange(n) if rows is None else np.asarray(rows)
    pk = np.argmax(W > 0, axis=0)[rows]
    onehot = np.zeros((len(rows), 2))
    onehot[np.arange(len(rows)), pk] = 1.0
    wk = W[pk, rows]
    PT, PE = W @ state.time_s, W @ state.energy_j  # noqa: N806
    dPT, dPE = W @ state.dtime_df, W @ state.denergy_df  # (2, S) along the ceiling  # noqa: N806
    gp = dPE - state.cap_w * dPT
    gp = np.where(state.limited & (gp != 0), gp, np.inf)  # unlimited: the ceiling does not answer
    dg = wk[:, None] * (d_energy - state.cap_w * d_time)  # (rows, S)
    df = -dg / gp[pk]
    st = (wk[:, None] * d_time + dPT[pk] * df)[:, None, :] * onehot[:, :, None]
    se = (wk[:, None] * d_energy + dPE[pk] * df)[:, None, :] * onehot[:, :, None]
    return PT[None] + st, PE[None] + se


def _pair(v) -> tuple[int, int]:
    a, b = (int(x) for x in v)
    return a, b


def pass_table2(spec: GpuSpec, params: KernelParams, trace, settings, cap_w: float | None = None) -> list[dict]:
    """Table 2's four pass-level rows (Spaan et al. 2026) chosen from the passes *as they run under the limiter*:
    one setting per pass (the trace's passes, as ``kdvfs.optimize``'s pass granularity groups them), local (each pass
    against its own auto time or EDP) and global (the step's), exhaustively over the settings; auto is the all-auto
    step under the limiter too. The study's pass rows are the optima of its pass-level sweep, which ran so."""
    from kdvfs.reproduce import PAPER_TABLE2

    settings = list(settings)
    C = np.array([s[0] for s in settings])  # noqa: N806
    M = np.array([s[1] for s in settings])  # noqa: N806
    names = [trace.segments[i].pass_name for i in trace.kernel_segment]
    order = list(dict.fromkeys(names))
    if len(order) != 2:
        raise InputError(f"pass Table 2: the trace has passes {order}; it needs exactly two (forward, backward)")
    w = np.stack([trace.repeats * np.array([n == p for n in names]) for p in order]).astype(float)
    st = solve_passes(spec, params, C, M, w, cap_w)
    GT, GE = w @ st.time_s, w @ st.energy_j  # noqa: N806
    ia = settings.index((AUTO, AUTO))
    t_auto, e_auto = GT[:, ia].sum(), GE[:, ia].sum()
    tt, ee = GT[0][:, None] + GT[1][None, :], GE[0][:, None] + GE[1][None, :]  # every (forward, backward) pair
    picks: dict[tuple[str, str], tuple[int, int]] = {
        ("local", "edp"): _pair(int(np.argmin(GE[g] * GT[g])) for g in range(2)),
        ("global", "edp"): _pair(np.unravel_index(int(np.argmin(ee * tt)), tt.shape)),
        ("local", "waste"): _pair(int(np.flatnonzero(GT[g] <= GT[g, ia])[np.argmin(GE[g][GT[g] <= GT[g, ia]])])
                                  for g in range(2)),
        ("global", "waste"): _pair(np.unravel_index(int(np.argmin(np.where(tt <= t_auto, ee, np.inf))), tt.shape)),
    }
    rows = []
    for scope in ("local", "global"):
        paper = PAPER_TABLE2[("pass", scope)]
        for obj, (pt, pe) in (("edp", paper[:2]), ("waste", paper[2:])):
            a, b = picks[(scope, obj)]
            rows.append({"granularity": "pass", "scope": scope, "objective": "strict waste" if obj == "waste" else "EDP",
                         "time_change_pct": float(100 * ((GT[0, a] + GT[1, b]) / t_auto - 1)),
                         "energy_change_pct": float(100 * ((GE[0, a] + GE[1, b]) / e_auto - 1)),
                         "paper_time_change_pct": pt, "paper_energy_change_pct": pe,
                         "solver": "exhaustive, under the limiter",
                         "settings": [f"{'auto' if settings[i][0] == AUTO else settings[i][0]}/"
                                      f"{'auto' if settings[i][1] == AUTO else settings[i][1]}" for i in (a, b)]})
    return rows
