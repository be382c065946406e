"""The switch-aware planner's memo of exact evaluations: each distinct plan evaluated once, the values those of a fresh
evaluation, the schedule unchanged."""

import dataclasses

import numpy as np
import pytest

import kdvfs.optimize.switchaware as sa
from kdvfs.gpus import get_gpu
from kdvfs.optimize import Problem
from kdvfs.optimize.switchaware import switch_aware
from kdvfs.switching import SwitchCosts

HOPPER = dataclasses.replace(get_gpu("h200").switch, spread=0.0)


@pytest.mark.parametrize("mechanism", ["sync", "predictive"])
def test_each_distinct_plan_is_evaluated_once_and_the_schedule_is_unchanged(spaan_problem, monkeypatch, mechanism):
    pb0 = spaan_problem
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    plain = switch_aware(Problem(pb0.trace, pb0.profile), HOPPER, mechanism, 0.0, costs)
    seen: list[bytes] = []
    tries: list[bytes] = []
    evaluate = sa._evaluate_sidx
    evaluated = sa._Search.evaluated

    def counting(pb, sidx, *a):
        seen.append(sidx.tobytes())
        return evaluate(pb, sidx, *a)

    def recording(self, sidx, solver):
        tries.append(sidx.tobytes())
        x = evaluated(self, sidx, solver)
        fresh = evaluate(self.pb, sidx, self.sw, self.mechanism, self.costs)  # the memo's values are a fresh one's
        assert x[4].keys() == fresh.keys()
        for key, v in fresh.items():
            assert type(x[4][key]) is type(v) and np.asarray(x[4][key]).tobytes() == np.asarray(v).tobytes(), key
        return x

    monkeypatch.setattr(sa, "_evaluate_sidx", counting)
    monkeypatch.setattr(sa._Search, "evaluated", recording)
    again = switch_aware(Problem(pb0.trace, pb0.profile), HOPPER, mechanism, 0.0, costs)
    assert again.to_dict() == plain.to_dict()
    assert sorted(seen) == sorted(set(tries))  # every distinct plan evaluated once (the check's own calls not counted)
    if mechanism == "sync":
        assert len(set(tries)) < len(tries)  # plans repeat here: the memo is used
