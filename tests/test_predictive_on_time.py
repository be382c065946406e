"""The predictive DP's shortcut for instances before which no switch can land late, against the full table."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize.switchaware import _dp_predictive, _dp_predictive_many, _late_fractions, candidate_settings

MODELS = {"fast": SwitchModel.from_latency(2e-5), "hopper": dataclasses.replace(get_gpu("h200").switch, spread=0.0)}


@pytest.mark.parametrize("model", MODELS)
def test_on_time_shortcut_gives_the_full_tables_plan(spaan_problem, model):
    """One plan (the shortcut where every late fraction is zero) equals the batched programme, which always builds the
    (S, S', A) table (``tests/test_switchaware_batch.py`` pins the batched programme to the loop before it)."""
    pb, sw = spaan_problem, MODELS[model]
    cand = candidate_settings(pb)[:24]
    fr = _late_fractions(pb, cand, sw, 6)
    on_time = float((fr.reshape(len(fr), -1) == 0).all(axis=1).mean())
    assert on_time > (0.9 if model == "fast" else 0.2)  # the shortcut is taken for most / a quarter of the steps
    lam0 = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    switches = 0
    for lam in (0.0, lam0 / 4, lam0, 4 * lam0):
        one = _dp_predictive(pb, cand, lam, sw, 6, fr)
        full = _dp_predictive_many(pb, cand, [(lam, fr), (lam, fr)])
        assert np.array_equal(one, full[0]) and np.array_equal(one, full[1])
        switches += int((np.diff(one) != 0).sum())
    assert switches > 0


@pytest.mark.parametrize("seed", range(30))
def test_on_time_step_is_the_full_tables_step(seed):
    """One step against the full (S, S', A) table with zero late fractions: the same best state and value per row,
    with ties (values drawn from a few levels), unreachable states (INF) and rows with nothing else reachable."""
    from kdvfs.optimize.switchaware import _on_time_switches

    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 7)), int(rng.integers(3, 7))  # noqa: N806
    val = rng.choice([0.5, 1.0, 1.5, 2.0], size=(S, A)) * rng.choice([1.0, 3.0])
    val[rng.random((S, A)) < [0.0, 0.3, 0.9][seed % 3]] = np.inf
    if seed % 5 == 0:  # only one setting reachable
        val[:] = np.inf
        val[int(rng.integers(S)), int(rng.integers(A))] = 1.0
    own = rng.uniform(0.1, 3.0, S)
    diff = np.repeat(own[None, :, None] - own[:, None, None], A, axis=2)  # (S, S', A)
    cost = np.zeros((1, S, A)) * diff + val[None]
    cost[np.arange(S), np.arange(S)] = np.inf
    flat = cost.reshape(S, S * A)
    want_best = flat.argmin(axis=1)
    out = np.empty(S)
    best = _on_time_switches(val, out)
    assert np.array_equal(best, want_best)
    assert out.tobytes() == flat[np.arange(S), want_best].tobytes()
