"""Where a live training loop can switch clocks, and schedules that switch only there.

A runtime inside a PyTorch loop (``hw_backend.torch_runtime``) sees the iteration through module hooks, not kernel by
kernel. The imported trace names, for each segment found from the module hierarchy, the module class that launched it
(``forward.GPT2Block`` × 24, ``backward.GPT2Block`` × 24, ``optimizer``). Each segment repetition starts at an *event*
the runtime can observe:

- ``PASS.Class`` — a module of that class starts (forward pre-hook; in the backward, the full backward pre-hook);
- ``PASS.Class/post`` — it ended (forward hook / full backward hook): the start of a following segment that no module
  of the unit depth launched (the loss after the last layer);
- ``optimizer`` — ``optimizer.step()`` starts (its step pre-hook);
- ``step`` — the iteration starts (the first region).

A segment with none of these (a module-less run right after another module-less run) belongs to the region before it.
A **region** is the run of instances between two consecutive events; a ``RuntimePlan`` is the ordered list of regions
with the event (and its occurrence number within the step) that opens each, and the setting a schedule asks for
there. ``boundary_schedule`` makes the switch-aware schedule at this granularity, so the runtime can apply it exactly:
the switches it issues are the schedule's switches.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import SwitchModel
from kdvfs.optimize.problem import Problem
from kdvfs.prediction import Prediction
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Kernel, Segment, Trace

log = logging.getLogger(__name__)

__all__ = ["Region", "RuntimePlan", "boundary_schedule", "plan_for", "regions_of", "unit_class_of"]


def unit_class_of(segment_name: str) -> str | None:
    """``forward.GPT2Block#2`` → ``GPT2Block``; segments found without a module (``forward#3``, ``backward.repeat``)
    → None."""
    head, dot, rest = segment_name.partition(".")
    if not dot:
        return None
    cls = rest.split("#")[0]
    return None if cls in ("", "repeat") else cls


@dataclass(frozen=True, slots=True)
class Region:
    """A run of instances the runtime can tell apart: it starts at one observable event.

    Attributes:
        event: ``forward.GPT2Block``, ``forward.LayerNorm/post``, ``optimizer`` or ``step``.
        occurrence: which occurrence of ``event`` within one iteration opens it (0-based).
        start: first instance index; stop: one past the last.
        core_mhz, mem_mhz: the setting the schedule asks for in it (``AUTO`` = 0).
    """

    event: str
    occurrence: int
    start: int
    stop: int
    core_mhz: int = 0
    mem_mhz: int = 0


def regions_of(trace: Trace) -> list[tuple[str, int, int, int]]:
    """``(event, occurrence, start, stop)`` of every region of one iteration, in order.

    The event stream is replayed from the segments: every repetition of a module segment emits its pre event, then
    its post event; occurrences count each kind from the start of the iteration."""
    out: list[list] = []
    pre: dict[str, int] = defaultdict(int)
    post: dict[str, int] = defaultdict(int)
    pos = 0
    prev_unit: tuple[str, str] | None = None
    prev_pass: str | None = None
    for seg in trace.segments:
        cls = unit_class_of(seg.name)
        n = len(seg.kernels)
        for _ in range(seg.repeat):
            ev: str | None = None
            occ = 0
            if cls is not None:
                ev = f"{seg.pass_name}.{cls}"
                occ = pre[ev]
                pre[ev] += 1
            elif seg.pass_name == "optimizer" and prev_pass != "optimizer":
                ev = "optimizer"
                occ = pre[ev]
                pre[ev] += 1
            elif prev_unit is not None:
                ev = f"{prev_unit[0]}.{prev_unit[1]}/post"
                occ = post[ev] - 1  # the previous repetition's own post event
            if not out and ev is None:
                ev = "step"
            if ev is None:
                out[-1][3] += n
            else:
                out.append([ev, occ, pos, pos + n])
            if cls is not None:
                post[f"{seg.pass_name}.{cls}/post"] += 1
            prev_unit = (seg.pass_name, cls) if cls is not None else None
            prev_pass = seg.pass_name
            pos += n
    return [(e, o, s, t) for e, o, s, t in out]


@dataclass(frozen=True, slots=True)
class RuntimePlan:
    """The regions of one iteration with the setting of each.

    Attributes:
        trace: name of the trace.
        gpu: the card the schedule is for.
        regions: in execution order.
        instances: instances per iteration (the schedule's length).
    """

    trace: str
    gpu: str
    regions: tuple[Region, ...]
    instances: int

    @property
    def switches(self) -> int:
        """Setting changes between consecutive regions (the schedule's switches when it is boundary-level)."""
        return sum(1 for a, b in zip(self.regions, self.regions[1:])
                   if (a.core_mhz, a.mem_mhz) != (b.core_mhz, b.mem_mhz))

    @property
    def events(self) -> tuple[str, ...]:
        """The event kinds the runtime must observe."""
        return tuple(sorted({r.event for r in self.regions}))

    @property
    def unit_classes(self) -> dict[str, int]:
        """Module class → the most regions one class opens in one pass (the model should have that many)."""
        cnt: dict[tuple[str, str], int] = defaultdict(int)
        for r in self.regions:
            p, dot, rest = r.event.partition(".")
            if dot and not rest.endswith("/post"):
                cnt[(p, rest)] += 1
        out: dict[str, int] = {}
        for (_, c), n in cnt.items():
            out[c] = max(out.get(c, 0), n)
        return out


def plan_for(trace: Trace, schedule: Schedule) -> RuntimePlan:
    """The runtime plan of a schedule; an error when the schedule switches inside a region (where no hook can)."""
    schedule.check_for(trace)
    regs = []
    for ev, occ, s, t in regions_of(trace):
        c, m = schedule.core_mhz[s:t], schedule.mem_mhz[s:t]
        if (c != c[0]).any() or (m != m[0]).any():
            raise InputError(
                f"schedule switches clocks inside region {ev}#{occ} (instances {s}–{t - 1}), where the runtime sees no "
                "boundary; make a boundary-level schedule with `kdvfs analyze` (it writes schedule-boundary-*.json) or "
                "kdvfs.runtime_plan.boundary_schedule")
        regs.append(Region(ev, occ, s, t, int(c[0]), int(m[0])))
    return RuntimePlan(trace.name, schedule.gpu, tuple(regs), len(schedule.core_mhz))


def _region_problem(pb: Problem, regs: list[tuple[str, int, int, int]]) -> Problem:
    """One 'kernel' per region: its time and energy per setting are its instances' sums."""
    inst = pb.trace.instances()
    starts = np.array([s for _, _, s, _ in regs])
    T = np.add.reduceat(pb.T[inst], starts, axis=0)
    E = np.add.reduceat(pb.E[inst], starts, axis=0)
    ks = tuple(Kernel(name=f"{e}#{o}", category="other", time_s=float(T[i, pb.auto]))
               for i, (e, o, _, _) in enumerate(regs))
    rt = Trace(name=pb.trace.name, segments=(Segment("regions", ks, 1, "other"),), gpu=pb.trace.gpu)
    prof = Profile(rt.kernel_keys, pb.profile.settings, T, E / T, np.full(T.shape, "model", dtype=object),
                   pb.profile.gpu, rt.name)
    return Problem(rt, prof)


def boundary_schedule(pb: Problem, sw: SwitchModel, mechanism: str = "predictive", slack_pct: float = 0.0,
                      costs: SwitchCosts | None = None) -> Schedule:
    """The switch-aware schedule whose switches fall only on region boundaries (what the runtime can apply).

    It is planned on one 'kernel' per region, then evaluated on the instances, where a switch's cost can differ from
    the region-level plan's (a predictive switch overlaps the previous kernel, not the whole previous region). When
    that evaluation exceeds the slack, the plan is made again with less slack (¾, ½, ¼ of it, none), and at the end
    the all-auto schedule is taken, so the result never exceeds the slack it was asked for."""
    regs = regions_of(pb.trace)
    rp = _region_problem(pb, regs)
    sched = None
    for f in (1.0, 0.75, 0.5, 0.25, 0.0):
        sched = _boundary_at(pb, rp, regs, sw, mechanism, slack_pct, f * slack_pct, costs)
        assert sched.predicted is not None
        if sched.predicted.time_change_pct <= slack_pct + 1e-9:
            return sched
        log.info("boundary schedule planned at %.3g %% slack runs %+.3f %% on the instances; planning with less",
                 f * slack_pct, sched.predicted.time_change_pct)
    n = len(pb.trace.instances())
    assert sched is not None
    return _boundary_schedule_of(pb, np.full(n, pb.profile.settings[pb.auto][0], dtype=np.int64),
                                 np.full(n, pb.profile.settings[pb.auto][1], dtype=np.int64), sw, mechanism, slack_pct,
                                 costs, sched.solver, sched.switch_plan)


def _boundary_at(pb: Problem, rp: Problem, regs, sw: SwitchModel, mechanism: str, slack_pct: float, plan_slack: float,
                 costs: SwitchCosts | None) -> Schedule:
    from kdvfs.optimize.switchaware import switch_aware

    rs = switch_aware(rp, sw, mechanism, plan_slack, costs)
    n = len(pb.trace.instances())
    core = np.empty(n, dtype=np.int64)
    mem = np.empty(n, dtype=np.int64)
    for i, (_, _, s, t) in enumerate(regs):
        core[s:t], mem[s:t] = rs.core_mhz[i], rs.mem_mhz[i]
    return _boundary_schedule_of(pb, core, mem, sw, mechanism, slack_pct, costs,
                                 rs.solver.replace("switch-aware", "switch-aware at module boundaries"), rs.switch_plan)


def _boundary_schedule_of(pb: Problem, core: np.ndarray, mem: np.ndarray, sw: SwitchModel, mechanism: str,
                          slack_pct: float, costs: SwitchCosts | None, solver: str, switch_plan) -> Schedule:
    from kdvfs.optimize.switchaware import evaluate_with_switching

    sched = Schedule(trace=pb.trace.name, gpu=pb.profile.gpu, core_mhz=core, mem_mhz=mem, objective="waste",
                     slack_pct=slack_pct, granularity="boundary", scope="global", solver=solver,
                     auto={"time_s": pb.auto_time_s, "energy_j": pb.auto_energy_j}, switch_plan=switch_plan)
    ev = evaluate_with_switching(pb, sched, sw, mechanism, costs)
    st = pb.instance_setting_index(sched)
    inst = pb.trace.instances()
    pred = Prediction(ev["time_s"], ev["energy_j"], ev["time_change_pct"], ev["energy_change_pct"], ev["switches"],
                      ideal_time_s=float(pb.T[inst, st].sum()), ideal_energy_j=float(pb.E[inst, st].sum()))
    return Schedule(trace=sched.trace, gpu=sched.gpu, core_mhz=core, mem_mhz=mem, objective="waste",
                    slack_pct=slack_pct, granularity="boundary", scope="global", solver=sched.solver, predicted=pred,
                    auto=sched.auto, switch_plan=sched.switch_plan)
