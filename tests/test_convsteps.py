"""Issue 12, session 9: the convolutional steps' kernel classes (simulator.h200_convsteps) and the zoo set ``conv``."""

import pytest

from hw_backend.zoo import ZOO_SETS, ZooKernel, conv_zoo, full_zoo
from kdvfs.errors import InputError
from simulator.h200_convsteps import classify, step_classes


@pytest.mark.parametrize(("name", "cls"), [
    ("void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>(x)", "bn backward"),
    ("void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16>(x)", "bn statistics"),
    ("void at::native::(anonymous namespace)::conv_depthwise2d_grad_weight_kernel<c10::BFloat16>(x)",
     "dwconv grad weight"),
    ("void at::native::(anonymous namespace)::conv_depthwise2d_backward_kernel<3, 2, c10::BFloat16>(x)",
     "dwconv grad input"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>(x)", "layout conversion"),
    ("dgrad2d_c1_k1_nhwc_specialized", "cuDNN depthwise"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "cuDNN convolution"),
    ("nvjet_sm90_tst_384x32_64x4_1x1_v_bz_NTT", "GEMM"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::silu_kernel(x)", "activation"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>", "other"),
])
def test_classify_names_of_the_steps_kernels(name, cls):
    assert classify(name, "other") == cls


def test_every_kernel_of_a_step_lands_in_one_class():
    """The classes' predicted energies and times add up to the step's: no kernel counted twice or dropped."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sc = step_classes(root, "validation/h200/steps9", "resnet-50-b32")
    c = sc["classes"]
    assert sum(v["predicted_j"] for v in c.values()) == pytest.approx(sc["predicted_kernel_j"], abs=0.01)
    assert sum(v["time_ms"] for v in c.values()) == pytest.approx(sc["kernel_time_ms"], abs=0.01)
    assert {"bn backward", "bn statistics", "cuDNN convolution"} <= set(c)
    assert c["bn statistics"]["occupancy"] < 0.5  # one block per channel


def test_conv_set_is_registered_but_not_in_all():
    z = conv_zoo()
    assert ZOO_SETS["conv"] is conv_zoo and 0 < len(z) <= 24 and len({k.name for k in z}) == len(z)
    assert not {k.name for k in z} & {k.name for k in full_zoo()}
    assert {k.op for k in z} >= {"batch_norm", "batch_norm_bwd", "dwconv", "dwconv_bwd", "avg_pool", "sigmoid"}
    assert all(k.role == "kernel" and k.graph > 0 for k in z)


def test_dwconv_stride_two_writes_a_quarter():
    s1 = ZooKernel("a", "other", "dwconv", "bf16", (2, 8, 16, 16, 3)).work
    s1b = ZooKernel("b", "other", "dwconv", "bf16", (2, 8, 16, 16, 3, 1)).work
    s2 = ZooKernel("c", "other", "dwconv", "bf16", (2, 8, 16, 16, 3, 2)).work
    assert s1 == s1b
    assert s2.flops == pytest.approx(s1.flops / 4)
    out, inp, w = 2 * 8 * 8 * 8, 2 * 8 * 16 * 16, 8 * 9
    assert s2.bytes == pytest.approx((inp + out + w) * 2)


def test_batch_norm_sized_as_the_importer_sizes_it():
    from kdvfs.work import norm_work

    k = ZooKernel("b", "norm", "batch_norm_bwd", "bf16", (4, 8, 6, 6))
    assert k.work == norm_work(4 * 8 * 36, "bf16", backward=True)


def test_unknown_op_still_refused():
    with pytest.raises(InputError, match="op 'batchnorm' is unknown"):
        _ = ZooKernel("x", "norm", "batchnorm", "bf16", (1, 2, 3, 4)).work
