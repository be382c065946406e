"""What-if grids: savings against auto under switch latency × GPU preset × mechanism × policy × slack.

Policies: ``auto`` (the driver), ``pass`` (pass-level optimum), ``ideal`` (kernel-level global optimum with free
switching), ``naive`` (the ideal schedule with every switch paid for), ``switch-aware`` (planned for the latency).
Each scenario is a pure function (``run_scenario``); switch-aware scenarios of one slack go to the executor in
groups (``run_scenarios``), planned together; rows come back in grid order.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from kdvfs.bundled import resolve_profile_path, resolve_trace_path
from kdvfs.errors import InputError
from kdvfs.executor import Executor
from kdvfs.gpus import SwitchModel, check_grid_latency, get_gpu
from kdvfs.modes import Mechanism, Policy
from kdvfs.optimize.policies import policy_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.passweep import restrict_settings
from kdvfs.profile import load_profile
from kdvfs.switching import SwitchCosts
from kdvfs.trace import load_trace
from simulator.api import simulate
from simulator.engine import SimConfig
from simulator.evaluate import evaluate_policy

__all__ = ["POLICIES", "Scenario", "default_latencies", "grid", "run_scenario", "run_scenarios", "run_grid"]

POLICIES = Policy.values()


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """Attributes: gpu (preset whose switch model is used, or ``custom``), switch_latency_s (None: the preset's),
    mechanism, policy, slack_pct."""

    gpu: str
    switch_latency_s: float | None
    mechanism: str
    policy: str
    slack_pct: float


def default_latencies(n: int = 13) -> list[float]:
    """Log-spaced from 100 ns to 200 ms."""
    if not isinstance(n, int) or not 1 <= n <= 1000:
        raise InputError(f"--latency-points {n!r} must be a whole number in 1–1000; give e.g. --latency-points 13")
    return [float(x) for x in np.logspace(np.log10(1e-7), np.log10(0.2), n)]


def grid(gpus: list[str], latencies: Sequence[float | None], mechanisms: list[str], policies: list[str],
         slacks: list[float]) -> list[Scenario]:
    for m in mechanisms:
        Mechanism.parse(m)
    for p in policies:
        Policy.parse(p)
    for lat in latencies:
        check_grid_latency(lat)
    for g in gpus:
        get_gpu(g)
    from kdvfs.optimize.problem import check_slack

    for s in slacks:
        check_slack(s)
    return [Scenario(g, lat, m, p, s) for g, lat, m, p, s in itertools.product(gpus, latencies, mechanisms, policies, slacks)]


_CACHE: dict = {}


def _problem(trace_ref: str, profile_ref: str, settings: str = "all") -> Problem:
    key = (trace_ref, profile_ref, settings)
    if key not in _CACHE:
        tr = load_trace(resolve_trace_path(trace_ref))
        prof = restrict_settings(load_profile(resolve_profile_path(profile_ref)).for_trace(tr), settings)
        _CACHE[key] = Problem(tr, prof)
    return _CACHE[key]


def _card(pb: Problem, card: str):
    """The card the scenarios are priced on: ``card``'s preset, adapted to the card a profile built with ``profile build
    --anchors`` records in its header (``Profile.card``), as ``compare`` and ``simulate`` adapt it: the workers built
    the preset by name, so a what-if on an anchored profile priced the limiter's idle card, the gaps and the switch
    stalls at the bundled card's idle power."""
    key = ("card", id(pb), card)
    if key not in _CACHE:
        spec = get_gpu(card)
        if pb.profile.card:
            from kdvfs.card_anchor import CardAnchor, adapted

            spec = adapted(spec, None, CardAnchor.from_header(pb.profile.card, spec.name, "the what-if's profile"))[0]
        _CACHE[key] = spec
    return _CACHE[key]


def _switch(sc: Scenario) -> SwitchModel:
    preset = get_gpu(sc.gpu).switch
    base = preset if sc.switch_latency_s is None else preset.scaled_to(sc.switch_latency_s)
    return dataclasses.replace(base, spread=0.0)


def run_scenario(trace_ref: str, profile_ref: str, card: str, sc: Scenario, limiter: bool = False,
                 size: tuple[int | None, int] | None = None, settings: str = "all") -> dict:
    """One row: the policy's schedule simulated under the scenario's switch model (pure function of its inputs).

    ``limiter``: under the card's power limiter, with the limiter-aware choices (``simulator.limited_whatif``).
    ``size``: (per-GPU batch, tensor-parallel degree): the schedule is chosen at the trace's own size and simulated
    at this one, against auto there (``kdvfs.scaling``; the shard's all-reduces are charged to both).
    ``settings``: the profile's settings to choose from (``kdvfs.passweep.restrict_settings``)."""
    pb = _problem(trace_ref, profile_ref, settings)
    spec = _card(pb, card)
    sw = _switch(sc)
    if limiter:
        if size is not None:
            raise InputError("the power limiter is simulated at the trace's own size; drop --batch/--tp or give "
                             "--limiter off")
        from simulator.limited_whatif import limited_scenario_row

        r = limited_scenario_row(trace_ref, pb, spec, sc.policy, sw, sc.mechanism, sc.slack_pct)
        return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
                "slack_pct": sc.slack_pct, "time_change_pct": r["time_change_pct"],
                "energy_change_pct": r["energy_change_pct"], "switches": int(r["switches"])}
    costs = SwitchCosts.for_gpu(spec)
    if size is None:
        ev = evaluate_policy(pb, spec, sc.policy, sw, sc.mechanism, sc.slack_pct, costs)
        return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
                "slack_pct": sc.slack_pct, "time_change_pct": ev.time_change_pct,
                "energy_change_pct": ev.energy_change_pct, "switches": ev.switches}
    key = (trace_ref, profile_ref, card, size)
    if key not in _CACHE:
        from kdvfs.scaling import scaled_for

        _CACHE[key] = scaled_for(pb, spec, size[0], size[1])
    sim_pb, scl = _CACHE[key]
    extra_t, extra_e = scl.collective_time_s, scl.collective_energy_j
    from simulator.carried import carry

    sched = carry(policy_schedule(pb, sc.policy, sc.slack_pct, sw, sc.mechanism, costs), pb.trace, sim_pb.trace, spec)
    if sc.policy == "ideal":
        t, e = _free(sim_pb, sched)
        n = sched.switches
    else:
        res = simulate(sim_pb.trace, sim_pb.profile, sched, spec,
                       SimConfig(mechanism=sc.mechanism, switch=sw, costs=costs), path="fast")
        t, e, n = res.time_s, res.energy_j, res.switches
    at, ae = sim_pb.auto_time_s + extra_t, sim_pb.auto_energy_j + extra_e
    t, e = t + extra_t, e + extra_e
    return {"gpu": sc.gpu, "switch_latency_s": sw.total_s, "mechanism": sc.mechanism, "policy": sc.policy,
            "slack_pct": sc.slack_pct, "time_change_pct": 100 * (t / at - 1), "energy_change_pct": 100 * (e / ae - 1),
            "switches": int(n), "batch": size[0] or pb.trace.batch_size, "tp": size[1]}


def _free(pb: Problem, sched) -> tuple[float, float]:
    """Time and energy of a schedule with free switching."""
    s = pb.instance_setting_index(sched)
    inst = pb.trace.instances()
    return float(pb.T[inst, s].sum()), float(pb.E[inst, s].sum())


_PLAN_TOGETHER = 16
"""Switch-aware scenarios of one slack planned in one task (``switch_aware_many``): their DPs then run as one batch."""


def run_scenarios(trace_ref: str, profile_ref: str, card: str, scenarios: list[Scenario], limiter: bool = False,
                  size: tuple[int | None, int] | None = None, settings: str = "all") -> list[dict]:
    """``run_scenario`` for each of ``scenarios`` in one task: the switch-aware ones (same slack) are planned
    together first, then each row is made as alone (the plans are memoised on the problem, so the rows are the same)."""
    sa = [sc for sc in scenarios if sc.policy == Policy.SWITCH_AWARE.value]
    if len(sa) > 1 and not limiter and size is None:
        from kdvfs.optimize.switchaware import switch_aware_many

        pb = _problem(trace_ref, profile_ref, settings)
        costs = SwitchCosts.for_gpu(_card(pb, card))
        for slack in dict.fromkeys(sc.slack_pct for sc in sa):
            switch_aware_many(pb, [(_switch(sc), sc.mechanism, costs) for sc in sa if sc.slack_pct == slack], slack)
    return [run_scenario(trace_ref, profile_ref, card, sc, limiter, size, settings) for sc in scenarios]


def _tasks(scenarios: list[Scenario], limiter: bool, size) -> list[list[int]]:
    """Scenario indices per task: switch-aware ones of one slack in groups of ``_PLAN_TOGETHER``, the rest alone
    (under the limiter or at another size each scenario plans on its own)."""
    tasks: list[list[int]] = []
    groups: dict[float, list[int]] = {}
    for i, sc in enumerate(scenarios):
        if sc.policy == Policy.SWITCH_AWARE.value and not limiter and size is None:
            g = groups.setdefault(sc.slack_pct, [])
            if not g:
                tasks.append(g)
            g.append(i)
            if len(g) == _PLAN_TOGETHER:
                del groups[sc.slack_pct]
        else:
            tasks.append([i])
    return tasks


def run_grid(trace_ref: str, profile_ref: str, card: str, scenarios: list[Scenario], executor: Executor,
             progress: Callable[[int], None] | None = None, limiter: bool = False,
             size: tuple[int | None, int] | None = None, settings: str = "all", done: dict[int, dict] | None = None,
             on_task: Callable[[list[int], list[dict]], None] | None = None) -> list[dict]:
    """One row per scenario, in grid order, whatever the executor.

    ``done``: rows by scenario index from an interrupted run of the same grid (``simulator.whatif_journal``); a task
    whose scenarios are all there is not run again. ``on_task(indices, rows)``: called as each task finishes (in
    the order they finish; the rows are placed by index, so the result does not depend on it)."""
    tasks = _tasks(scenarios, limiter, size)
    rows: list[dict | None] = [None] * len(scenarios)
    done = done or {}
    todo = []
    for idx in tasks:
        if all(i in done for i in idx):
            for i in idx:
                rows[i] = done[i]
        else:
            todo.append(idx)
    if progress and len(todo) < len(tasks):
        progress(sum(len(idx) for idx in tasks) - sum(len(idx) for idx in todo))
    args = [(trace_ref, profile_ref, card, [scenarios[i] for i in idx], limiter, size, settings) for idx in todo]
    for k, part in executor.map_unordered(run_scenarios, args):  # kept as each finishes; placed by index
        idx = todo[k]
        for i, r in zip(idx, part):
            rows[i] = r
        if on_task:
            on_task(idx, part)
        if progress:
            progress(len(idx))
    assert all(r is not None for r in rows)
    return rows  # type: ignore[return-value]
