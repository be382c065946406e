"""The sync/callback DP's cheap step (``kdvfs.optimize.switchaware_sync``, issue 15 item 7, session 13): one plan
must be ``_dp_many``'s (the full 48 × 48 table at every step) and the per-instance loop's before the speed work, bit
for bit, on random problems with exact ties, transitions shorter and longer than the kernels, and λ from 0 up."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kdvfs.optimize.switchaware_sync as ss
from kdvfs.gpus import SwitchModel
from kdvfs.optimize.switchaware import _dp, _dp_many
from kdvfs.switching import SwitchCosts

sys.path.insert(0, str(Path(__file__).parent))
from dp_problems import problem, tables  # noqa: E402
from test_speed import _old_dp  # noqa: E402

COSTS = SwitchCosts(sync_overhead_s=1e-5, callback_overhead_s=0.0, idle_power_w=80.0)


def _layered(seed: int, levels: bool):
    """A block of kernels repeated as layers are, with one-off kernels between (the shape of a training step)."""
    rng = np.random.default_rng(seed)
    K, S = int(rng.integers(2, 7)), int(rng.integers(2, 9))  # noqa: N806
    T, E = tables(rng, K, S, levels)  # noqa: N806
    block = rng.integers(0, K, int(rng.integers(1, 6)))
    parts = [rng.integers(0, K, int(rng.integers(1, 4)))]
    for _ in range(int(rng.integers(2, 9))):
        parts += [block, rng.integers(0, K, int(rng.integers(0, 3)))]
    return problem(np.concatenate(parts).astype(np.int64), T, E)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), levels=st.booleans(), latency_us=st.sampled_from([50, 600, 1500, 4000]),
       lam=st.sampled_from([0.0, 30.0, 200.0, 1e4]), mechanism=st.sampled_from(["sync", "callback"]))
def test_one_plan_is_the_full_tables_plan(seed, levels, latency_us, lam, mechanism):
    pb, cand = _layered(seed, levels)
    sw = SwitchModel.from_latency(latency_us * 1e-6)
    one = _dp(pb, cand, lam, sw, mechanism, COSTS)
    assert np.array_equal(one, _dp_many(pb, cand, [(lam, sw, mechanism, COSTS)])[0])
    assert np.array_equal(one, _old_dp(pb, cand, lam, sw, mechanism, COSTS))


def _cheap_and_full(caplog, pb, cand, lam, sw) -> tuple[int, int]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=ss.__name__):
        _dp(pb, cand, lam, sw, "sync", COSTS)
    (msg,) = [r.getMessage() for r in caplog.records if r.name == ss.__name__]
    full, steps = (int(x) for x in msg.split(": ")[1].split(" steps")[0].split(" of "))
    return steps - full, full


def test_the_random_problems_take_both_steps(caplog):
    """The problems above do take the cheap step and the full one (near-ties and rows that differ), with
    transitions that cover the kernel and ones that do not: the comparison covers both."""
    cheap = full = 0
    for seed in range(30):
        pb, cand = _layered(seed, seed % 2 == 0)
        for latency_us, lam in ((600, 30.0), (1500, 0.0), (4000, 200.0)):
            c, f = _cheap_and_full(caplog, pb, cand, lam, SwitchModel.from_latency(latency_us * 1e-6))
            cheap, full = cheap + c, full + f
    assert cheap > 0 and full > 0


def test_the_margin_is_what_keeps_the_plans(monkeypatch):
    """Without the proof (every step cheap) some plans differ from the full table's: the check has teeth."""
    monkeypatch.setattr(ss, "_MARGIN", -np.inf)
    differ = 0
    for seed in range(40):
        pb, cand = _layered(seed, seed % 2 == 0)
        for latency_us, lam in ((600, 30.0), (1500, 0.0)):
            sw = SwitchModel.from_latency(latency_us * 1e-6)
            differ += not np.array_equal(_dp(pb, cand, lam, sw, "sync", COSTS),
                                         _dp_many(pb, cand, [(lam, sw, "sync", COSTS)])[0])
    assert differ > 0


@pytest.mark.parametrize("mechanism", ["sync", "callback"])
def test_the_benchmark_plans_are_mostly_cheap(spaan_problem, caplog, mechanism):
    """On the bundled RTX trace (48 candidates) at the search's first λ nearly every step is cheap, and the plan is
    the full table's."""
    from kdvfs.optimize.switchaware import candidate_settings

    pb = spaan_problem
    cand = candidate_settings(pb)
    sw = SwitchModel.from_latency(1e-3)
    lam = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    cheap, full = _cheap_and_full(caplog, pb, cand, lam, sw)
    assert cheap > 0.9 * (cheap + full)
    assert np.array_equal(_dp(pb, cand, lam, sw, mechanism, COSTS),
                          _dp_many(pb, cand, [(lam, sw, mechanism, COSTS)])[0])


@pytest.mark.parametrize("mechanism", ["sync", "predictive"])
def test_the_transposed_table_is_the_tables_transpose(mechanism):
    """``_transition_table_t`` writes ``_transition_table``'s floats, laid out (kernel, old, new)."""
    from kdvfs.optimize.switchaware import _transition_table

    for seed in range(10):
        pb, cand = _layered(seed, seed % 2 == 0)
        sw = SwitchModel.from_latency(1e-3)
        K, S = pb.T.shape  # noqa: N806
        a, b = np.empty((K, S, S)), np.empty((K, S, S))
        _transition_table(pb, cand, 30.0, sw, mechanism, a)
        tr = sw.host_call_s + sw.transition_s if mechanism == "predictive" else sw.transition_s
        ss._transition_table_t(pb.T[:, cand], pb.E[:, cand], 30.0, tr, b)
        assert a.transpose(0, 2, 1).tobytes() == b.tobytes()
