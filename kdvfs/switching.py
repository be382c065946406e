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
    change = np.flatnonzero(setting[1:] != setting[:-1]) + 1
    if start_setting is not None and int(start_setting) != int(setting[0]):
        change = np.concatenate([[0], change])
    m = len(change)
    if m:
        stall = costs.stall_s(mechanism, sw)
        # run j spans instances change[j] .. change[j+1]-1; the setting in effect before switch j is the previous
        # run's requested setting (a new switch first completes any transition still pending)
        old_of_run = setting.take(np.maximum(change - 1, 0) if change[0] == 0 else change - 1)
        if start_setting is not None and change[0] == 0:
            old_of_run[0] = int(start_setting)
        if mechanism == "predictive":
            csum = np.concatenate([[0.0], np.cumsum(t_inst)])
            gap = np.full(m, np.inf)
            gap[1:] = csum[change[1:]] - csum[change[:-1]]  # time of the previous run at requested rates
            lag: np.ndarray | float = np.maximum(0.0, sw.host_call_s + sw.transition_s - gap)
            stall = 0.0
        else:
            if sw.stall_while_relocking:
                stall += sw.transition_s
            lag = 0.0 if sw.stall_while_relocking else sw.transition_s  # the same for every switch
        # during its lag, a run's first instances run at the old setting; walk the runs' first, second, …
        # instances together, keeping only runs with lag left (usually one or two steps)
        S = T.shape[1]  # noqa: N806
        Tf, Pf = T.ravel(), P.ravel()  # noqa: N806
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
