"""Issue 12, session 13: the zoo set ``light-ops3`` (spatial log-softmax, row softmax and 1 × 1 convolutions at other
shapes and dtypes, measured sealed as a held-out check of that session's softmax and convolution rules)."""

from __future__ import annotations


def test_light_ops3_is_new_and_runs_only_known_ops():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["light-ops3"]()
    names = [k.name for k in z]
    assert len(z) == 12 and len(set(names)) == len(names)
    others = [k for s, make in ZOO_SETS.items() if s != "light-ops3" for k in make()]
    assert not set(names) & {k.name for k in others}  # no repeats: every entry is a shape or dtype no set ran
    assert not {(k.op, k.dtype, k.shape) for k in z} & {(k.op, k.dtype, k.shape) for k in others}
    assert {k.op for k in z} <= {k.op for k in others}  # known ops: the check is of the model, not of a new formula
    by = {k.name: k for k in z}
    conv = by["conv2d_bf16_128x256x28x28_to512_k1_graph64"]
    assert conv.work.flops == 2.0 * 128 * 512 * 28 * 28 * 256 * conv.graph and conv.work.tensor
