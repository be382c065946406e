"""Policies against auto under the card's power limiter, and the what-if before and after it.

``limited_rows`` simulates each policy's schedule under the limiter (``simulator.limiter``, fast path, after one
warm-up iteration) and compares it with the all-auto schedule under the same limiter. The policies are those of the
what-if (pass-level, kernel-level ideal with free switching, naive, switch-aware), chosen as before from the
profile's isolated prices, plus the same three kernel-level policies chosen *under* the limiter
(``kdvfs.optimize.limited``): there, slowing memory-bound kernels lowers the step's power and buys clock for the GEMMs.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from kdvfs.errors import InputError, KdvfsError
from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.limiter import CeilingTables, LimiterModel
from kdvfs.model import KernelParams
from kdvfs.optimize.granularity import allocate_schedule
from kdvfs.optimize.limited import limited_tables, optimize_limited, priced_problem
from kdvfs.optimize.problem import Problem
from kdvfs.optimize.switchaware import coarse_switch_aware, switch_aware
from kdvfs.switching import SwitchCosts
from simulator.api import simulate
from simulator.engine import SimConfig

__all__ = ["COMPARE_KEYS", "LIMITED_POLICIES", "before_after", "limited_compare_rows", "limited_rows",
           "limited_scenario_row"]

log = logging.getLogger(__name__)

LIMITED_POLICIES = ("auto", "pass", "ideal", "naive", "switch-aware", "limiter-aware ideal", "limiter-aware naive",
                    "limiter-aware switch-aware")


def limited_rows(pb: Problem, spec: GpuSpec, params: KernelParams, lim: LimiterModel, sw: SwitchModel,
                 mechanism: str, slack_pct: float, tables: CeilingTables | None = None,
                 policies=LIMITED_POLICIES, progress=None) -> list[dict]:
    """One row per policy: time and energy change against auto, both simulated under the limiter (``progress(1)``
    after each)."""
    sw = dataclasses.replace(sw, spread=0.0)
    costs = SwitchCosts(idle_power_w=spec.idle_power_w)
    paid = SimConfig(mechanism=mechanism, switch=sw, costs=costs)
    free = SimConfig(mechanism="sync", switch=SwitchModel(0.0, 0.0), costs=SwitchCosts(0.0, 0.0, spec.idle_power_w))
    tables = tables or limited_tables(pb, spec, params)

    def sim(s, cfg):
        return simulate(pb.trace, pb.profile, s, spec, cfg, path="fast", limiter=lim, params=params)

    auto = sim(allocate_schedule(pb, "static", auto=True), free)
    bound_s = auto.time_s * (1 + slack_pct / 100.0) * (1 + 1e-12)

    def within(make):
        """The first schedule ``make(d)`` (planned with d points less slack) whose time under the limiter keeps the
        bound, simulated; all-auto when none does. Policies that pay their switches must keep the slack as every
        other path does (a plan priced in isolation can run slower once the limiter couples the kernels)."""
        for d in sorted({0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0} | ({slack_pct} if slack_pct > 0 else set())):
            try:
                r = sim(make(d), paid)
            except KdvfsError:
                continue
            if r.time_s <= bound_s:
                return r
        return auto

    plan = None
    rows = []
    for pol in policies:
        if pol not in LIMITED_POLICIES:
            raise InputError(f"policy {pol!r} is not one of {', '.join(LIMITED_POLICIES)}")
        if pol == "auto":
            r = auto
        elif pol == "pass":
            r = within(lambda d: coarse_switch_aware(pb, "pass", sw, mechanism, slack_pct - d, costs))
        elif pol in ("ideal", "naive"):
            r = sim(allocate_schedule(pb, "kernel", slack_pct), free if pol == "ideal" else paid)
        elif pol == "switch-aware":
            r = within(lambda d: switch_aware(pb, sw, mechanism, slack_pct - d, costs))
        else:
            if plan is None:
                plan = optimize_limited(pb, spec, params, lim, slack_pct, tables=tables)
            if pol == "limiter-aware switch-aware":
                # plan the switch points on prices at the plan's own ceiling, against the same time bound
                pf = priced_problem(pb, tables, plan.steady.ceiling_mhz)
                slack_f = 100.0 * (plan.auto.time_s * (1 + slack_pct / 100.0) / pf.auto_time_s - 1)
                r = within(lambda d, pf=pf, slack_f=slack_f: switch_aware(pf, sw, mechanism, slack_f - d, costs))
            else:
                r = sim(plan.schedule, free if pol == "limiter-aware ideal" else paid)
        rows.append({"policy": pol, "slack_pct": slack_pct, "mechanism": mechanism, "switch_latency_s": sw.total_s,
                     # no plan of this policy kept the slack under the limiter but all-auto: the row is auto's
                     "fell_back_to_auto": pol != "auto" and r.switches == 0
                     and math.isclose(r.time_s, auto.time_s, rel_tol=1e-12)
                     and math.isclose(r.energy_j, auto.energy_j, rel_tol=1e-12),
                     "time_change_pct": 100 * (r.time_s / auto.time_s - 1),
                     "energy_change_pct": 100 * (r.energy_j / auto.energy_j - 1), "switches": r.switches,
                     "median_core_mhz": r.limiter.median_core_mhz, "steady_ceiling_mhz": r.limiter.steady_ceiling_mhz,
                     "time_s": r.time_s, "energy_j": r.energy_j})
        if progress is not None:
            progress(1)
    return rows



COMPARE_KEYS = ("policy", "time_change_pct", "energy_change_pct", "switches", "fell_back_to_auto")
"""The columns of ``kdvfs compare`` under the limiter."""


def limited_compare_rows(pb: Problem, spec: GpuSpec, params: KernelParams, lim: LimiterModel, sw: SwitchModel,
                         mechanism: str, slack_pct: float, progress=None) -> list[dict]:
    """``kdvfs compare`` under the card's power limiter: every policy of ``limited_rows`` (the isolated choices and
    the limiter-aware ones), with the comparison's columns only (``progress(1)`` after each policy)."""
    return [{k: r[k] for k in COMPARE_KEYS}
            for r in limited_rows(pb, spec, params, lim, sw, mechanism, slack_pct, progress=progress)]

def before_after(trace_ref: str, pb: Problem, spec: GpuSpec, params: KernelParams, lim: LimiterModel,
                 mechanisms, slacks) -> dict:
    """Each policy's change against auto before (isolated throttling, the profile as it is) and after (under the
    limiter; the limiter-aware policies beside the isolated choices), for the preset's own switch model."""
    from simulator.whatif import Scenario, run_scenario

    tables = limited_tables(pb, spec, params)
    rows = []
    auto: dict | None = None
    for mech in mechanisms:
        for slack in slacks:
            for r in limited_rows(pb, spec, params, lim, spec.switch, mech, slack, tables):
                if r["policy"] == "auto":
                    auto = r
                if not r["policy"].startswith("limiter-aware"):
                    b = run_scenario(trace_ref, pb.trace.name, spec.name, Scenario(spec.name, None, mech, r["policy"], slack),
                                     limiter=False)
                    r["before"] = {k: b[k] for k in ("time_change_pct", "energy_change_pct", "switches")}
                rows.append(r)
    if auto is None:
        raise InputError("the limited what-if produced no auto row; give at least one mechanism and one slack")
    return {"auto": {"time_s": auto["time_s"], "energy_j": auto["energy_j"], "median_core_mhz": auto["median_core_mhz"],
                     "steady_ceiling_mhz": auto["steady_ceiling_mhz"], "isolated_time_s": pb.auto_time_s,
                     "isolated_energy_j": pb.auto_energy_j},
            "rows": rows}


_LIMITED_CACHE: dict = {}


def limited_scenario_row(trace_ref: str, pb: Problem, card, policy: str, sw: SwitchModel, mechanism: str,
                         slack_pct: float) -> dict:
    """``simulator.whatif`` with the limiter on: the policy's limiter-aware counterpart (ideal, naive, switch-aware
    chosen under the limiter; auto and pass as they are), simulated under the card's limiter."""
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import limiter_for, limiter_params

    spec = get_gpu(card) if isinstance(card, str) else card  # a card adapted to an anchored profile comes as itself
    lim = limiter_for(spec)
    if lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; run the what-if with --limiter off")
    key = (trace_ref, id(pb), spec.name)  # one profile (id) has one card
    if key not in _LIMITED_CACHE:
        params = limiter_params(pb.trace, spec, lim)
        _LIMITED_CACHE[key] = (params, limited_tables(pb, spec, params))
    params, tables = _LIMITED_CACHE[key]
    pol = policy if policy in ("auto", "pass") else f"limiter-aware {policy}"
    return limited_rows(pb, spec, params, lim, sw, mechanism, slack_pct, tables, policies=(pol,))[0]
