"""Switch-aware planning for several scenarios at once (``switch_aware_many``, issue 15's what-if speed) against the
one-request search it replaced: the same schedules, byte for byte.

``_ref_switch_aware`` is the single-request loop as it stood before the batching (main a5ec1e0), kept here only to pin
the rewrite to it; its DP ``_dp`` is pinned to the per-instance loop in ``tests/test_speed.py``.
"""

import dataclasses
import json

import numpy as np
import pytest

from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize import Problem
from kdvfs.optimize.switchaware import (
    _COARSE_SLACK_STEPS,
    _card_costs,
    _dp,
    _dp_predictive,
    _evaluate_sidx,
    _late_fractions,
    _schedule_from_settings,
    _waste_setting_index,
    candidate_settings,
    switch_aware,
    switch_aware_many,
)
from kdvfs.switching import SwitchCosts, check_mechanism

HOPPER = dataclasses.replace(get_gpu("h200").switch, spread=0.0)


def _ref_switch_aware(pb, sw, mechanism="sync", slack_pct=0.0, costs=None, iterations=30):
    check_mechanism(mechanism)
    costs = costs or _card_costs(pb)
    budget = pb.budget(slack_pct)
    cand = candidate_settings(pb)
    results = []

    def consider(sidx, solver):
        ev = _evaluate_sidx(pb, sidx, sw, mechanism, costs)
        results.append((ev["time_s"], ev["energy_j"], sidx, solver, ev))
        return ev["time_s"]

    inst = pb.trace.instances()
    consider(np.full(len(inst), pb.auto), "switch-aware (stay at auto)")
    consider(_waste_setting_index(pb, slack_pct, "kernel"), "switch-aware (naive schedule)")
    lo_slack = 100 * (pb.fastest_time_s / pb.auto_time_s - 1)
    for d in (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0):
        if slack_pct - d >= lo_slack:
            consider(_waste_setting_index(pb, slack_pct - d, "kernel"),
                     f"switch-aware (naive schedule at {slack_pct - d:+g} %)")
    for gran in ("static", "pass"):
        consider(_waste_setting_index(pb, slack_pct, gran), f"switch-aware ({gran} schedule)")
        for d in _COARSE_SLACK_STEPS:
            if d > 0 and slack_pct - d >= lo_slack:
                consider(_waste_setting_index(pb, slack_pct - d, gran),
                         f"switch-aware ({gran} schedule at {slack_pct - d:+g} %)")
    lo, hi = 0.0, None
    lam = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    if mechanism == "predictive":
        cand = cand[:24]
        frac_all = _late_fractions(pb, cand, sw, 6)

    def plan(lam):
        if mechanism == "predictive":
            return _dp_predictive(pb, cand, lam, sw, 6, frac_all)
        return _dp(pb, cand, lam, sw, mechanism, costs)

    for _ in range(iterations):
        t = consider(plan(lam), "switch-aware (DP)")
        if t <= budget:
            hi = lam
            lam = 0.5 * (lo + lam) if lo > 0 else lam / 4
        else:
            lo = lam
            lam = lam * 4 if hi is None else 0.5 * (lam + hi)
        if hi is not None and lo > 0 and (hi - lo) / hi < 1e-3:
            break
    feas = [x for x in results if x[0] <= budget * (1 + 1e-12)]
    pool = feas or results
    best = min(pool, key=lambda x: (x[1], x[0])) if feas else min(pool, key=lambda x: x[0])
    return _schedule_from_settings(pb, best[2], best[3], slack_pct, sw, mechanism, best[4])


def _bytes(s) -> str:
    return json.dumps(s.to_dict(), sort_keys=True)


SWITCHES = [HOPPER, SwitchModel.from_latency(2e-5), SwitchModel.from_latency(0.05, 0.1837)]


@pytest.mark.parametrize("mechanism", ["sync", "callback", "predictive"])
def test_one_request_is_the_loop_it_replaced(spaan_problem, mechanism):
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    for sw, slack in [(HOPPER, 0.0), (SWITCHES[1], 2.0)]:
        pb = Problem(spaan_problem.trace, spaan_problem.profile)  # nothing memoised
        new = switch_aware(pb, sw, mechanism, slack, costs)
        assert _bytes(new) == _bytes(_ref_switch_aware(pb, sw, mechanism, slack, costs))


def test_many_requests_give_each_its_own_schedule(spaan_problem, monkeypatch):
    """A what-if's batch (mixed latencies, mechanisms and costs, one repeated; split into DP batches of 5) equals each
    request planned alone."""
    import kdvfs.optimize.switchaware as sa

    monkeypatch.setattr(sa, "_BATCH", 5)
    h200 = SwitchCosts.for_gpu(get_gpu("h200"))
    reqs = [(sw, m, c) for sw in SWITCHES for m in ("sync", "callback") for c in (None, h200)] + [(HOPPER, "sync", None)]
    pb = Problem(spaan_problem.trace, spaan_problem.profile)
    many = switch_aware_many(pb, reqs, 1.0)
    assert len(many) == len(reqs)
    assert many[-1] is many[0]  # the repeated request is planned once
    for (sw, m, c), s in zip(reqs[1:3] + reqs[-3:-1], many[1:3] + many[-3:-1]):
        alone = _ref_switch_aware(Problem(spaan_problem.trace, spaan_problem.profile), sw, m, 1.0, c)
        assert _bytes(s) == _bytes(alone)
    assert switch_aware(pb, SWITCHES[0], "sync", 1.0) is many[0]  # memoised on the problem


def _ref_coarse_switch_aware(pb, granularity, sw, mechanism="sync", slack_pct=0.0, costs=None):
    """``coarse_switch_aware`` as it stood before it evaluated its tries from their setting indices (a5ec1e0)."""
    from kdvfs.optimize.switchaware import _coarse_schedule, evaluate_with_switching

    costs = costs or SwitchCosts()
    budget = pb.budget(slack_pct)
    lo_slack = 100 * (pb.fastest_time_s / pb.auto_time_s - 1)
    best = None
    for gran, d in [(granularity, d) for d in _COARSE_SLACK_STEPS] + [("static", 0.0)]:
        if slack_pct - d < lo_slack:
            continue
        s = _coarse_schedule(pb, gran, slack_pct - d, slack_pct)
        ev = evaluate_with_switching(pb, s, sw, mechanism, costs)
        if ev["time_s"] <= budget * (1 + 1e-12) and (best is None or ev["energy_j"] < best[1]):
            best = (ev["time_s"], ev["energy_j"], s)
    return best[2]


@pytest.mark.parametrize("mechanism", ["sync", "predictive"])
def test_coarse_switch_aware_is_the_loop_it_replaced(spaan_problem, mechanism):
    from kdvfs.optimize import coarse_switch_aware

    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    for sw in SWITCHES:
        for slack in (0.0, 3.0):
            new = coarse_switch_aware(spaan_problem, "pass", sw, mechanism, slack, costs)
            assert _bytes(new) == _bytes(_ref_coarse_switch_aware(spaan_problem, "pass", sw, mechanism, slack, costs))


def test_predictive_requests_are_planned_together_alike(spaan_problem, monkeypatch):
    """Predictive requests batched (batches of 2 here, so one batch holds a single plan) give each the schedule the
    single-request loop gives."""
    import kdvfs.optimize.switchaware as sa

    monkeypatch.setattr(sa, "_BATCH_PREDICTIVE", 2)
    calls = []
    real = sa._dp_predictive_many
    monkeypatch.setattr(sa, "_dp_predictive_many", lambda pb, cand, jobs: calls.append(len(jobs)) or real(pb, cand, jobs))
    reqs = [(sw, "predictive", None) for sw in SWITCHES]
    pb = Problem(spaan_problem.trace, spaan_problem.profile)
    many = switch_aware_many(pb, reqs, 0.5)
    assert 2 in calls and 1 in calls
    for (sw, m, c), s in zip(reqs, many):
        alone = _ref_switch_aware(Problem(spaan_problem.trace, spaan_problem.profile), sw, m, 0.5, c)
        assert _bytes(s) == _bytes(alone)
