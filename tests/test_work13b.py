"""Issue 12, session 13 (helper i13b): the spatial softmax's re-reads judged on the resident blocks' columns, the
convolution backward's kernels priced by what each computes (``kdvfs.work_conv``), and index_select / embedding priced
by the slices they select; importer and zoo sharing each definition."""

from __future__ import annotations

import pytest

from kdvfs.trace import Kernel
from kdvfs.work import Work, op_work
from kdvfs.work_conv import conv_backward_parts, conv_backward_role, conv_backward_work
from kdvfs.work_passes import (
    L2_BYTES_MAX,
    spatial_softmax_block,
    spatial_softmax_reread_share,
    spatial_softmax_resident_bytes,
    spatial_softmax_work,
)

F, B = "float", "c10::BFloat16"


# ---------------------------------------------------------------------------------------------- spatial softmax
def test_resident_blocks_follow_atens_block_and_the_sms_thread_slots():
    """Blocks of (1, 1024) where inner ≥ 1024: two per SM, 264 on the H200 (characterization17's launch records:
    grid [2, 256] and [5, 64] of [1, 1024]); few inner positions and ≥ 64 classes: more threads along the classes."""
    assert spatial_softmax_block(19, 512 * 512) == (1, 1024)
    assert spatial_softmax_block(150, 4) == (128, 4)
    assert spatial_softmax_block(19, 4) == (1, 4)  # fewer than 64 classes: one thread per position
    assert spatial_softmax_resident_bytes(32, 19, 512 * 512, 8) == 264 * 1024 * 19 * 8
    # fewer positions than the card holds: all of them
    assert spatial_softmax_resident_bytes(2, 150, 64, 4) == 2 * 64 * 150 * 4


@pytest.mark.parametrize("dtype,size", [("fp32", 4), ("bf16", 2)])
def test_spatial_softmax_passes_by_session_12s_rule(dtype, size):
    """The model keeps session 12's rule (held-out light-ops3 read the graded share worse): resident [8, 19, 32, 32]:
    1 read + 1 write forward, 3 accesses backward; [16, 150, 512, 512] spills at fp32 (108 × 1024 × 150 × 4 B = 66 MB
    > 50 MiB: 3 reads + 1 write forward, 2 + 1 reads + 1 write backward) and not at bf16 (33 MB)."""
    small, big = (8, 19, 32 * 32), (16, 150, 512 * 512)
    n_s, n_b = 8 * 19 * 1024, 16 * 150 * 512 * 512
    assert spatial_softmax_work(*small, dtype).bytes == 2 * size * n_s
    assert spatial_softmax_work(*small, dtype, backward=True, log=True).bytes == 3 * size * n_s
    passes_f, passes_b = (4, 4) if dtype == "fp32" else (2, 3)
    assert spatial_softmax_work(*big, dtype).bytes == passes_f * size * n_b
    assert spatial_softmax_work(*big, dtype, backward=True, log=True).bytes == passes_b * size * n_b
    # FLOPs: 5 per element whatever the passes
    assert spatial_softmax_work(*big, dtype).flops == 5.0 * n_b


def test_the_reread_share_is_the_l2_curve_at_the_resident_columns_of_every_tensor_touched():
    """Session 13's candidate (kept for the diagnosis, not used by the model): characterization17's fp32 19-class
    entries, between the two: the forward's columns (input and output) are 41 MB, the backward's (gradient, output,
    result) 62 MB; the share 1 / (1 + (50 MiB / ws)^4). The model's work for them is session 12's (no spill: 1 + 1)."""
    ws_f, ws_b = 264 * 1024 * 19 * 8, 264 * 1024 * 19 * 12
    phi_f = 1 / (1 + (L2_BYTES_MAX / ws_f) ** 4)
    phi_b = 1 / (1 + (L2_BYTES_MAX / ws_b) ** 4)
    assert spatial_softmax_reread_share(32, 19, 512 * 512, "fp32") == pytest.approx(phi_f)
    assert spatial_softmax_reread_share(32, 19, 512 * 512, "fp32", backward=True) == pytest.approx(phi_b)
    assert 0.2 < phi_f < 0.35 < 0.6 < phi_b < 0.7
    n = 32 * 19 * 512 * 512
    assert spatial_softmax_work(32, 19, 512 * 512, "fp32").bytes == 2 * 4 * n
    assert spatial_softmax_work(32, 19, 512 * 512, "fp32", backward=True, log=True).bytes == 3 * 4 * n
    # the importer takes the same: aten::_log_softmax along dim 1
    x = [32, 19, 512, 512]
    assert op_work("aten::_log_softmax", [x, [], []], [F, "Scalar", "Scalar"], concrete=["", "1", "False"]) == \
        spatial_softmax_work(32, 19, 512 * 512, "fp32", log=True)


def test_the_zoo_softmax_entries_take_the_importers_passes():
    from hw_backend.zoo import ZOO_SETS

    by = {k.name: k for k in ZOO_SETS["light-ops2"]()}
    k = by["log_softmax_ch_bf16_16x150x256x256_graph8"]
    assert k.work.bytes == pytest.approx(8 * spatial_softmax_work(16, 150, 256 * 256, "bf16", log=True).bytes)
    k = by["log_softmax_ch_bwd_fp32_32x19x512x512_graph4"]
    w = spatial_softmax_work(32, 19, 512 * 512, "fp32", backward=True, log=True)
    assert (k.work.flops, k.work.bytes) == pytest.approx((4 * w.flops, 4 * w.bytes))


# ------------------------------------------------------------------------------------------ convolution backward
def test_the_kernel_roles_by_name():
    assert conv_backward_role("void cudnn::cnn::reduce_wgrad_nchw_helper<float, __nv_bfloat16>(void*)") == "wgrad_reduce"
    assert conv_backward_role("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<x>>") \
        == "wgrad_reduce"
    assert conv_backward_role("void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<p>(int)") \
        == "workspace"
    assert conv_backward_role("Memset (Device)") == "workspace"
    assert conv_backward_role("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, "
                              "at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16>>>>") \
        == "bias"
    assert conv_backward_role("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>") == "layout"
    assert conv_backward_role("nvjet_sm90_tss_64x128_64x8_1x2_h_bz_TNN") == "gemm"


def test_the_1x1_backward_parts_at_characterization16s_shape():
    """[128, 320, 14²] → 1280 channels, bf16: dgrad and wgrad 2 · 128 · 1280 · 196 · 320 FLOPs each; the wgrad writes
    128 fp32 partials of the 1280 × 320 weights (210 MB), reduce_wgrad_nchw_helper reads them and writes dw; the
    bias's sum reads dy."""
    g, x, w = (128, 1280, 14, 14), (128, 320, 14, 14), (1280, 320, 1, 1)
    ng, nx, nw = 128 * 1280 * 196, 128 * 320 * 196, 1280 * 320
    p = conv_backward_parts(g, x, w, "bf16", mask=(True, True, True), partials=128)
    macs = 128.0 * 1280 * 196 * 320
    assert p["dgrad"] == Work(2 * macs, 2.0 * (ng + nw + nx), "bf16", True)
    assert p["wgrad"] == Work(2 * macs, 2.0 * (ng + nx) + 128 * nw * 4.0, "bf16", True)
    assert p["wgrad_reduce"] == Work(128.0 * nw, 128 * nw * 4.0 + 2.0 * nw, "bf16", False)
    assert p["bias"] == Work(float(ng), 2.0 * ng + 2.0 * 1280, "bf16", False)
    assert 128 * nw * 4 == pytest.approx(210e6, rel=0.01)
    whole = conv_backward_work(g, x, w, "bf16", mask=(True, True, True), partials=128)
    assert whole.flops == 4 * macs and whole.bytes == sum(q.bytes for q in p.values())
    # without partials (a wgrad that writes dw itself) and without the bias: the op's Work as kdvfs.work counts it
    plain = conv_backward_work(g, x, w, "bf16")
    old = op_work("aten::convolution_backward", [list(g), list(x), list(w)] + [[]] * 8, [B, B, B])
    assert (plain.flops, plain.bytes) == (old.flops, old.bytes)


def _conv_bwd_op(g, x, w, mask="[True, True, True]"):
    return {"name": "aten::convolution_backward", "args": {
        "Input Dims": [list(g), list(x), list(w)] + [[]] * 8, "Input type": [B, B, B],
        "Concrete Inputs": ["", "", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", mask],
        "External id": 9}}


def test_importer_and_zoo_price_the_1x1_backward_alike():
    """characterization17's conv2d_bwd entry ran two nvjet GEMMs, reduce_wgrad_nchw_helper, a memset and the bias's
    sum: the importer's kernels, priced by role, sum to the zoo entry's work per launch; the helper and the sum take
    no tensor FLOPs (before, the helper took a share by duration and was priced at up to 2 200 W in the steps)."""
    from hw_backend.zoo import ZOO_SETS
    from kdvfs.kernelwork import kernel_work

    g, x, w = (64, 256, 56, 56), (64, 64, 56, 56), (256, 64, 1, 1)
    names = [("nvjet_sm90_tst_320x64_64x4_2x1_v_ssched_bz_NTT", "gemm", 30e-6, (2, 66, 1)),
             ("nvjet_sm90_tss_64x128_64x8_1x2_h_bz_TNN", "gemm", 38e-6, (2, 64, 1)),
             ("void cudnn::cnn::reduce_wgrad_nchw_helper<float, __nv_bfloat16>(void*, void const*, float, int, int)",
              "reduction", 3.5e-6, (128, 1, 1)),
             ("Memset (Device)", "copy", 1.2e-6, None),
             ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<"
              "c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>>>>", "reduction", 89e-6,
              (256, 3, 1))]
    ks = [Kernel(n, c, t, grid=gr, block=(128, 1, 1) if gr else None) for n, c, t, gr in names]
    out = kernel_work(ks, [{"args": {"External id": 9}}] * len(ks), {9: [_conv_bwd_op(g, x, w)]})
    zoo = {k.name: k for k in ZOO_SETS["light-ops2"]()}["conv2d_bwd_bf16_64x64x56x56_to256_k1_graph32"].work
    assert sum(k.bytes for k in out) == pytest.approx(zoo.bytes / 32 + 4.0 * 1, rel=1e-9)  # + the memset's word
    assert out[0].flops + out[1].flops == pytest.approx(zoo.flops / 32)
    assert out[0].math == out[1].math == "tensor16"
    helper, bias = out[2], out[4]
    nw = 256 * 64
    assert (helper.flops, helper.bytes) == (64.0 * nw, 64 * nw * 4.0 + 2.0 * nw)
    assert helper.math != "tensor16" and bias.math != "tensor16"
    assert bias.bytes == 2.0 * (64 * 256 * 56 * 56 + 256)


def test_importer_and_zoo_price_characterization16s_1x1_backward_alike():
    """The step-ops entry ([128, 320, 14²] → 1280) ran cuDNN's per-image CUTLASS GEMMs (the wgrad on [20, 1, 128]:
    128 partials), reduce_wgrad_nchw_helper and the bias's sum: the importer's kernels sum to the entry's work."""
    from hw_backend.zoo import ZOO_SETS
    from kdvfs.kernelwork import kernel_work

    g, x, w = (128, 1280, 14, 14), (128, 320, 14, 14), (1280, 320, 1, 1)
    ks = [Kernel("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_nt_align2>", "gemm",
                 133e-6, grid=(3, 1, 128), block=(256, 1, 1)),
          Kernel("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x256_64x3_tn_align2>", "gemm", 212e-6,
                 grid=(20, 1, 128), block=(256, 1, 1)),
          Kernel("void cudnn::cnn::reduce_wgrad_nchw_helper<float, __nv_bfloat16>(void*, void const*, float, int, int)",
                 "reduction", 57e-6, grid=(3200, 1, 1), block=(128, 1, 1)),
          Kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t"
                 "<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>>>>", "reduction", 57e-6,
                 grid=(1280, 1, 1), block=(32, 16, 1))]
    out = kernel_work(ks, [{"args": {"External id": 9}}] * len(ks), {9: [_conv_bwd_op(g, x, w)]})
    zoo = {k.name: k for k in ZOO_SETS["step-ops"]()}["conv2d_bwd_bf16_128x320x14x14_to1280_k1_graph16"].work
    assert sum(k.bytes for k in out) == pytest.approx(zoo.bytes / 16, rel=1e-12)
    assert out[0].flops + out[1].flops == pytest.approx(zoo.flops / 16)
    assert out[2].bytes == 128 * 1280 * 320 * 4.0 + 2.0 * 1280 * 320  # z = 128 partials read, dw written


def test_split_k_partials_come_from_the_wgrads_grid():
    """CUTLASS's split-K wgrad (SqueezeBERT: ImplicitGemmConvolution on grid [4, 1, 18], then ReduceSplitK): 18
    fp32 partials of the weights."""
    from kdvfs.kernelwork import kernel_work

    g, x, w = (32, 768, 128, 1), (32, 768, 128, 1), (768, 768, 1, 1)
    ks = [Kernel("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolution_wgrad", "gemm", 8e-6,
                 grid=(4, 1, 18), block=(128, 1, 1)),
          Kernel("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<x>>", "gemm", 2e-6,
                 grid=(48, 1, 1), block=(32, 4, 1))]
    out = kernel_work(ks, [{"args": {"External id": 9}}] * 2, {9: [_conv_bwd_op(g, x, w, "[False, True, False]")]})
    nw = 768 * 768
    assert out[1].bytes == 18 * nw * 4.0 + 2.0 * nw and out[1].flops == 18.0 * nw
    assert out[0].bytes == 2.0 * (32 * 768 * 128 * 2) + 18 * nw * 4.0


def test_a_backward_without_helper_kernels_keeps_the_split_by_duration():
    """An op of GEMMs (and a memset) only: nothing here changes what it was given before."""
    from kdvfs.kernelwork import kernel_work

    g, x, w = (8, 64, 28, 28), (8, 64, 28, 28), (64, 64, 3, 3)
    ks = [Kernel("sm90_xmma_dgrad_implicit_gemm_bf16", "gemm", 3e-5), Kernel("sm90_xmma_wgrad_implicit_gemm_bf16",
                                                                            "gemm", 1e-5)]
    op = _conv_bwd_op(g, x, w)
    out = kernel_work(ks, [{"args": {"External id": 9}}] * 2, {9: [op]})
    whole = op_work(op["name"], op["args"]["Input Dims"], op["args"]["Input type"],
                    concrete=op["args"]["Concrete Inputs"])
    assert out[0].flops == pytest.approx(0.5 * whole.flops) and out[0].bytes == pytest.approx(0.5 * whole.bytes)


# -------------------------------------------------------------------------------------------------------- gathers
def test_index_select_and_embedding_move_the_selected_slices_only():
    """DeBERTa's word embedding: index_select of 8192 rows of a 128 100 × 768 fp32 table reads and writes 8192 × 768
    elements and the int64 index (50 MB), where the copy rule had priced the whole table (787 MB)."""
    t, idx = [128100, 768], [8192]
    w = op_work("aten::index_select", [t, [], idx], [F, "Scalar", "long int"], concrete=["", "0", ""])
    assert w == Work(0.0, 2 * 4.0 * 8192 * 768 + 8 * 8192, "fp32", False, "shapes")
    e = op_work("aten::embedding", [t, [16, 512], [], [], []], [F, "long int", "Scalar", "Scalar", "Scalar"],
                concrete=["", "", "0", "False", "False"])
    assert e == w
    # along another dimension: a slice is everything but that dimension
    s = op_work("aten::index_select", [[4, 100, 6], [], [10]], [B, "Scalar", "long int"], concrete=["", "1", ""])
    assert s.bytes == 2 * 2.0 * 10 * 4 * 6 + 8 * 10
    # without the dim argument: the copy of the largest operand, as before
    old = op_work("aten::index_select", [t, [], idx], [F, "Scalar", "long int"])
    assert old.bytes == 2 * 4.0 * 128100 * 768


# ---------------------------------------------------------------------------------- zoo rows from their own kernels
_C16_FWD = [{"name": "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false>",
             "us": 16.16, "grid": [7, 10, 128], "block": [256, 1, 1]},
            {"name": "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "us": 40.863,
             "grid": [30, 4, 1], "block": [384, 1, 1]},
            {"name": "void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true>",
             "us": 70.368, "grid": [7, 40, 128], "block": [256, 1, 1]}]


def test_a_convolution_row_takes_the_work_of_the_kernels_it_ran():
    """characterization16's 1 × 1 forward ran cuDNN's two layout conversions around the GEMM: its row is the GEMM's
    operands and a copy of the input and of the output (as the importer prices a traced op's kernels); a forward that
    ran one GEMM (characterization17's nvjet) keeps the GEMM's work, the zoo's definition by shape."""
    from hw_backend.zoo import ZOO_SETS
    from kdvfs.work_conv import recorded_conv_work

    x, y, wt = 128 * 320 * 196, 128 * 1280 * 196, 1280 * 320
    w = recorded_conv_work("conv2d", (128, 320, 14, 14, 1280, 1), "bf16", _C16_FWD)
    assert w.flops == 2.0 * 128 * 1280 * 196 * 320
    assert w.bytes == pytest.approx(2.0 * (x + y + wt) + 2 * 2.0 * x + 2 * 2.0 * y)
    z = {k.name: k for k in ZOO_SETS["light-ops2"]()}["conv2d_bf16_64x64x56x56_to256_k1_graph64"]
    one = [{"name": "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "us": 35.5, "grid": [2, 66, 1],
            "block": [384, 1, 1]}]
    w17 = recorded_conv_work("conv2d", z.shape, "bf16", one)
    assert (w17.flops, w17.bytes) == pytest.approx((z.work.flops / 64, z.work.bytes / 64))
    assert recorded_conv_work("conv2d", z.shape, "bf16", []) is None  # no record: the definition by shape stands


def test_the_rows_of_characterization16_and_17_take_their_recorded_kernels():
    from hw_backend.zoo import ZOO_SETS
    from kdvfs.h200_rows import load_rows

    rows = {r["name"]: r for r in load_rows(["validation/h200/characterization/characterization16.json.gz",
                                             "validation/h200/characterization/characterization17.json.gz"])[0]}
    zoo = {k.name: k for s in ("step-ops", "light-ops2") for k in ZOO_SETS[s]()}
    f16 = rows["conv2d_bf16_128x320x14x14_to1280_k1_graph32"]
    assert f16["bytes"] == pytest.approx(32 * 241664000.0) and f16["bytes"] > 2.9 * zoo[f16["name"]].work.bytes
    for n in ("conv2d_bwd_bf16_128x320x14x14_to1280_k1_graph16", "conv2d_bf16_64x64x56x56_to256_k1_graph64",
              "conv2d_bwd_bf16_64x64x56x56_to256_k1_graph32"):
        assert rows[n]["bytes"] == pytest.approx(zoo[n].work.bytes) and rows[n]["flops"] == pytest.approx(zoo[n].work.flops)


def test_the_zoo_check_script_adds_time_and_energy_to_the_fits_check(tmp_path):
    """``python -m scripts.h200_zoo_check FILE``: calibrate-h200 --check's clock, power and counts, and each entry's
    time and energy per invocation (the lead's one check of a sealed file); a missing file is one line and exit 2."""
    import json

    from kdvfs.calibrate_h200 import check_h200_fit
    from scripts.h200_zoo_check import main

    data = "validation/h200/characterization/characterization17.json.gz"
    out = tmp_path / "c.json"
    assert main([data, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    from pathlib import Path

    ref = check_h200_fit(json.loads(Path("traces/h200.fit.json").read_text()), [data])["check"]
    assert (doc["meet_both"], doc["meet_clock"], doc["meet_power"]) == (ref["meet_both"], ref["meet_clock"],
                                                                       ref["meet_power"])
    for e in doc["per_kernel"]:
        assert e["predicted_energy_j"] == pytest.approx(e["predicted_power_w"] * e["predicted_time_s"])
        assert e["measured_time_s"] > 0 and e["measured_energy_j"] > 0
    assert main([str(tmp_path / "missing.json.gz")]) == 2
