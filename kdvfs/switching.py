"""The cost of clock switches along an instance sequence, for one GPU with no concurrency.

Semantics (shared by the optimiser's planner, the simulator's fast path and — event by event — its simpy engine):

- a *switch point* is an instance whose requested setting differs from the previous instance's;
- ``sync`` / ``callback``: before that instance the GPU stalls for the host call (plus the mechanism's own
  overhead: ``sync_overhead_s`` for a host synchronisation and relaunch, ``callback_overhead_s`` for an in-stream host
  function) at idle power; then the new clock lands ``transition_s`` later, and until it lands kernels run at the
  setting in effect before (``stall_while_relocking``: the GPU idles instead);
- ``predictive``: the call is issued early on a host thread so that the clock lands at the boundary; calls are
  serialised, so a switch that follows the previous one too closely lands late; a late landing runs the next kernel's
  head at the old setting. Without spread nothing else is lost;
- a kernel's progress rate is 1/T at the setting in effect; power is P of that setting; a stall draws idle power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.modes import Mechanism

__all__ = ["MECHANISMS", "SwitchCosts", "sequence_cost"]

MECHANISMS = Mechanism.values()

DENSE_MIN_SHARE = 0.25
"""Share of boundaries that switch from which ``sequence_cost`` computes every boundary on contiguous arrays rather
than gathering the switch positions (the two give bit-identical results; this is only the faster side)."""


@dataclass(frozen=True, slots=True)
class SwitchCosts:
    """Mechanism overheads measured or assumed.

    Attributes:
        sync_overhead_s: extra GPU idle per synchronous switch (host sync, relaunch); measured on the H200 with
            PyTorch eager at ~163 µs per boundary (validation/h200).
        callback_overhead_s: extra stall per in-stream host function; measured ~110 µs on the H200 (validation/h200).
        idle_power_w: power while the GPU stalls. Library paths take it from the card (``SwitchCosts.for_gpu``);
            the 80 W default only serves hand-made costs in tests and examples.
    """

    sync_overhead_s: float = 163e-6
    callback_overhead_s: float = 110e-6
    idle_power_w: float = 80.0

    @classmethod
    def for_gpu(cls, spec: GpuSpec, **overheads: float) -> SwitchCosts:
        """The mechanism overheads (defaults unless given) with the card's own idle power."""
        return cls(idle_power_w=spec.idle_power_w, **overheads)

    def stall_s(self, mechanism: str, sw: SwitchModel) -> float:
        if mechanism == "sync":
            return sw.host_call_s + self.sync_overhead_s
        if mechanism == "callback":
            return sw.host_call_s + self.callback_overhead_s
        return 0.0


def check_mechanism(m: str) -> Mechanism:
    return Mechanism.parse(m)


def sequence_cost(t_inst: np.ndarray, p_inst: np.ndarray, setting: np.ndarray, T: np.ndarray, P: np.ndarray,
                  kernel: np.ndarray, sw: SwitchModel, mechanism: str, costs: SwitchCosts,
                  start_setting: int | None = None, e_inst: np.ndarray | None = None) -> dict:
    """Exact time and energy of an instance sequence under switching (zero spread).

    Args:
        t_inst, p_inst: each instance's time and power at its requested setting.
        setting: requested setting index per instance.
        T, P: kernel × setting tables (for running at the old setting during a transition).
        kernel: kernel index per instance.
        sw: the switch model; mechanism: sync, callback or predictive; costs: mechanism overheads and idle power.
        start_setting: setting in effect before the first instance (default: the first instance's).
        e_inst: ``t_inst * p_inst`` when the caller has it already.

    Returns time_s and energy_j (switches paid for), switches, switch_time_s (the time they add), the per-instance
    extra_time_s and extra_energy_j, and base_time_s (the instances' own time, ``t_inst.sum()``).
    """
    check_mechanism(mechanism)
    n = len(setting)
    base_t = float(t_inst.sum())
    base_e = float((t_inst * p_inst if e_inst is None else e_inst).sum())
    per_t = np.zeros(n)
    per_e = np.zeros(n)
    if n == 0:
        return {"time_s": 0.0, "energy_j": 0.0, "switches": 0, "switch_time_s": 0.0,
                "extra_time_s": per_t, "extra_energy_j": per_e, "base_time_s": 0.0}
    neq = setting[1:] != setting[:-1]
    leading = start_setting is not None and int(start_setting) != int(setting[0])  # a switch before the first
    m = int(np.count_nonzero(neq)) + leading
    if m:
        stall = costs.stall_s(mechanism, sw)
        S = T.shape[1]  # noqa: N806
        Tf, Pf = T.ravel(), P.ravel()  # noqa: N806
        if mechanism != "predictive":
            if sw.stall_while_relocking:
                stall += sw.transition_s
            lag: np.ndarray | float = 0.0 if sw.stall_while_relocking else sw.transition_s  # the same for every one
        if mechanism != "predictive" and not leading and m >= DENSE_MIN_SHARE * n:
            # most boundaries switch (a what-if's dense schedules): the same arithmetic at every boundary on
            # contiguous arrays, kept where it switches, beats gathering the switch positions and scattering back
            _dense_switches(per_t, per_e, neq, t_inst, p_inst, e_inst, setting, kernel, Tf, Pf, S, float(lag), stall,
                            costs.idle_power_w)
        else:
            change = np.flatnonzero(neq) + 1
            if leading:
                change = np.concatenate([[0], change])
            # run j spans instances change[j] .. change[j+1]-1; the setting in effect before switch j is the previous
            # run's requested setting (a new switch first completes any transition still pending)
            if mechanism == "predictive":
                csum = np.concatenate([[0.0], np.cumsum(t_inst)])
                gap = np.full(m, np.inf)
                gap[1:] = csum[change[1:]] - csum[change[:-1]]  # time of the previous run at requested rates
                lag = np.maximum(0.0, sw.host_call_s + sw.transition_s - gap)
                stall = 0.0
            # during its lag, a run's first instances run at the old setting; walk the runs' first, second, …
            # instances together, keeping only runs with lag left (usually one or two steps)
            old_of_run = setting.take(np.maximum(change - 1, 0) if change[0] == 0 else change - 1)
            if start_setting is not None and change[0] == 0:
                old_of_run[0] = int(start_setting)
            # first instance of every run, without index bookkeeping (the common, dense case)
            kk = kernel.take(change) * S + old_of_run
            t_old = Tf.take(kk)  # take(): the same values as fancy indexing, faster
            tn = t_inst.take(change)
            frac = np.minimum(1.0, lag / t_old)
            # the change positions are distinct and untouched so far: plain assignment, stall included
            per_t[change] = stall + frac * (t_old - tn)
            # tn·p_new is the instance's own energy (the same product) where the caller has it
            e_new = tn * p_inst.take(change) if e_inst is None else e_inst.take(change)
            per_e[change] = stall * costs.idle_power_w + frac * (t_old * Pf.take(kk) - e_new)
            left = lag - frac * t_old  # an array either way (t_old is one)
            # runs longer than one instance whose transition outlasts their first: walk their second, third, …
            # instances together, on arrays of those runs only (usually few, for one or two steps)
            longer = np.empty(m, dtype=bool)
            np.greater(np.diff(change), 1, out=longer[:-1])  # the next run starts after the second instance
            longer[-1] = change[-1] + 1 < n
            active = np.flatnonzero((left > 1e-15) & longer)
            if len(active):
                pos = change.take(active) + 1
                nxt = np.append(change, n).take(active + 1)
                old = old_of_run.take(active)
                la = left.take(active)
            while len(active):
                i = pos
                kk = kernel[i] * S + old
                t_old = Tf[kk]
                tn = t_inst[i]
                frac = np.minimum(1.0, la / t_old)
                per_t[i] += frac * (t_old - tn)
                per_e[i] += frac * (t_old * Pf[kk] - tn * p_inst[i])
                la = la - frac * t_old
                pos = i + 1
                keep = (la > 1e-15) & (pos < nxt)
                active = active[keep]
                pos, nxt, old, la = pos[keep], nxt[keep], old[keep], la[keep]
    extra_t, extra_e = float(per_t.sum()), float(per_e.sum())
    return {"time_s": base_t + extra_t, "energy_j": base_e + extra_e, "switches": int(m),
            "switch_time_s": extra_t, "extra_time_s": per_t, "extra_energy_j": per_e, "base_time_s": base_t}


def _dense_switches(per_t: np.ndarray, per_e: np.ndarray, neq: np.ndarray, t_inst: np.ndarray, p_inst: np.ndarray,
                    e_inst: np.ndarray | None, setting: np.ndarray, kernel: np.ndarray, Tf: np.ndarray,  # noqa: N803
                    Pf: np.ndarray, S: int, lag: float, stall: float, idle_power_w: float) -> None:  # noqa: N803
    """``sequence_cost``'s extras written to ``per_t``/``per_e`` (zeros) where most boundaries switch, one lag for
    every switch and none before the first instance.

    Each value is the same expression on the same operands as the sparse walk's, so the arrays are bit-identical (the
    operations are element-wise IEEE arithmetic; a product or sum with its operands swapped is the same number). Only
    where they are computed differs: the first instance of every run at all n − 1 boundaries at once, into buffers
    reused in place (fresh temporaries of this size cost page faults), kept where the boundary switches (elsewhere
    the "old" setting is the instance's own and the value is dropped); then the later instances of runs whose
    transition outlasts their first one, walked as before, a run ending where the next switch is."""
    n = len(setting)
    kk = kernel[1:] * S
    kk += setting[:-1]
    t_old = Tf.take(kk)
    frac = np.divide(lag, t_old)
    np.minimum(frac, 1.0, out=frac)
    on = neq.astype(np.float64)
    if lag > 0:
        # frac is finite (at most 1), so (x·frac + stall)·on is the value where the boundary switches (×1.0 is exact)
        # and +0.0 elsewhere (a finite number ×0.0), as the zeros it replaces
        fon = frac
        buf = np.subtract(t_old, t_inst[1:])
        buf *= frac
        buf += stall
        np.multiply(buf, on, out=per_t[1:])  # stall + frac·(t_old − t_new)
        Pf.take(kk, out=buf)
        buf *= t_old
        buf -= t_inst[1:] * p_inst[1:] if e_inst is None else e_inst[1:]
        buf *= frac
        buf += stall * idle_power_w
        np.multiply(buf, on, out=per_e[1:])  # stall·idle + frac·(t_old·p_old − e_new)
    else:
        # without a lag a zero-time entry gives 0/0 = NaN at a boundary that may not switch (the sparse walk never
        # computes it there): frac where it switches, +0.0 elsewhere, by a select; x·fon + on·stall then keeps the
        # value where it switches and is +0.0 elsewhere
        fon = np.where(neq, frac, 0.0)
        buf = np.subtract(t_old, t_inst[1:])
        buf *= fon
        np.add(buf, np.multiply(on, stall, out=per_t[1:]), out=per_t[1:])
        Pf.take(kk, out=buf)
        buf *= t_old
        buf -= t_inst[1:] * p_inst[1:] if e_inst is None else e_inst[1:]
        buf *= fon
        np.add(buf, np.multiply(on, stall * idle_power_w, out=per_e[1:]), out=per_e[1:])
    # runs that have a second instance (the boundary switches, the next one does not): the lag left after their first
    # instance, lag − frac·t_old, computed on those boundaries only; the run is walked where some is left
    cand = np.flatnonzero(np.greater(neq[:-1], neq[1:]))  # a > b is a and not b, for booleans
    la = np.subtract(lag, fon.take(cand) * t_old.take(cand))  # fon is frac where the boundary switches
    keep = la > 1e-15
    first = cand[keep]
    if not len(first):
        return
    la = la[keep]
    is_change = np.empty(n + 1, dtype=bool)
    is_change[0] = False
    is_change[1:n] = neq
    is_change[n] = True  # the end of the sequence ends every run
    pos = first + 2  # the second instance of the run that starts at boundary first + 1
    old = setting.take(first)
    # the walked instances are inside runs (their boundary does not switch), each visited once: their extras are the
    # +0.0 the first pass wrote, so ``+=`` is ``0.0 +`` (which also keeps a −0.0 product from reaching them)
    e_of = (lambda i, tn: tn * p_inst.take(i)) if e_inst is None else (lambda i, tn: e_inst.take(i))
    while len(pos):
        i = pos
        kk = kernel.take(i) * S + old
        t_o = Tf.take(kk)
        tn = t_inst.take(i)
        frac = np.minimum(1.0, la / t_o)
        per_t[i] = 0.0 + frac * (t_o - tn)
        per_e[i] = 0.0 + frac * (t_o * Pf.take(kk) - e_of(i, tn))
        la = la - frac * t_o
        pos = i + 1
        more = (la > 1e-15) & ~is_change.take(pos)
        pos, old, la = pos[more], old[more], la[more]
