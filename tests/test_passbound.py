"""The floor under a pass-level try's energy (``kdvfs.optimize.passbound``) holds, and skipping the tries above the best
feasible energy leaves every switch-aware plan as it was (issue 15's speed: most of a cold plan's MILPs)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import kdvfs.optimize.switchaware as sa
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize import Problem, switch_aware
from kdvfs.optimize.passbound import pass_member_floor, reached_instances
from kdvfs.switching import SwitchCosts

HOPPER = dataclasses.replace(get_gpu("h200").switch, spread=0.0)
SWITCHES = [HOPPER, SwitchModel.from_latency(2e-5), SwitchModel.from_latency(0.05, 0.1837),
            dataclasses.replace(HOPPER, stall_while_relocking=True)]


def _bytes(s) -> str:
    return json.dumps(s.to_dict(), sort_keys=True)


@pytest.mark.parametrize("mechanism", ["sync", "callback", "predictive"])
def test_floor_is_below_every_pass_try(spaan_problem, mechanism):
    """Each pass-level try at each slack, evaluated with its switches, uses at least the floor."""
    pb = spaan_problem
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    lo = 100 * (pb.fastest_time_s / pb.auto_time_s - 1)
    checked = 0
    for sw in SWITCHES:
        for slack in (lo + 0.01, -1.0, -0.25, 0.0, 0.4, 2.0, 8.0):
            floor = pass_member_floor(pb, pb.budget(slack), sw, costs.stall_s(mechanism, sw), costs.idle_power_w)
            ev = sa._evaluate_sidx(pb, sa._waste_setting_index(pb, slack, "pass"), sw, mechanism, costs)
            if floor is None:  # near the fastest kernel-level time no pass-level combination fits
                assert slack < -1.5
                continue
            assert floor <= ev["energy_j"]
            if sw is HOPPER:  # and useful: close under the Hopper switch (the 50 ms one gives more back)
                assert ev["energy_j"] - floor < 0.005 * ev["energy_j"]
            checked += 1
    assert checked >= 24


def test_floor_parts(spaan_problem):
    pb = spaan_problem
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    stall = costs.stall_s("sync", HOPPER)
    b = pb.budget(0.0)
    # with no lag nothing is reached: the floor is the least ideal energy over every pair of settings (brute force)
    from kdvfs.optimize.granularity import _group_tables, _groups

    GT, GE = _group_tables(pb, _groups(pb, "pass"))  # noqa: N806
    assert GT.shape[0] == 2
    t = GT[0][:, None] + GT[1][None, :]
    e = GE[0][:, None] + GE[1][None, :]
    brute = float(e[t <= b].min())
    none = SwitchModel(0.0, 0.0)
    assert not reached_instances(pb, 0.0).any()
    floor0 = pass_member_floor(pb, b, none, stall, 80.0)
    assert floor0 == pytest.approx(brute, rel=2e-9) and floor0 <= brute
    # a lag reaches the instances after each pass boundary, more for a longer one, and lowers the floor
    inst = pb.trace.instances()
    passes = np.array([pb.trace.segments[s].pass_name for s in pb.trace.kernel_segment])[inst]
    first = int(np.flatnonzero(passes[1:] != passes[:-1])[0]) + 1
    hopper = reached_instances(pb, 6e-3)
    assert hopper[first] and not hopper[:first].any()
    assert (reached_instances(pb, 0.05) >= hopper).all() and reached_instances(pb, 0.05).sum() > hopper.sum()
    assert pass_member_floor(pb, b, HOPPER, stall, 80.0) < floor0
    assert pass_member_floor(pb, 0.5 * pb.fastest_time_s, HOPPER, stall, 80.0) is None  # nothing fits
    # hand-made negative costs: no floor
    assert pass_member_floor(pb, b, HOPPER, -1e-3, 80.0) is None
    assert pass_member_floor(pb, b, HOPPER, 1e-3, -80.0) is None


@pytest.mark.parametrize(("mechanism", "sw", "slack"), [("sync", HOPPER, 0.0), ("callback", SWITCHES[1], 2.0),
                                                        ("predictive", HOPPER, 0.0), ("sync", SWITCHES[2], 0.5)])
def test_skipping_tries_leaves_the_plan(spaan_problem, mechanism, sw, slack, monkeypatch):
    """A plan with the floor equals the plan with every pass-level try solved, and the floor does skip tries."""
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    solved = []
    real = sa._waste_setting_index

    def spy(pb, sl, gran):
        if gran == "pass":
            solved.append(sl)
        return real(pb, sl, gran)

    monkeypatch.setattr(sa, "_waste_setting_index", spy)
    with_floor = switch_aware(Problem(spaan_problem.trace, spaan_problem.profile), sw, mechanism, slack, costs)
    n_floor = len(solved)
    monkeypatch.setattr(sa, "pass_member_floor", lambda *a: None)
    every = switch_aware(Problem(spaan_problem.trace, spaan_problem.profile), sw, mechanism, slack, costs)
    assert _bytes(with_floor) == _bytes(every)
    assert len(solved) - n_floor > n_floor  # most tries skipped


def test_pass_level_without_costs_prices_stalls_at_the_cards_idle_power(spaan_problem, monkeypatch):
    """``coarse_switch_aware`` without costs prices its tries with the card's costs (as ``switch_aware`` does), not the
    80 W default of a hand-made ``SwitchCosts()``."""
    from kdvfs.optimize import coarse_switch_aware

    seen = []
    real = sa._evaluate_sidx
    monkeypatch.setattr(sa, "_evaluate_sidx", lambda pb, sidx, sw, m, costs: seen.append(costs) or real(pb, sidx, sw, m,
                                                                                                        costs))
    coarse_switch_aware(Problem(spaan_problem.trace, spaan_problem.profile), "pass", HOPPER, "sync", 1.0)
    card = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    assert seen and all(c == card for c in seen) and card.idle_power_w != SwitchCosts().idle_power_w
