"""The predictive DP's steps where a switch can land late only after a one-instance run (age 0 alone, issue 15 item 7),
against the full (S, S', A) table of the batched programme and the per-instance loop before the speed work, on random
problems: kernel times around the switch latency (so that on-time, age-0-only and full steps all occur), values drawn
from a few levels (exact ties) and λ = 0."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kdvfs.gpus import SwitchModel
from kdvfs.optimize.switchaware import _dp_predictive, _dp_predictive_many, _late_fractions

sys.path.insert(0, str(Path(__file__).parent))
from dp_problems import problem, tables  # noqa: E402
from test_speed import _old_dp_predictive  # noqa: E402


def _problem(seed: int, levels: bool):
    rng = np.random.default_rng(seed)
    K, S, n = int(rng.integers(2, 6)), int(rng.integers(3, 8)), int(rng.integers(8, 60))  # noqa: N806
    T, E = tables(rng, K, S, levels)  # noqa: N806
    return problem(rng.integers(0, K, n), T, E)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), levels=st.booleans(), latency_us=st.sampled_from([50, 600, 1500, 4000]),
       lam=st.sampled_from([0.0, 30.0, 200.0]))
def test_age0_steps_give_the_full_tables_plan(seed, levels, latency_us, lam):
    pb, cand = _problem(seed, levels)
    sw = SwitchModel.from_latency(latency_us * 1e-6)
    fr = _late_fractions(pb, cand, sw, 6)
    one = _dp_predictive(pb, cand, lam, sw, 6, fr)
    assert np.array_equal(one, _dp_predictive_many(pb, cand, [(lam, fr)])[0])
    assert np.array_equal(one, _old_dp_predictive(pb, cand, lam, sw))


def test_the_random_problems_reach_every_kind_of_step():
    """The problems above do take the age-0 path (and the on-time and full ones): the comparison covers it."""
    kinds = set()
    for seed in range(40):
        pb, cand = _problem(seed, seed % 2 == 0)
        for latency_us in (600, 1500):
            fr = _late_fractions(pb, cand, SwitchModel.from_latency(latency_us * 1e-6), 6)[1:]
            late = fr != 0
            kinds |= {"on time"} if (~late).all(axis=(1, 2)).any() else set()
            kinds |= {"age 0"} if (late[:, :, 0].any(axis=1) & ~late[:, :, 1:].any(axis=(1, 2))).any() else set()
            kinds |= {"full"} if late[:, :, 1:].any(axis=(1, 2)).any() else set()
    assert kinds == {"on time", "age 0", "full"}
