"""Issue 12, session 11: the grouped convolutions' work and time, from the kernels' names, grids and timestamps (the
importer's path, ``kdvfs.kernelwork`` and ``kdvfs.importers``, and the zoo's, ``hw_backend.zoo`` and
``kdvfs.h200_rows``), and the held-out zoo set ``tiny-grid2``."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import ROOT

from kdvfs.kernelwork import concurrent_wall_share, conv_gradient, kernel_work
from kdvfs.trace import Kernel
from kdvfs.work import NAME_PEAK_FLOPS, math_class, simt_by_name, work_from_name

BF = "c10::BFloat16"
IMPLICIT = "void implicit_convolve_sgemm<__nv_bfloat16, __nv_bfloat16, 128, 6, 7, 3, 3, 5, 1, false, false, true>(int)"
PRECOMP = "void precomputed_convolve_sgemm<__nv_bfloat16, 128, 6, 7, 3, 3, 5, 1, false>(int, int, int)"
DGRAD = "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816dgrad_analytic_bf16_256x64_32x4_nhwc_align8>(x)"
WGRAD = "sm80_xmma_wgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4"
S11 = ROOT / "validation/h200/steps11"


# ------------------------------------------------------------------------------------------- where the math runs
def test_convolve_sgemm_engines_are_simt_and_tensor_kernels_are_not():
    assert simt_by_name(IMPLICIT) and simt_by_name(PRECOMP)
    assert not simt_by_name(DGRAD) and not simt_by_name(WGRAD) and not simt_by_name("sm90_xmma_gemm_bf16bf16_tn")
    assert not simt_by_name(None)


def test_shapeless_convolve_sgemm_is_priced_at_the_cuda_cores_peak():
    """Without shapes, a named GEMM's FLOPs come from its duration at 70 % of a peak: the CUDA cores' for a convolve
    sgemm engine (bf16 storage, FP32 FMA), where the tensor peak gave it 15× the FLOPs."""
    w = work_from_name(IMPLICIT, "gemm", (4, 1, 1), (8, 32, 1), 1e-3, peak_flops=NAME_PEAK_FLOPS)
    assert w.flops == pytest.approx(0.7 * NAME_PEAK_FLOPS["fp32"] * 1e-3)
    assert not w.tensor and math_class("gemm", w.dtype, w.tensor) == "simt"
    g = work_from_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm", (132, 1, 1), (384, 1, 1),
                       1e-3, peak_flops=NAME_PEAK_FLOPS)
    assert g.tensor and g.flops == pytest.approx(0.7 * NAME_PEAK_FLOPS["bf16"] * 1e-3)


def _op(name, dims, types, concrete):
    return {"name": name, "args": {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}}


def _kw(kernels, op):
    ops = {1: [op]}
    events = [{"args": {"External id": 1}} for _ in kernels]
    return kernel_work(kernels, events, ops, backward=[True] * len(kernels))


def test_grouped_conv_forward_kernels_are_simt_with_the_ops_work():
    """wav2vec 2.0's position convolution (kernel 128, 16 groups, batch 4 × 768 × 499): the importer marked its
    convolve_sgemm kernels tensor16 (a bf16 conv op); they are SIMT. The op's FLOPs are the zoo entry's, split by
    duration over its kernels."""
    op = _op("aten::cudnn_convolution", [[4, 768, 1, 499], [768, 48, 1, 128], []], [BF, BF, "ScalarList"],
             ["", "", "[0, 64]", "[1, 1]", "[1, 1]", "16", "False", "False", "True"])
    ks = [Kernel(PRECOMP, "gemm", 0.6e-3), Kernel(IMPLICIT, "gemm", 0.7e-3), Kernel(IMPLICIT, "gemm", 0.7e-3)]
    out = _kw(ks, op)
    assert [k.math for k in out] == ["simt"] * 3
    from hw_backend.zoo import ZOO_SETS
    zoo = {k.name: k for k in ZOO_SETS["tiny-grid"]()}["gconv1d_bf16_4x768x499_k128_g16"]
    assert sum(k.flops for k in out) == pytest.approx(zoo.work.flops)
    assert out[0].flops / out[1].flops == pytest.approx(0.6 / 0.7)


def test_backward_dgrad_and_wgrad_kernels_take_half_the_work_each():
    """The position convolution's backward: sixteen dgrad kernels (3.8 ms together) and one wgrad kernel (0.15 ms)
    compute one gradient each, of the same FLOPs; split by duration the wgrad kernel took 4 % of them."""
    op = _op("aten::convolution_backward", [[4, 768, 500], [4, 768, 499], [768, 48, 128]] + [[]] * 8, [BF] * 3,
             ["", "", "", "[768]", "[1]", "[64]", "[1]", "False", "[0]", "16", "[True, True, False]"])
    mover = "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false>(x)"
    ks = [Kernel(DGRAD, "gemm", 0.24e-3) for _ in range(16)] + [Kernel(WGRAD, "gemm", 0.15e-3),
                                                                Kernel(mover, "copy", 0.01e-3)]
    out = _kw(ks, op)
    fl = [k.flops for k in out]
    total = 2 * 2.0 * 4 * 768 * 500 * 48 * 128
    assert sum(fl) == pytest.approx(total)
    assert sum(fl[:16]) == pytest.approx(total / 2) and fl[16] == pytest.approx(total / 2) and fl[17] == 0.0
    assert all(k.math == "tensor16" for k in out[:17])
    # bytes: the mover keeps its duration share, the two gradients split the rest evenly
    by = [k.bytes for k in out]
    assert sum(by[:16]) == pytest.approx(by[16])
    assert by[17] == pytest.approx(sum(by) * 0.01 / (16 * 0.24 + 0.15 + 0.01))


def test_gradient_names():
    assert conv_gradient(DGRAD) == "dgrad" and conv_gradient(WGRAD) == "wgrad"
    assert conv_gradient("ImplicitGemmConvolution<Conv2dWgradOutputGradientTileAccessIteratorOptimized>") == "wgrad"
    assert conv_gradient(IMPLICIT) is None and conv_gradient("dgrad_wgrad_both") is None


def test_one_gradient_named_keeps_the_duration_split():
    op = _op("aten::convolution_backward", [[4, 8, 10], [4, 8, 10], [8, 8, 3]] + [[]] * 8, [BF] * 3,
             ["", "", "", "[0]", "[1]", "[1]", "[1]", "False", "[0]", "1", "[True, True, False]"])
    out = _kw([Kernel(DGRAD, "gemm", 1e-3), Kernel("some_gemm_kernel", "gemm", 3e-3)], op)
    assert out[1].flops == pytest.approx(3 * out[0].flops)


# ------------------------------------------------------------------------------------------- concurrent kernels
def test_concurrent_kernels_of_one_op_share_the_wall_time():
    # op 1: two kernels on two streams overlapping for 2 of their 4 µs each; op 2 runs alone; op 3 on one stream
    starts, durs = [0, 2, 10, 20, 23], [4, 4, 5, 4, 4]
    r = concurrent_wall_share(starts, durs, [1, 2, 1, 1, 1], [1, 1, 2, 3, 3])
    assert r[0] == pytest.approx((2 + 1) / 4) and r[1] == pytest.approx((1 + 2) / 4)
    assert sum(d * x for d, x in zip(durs[:2], r[:2])) == pytest.approx(6.0)  # the op's span
    assert r[2:] == [1.0, 1.0, 1.0]
    # unknown ops are left alone, whatever their streams
    assert concurrent_wall_share([0, 0], [5, 5], [1, 2], [None, None]) == [1.0, 1.0]


def test_eight_streams_sum_to_the_span():
    starts = [0.0] * 8 + [10.0] * 8
    durs = [10.0] * 16
    r = concurrent_wall_share(starts, durs, list(range(8)) * 2, [7] * 16)
    assert sum(d * x for d, x in zip(durs, r)) == pytest.approx(20.0) and r == pytest.approx([1 / 8] * 16)


def test_wav2vec_step_imports_at_its_wall_time():
    """The recorded step (steps11, batch 4): its kernels sum to 50.9 ms, but the position convolution's 48 forward
    kernels ran on 8 of cuDNN's streams at once; imported, its kernels sum to the union, 29.3 ms, with the op's
    work unchanged."""
    from kdvfs.importers import import_kineto

    t = import_kineto(S11 / "wav2vec2-base-b4.kineto.json.gz").trace
    assert t.total_time_s == pytest.approx(29.29e-3, rel=2e-3)
    conv = [(k, s.repeat) for s in t.segments for k in s.kernels if simt_by_name(k.name)]
    # (a repeated segment keeps its first repeat's split of the op's work: within 1 %)
    assert sum(k.flops * r for k, r in conv) == pytest.approx(18874368000.0, rel=1e-2)
    assert {k.math for k, _ in conv} == {"simt"}
    # the raw events' span of that op, for the record
    with gzip.open(S11 / "wav2vec2-base-b4.kineto.json.gz") as f:
        d = json.load(f)
    streams = {e["args"].get("stream") for e in d["traceEvents"] if e.get("cat") == "kernel" and simt_by_name(e["name"])}
    assert len(streams) == 8


# ------------------------------------------------------------------------------------------------- the zoo path
def test_zoo_gconv_forward_is_simt_and_backward_tensor():
    from hw_backend.zoo import ZOO_SETS

    for name in ("tiny-grid", "tiny-grid2"):
        for k in ZOO_SETS[name]():
            if k.op == "gconv1d":
                assert math_class(k.category, k.dtype, k.work.tensor) == "simt"
            elif k.op == "gconv1d_bwd":
                assert math_class(k.category, k.dtype, k.work.tensor) == "tensor16"


def test_c14_rows_take_the_math_their_kernels_ran_on():
    """The measured file's kernel names say the same as the definitions: the forward's profiled time is all in
    convolve_sgemm engines, the backward's in tensor-op dgrad and wgrad kernels, whose rate (111 TFLOP/s at batch 16)
    no CUDA core reaches (67)."""
    from kdvfs.h200_rows import zoo_rows

    with gzip.open(ROOT / "validation/h200/characterization/characterization14.json.gz") as f:
        doc = json.load(f)
    rows = {r["name"]: r for r in zoo_rows(doc)}
    for n, r in rows.items():
        ks = [c for c in r.get("cuda_kernels") or [] if not c["name"].startswith("(+")]  # named ones, not the rest
        simt_us = sum(c["us"] for c in ks if simt_by_name(c["name"]))
        tot = sum(c["us"] for c in ks)
        if n.startswith("gconv1d_bf16"):
            assert r["math"] == "simt" and simt_us > 0.95 * tot
        elif n.startswith("gconv1d_bwd"):
            assert r["math"] == "tensor16" and simt_us == 0
        else:
            assert r["math"] == math_class(r["category"], r["dtype"])  # the GEMMs: unchanged
    b16 = rows["gconv1d_bwd_bf16_16x768x499_k128_g16"]
    assert b16["flops"] / b16["time_s"] > 1.5 * NAME_PEAK_FLOPS["fp32"]


# ------------------------------------------------------------------------------------------------- tiny-grid2
def test_tiny_grid2_set():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["tiny-grid2"]()
    names = [k.name for k in z]
    assert 12 <= len(z) <= 16 and len(set(names)) == len(names)
    c14 = {k.name for k in ZOO_SETS["tiny-grid"]()}
    repeats = [n for n in names if n in c14]
    assert 2 <= len(repeats) <= 3
    others = {k.name for s, make in ZOO_SETS.items() if s not in ("tiny-grid", "tiny-grid2") for k in make()}
    assert not (set(names) - c14) & others  # the new shapes are new
    ops = {k.op for k in z}
    assert {"gemm", "bmm", "dwconv", "gconv1d"} <= ops
    bmm = next(k for k in z if k.op == "bmm")
    b, m, n, kk = bmm.shape
    assert bmm.work.flops == 2.0 * b * m * n * kk * bmm.graph and bmm.work.tensor


# ------------------------------------------------------------------------------- concurrency: the SMs busy at once
def test_kernel_concurrency_is_checked_and_round_trips():
    from kdvfs.errors import FormatError
    from kdvfs.trace import Segment, Trace, trace_from_dict, trace_to_dict

    with pytest.raises(FormatError, match="concurrency must be a number ≥ 1"):
        Kernel(IMPLICIT, "gemm", 1e-3, concurrency=0.5)
    k = Kernel(IMPLICIT, "gemm", 1e-3, grid=(4, 1, 1), concurrency=2.5)
    t = Trace(name="t", segments=(Segment("s", (k, Kernel("x", "other", 1e-3)), 1),))
    back = trace_from_dict(trace_to_dict(t))
    assert [q.concurrency for q in back.kernels] == [2.5, None]


def test_imported_concurrent_kernels_carry_their_concurrency():
    from kdvfs.importers import import_kineto

    t = import_kineto(S11 / "wav2vec2-base-b4.kineto.json.gz").trace
    conc = [k for k in t.kernels if k.concurrency is not None]
    assert conc and all(k.concurrency > 1 for k in conc)
    assert {k.name for k in conc if simt_by_name(k.name)} and all(k.concurrency is None for k in t.kernels
                                                                    if k.op and "linear" in k.op)


def test_model_counts_the_sms_of_concurrent_kernels(monkeypatch):
    """A 4-block kernel beside seven others of its op keeps 32 of the 132 SMs busy, not 4."""
    import kdvfs.model as model
    from kdvfs.gpus import get_gpu
    from kdvfs.trace import Segment, Trace

    seen = {}

    def spy(*a, **kw):
        seen.update(kw)
        raise RuntimeError("stop")

    monkeypatch.setattr(model, "params_from_work", spy)
    ks = (Kernel(IMPLICIT, "gemm", 1e-3, flops=1e9, bytes=1e6, grid=(4, 1, 1), block=(8, 32, 1), math="simt",
                 concurrency=8.0),
          Kernel(IMPLICIT + " ", "gemm", 1e-3, flops=1e9, bytes=1e6, grid=(4, 1, 1), block=(8, 32, 1), math="simt"))
    with pytest.raises(RuntimeError, match="stop"):
        model.default_params(Trace(name="t", segments=(Segment("s", ks, 1),)), get_gpu("h200"))
    assert list(seen["sm_fraction"]) == pytest.approx([32 / 132, 4 / 132])
    assert list(seen["occupancy"]) == pytest.approx([8 * 4 * 256 / (132 * 2048), 4 * 256 / (132 * 2048)])


def test_zoo_concurrency_of_the_grouped_convolutions():
    """characterization14's grouped convolutions profile 2.5–4.9× their measured time in kernels (cuDNN's eight
    streams); every other entry ≤ 1.14. Their SM share is that many times the time-weighted grids' share."""
    from kdvfs.h200_rows import CONCURRENT_MIN, zoo_concurrency, zoo_rows, zoo_sm_fraction

    with gzip.open(ROOT / "validation/h200/characterization/characterization14.json.gz") as f:
        doc = json.load(f)
    for r in zoo_rows(doc):
        c = zoo_concurrency(r)
        if r["name"].startswith("gconv1d"):
            assert 2.4 < c < 5.0
            assert r["sm_fraction"] == pytest.approx(min(1.0, c * zoo_sm_fraction(r)))
        else:
            assert c == 1.0 and r["sm_fraction"] == pytest.approx(zoo_sm_fraction(r))
    assert zoo_concurrency({"time_s": 1e-3, "cuda_kernels": [{"name": "a", "us": 1.1 * 1e3 * CONCURRENT_MIN}]}) > 1
    assert zoo_concurrency({"time_s": 1e-3, "cuda_kernels": [{"name": "a", "us": 1140.0}]}) == 1.0
    assert zoo_concurrency({"time_s": 1e-3, "graph": 8, "cuda_kernels": [{"name": "a", "us": 9e3}]}) == 1.0


def test_wall_share_never_exceeds_one_by_rounding():
    """A memset that ran alone while its op's other kernels ran on another stream read 1.0000000000000149 through
    the sweep's sums (repeat_leaseB's wav2vec b4 step): a concurrency below 1, refused by the trace."""
    starts = [5224303854285.718, 5224303854290.5, 5224303854300.25]
    durs = [3.2, 7.9, 1.3]
    r = concurrent_wall_share(starts, durs, [7, 29, 7], [4, 4, 4])
    assert all(0 < x <= 1.0 for x in r)


def test_simt_occupancy_switch_scales_only_cuda_core_gemm_kernels():
    """The structure tried this session (``simt-occupancy``, not bundled): warp-occupancy's scaling also for a
    GEMM-category kernel on the CUDA cores (a convolve_sgemm engine); a tensor-core GEMM keeps its base."""
    from dataclasses import replace

    from kdvfs.gpus import get_gpu
    from kdvfs.model import activity_from_work

    spec = get_gpu("h200")
    co = dict(spec.work_activity)
    assert "occ_exp" in co and not co.get("occ_simt")
    args = ([1e9, 1e9], [1e6, 1e6], ["simt", "tensor16"], [1e-3, 1e-3], [1980.0] * 2)
    kw = dict(categories=["gemm", "gemm"], occupancy=[0.05, 0.05])
    off, _ = activity_from_work(spec, *args, **kw)
    on, _ = activity_from_work(replace(spec, work_activity=tuple((co | {"occ_simt": 1.0}).items())), *args, **kw)
    assert on[0] - off[0] == pytest.approx(co["base"] * (0.05 ** co["occ_exp"] - 1.0))
    assert on[1] == off[1]
