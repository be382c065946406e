"""Issue 12, session 13: the zoo set ``light-ops4`` (strided copies, bf16 spatial log-softmax and 1 × 1 convolution backwards at other
shapes and dtypes, measured sealed for the next session)."""

from __future__ import annotations


def test_light_ops4_is_new_and_runs_only_known_ops():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["light-ops4"]()
    names = [k.name for k in z]
    assert len(z) == 11 and len(set(names)) == len(names)
    others = [k for s, make in ZOO_SETS.items() if s != "light-ops4" for k in make()]
    assert not set(names) & {k.name for k in others}  # no repeats: every entry is a shape or dtype no set ran
    assert not {(k.op, k.dtype, k.shape) for k in z} & {(k.op, k.dtype, k.shape) for k in others}
    assert {k.op for k in z} <= {k.op for k in others}  # known ops: the check is of the model, not of a new formula
    by = {k.name: k for k in z}
    conv = by["conv2d_bwd_bf16_64x256x56x56_to64_k1_graph16"]
    assert conv.work.tensor and conv.work.flops >= 2 * 2.0 * 64 * 64 * 56 * 56 * 256 * conv.graph  # dgrad + wgrad
    t = by["transpose_fp32_2048x32768_graph8"].work
    assert t.bytes >= 2 * 4 * 2048 * 32768 * 8 and t.flops == 0  # at least a read and a write of each element
