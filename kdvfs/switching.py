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

from kdvfs.errors import InputError
from kdvfs.gpus import SwitchModel

__all__ = ["MECHANISMS", "SwitchCosts", "sequence_cost"]

MECHANISMS = ("sync", "callback", "predictive")


@dataclass(frozen=True, slots=True)
class SwitchCosts:
    """Mechanism overheads measured or assumed.

    Attributes:
        sync_overhead_s: extra GPU idle per synchronous switch (host sync, relaunch); measured on the H200 with
            PyTorch eager at ~163 µs per boundary (validation/h200).
        callback_overhead_s: extra stall per in-stream host function; measured ~110 µs on the H200 (validation/h200).
        idle_power_w: power while the GPU stalls.
    """

    sync_overhead_s: float = 163e-6
    callback_overhead_s: float = 110e-6
    idle_power_w: float = 80.0

    def stall_s(self, mechanism: str, sw: SwitchModel) -> float:
        if mechanism == "sync":
            return sw.host_call_s + self.sync_overhead_s
        if mechanism == "callback":
            return sw.host_call_s + self.callback_overhead_s
        return 0.0


def check_mechanism(m: str) -> str:
    if m not in MECHANISMS:
        raise InputError(f"mechanism {m!r} is not one of {', '.join(MECHANISMS)}")
    return m


def sequence_cost(t_inst: np.ndarray, p_inst: np.ndarray, setting: np.ndarray, T: np.ndarray, P: np.ndarray,
                  kernel: np.ndarray, sw: SwitchModel, mechanism: str, costs: SwitchCosts,
                  start_setting: int | None = None) -> dict:
    """Exact time and energy of an instance sequence under switching (zero spread).

    Args:
        t_inst, p_inst: each instance's time and power at its requested setting.
        setting: requested setting index per instance.
        T, P: kernel × setting tables (for running at the old setting during a transition).
        kernel: kernel index per instance.
        sw: the switch model; mechanism: sync, callback or predictive; costs: mechanism overheads and idle power.
        start_setting: setting in effect before the first instance (default: the first instance's).
    """
    check_mechanism(mechanism)
    n = len(setting)
    base_t = float(t_inst.sum())
    base_e = float((t_inst * p_inst).sum())
    if n == 0:
        return {"time_s": 0.0, "energy_j": 0.0, "switches": 0, "switch_time_s": 0.0}
    cur = int(setting[0]) if start_setting is None else int(start_setting)
    change = np.nonzero(np.diff(np.concatenate([[cur], setting])) != 0)[0]
    stall = costs.stall_s(mechanism, sw)
    tr = sw.transition_s
    extra_t = extra_e = 0.0
    # Walk switch points; between them instances run at their own setting (already in base).
    eff = cur  # setting in effect; a new switch point first completes any transition still pending
    for j, i in enumerate(change):
        new = int(setting[i])
        if mechanism == "predictive":
            # serialised calls: the previous call's host part must end before this one starts
            gap = float(t_inst[change[j - 1]:i].sum()) if j > 0 else np.inf
            late = max(0.0, (sw.host_call_s + tr) - gap) if j > 0 else 0.0
            lag = late
        else:
            extra_t += stall
            extra_e += stall * costs.idle_power_w
            lag = tr
        if sw.stall_while_relocking and mechanism != "predictive":
            extra_t += tr
            extra_e += tr * costs.idle_power_w
            lag = 0.0
        # during `lag`, instances from i on run at the setting in effect before
        k = i
        old = eff
        while lag > 0 and k < n and (j + 1 >= len(change) or k < change[j + 1]):
            kk = int(kernel[k])
            t_old, p_old = T[kk, old], P[kk, old]
            t_new, p_new = t_inst[k], p_inst[k]
            frac = min(1.0, lag / t_old)
            dur = frac * t_old + (1 - frac) * t_new
            extra_t += dur - t_new
            extra_e += frac * t_old * p_old + (1 - frac) * t_new * p_new - t_new * p_new
            lag -= frac * t_old
            k += 1
        eff = new
    return {"time_s": base_t + extra_t, "energy_j": base_e + extra_e, "switches": int(len(change)),
            "switch_time_s": extra_t}
