"""Activity from work: FLOP/byte formulas, the importer's shapes/name/category estimates, the model's use of them."""

import gzip
import json

import numpy as np
import pytest
from conftest import ROOT, run_cli

from kdvfs.gpus import AUTO, get_gpu
from kdvfs.importers import import_kineto
from kdvfs.model import default_params, evaluate, params_from_work
from kdvfs.profile import build_profile, load_profile, save_profile
from kdvfs.trace import Kernel, Segment, Trace, load_trace, save_trace
from kdvfs.work import attention_work, gemm_work, math_class, op_work, work_from_name


def test_formulas():
    w = gemm_work(8192, 8192, 8192, "bf16")
    assert w.flops == 2 * 8192**3 and w.bytes == 3 * 8192 * 8192 * 2 and w.tensor
    assert gemm_work(64, 64, 64, "fp32", tf32=True).dtype == "tf32"
    assert not gemm_work(64, 64, 64, "fp32").tensor
    a = attention_work(8, 16, 2048, 2048, 128, causal=True)  # half the scores and the diagonal's 128-wide tiles
    assert a.flops == pytest.approx((0.5 + 64 / 2048) * 4 * 8 * 16 * 2048 * 2048 * 128)
    assert attention_work(8, 16, 2048, 2048, 128, causal=True, backward=True).flops == pytest.approx(2.5 * a.flops)
    assert math_class("gemm", "bf16") == "tensor16" and math_class("elementwise", "bf16") == "simt"
    assert math_class("gemm", "fp32") == "simt" and math_class("gemm", "tf32") == "tf32"


def test_op_work_from_profiler_shapes():
    w = op_work("aten::addmm", [[4096], [16384, 2048], [2048, 4096], [], []],
                ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"])
    assert w.flops == pytest.approx(2 * 16384 * 4096 * 2048 + 16384 * 4096) and w.dtype == "bf16"
    lin = op_work("aten::linear", [[8, 2048, 2048], [6144, 2048], [6144]], ["float", "float", "float"], tf32=False)
    assert lin.flops == pytest.approx(2 * 8 * 2048 * 6144 * 2048 + 8 * 2048 * 6144) and lin.dtype == "fp32"
    bmm = op_work("aten::bmm", [[16, 128, 64], [16, 64, 256]], ["c10::Half", "c10::Half"])
    assert bmm.flops == 2 * 16 * 128 * 256 * 64 and bmm.dtype == "fp16"
    q = [16, 16, 1024, 64]
    conc_fwd = ["", "", "", "", "", "", "1024", "1024", "True", "0.1", "True", "False", "0.125"]
    fwd = op_work("aten::_cudnn_attention_forward", [q, q, q] + [[]] * 10, ["c10::BFloat16"] * 3, concrete=conc_fwd)
    assert fwd.flops == pytest.approx(attention_work(16, 16, 1024, 1024, 64, causal=True).flops)
    conc_fwd[10] = "False"
    assert op_work("aten::_cudnn_attention_forward", [q, q, q] + [[]] * 10, ["c10::BFloat16"] * 3,
                   concrete=conc_fwd).flops == pytest.approx(attention_work(16, 16, 1024, 1024, 64).flops)
    cast = op_work("aten::copy_", [[1024, 1024], [1024, 1024], []], ["c10::BFloat16", "float", "Scalar"])
    assert cast.flops == 0 and cast.bytes == 1024 * 1024 * (2 + 4)
    assert op_work("aten::_foreach_mul_", [[], []], ["TensorList", "Scalar"]) is None  # no shapes recorded


def test_name_and_grid_estimates():
    w = work_from_name("void at::native::vectorized_elementwise_kernel<8, at::native::AddFunctor<c10::BFloat16>>",
                       "elementwise", (1024, 1, 1), (128, 1, 1), 1e-5)
    assert w.source == "name" and w.bytes == 1024 * 128 * 8 * 2 * 2
    g = work_from_name("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm", (132, 1, 1), (384, 1, 1), 1e-3,
                       peak_flops={"bf16": 1e15})
    assert g.source == "name" and g.flops == pytest.approx(0.7e12) and g.tensor
    assert work_from_name("something", "other", None, None, 1e-3) is None


def _kineto(with_shapes: bool) -> dict:
    ev = []
    op_args = {"External id": 7}
    if with_shapes:
        op_args |= {"Input Dims": [[2048], [4096, 1024], [1024, 2048], [], []],
                    "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]}
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": 0, "dur": 50, "pid": 1, "tid": 1, "args": op_args})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "pid": 1, "tid": 1,
               "args": {"correlation": 1, "External id": 7}})
    ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "ts": 100,
               "dur": 40, "pid": 0, "tid": 7, "args": {"correlation": 1, "External id": 7, "grid": [132, 1, 1],
                                                        "block": [384, 1, 1], "stream": 7}})
    ev.append({"ph": "X", "cat": "kernel", "name": "weird_kernel", "ts": 150, "dur": 10, "pid": 0, "tid": 7,
               "args": {"correlation": 2, "stream": 7}})
    return {"traceEvents": ev}


@pytest.mark.parametrize("with_shapes", [True, False])
def test_importer_fills_work_and_says_how(tmp_path, with_shapes):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(_kineto(with_shapes)).encode()))
    ks = import_kineto(p).trace.kernels
    g, other = ks
    if with_shapes:
        assert g.work_source == "shapes" and g.flops == pytest.approx(2 * 4096 * 2048 * 1024 + 4096 * 2048)
        assert g.dtype == "bf16" and g.math == "tensor16"
    else:
        assert g.work_source == "name" and g.math == "tensor16"
    assert other.work_source == "category" and other.flops is None
    # the fields survive the trace file
    save_trace(import_kineto(p).trace, tmp_path / "t.trace.json")
    assert load_trace(tmp_path / "t.trace.json").kernels[0].work_source == g.work_source


def test_recorded_hf_trace_gets_shapes_for_most_of_its_time():
    ks = import_kineto(ROOT / "validation/h200/steps/gpt2-medium.kineto.json.gz").trace.kernels
    t = np.array([k.time_s for k in ks])
    shaped = np.array([k.work_source == "shapes" for k in ks])
    assert t[shaped].sum() / t.sum() > 0.9
    assert all(k.work_source in ("shapes", "name", "category") for k in ks)


def _two_gemms() -> Trace:
    # the zoo's measured times at the card's own clocks (validation/h200/characterization)
    big, small = gemm_work(8192, 8192, 8192), gemm_work(2048, 2048, 2048)
    ks = (Kernel("gemm8192", "gemm", 1.6378e-3, flops=big.flops, bytes=big.bytes, dtype="bf16", math="tensor16",
                 work_source="shapes"),
          Kernel("gemm2048", "gemm", 2.61e-5, flops=small.flops, bytes=small.bytes, dtype="bf16", math="tensor16",
                 work_source="shapes"),
          Kernel("mystery", "other", 1e-3))
    return Trace("two", (Segment("s", ks),))


def test_size_matters_on_the_h200():
    spec = get_gpu("h200")
    tr = _two_gemms()
    p = default_params(tr, spec)  # capture clock unknown: times taken as at the boost clock
    ev = evaluate(spec, p, np.array([AUTO]), np.array([AUTO]))
    f8, f2 = ev.core_mhz[0, 0], ev.core_mhz[1, 0]
    # different activity and clock, both throttled (the order needs FLOPs per cycle, i.e. the capture clock: below);
    # since session 6's fit the voltage curve rises, so an activity difference moves the capped clock less (32 MHz here)
    assert p.uc[0] != p.uc[1] and abs(f8 - f2) > 20 and max(f8, f2) < spec.boost_core_mhz and ev.throttled[:2, 0].all()
    # with the clocks they were measured at alone (1470 and 1740 MHz), the 8192³ GEMM lands on its measured clock;
    # the 2048³ at ~1540 MHz (validation/h200/characterization/README.md: FLOPs per cycle)
    w8, w2 = gemm_work(8192, 8192, 8192), gemm_work(2048, 2048, 2048)
    q = params_from_work(spec, [w8.flops, w2.flops], [w8.bytes, w2.bytes], ["tensor16"] * 2, ["gemm"] * 2, ["a", "b"],
                         [1.6378e-3, 2.61e-5], core_mhz=[1470, 1740])
    ev = evaluate(spec, q, np.array([AUTO]), np.array([AUTO]))
    assert ev.core_mhz[0, 0] == pytest.approx(1470, rel=0.05) and ev.core_mhz[1, 0] > ev.core_mhz[0, 0]
    # a kernel without work keeps its category's activity
    from kdvfs.model import CATEGORY_PRIORS

    assert p.uc[2] == pytest.approx(CATEGORY_PRIORS["other"][2])


def test_other_presets_ignore_work_activity():
    spec = get_gpu("rtx3080ti")
    assert not spec.work_activity
    tr = _two_gemms()
    p = default_params(tr, spec)
    assert p.uc[0] == p.uc[1]  # category priors, as before


def test_params_from_work_at_a_known_clock_reproduces_time():
    spec = get_gpu("h200")
    w = gemm_work(4096, 4096, 4096)
    p = params_from_work(spec, [w.flops], [w.bytes], ["tensor16"], ["gemm"], ["k"], [2.053e-4], core_mhz=[1500])
    ev = evaluate(spec, p, np.array([1500]), np.array([3201]), kernel_index=np.array([0]), cap_w=np.inf)
    assert ev.time_s[0] == pytest.approx(2.053e-4, rel=1e-9)


def test_profile_carries_the_effective_clock(tmp_path, capsys):
    spec = get_gpu("h200")
    tr = _two_gemms()
    settings = [(AUTO, AUTO), (1980, 3201), (1200, 3201)]
    prof = build_profile(tr, spec, default_params(tr, spec), settings=settings)
    assert prof.eff_core_mhz is not None and prof.eff_core_mhz[0, 1] < 1980 and prof.eff_core_mhz[0, 2] == 1200
    save_profile(prof, tmp_path / "p.csv")
    back = load_profile(tmp_path / "p.csv")
    assert np.allclose(back.eff_core_mhz, prof.eff_core_mhz, atol=0.05)
    # an old profile without the column still loads
    lines = (tmp_path / "p.csv").read_text().splitlines()
    old = [",".join(ln.split(",")[:7]) if not ln.startswith("#") else ln for ln in lines]
    (tmp_path / "old.csv").write_text("\n".join(old) + "\n")
    assert load_profile(tmp_path / "old.csv").eff_core_mhz is None
    save_trace(tr, tmp_path / "two.trace.json")
    code, out, _ = run_cli(["profile", "build", "--trace", str(tmp_path / "two.trace.json"), "--gpu", "h200",
                            "-o", str(tmp_path / "q.csv"), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["clocks"]["throttled_at_auto"] >= 1
    k0 = d["clocks"]["kernels"][0]
    assert k0["work_source"] == "shapes" and len(k0["eff_core_mhz"]) == d["settings"]


def test_bundled_h200_profiles_throttle_the_gemms():
    prof = load_profile(ROOT / "traces/gpt3xl-torch-h200-bf16.profile.csv.gz")
    tr = load_trace(ROOT / "traces/gpt3xl-torch-h200-bf16.trace.json")
    assert prof.eff_core_mhz is not None
    ia = prof.auto_index
    gemm = np.array([k.category == "gemm" for k in tr.kernels])
    assert np.median(prof.eff_core_mhz[gemm, ia]) < 1980
    assert all(k.work_source for k in tr.kernels)


@pytest.mark.parametrize("op", ["aten::all", "aten::any", "aten::all_", "aten::any_"])
def test_all_and_any_are_reductions_with_a_bool_result(op):
    """``all`` and ``any`` reduce (one result per launch, one FLOP per element read) and their result is bool: the
    bool-result rule used to be shadowed by the reduction rule, which wrote the result at the input's float width."""
    n = 8 * 1024
    for types, read in ((["bool"], 1), (["float"], 4), (["c10::BFloat16"], 2)):
        w = op_work(op, [[8, 1024]], types)
        assert (w.flops, w.bytes) == (n, n * read + 1)
    assert op_work("aten::sum", [[8, 1024]], ["float"]).bytes == n * 4 + 4  # other reductions keep their width


def test_an_ops_flops_go_to_its_compute_kernels_not_its_layout_conversions():
    """cuDNN's convolution converts NCHW to NHWC and back around its implicit GEMM: the op's FLOPs belong to the
    GEMM, its bytes to all three by duration (session 8's blind ResNet-50 step: the layout kernels took 40 % of the
    convolutions' FLOPs and were priced at the cap's power, +31 % on the step). A GEMM whose template reads
    "NoPermute" is not a data mover."""
    from kdvfs.kernelwork import kernel_work, moves_data_only

    names = ["void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "sm90_xmma_fprop_implicit_gemm_bf16",
             "void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16>"]
    assert [moves_data_only(n) for n in names] == [True, False, True]
    assert not moves_data_only("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmENSO_9NoPermuteE")
    assert moves_data_only("Memset (Device)") and moves_data_only("bfloat16_copy_kernel_cuda")
    op = {"cat": "cpu_op", "name": "aten::cudnn_convolution", "ts": 0, "dur": 10,
          "args": {"External id": 7, "Input Dims": [[8, 64, 56, 56], [64, 64, 3, 3]],
                   "Input type": ["c10::BFloat16", "c10::BFloat16"], "Concrete Inputs": ["", "", "[1, 1]", "[1, 1]"]}}
    ops = {7: [op]}
    kernels = [Kernel(n, "other" if "cudnn" in n else "gemm", t) for n, t in zip(names, (2e-5, 6e-5, 2e-5))]
    events = [{"args": {"External id": 7}}] * 3
    out = kernel_work(kernels, events, ops)
    whole = op_work("aten::cudnn_convolution", op["args"]["Input Dims"], op["args"]["Input type"],
                    concrete=op["args"]["Concrete Inputs"])
    assert out[0].flops == 0.0 and out[2].flops == 0.0
    assert out[1].flops == pytest.approx(whole.flops)
    assert sum(k.bytes for k in out) == pytest.approx(whole.bytes)
    assert out[0].bytes == pytest.approx(whole.bytes * 0.2)
    # an op that launched only data movers keeps its work split by duration as before
    movers = [kernels[0], kernels[2]]
    out2 = kernel_work(movers, events[:2], ops)
    assert sum(k.flops for k in out2) == pytest.approx(whole.flops)
