"""``validate``: run a schedule on a GPU and compare with the simulator.

- *isolated* (the study's method): each kernel unit alone at each of its scheduled settings, measured in long
  windows, summed over the iteration's instances; the same at auto for the saving.
- *live*: whole iterations with the clocks switched between kernels (a synchronisation point and the driver call
  before each switch point), measured the same way; the same at auto.
Both are repeated; the spread is reported; the simulator's prediction for the same schedule stands beside them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict

import numpy as np

from hw_backend.base import ClockGuard
from hw_backend.measure import measure_window
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Trace

__all__ = ["validate"]


def _isolated(backend, workload, trace: Trace, sched: Schedule, guard: ClockGuard | None, window_s, warmup_s, min_steps):
    inst = trace.instances()
    keys = trace.kernel_keys
    uses: dict[tuple[int, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for k, c, m in zip(inst.tolist(), sched.core_mhz.tolist(), sched.mem_mhz.tolist()):
        uses[(c, m)][keys[k]] += 1
    t_tot = e_tot = 0.0
    for st in sorted(uses):
        if guard is not None:
            if st == (AUTO, AUTO):
                guard.restore()
            else:
                guard.set(*st)
        elif st != (AUTO, AUTO):
            raise InputError("isolated validation of a schedule that changes clocks needs --allow-clock-control")
        for u in workload.units():
            n = [uses[st].get(k, 0) for k in u.keys]
            if not any(n):
                continue
            est = max(workload.unit_time_estimate_s(u), 1e-6)
            b = max(1, int(0.02 / est))
            w = measure_window(functools.partial(workload.run_unit, u, b), workload.sync, backend, window_s=window_s,
                               warmup_s=warmup_s, min_steps=min_steps, clock=workload.clock)
            per_t, per_e = w.time_s / w.iterations / b, w.energy_j / w.iterations / b
            for cnt, share in zip(n, u.shares):
                t_tot += cnt * per_t * share
                e_tot += cnt * per_e * share
    return t_tot, e_tot


def _live(backend, workload, trace: Trace, sched: Schedule, guard: ClockGuard | None, window_s, warmup_s, min_steps,
          noop_writes: bool):
    setting = list(zip(sched.core_mhz.tolist(), sched.mem_mhz.tolist()))
    state = {"req": setting[0]}
    # a real workload calls back with its stage name at each stage boundary
    stage_setting = {name: setting[i] for name, i in _unit_first_instance(trace, workload).items()}

    def before(i):
        st = setting[i] if isinstance(i, int) else stage_setting.get(i, state["req"])
        if st != state["req"]:
            state["req"] = st
            workload.sync()  # synchronous mechanism: wait for the kernel, call the driver, launch the next
            if noop_writes or guard is None:
                return
            if st == (AUTO, AUTO):
                guard.reset()
            else:
                guard.set(*st, verify=False)

    if guard is not None and not noop_writes:
        st0 = setting[0]
        if st0 != (AUTO, AUTO):
            guard.set(*st0)
    w = measure_window(lambda: workload.run_step(before), workload.sync, backend, window_s=window_s,
                       warmup_s=warmup_s, min_steps=min_steps, clock=workload.clock)
    return w.time_per_iter_s, w.energy_per_iter_j


def _unit_first_instance(trace: Trace, workload) -> dict[str, int]:
    """Each workload unit's first instance in the iteration: a unit (stage) runs at that instance's setting, one
    recorded layer standing for all repetitions."""
    first: dict[str, int] = {}
    for i, k in enumerate(trace.instances().tolist()):
        first.setdefault(trace.kernel_keys[k], i)
    return {u.name: min(first[k] for k in u.keys) for u in workload.units()}


def _stage_collapsed(trace: Trace, sched: Schedule, workload) -> Schedule:
    """The schedule as a stage-switching workload runs it: every instance at its stage's first setting."""
    keys = trace.kernel_keys
    pick = _unit_first_instance(trace, workload)
    unit_of = {k: u.name for u in workload.units() for k in u.keys}
    idx = np.array([pick[unit_of[keys[k]]] for k in trace.instances().tolist()])
    return dataclasses.replace(sched, core_mhz=sched.core_mhz[idx], mem_mhz=sched.mem_mhz[idx])


def validate(backend, workload, trace: Trace, profile: Profile, sched: Schedule, spec: GpuSpec, *,
             mode: str = "isolated", repeats: int = 3, window_s: float = 5.0, warmup_s: float = 1.0,
             allow_clock_control: bool = False, noop_writes: bool = False, min_steps: int = 20,
             costs: SwitchCosts | None = None) -> dict:
    """Measure ``sched`` and the all-auto schedule; compare with the simulator's predictions."""
    from simulator import SimConfig, simulate

    if mode not in ("isolated", "live"):
        raise InputError(f"mode {mode!r} is not isolated or live")
    sched.check_for(trace, spec)
    if not allow_clock_control and not noop_writes and (np.any(sched.core_mhz != AUTO) or np.any(sched.mem_mhz != AUTO)):
        raise InputError("this schedule changes clocks: pass --allow-clock-control (on a card you may change), or "
                         "--noop-writes to measure the live mechanism's cost with the clock writes left out")
    auto = Schedule(trace.name, sched.gpu, np.zeros_like(sched.core_mhz), np.zeros_like(sched.mem_mhz))
    res: dict = {"mode": mode, "repeats": repeats, "window_s": window_s}
    with ClockGuard(backend) as guard:
        g = guard if allow_clock_control else None
        for name, s in (("auto", auto), ("schedule", sched)):
            vals = []
            for _ in range(repeats):
                if mode == "isolated":
                    vals.append(_isolated(backend, workload, trace, s, g, window_s, warmup_s, min_steps))
                else:
                    vals.append(_live(backend, workload, trace, s, g, window_s, warmup_s, min_steps, noop_writes))
                if g is not None:
                    guard.restore()
            a = np.array(vals)
            res[name] = {"time_s": float(a[:, 0].mean()), "energy_j": float(a[:, 1].mean()),
                         "time_std_s": float(a[:, 0].std(ddof=1)) if len(a) > 1 else 0.0,
                         "energy_std_j": float(a[:, 1].std(ddof=1)) if len(a) > 1 else 0.0}
    stage_level = getattr(workload, "boundaries", "instance") == "stage"
    if costs is None:
        # the fake has no host-side launch overhead; a real PyTorch step pays the measured synchronisation cost
        costs = SwitchCosts(idle_power_w=spec.idle_power_w) if stage_level else SwitchCosts(sync_overhead_s=0.0,
                                                                                         idle_power_w=spec.idle_power_w)
    # the fake and the prediction use the mean latencies (zero spread); a no-op write costs only the mechanism
    sw = SwitchModel(0.0, 0.0) if noop_writes else dataclasses.replace(spec.switch, spread=0.0)
    cfg = SimConfig(mechanism="sync", switch=sw, costs=costs)
    if stage_level and mode == "live":
        # a real workload switches at its stage boundaries only: predict the schedule it actually ran
        sched = _stage_collapsed(trace, sched, workload)
    if noop_writes:
        # the clocks never change: every setting behaves like auto, and each switch point costs its stall
        prof = profile.for_trace(trace)
        ia = prof.auto_index
        profile = dataclasses.replace(prof, time_s=np.repeat(prof.time_s[:, ia:ia + 1], len(prof.settings), 1),
                                      power_w=np.repeat(prof.power_w[:, ia:ia + 1], len(prof.settings), 1))
    sim_s = simulate(trace, profile, sched, spec, cfg, path="fast")
    sim_a = simulate(trace, profile, auto, spec, cfg, path="fast")
    if mode == "isolated":  # the study's assumption: no switching cost at all
        pred = sched.predicted
        sim_s = type(sim_s)(sim_s.time_s if pred is None else pred.time_s,
                            sim_s.energy_j if pred is None else pred.energy_j, sim_s.segments, 0, 0.0, "profile")
    res["simulated"] = {"schedule": {"time_s": sim_s.time_s, "energy_j": sim_s.energy_j},
                        "auto": {"time_s": sim_a.time_s, "energy_j": sim_a.energy_j}}
    m, sm = res["schedule"], res["simulated"]["schedule"]
    res["measured_energy_change_pct"] = 100 * (m["energy_j"] / res["auto"]["energy_j"] - 1)
    res["measured_time_change_pct"] = 100 * (m["time_s"] / res["auto"]["time_s"] - 1)
    res["simulated_energy_change_pct"] = 100 * (sm["energy_j"] / sim_a.energy_j - 1)
    res["simulated_time_change_pct"] = 100 * (sm["time_s"] / sim_a.time_s - 1)
    return res
