"""Issue 12, session 12: the zoo set ``light-ops2`` (the step-ops set's light ops at other shapes and dtypes, measured
as a held-out check of that session's fit)."""

from __future__ import annotations


def test_light_ops2_is_new_and_runs_only_known_ops():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["light-ops2"]()
    names = [k.name for k in z]
    assert len(z) == 16 and len(set(names)) == len(names)
    others = {k.name for s, make in ZOO_SETS.items() if s != "light-ops2" for k in make()}
    assert not set(names) & others  # no repeats: every entry is a shape or dtype no other set ran
    step_ops = {k.op for k in ZOO_SETS["step-ops"]()}
    assert {k.op for k in z} <= step_ops  # the same ops, so the check is of the model, not of a new formula
    by = {k.name: k for k in z}
    up = by["upsample_bilinear_bf16_16x150x128x128_x4"].work
    big, small = 16 * 150 * 512 * 512, 16 * 150 * 128 * 128
    assert up.bytes == 2 * (big + small) and up.dtype == "bf16"
    conv = by["conv2d_bf16_64x64x56x56_to256_k1_graph64"]
    assert conv.work.flops == 2.0 * 64 * 256 * 56 * 56 * 64 * conv.graph and conv.work.tensor
