"""Issue 12, session 12: the zoo set ``copies`` (ATen's strided copies at more shapes and dtypes, and SqueezeBERT's
grouped 1 × 1 convolution), measured for the next session."""

from __future__ import annotations


def test_copies_set_is_new_and_sized_as_a_read_and_a_write():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["copies"]()
    names = [k.name for k in z]
    assert len(z) == 10 and len(set(names)) == len(names)
    assert not set(names) & {k.name for s, make in ZOO_SETS.items() if s != "copies" for k in make()}
    by = {k.name: k for k in z}
    sq = by["copy_nhwc_bf16_32x768x512x1_graph64"]
    assert sq.work.flops == 0 and sq.work.bytes == 64 * 2 * 2 * 32 * 768 * 512  # one read, one write per launch
    tr = by["transpose_fp32_4096x16384_graph8"]
    assert tr.work.bytes == 8 * 2 * 4 * 4096 * 16384
    g = by["gconv1d_bf16_32x768x512_k1_g4_graph16"]  # 768 / 4 input channels per output, kernel 1
    assert g.work.flops == 16 * 2.0 * 32 * 768 * 512 * (768 // 4) and not g.work.tensor
