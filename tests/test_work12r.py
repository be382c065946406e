"""Issue 12, session 12 (second part): the passes over global memory the light kernels really make — the spatial
softmax (``cunn_SpatialSoftMaxForward``/``Backward``), group norm (RowwiseMoments, the apply, the backward's internal
gradients) and cuDNN's NCHW ↔ NHWC conversions around a convolution (``kdvfs.work_passes``), each pinned from
arithmetic; and the nine fitted files' rows, whose work must not move."""

from __future__ import annotations

import hashlib

import pytest

from kdvfs.trace import Kernel
from kdvfs.work import op_work
from kdvfs.work_passes import (
    L2_BYTES_MAX,
    group_norm_work,
    layout_copy_bytes,
    layout_tiles,
    spatial_softmax_reread_share,
    spatial_softmax_work,
)

F, B = "float", "c10::BFloat16"
SEG = [16, 150, 512, 512]  # SegFormer-B0's loss head: log-softmax along the 150 classes
N_SEG = 16 * 150 * 512 * 512


# ---------------------------------------------------------------------------------------------- spatial softmax
def test_spatial_log_softmax_reads_its_input_once_per_pass_where_the_resident_columns_spill_l2():
    """Forward: max, sum of exponentials, write — 3 reads + 1 write; backward: the gradient's sum, then gradient and
    output read, input's gradient written — 2 + 1 reads + 1 write. Session 13: the re-reads' share from device memory
    is the L2 curve's at the resident blocks' columns (264 × 1024 × 150 × 8 B = 324 MB: 0.9990 of them)."""
    assert L2_BYTES_MAX < 108 * 1024 * 150 * 4
    f = op_work("aten::_log_softmax", [SEG, [], []], [F, "Scalar", "Scalar"], concrete=["", "1", "False"])
    assert (f.flops, f.dtype) == (5.0 * N_SEG, "fp32")
    assert f.bytes == pytest.approx(4 * 4.0 * N_SEG, rel=1e-3)
    b = op_work("aten::_log_softmax_backward_data", [SEG, SEG, [], []], [F, F, "Scalar", "Scalar"],
                concrete=["", "", "1", "6"])
    assert b.flops == 5.0 * N_SEG and b.bytes == pytest.approx(4 * 4.0 * N_SEG, rel=1e-3)
    # before: 1 + 1 and 3 accesses
    assert f.bytes / (2 * 4.0 * N_SEG) == pytest.approx(2.0, rel=1e-3)


def test_spatial_softmax_counts_few_rereads_where_the_resident_columns_fit():
    """Few positions in all (4 × 64 positions × 150 × 8 B): the whole tensor stays in L2, one read and one write
    (forward), 3 accesses (backward), as the last-dimension kernels that keep a row on chip. (Session 12 counted 19
    classes and bf16 at 150 as hits too; session 13's rule, ``tests/test_work13b.py``, counts their shares.)"""
    assert spatial_softmax_reread_share(4, 150, 64, "fp32") < 1e-6
    n = 4 * 150 * 64
    assert spatial_softmax_work(4, 150, 64, "fp32").bytes == pytest.approx(2 * 4.0 * n)
    assert spatial_softmax_work(4, 150, 64, "fp32", backward=True, log=True).bytes == pytest.approx(3 * 4.0 * n)


def test_spatial_softmax_backward_forms_grad_times_output_first():
    """softmax_backward_cuda_out computes tmp = grad · output (an elementwise kernel: 2 reads + 1 write, 1 FLOP)
    and runs the spatial backward on it."""
    w = spatial_softmax_work(16, 150, 512 * 512, "fp32", backward=True, log=False)
    assert w.flops == 6.0 * N_SEG and w.bytes == pytest.approx(7 * 4.0 * N_SEG, rel=1e-3)
    o = op_work("aten::_softmax_backward_data", [SEG, SEG, [], []], [F, F, "Scalar", "Scalar"],
                concrete=["", "", "1", "6"])
    assert o == w


def test_a_softmax_along_the_last_dimension_keeps_its_formula():
    """inner = 1 (the attention's and the vocabulary's softmax), or no recorded dim: softmax_work as before."""
    from kdvfs.work import softmax_work

    x = [8, 12, 512, 512]
    for conc in (["", "-1", "False"], ["", "3", "False"], None):
        w = op_work("aten::_softmax", [x, [], []], [B, "Scalar", "Scalar"], concrete=conc)
        assert w == softmax_work(8 * 12 * 512 * 512, "bf16", row=512)


# ------------------------------------------------------------------------------------------------------ group norm
def test_group_norm_forward_makes_three_passes():
    """RowwiseMoments reads x, the apply reads x and writes y; the fused parameters (N · C) are not counted."""
    n = 128 * 64 * 56 * 56
    w = op_work("aten::native_group_norm", [[128, 64, 56, 56], [64], [64], [], [], [], [], []], [F, F, F],
                concrete=["", "", "", "128", "64", "3136", "1", "1e-05"])
    assert (w.flops, w.bytes, w.dtype) == (12.0 * n, 3 * 4.0 * n, "fp32")
    assert group_norm_work(n, "fp32") == w


def test_group_norm_backward_re_reads_for_the_input_gradient_whatever_the_weight_mask():
    """ComputeInternalGradients reads dy and x; the apply reads them again and writes dx: 5 passes where dx is asked
    for, with or without γ's and β's gradients (their sums come from the internal gradients); 2 where it is not."""
    n = 32 * 64 * 56 * 56
    dims = [[32, 64, 56, 56], [32, 64, 56, 56], [32, 1], [32, 1], [64], [], [], [], [], []]
    types = [F, F, F, F, F]
    for mask, passes in (("[True, True, True]", 5), ("[True, False, False]", 5), ("[False, True, True]", 2), (None, 5)):
        conc = None if mask is None else ["", "", "", "", "", "32", "64", "3136", "1", mask]
        w = op_work("aten::native_group_norm_backward", dims, types, concrete=conc)
        assert (w.flops, w.bytes) == (12.0 * n, passes * 4.0 * n), mask


def test_layer_and_batch_norm_keep_their_passes():
    """norm_work is shared with layer and batch norm, which the fitted files hold: unchanged."""
    from kdvfs.work import norm_work

    n = 8 * 512 * 768
    assert op_work("aten::native_layer_norm", [[8, 512, 768], [], [768], [768], []], [B, "", B, B]) == norm_work(n, "bf16")
    x = [32, 64, 56, 56]
    assert op_work("aten::native_batch_norm", [x, [64], [64], [64], [64]], [B] * 5) == norm_work(32 * 64 * 56 * 56, "bf16")


# ------------------------------------------------------------------------------------- cuDNN's layout conversions
def test_layout_tiles_follow_the_recorded_grids():
    """characterization16's 1 × 1 bf16 convolution: nchwToNhwc on [7, 10, 128] (the input [128, 320, 14, 14]),
    nhwcToNchw on [7, 40, 128] (the output, 1280 channels)."""
    assert layout_tiles([128, 320, 14, 14]) == 7 * 10 * 128
    assert layout_tiles([128, 1280, 14, 14]) == 7 * 40 * 128
    x, y = [128, 320, 14, 14], [128, 1280, 14, 14]
    assert layout_copy_bytes((7, 10, 128), [x, [1280, 320, 1, 1], y], "bf16") == 2 * 2.0 * 128 * 320 * 196
    assert layout_copy_bytes((7, 40, 128), [x, [1280, 320, 1, 1], y], "bf16") == 2 * 2.0 * 128 * 1280 * 196
    # a tensor the record does not hold: the grid's extent, 32 × 32 per block
    assert layout_copy_bytes((3, 2, 1), [x], "fp32") == 2 * 4.0 * 6 * 1024
    assert layout_copy_bytes(None, [x], "fp32") is None


def _conv_op(dims, name="aten::cudnn_convolution"):
    return {"cat": "cpu_op", "name": name, "ts": 0, "dur": 10,
            "args": {"External id": 7, "Input Dims": dims, "Input type": [B] * len(dims),
                     "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]}}


def test_conversion_kernels_are_priced_as_copies_and_the_gemm_keeps_the_ops_work():
    from kdvfs.kernelwork import kernel_work

    x, w = [128, 320, 14, 14], [1280, 320, 1, 1]
    op = _conv_op([x, w, [], [], [], [], [], [], []])
    names = ["void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "sm90_xmma_fprop_implicit_gemm_bf16",
             "void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16>"]
    grids = [(7, 10, 128), (30, 4, 1), (7, 40, 128)]
    kernels = [Kernel(n, "other" if "cudnn" in n else "gemm", t, grid=g)
               for n, t, g in zip(names, (16e-6, 41e-6, 70e-6), grids)]
    out = kernel_work(kernels, [{"args": {"External id": 7}}] * 3, {7: [op]})
    whole = op_work(op["name"], op["args"]["Input Dims"], op["args"]["Input type"], concrete=op["args"]["Concrete Inputs"])
    assert [k.flops for k in out] == [0.0, pytest.approx(whole.flops), 0.0]
    assert out[0].bytes == 2 * 2.0 * 128 * 320 * 196 and out[2].bytes == 2 * 2.0 * 128 * 1280 * 196
    assert out[1].bytes == pytest.approx(whole.bytes)  # the GEMM: the op's operands once, all of them
    assert {k.work_source for k in out} == {"shapes"}


def test_grouped_convolutions_are_converted_a_group_at_a_time():
    """RegNet's 3 × 3 convolution, 48 channels in 2 groups of 24: cuDNN's grid [392, 1, 32] is one group's input
    [32, 24, 112, 112]."""
    from kdvfs.kernelwork import kernel_work

    op = _conv_op([[32, 48, 112, 112], [48, 24, 3, 3], [], [], [], [], [], [], []])
    k = Kernel("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "other", 1e-5, grid=(392, 1, 32))
    g = Kernel("sm80_xmma_fprop_implicit_gemm_bf16", "gemm", 1e-5, grid=(10, 1, 1))
    out = kernel_work([k, g], [{"args": {"External id": 7}}] * 2, {7: [op]})
    assert out[0].bytes == 2 * 2.0 * 32 * 24 * 112 * 112


def test_conversions_without_a_grid_keep_the_split_by_duration():
    from kdvfs.kernelwork import kernel_work

    op = _conv_op([[8, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []])
    ks = [Kernel("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "other", 2e-5),
          Kernel("sm90_xmma_fprop_implicit_gemm_bf16", "gemm", 6e-5)]
    out = kernel_work(ks, [{"args": {"External id": 7}}] * 2, {7: [op]})
    whole = op_work(op["name"], op["args"]["Input Dims"], op["args"]["Input type"], concrete=op["args"]["Concrete Inputs"])
    assert out[0].bytes == pytest.approx(0.25 * whole.bytes)


def test_the_zoo_prices_its_step_ops_entries_with_the_same_passes():
    from hw_backend.zoo import ZOO_SETS

    by = {k.name: k for k in ZOO_SETS["step-ops"]()}
    assert by["log_softmax_ch_fp32_16x150x512x512"].work.bytes == pytest.approx(4 * 4.0 * N_SEG, rel=1e-3)
    assert by["log_softmax_ch_bwd_fp32_16x150x512x512"].work.bytes == pytest.approx(4 * 4.0 * N_SEG, rel=1e-3)
    n = 128 * 64 * 56 * 56
    assert by["group_norm_fp32_128x64x56x56_g1_graph16"].work.bytes == 16 * 3 * 4.0 * n
    assert by["group_norm_bwd_fp32_128x64x56x56_g1_graph8"].work.bytes == 8 * 5 * 4.0 * n
    x, y, wt = 128 * 320 * 196, 128 * 1280 * 196, 1280 * 320
    # the forward's entry is the GEMM's one Work: its cuDNN layout copies ran apart from it (a row checked as one
    # kernel would sum their traffic with the GEMM's rate; session 12's held-out light-ops2 check, 1980 → 1233 MHz)
    assert by["conv2d_bf16_128x320x14x14_to1280_k1_graph32"].work.bytes == 32 * 2.0 * (x + y + wt)
    # the backward's entry: every kernel it ran (session 13, kdvfs.work_conv; tests/test_work13b.py): the two GEMMs,
    # the wgrad's 128 fp32 partials written and read back by reduce_wgrad_nchw_helper, and the bias's sum over dy
    assert by["conv2d_bwd_bf16_128x320x14x14_to1280_k1_graph16"].work.bytes == 16 * (
        2.0 * (2 * y + 2 * x + wt) + 2 * 128 * wt * 4.0 + 2.0 * wt + 2.0 * (y + 1280))


# ----------------------------------------------------------------------------------------- the fitted files unmoved
# sha256 (16 hex digits) of (name, FLOPs, bytes, dtype, math, working set) of every row kdvfs.h200_rows reads from the
# nine files the bundled fit was fitted on, computed at integ12 (b783636) before this change and after it: equal.
_NINE_DIGEST = "4a83467e8fd67879"


def test_the_nine_fitted_files_rows_keep_their_work():
    from kdvfs.h200_rows import DEFAULT_DATA, load_rows

    rows, gaps, _, _ = load_rows(DEFAULT_DATA)
    h = hashlib.sha256()
    for r in rows + gaps:
        h.update(repr((r["name"], float(r["flops"]).hex(), float(r["bytes"]).hex(), r.get("dtype"), r.get("math"),
                       float(r.get("ws_bytes", 0.0)).hex())).encode())
    assert (len(rows), len(gaps), h.hexdigest()[:16]) == (124, 11, _NINE_DIGEST)
