"""The predictive DP's shared late products (issue 15 item 7, session 12): steps whose (kernel, late fractions) pair
recurs add one product made once per plan. Checked against the per-instance loop before the speed work and the
batched full-table programme on random problems whose instances repeat a block of kernels, as a transformer's layers
do (so that pairs recur with fractions strictly between 0 and 1), plus one-off instances between the blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kdvfs.gpus import SwitchModel
from kdvfs.optimize.switchaware import _dp_predictive, _dp_predictive_many, _late_fractions
from kdvfs.optimize.switchaware_predictive import _late_steps

sys.path.insert(0, str(Path(__file__).parent))
from dp_problems import problem, tables  # noqa: E402
from test_speed import _old_dp_predictive  # noqa: E402


def _layered(seed: int, levels: bool):
    rng = np.random.default_rng(seed)
    K, S = int(rng.integers(3, 7)), int(rng.integers(3, 8))  # noqa: N806
    T, E = tables(rng, K, S, levels)  # noqa: N806
    block = rng.integers(0, K, int(rng.integers(2, 6)))
    parts = [rng.integers(0, K, int(rng.integers(0, 3)))]
    for _ in range(int(rng.integers(3, 9))):
        parts += [block, rng.integers(0, K, int(rng.integers(0, 2)))]
    return problem(np.concatenate(parts).astype(np.int64), T, E)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), levels=st.booleans(), latency_us=st.sampled_from([50, 600, 1500, 4000]),
       lam=st.sampled_from([0.0, 30.0, 200.0]))
def test_shared_products_give_the_old_loops_plan(seed, levels, latency_us, lam):
    pb, cand = _layered(seed, levels)
    sw = SwitchModel.from_latency(latency_us * 1e-6)
    fr = _late_fractions(pb, cand, sw, 6)
    steps = _late_steps(fr, pb.trace.instances())
    one = _dp_predictive(pb, cand, lam, sw, 6, fr, steps)
    assert np.array_equal(one, _old_dp_predictive(pb, cand, lam, sw))
    assert np.array_equal(one, _dp_predictive_many(pb, cand, [(lam, fr)])[0])
    # the search reuses its steps (and their scratch products) for every plan: a second plan is the same
    assert np.array_equal(_dp_predictive(pb, cand, lam, sw, 6, fr, steps), one)


def test_the_layered_problems_share_pairs_with_fractional_fractions():
    """The problems above do take the shared path, with products that are not just 0·diff or 1·diff, and also leave
    one-off pairs to the per-step path: the comparison covers both."""
    shared_fractional = one_off = 0
    for seed in range(30):
        pb, cand = _layered(seed, seed % 2 == 0)
        inst = pb.trace.instances()
        for latency_us in (600, 1500):
            fr = _late_fractions(pb, cand, SwitchModel.from_latency(latency_us * 1e-6), 6)
            steps = _late_steps(fr, inst)
            for i, p in enumerate(steps.pair):
                if p >= 0:
                    assert steps.pair_kernel[p] == inst[i] and steps.pair_frac[p, 0].tobytes() == fr[i].tobytes()
                    f = fr[i]
                    shared_fractional += bool(((f > 0) & (f < 1)).any())
                elif steps.kind[i]:
                    one_off += 1
            counts = np.bincount([p for p in steps.pair if p >= 0], minlength=len(steps.pair_kernel))
            assert (counts >= 2).all()  # a pair is shared only where two steps or more use it
    assert shared_fractional > 0 and one_off > 0


def test_a_bounded_scratch_shares_the_most_used_pairs_and_plans_alike(monkeypatch):
    """Where the shared products would outgrow their bound, the most used pairs are shared and the rest keep the
    per-step product: the plans are the same either way."""
    import kdvfs.optimize.switchaware_predictive as sp

    sw = SwitchModel.from_latency(1.5e-3)
    checked = 0
    for seed in range(6):
        pb, cand = _layered(seed, seed % 2 == 0)
        inst = pb.trace.instances()
        fr = _late_fractions(pb, cand, sw, 6)
        full = _late_steps(fr, inst)
        if len(full.pair_kernel) < 2:
            continue
        uses = np.bincount([p for p in full.pair if p >= 0])
        monkeypatch.setattr(sp, "_SHARED_BYTES", len(cand) ** 2 * 6 * 8)  # room for one pair
        one = _late_steps(fr, inst)
        monkeypatch.undo()
        assert len(one.pair_kernel) == 1 and sum(p == 0 for p in one.pair) == uses.max()
        for lam in (0.0, 30.0):
            assert np.array_equal(_dp_predictive(pb, cand, lam, sw, 6, fr, one), _old_dp_predictive(pb, cand, lam, sw))
        checked += 1
    assert checked >= 2
