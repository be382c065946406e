"""The speculative λ search (``kdvfs.optimize.lamsearch``) against the bisection one step at a time: the same λ tried,
the same plans, the same schedules."""

import dataclasses
import json

import numpy as np
import pytest

import kdvfs.optimize.switchaware as sa
from kdvfs.bundled import load_trace_by_name, resolve_profile_path
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize import Problem
from kdvfs.optimize.lamsearch import bisect_next, dp_lazy, tree
from kdvfs.profile import load_profile


def _walk(state, feasible, depth):
    """λ tried by walking trees of ``depth`` (one per round) under the predicate ``feasible``."""
    tried = []
    while state[3] > 0:
        nodes = tree(state, depth)
        j = 0
        while j < len(nodes) and nodes[j] is not None:
            assert nodes[j] == state
            ok = feasible(state[1])
            tried.append(state[1])
            state = bisect_next(state, ok)
            j = 2 * j + (2 if ok else 1)
    return tried


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_tree_walk_is_the_bisection_under_a_non_monotone_predicate(depth):
    rng = np.random.default_rng(depth)
    cuts = np.sort(rng.uniform(0.01, 50.0, 9))

    def feasible(lam):  # alternates between the cuts: not monotone in λ
        return bool(np.searchsorted(cuts, lam) % 2)

    assert _walk((0.0, 1.0, None, 30), feasible, depth) == _walk((0.0, 1.0, None, 30), feasible, 1)


def _dump(s):
    return json.dumps(s.to_dict(), sort_keys=True)


@pytest.mark.parametrize("trace", ["gpt3xl-llmc-rtx3080ti", "gpt3xl-torch-h200-bf16"])
def test_speculative_schedules_are_the_bisections(trace, monkeypatch):
    t, prof = load_trace_by_name(trace), load_profile(resolve_profile_path(trace))
    models = [dataclasses.replace(get_gpu("h200").switch, spread=0.0), SwitchModel.from_latency(1e-3)]
    for sw in models:
        for mech in ("sync", "callback", "predictive"):
            monkeypatch.setattr(sa, "_TREE_JOBS", 1)
            monkeypatch.setattr(sa, "_TREE_JOBS_PREDICTIVE", 1)
            ref = _dump(sa.switch_aware(Problem(t, prof), sw, mech, 1.0))
            monkeypatch.setattr(sa, "_TREE_JOBS", 7)
            monkeypatch.setattr(sa, "_TREE_JOBS_PREDICTIVE", 3)
            assert _dump(sa.switch_aware(Problem(t, prof), sw, mech, 1.0)) == ref


def test_dp_lazy_is_dp_many():
    t = load_trace_by_name("gpt3xl-llmc-rtx3080ti")
    pb = Problem(t, load_profile(resolve_profile_path("gpt3xl-llmc-rtx3080ti")))
    cand = sa.candidate_settings(pb)
    costs = sa._card_costs(pb)
    sw = SwitchModel.from_latency(1e-3)
    jobs = [(lam, sw, m, costs) for lam in (0.3, 7.0, 200.0) for m in ("sync", "callback")]
    stall, own, trans = sa._tables(pb, cand, jobs, True)
    lazy = dp_lazy(pb.trace.instances(), own, trans, stall)
    for j, ref in enumerate(sa._dp_many(pb, cand, jobs)):
        assert np.array_equal(cand[lazy.plan(j)], ref)
