"""Session 7 of issue 12: the structural changes to work and activity that the zoo's misses pointed at — each must
change the prediction where its cause applies and leave it alone where it does not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hw_backend.zoo import ZooKernel, full_zoo
from kdvfs.calibrate_h200 import constant_write
from kdvfs.gpus import get_gpu
from kdvfs.model import activity_from_work, default_params, evaluate
from kdvfs.trace import Kernel, Segment, Trace
from kdvfs.work import (
    ATTENTION_TILE,
    MAX_REDUCTION_FLOPS,
    NORM_FORWARD_FLOPS,
    attention_work,
    norm_work,
    op_work,
    work_from_name,
    writes_constant,
)

FILL = "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >"
COPY = "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda, std::array<char*, 2ul> >"
_MT = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"


def test_norm_forward_flops_by_kind():
    n = 16384 * 4096
    ln = op_work("aten::layer_norm", [[16384, 4096], [4096], [4096], [4096]], ["c10::BFloat16"] * 4)
    rms = op_work("aten::rms_norm", [[16384, 4096], [4096], [4096]], ["c10::BFloat16"] * 3)
    assert ln.flops == pytest.approx(n * NORM_FORWARD_FLOPS["layer"]) and rms.flops == pytest.approx(n * 4.0)
    assert ln.bytes == rms.bytes == pytest.approx(n * 2 * 2)  # the same traffic: only the arithmetic differs
    # the backward is not split by kind (no backward norm was measured alone): as before
    assert norm_work(n, backward=True, rms=True) == norm_work(n, backward=True) and norm_work(n, backward=True).flops == 12 * n
    zoo = {k.name: k for k in full_zoo()}
    assert zoo["rms_norm_bf16_16384x4096"].work.flops == pytest.approx(n * 4.0)
    assert zoo["layer_norm_bf16_16384x4096"].work.flops == pytest.approx(n * 12.0)


def test_max_reductions_count_the_nan_propagating_compare():
    n = 16384 * 16384
    amax = op_work("aten::amax", [[16384, 16384], [], []], ["c10::BFloat16", "ScalarList", "Scalar"])
    total = op_work("aten::sum", [[16384, 16384], []], ["c10::BFloat16", "ScalarList"])
    assert amax.flops == pytest.approx(MAX_REDUCTION_FLOPS * n) and total.flops == pytest.approx(n)
    assert amax.bytes == total.bytes
    zoo = {k.name: k for k in full_zoo()}
    assert zoo["amax_bf16_rows_16384x16384"].work.flops == pytest.approx(3 * n)
    assert zoo["sum_fp32_1GiB"].work.flops == pytest.approx(1 << 28)


def test_foreach_functor_reads_only_its_input_lists():
    grid, block = (320, 1, 1), (512, 1, 1)
    n = 320 * 65536
    sqrt = work_from_name(_MT + "TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, "
                          "1>, at::native::Sqrt<float> >(x)", "optimizer", grid, block, 50e-6)
    assert sqrt.bytes == pytest.approx(n * 2 * 4)  # out of place: one list read, one written
    lerp = work_from_name(_MT + "TensorListMetadata<2>, at::native::(anonymous namespace)::TernaryOpScalarFunctor<float, "
                          "2, 2, 0>, at::native::LerpFunctor<float>, float>(x)", "optimizer", grid, block, 50e-6)
    assert lerp.bytes == pytest.approx(n * 3 * 4)  # in place: both lists read, the first written — as before
    bare = work_from_name(_MT + "TensorListMetadata<2>, float>", "optimizer", grid, block, 50e-6)
    assert bare.bytes == pytest.approx(n * 3 * 4)  # no functor in the name: every list read


def test_causal_attention_counts_the_diagonal_tiles():
    full = attention_work(8, 16, 2048, 2048, 128)
    causal = attention_work(8, 16, 2048, 2048, 128, causal=True)
    assert causal.flops / full.flops == pytest.approx(0.5 + ATTENTION_TILE / (2 * 2048))
    long = attention_work(1, 1, 65536, 65536, 128, causal=True).flops / attention_work(1, 1, 65536, 65536, 128).flops
    assert 0.5 < long < 0.502
    short = attention_work(4, 4, 64, 64, 64, causal=True)  # one tile: the whole of it is computed
    assert short.flops == attention_work(4, 4, 64, 64, 64).flops
    assert attention_work(8, 16, 2048, 2048, 128, backward=True).flops == pytest.approx(2.5 * full.flops)
    assert causal.bytes == full.bytes


def test_constant_writes_are_recognised_by_name():
    assert writes_constant(FILL) and writes_constant("Memset (Device)")
    assert not writes_constant(COPY) and not writes_constant("Memcpy DtoD (Device -> Device)")
    assert not writes_constant("")
    # a zoo entry is a constant write only when every kernel it launched is one: the attention entries start with a
    # memset of their own
    assert constant_write({"cuda_kernels": [{"name": FILL, "us": 316.5}]})
    assert not constant_write({"cuda_kernels": [{"name": "Memset (Device)", "us": 0.7}, {"name": "cudnn_sdpa", "us": 270}]})
    assert not constant_write({"cuda_kernels": []}) and not constant_write({})


def test_constant_writes_draw_no_traffic_power():
    spec = get_gpu("h200")
    args = (spec, [1e9, 1e9], [1e9, 1e9], ["simt", "simt"], [3e-4, 3e-4], [1980, 1980], ["copy", "copy"])
    uc0, um0 = activity_from_work(*args)
    uc1, um1 = activity_from_work(*args, constant_write=[True, False])
    assert um1[0] == 0.0 and um1[1] == um0[1] > 0 and np.array_equal(uc0, uc1)
    _, um2 = activity_from_work(*args, constant_write=[False, False])
    assert np.array_equal(um2, um0)  # no constant write: exactly as without the argument

    def kernel(name):
        return Kernel(name=name, category="copy", time_s=3e-4, flops=0.0, bytes=1e9, dtype="bf16", math="simt")

    tr = Trace(name="t", gpu="h200", segments=(Segment("s", (kernel(FILL), kernel(COPY)), 1, "other"),))
    ev = evaluate(spec, default_params(tr, spec), np.zeros(1), np.zeros(1))
    assert ev.power_w[0, 0] < ev.power_w[1, 0] - 100  # the same bytes: the fill draws no traffic power
    # a card without activity from work keeps its category priors: the kernel's name does not matter there
    h100 = get_gpu("h100")
    ev = evaluate(h100, default_params(replace(tr, gpu="h100"), h100), np.zeros(1), np.zeros(1))
    assert ev.power_w[0, 0] == pytest.approx(ev.power_w[1, 0])


def test_zoo_fill_row_is_a_constant_write():
    from kdvfs.calibrate_h200 import zoo_rows

    fill = ZooKernel("fill_bf16_1GiB", "copy", "fill", "bf16", (1 << 29,))
    copy = ZooKernel("copy_bf16_1GiB", "copy", "copy", "bf16", (1 << 29,))
    base = {"dtype": "bf16", "time_s": 3e-4, "power_w": 400.0, "sm_mhz_median": 1980.0}
    doc = {"kernels": [dict(base, name=fill.name, category="copy", flops=fill.work.flops, bytes=fill.work.bytes,
                            cuda_kernels=[{"name": FILL, "us": 300.0}]),
                       dict(base, name=copy.name, category="copy", flops=copy.work.flops, bytes=copy.work.bytes,
                            cuda_kernels=[{"name": "Memcpy DtoD (Device -> Device)", "us": 300.0}])]}
    rows = {r["name"]: r for r in zoo_rows(doc)}
    assert rows["fill_bf16_1GiB"]["constant_write"] and not rows["copy_bf16_1GiB"]["constant_write"]
