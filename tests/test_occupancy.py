"""Issue 12, session 8: the SM-occupancy and issue-rate structures of the H200 model — each must change a kernel's
power where its cause applies (few blocks; a low achieved rate) and leave it alone where it does not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kdvfs.calibrate_h200 import (
    STRUCTURES,
    _extra_fields,
    fit_h200,
    spec_from_vector,
    zoo_direct_convolution,
    zoo_sm_fraction,
)
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import activity_from_work, default_params, evaluate
from kdvfs.occupancy import direct_convolution, sm_fraction, sm_fractions, thread_occupancies, thread_occupancy
from kdvfs.trace import Kernel, Segment, Trace

# the bundled preset without the session-8 structure's fields: the model each structure is added to here
H200 = replace(get_gpu("h200"), work_activity=tuple(
    (k, v) for k, v in get_gpu("h200").work_activity if k not in ("occ_exp", "occ_rate_floor", "conv_dot")))


def _with(**extra) -> object:
    return replace(H200, work_activity=tuple({**dict(H200.work_activity), **extra}.items()))


def test_sm_fraction_from_the_launch_grid():
    assert sm_fraction((6, 1, 1), (32, 32, 1)) == pytest.approx(6 / 132)
    assert sm_fraction((2, 66, 1), (384, 1, 1)) == 1.0  # a persistent GEMM: one block per SM
    assert sm_fraction((200704, 1, 1)) == 1.0
    assert sm_fraction((12, 64, 1)) == 1.0  # the grid's dimensions multiply
    assert sm_fraction((40,), sms=80) == 0.5
    for bad in (None, (), (0, 1, 1), ("x",), (-3,)):
        assert sm_fraction(bad) is None
    assert list(sm_fractions([(66,), None, (1000,)])) == [0.5, 1.0, 1.0]  # unknown: all busy (the fallback)


def test_sm_floor_scales_only_the_base_and_only_with_a_grid():
    args = ([1e9, 1e9], [1e9, 1e9], ["simt", "simt"], [1e-4, 1e-4], [1980, 1980], ["norm", "norm"])
    plain, _ = activity_from_work(H200, *args)
    spec = _with(sm_floor=0.25)
    # without sm_fraction, or on a spec without sm_floor: nothing changes
    assert np.array_equal(activity_from_work(spec, *args)[0], plain)
    assert np.array_equal(activity_from_work(H200, *args, sm_fraction=[0.1, 1.0])[0], plain)
    uc, um = activity_from_work(spec, *args, sm_fraction=[0.1, 1.0])
    base = dict(H200.work_activity)["base"]
    assert uc[1] == pytest.approx(plain[1])  # all SMs busy: unchanged
    assert plain[0] - uc[0] == pytest.approx(base * (1 - (0.25 + 0.75 * 0.1)))  # only the base moved
    assert np.array_equal(um, activity_from_work(H200, *args)[1])  # traffic power is the bytes', unchanged


def test_rate_exp_lowers_the_base_of_a_kernel_far_below_its_roofline():
    spec = _with(rate_exp=0.5)
    bw = H200.mem_bandwidth_gbs[-1] * 1e9
    t = 1e-3
    nbytes = [0.9 * bw * t, 0.09 * bw * t]  # at 90 % and at 9 % of the memory bandwidth
    plain, _ = activity_from_work(H200, [0, 0], nbytes, ["simt", "simt"], [t, t], [1980, 1980], ["copy", "copy"])
    uc, _ = activity_from_work(spec, [0, 0], nbytes, ["simt", "simt"], [t, t], [1980, 1980], ["copy", "copy"])
    base = dict(H200.work_activity)["base"]
    assert plain[0] - uc[0] == pytest.approx(base * (1 - 0.9 ** 0.5))
    assert plain[1] - uc[1] == pytest.approx(base * (1 - 0.09 ** 0.5))


def _trace(grid):
    k = Kernel("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float>", "norm", 2e-4,
               flops=4e8, bytes=8e7, grid=grid, block=(32, 32, 1), dtype="fp32", math="simt")
    return Trace(name="t", gpu="h200", segments=(Segment("s", (k,), 1, "backward"),))


def test_profiles_use_the_traces_launch_grid():
    spec = _with(sm_floor=0.2)

    def power(sp, grid):
        p = default_params(_trace(grid), sp)
        return evaluate(sp, p, np.array([AUTO]), np.array([AUTO])).power_w[0, 0]

    # six blocks on 132 SMs draw less than the same work on a full grid; a trace without grids is as before
    assert power(spec, (6, 1, 1)) < power(spec, (600, 1, 1)) - 100
    assert power(spec, None) == pytest.approx(power(spec, (600, 1, 1)))
    assert power(H200, (6, 1, 1)) == pytest.approx(power(H200, (600, 1, 1)))  # the bundled model without sm_floor


def test_zoo_entry_sm_fraction_is_time_weighted_and_falls_back_to_all_busy():
    r = {"cuda_kernels": [{"name": "a", "us": 30.0, "grid": [33, 1, 1]}, {"name": "b", "us": 10.0, "grid": [500]}]}
    assert zoo_sm_fraction(r) == pytest.approx((30 * 0.25 + 10 * 1.0) / 40)
    assert zoo_sm_fraction({"cuda_kernels": [{"name": "a", "us": 5.0}]}) == 1.0  # no grid recorded
    assert zoo_sm_fraction({}) == 1.0


def test_structures_add_their_fields_to_the_fit_and_unknown_ones_are_refused():
    x = np.array([650.0, 0.9, 1500.0, 280.0, 692.0, 0.43, 0.96, 0.5, 0.0, 2.4, 51.0, 1.25, 0.3])
    spec = spec_from_vector(x, extra=("sm_floor",))
    assert dict(spec.work_activity)["sm_floor"] == 0.3 and "rate_exp" not in dict(spec.work_activity)
    assert set(STRUCTURES) >= {"none", "sm-occupancy", "issue-rate", "conv-dot"}
    # a switch is set, not fitted: it takes no place in the parameter vector
    spec = spec_from_vector(x, extra=_extra_fields("conv-dot+sm-occupancy"))
    assert dict(spec.work_activity)["conv_dot"] == 1.0 and dict(spec.work_activity)["sm_floor"] == 0.3
    for bad in ("grid", "sm-occupancy+grid", ""):
        with pytest.raises(InputError, match="is not made of"):
            fit_h200([], structure=bad)


def test_direct_convolutions_take_the_simt_dot_product_coefficient_only_with_the_switch():
    names = ["dgrad2d_c1_k1_nhwc_specialized", "conv2d_c1_k1_nhwc_specialized", "wgrad2d_c1_k1_nhwc"]
    assert all(direct_convolution(n) for n in names)
    assert not any(direct_convolution(n) for n in ("wgrad2d_c1_k1_nhwc_reduce", "sm90_xmma_fprop_implicit_gemm_bf16",
                                                   "void cudnn::engines_precompiled::nchwToNhwcKernel<bf16>", ""))
    args = ([8e9], [1e8], ["simt"], [1e-3], [1980], ["other"])
    plain = activity_from_work(H200, *args, dot_product=[True])[0]
    assert plain == pytest.approx(activity_from_work(H200, *args)[0])  # no switch: as before
    on = activity_from_work(_with(conv_dot=1.0), *args, dot_product=[True])[0]
    co = dict(H200.work_activity)
    util = 8e9 / (H200.peak_flops("simt") * 1e-3)
    assert plain - on == pytest.approx((co["ew"] - co["simt"]) * util)
    assert zoo_direct_convolution({"cuda_kernels": [{"name": names[0], "us": 9.0}, {"name": "x", "us": 1.0}]})
    assert not zoo_direct_convolution({"cuda_kernels": [{"name": "x", "us": 9.0}, {"name": names[0], "us": 1.0}]})


def test_thread_occupancy_counts_resident_thread_slots_of_the_first_wave():
    assert thread_occupancy((512, 1, 1), (32, 4, 1)) == pytest.approx(512 * 128 / (132 * 2048))  # a LayerNorm, 512 rows
    assert thread_occupancy((3136, 1, 1), (32, 4, 1)) == 1.0
    assert thread_occupancy((8,), (128,)) == pytest.approx(8 * 128 / (132 * 2048))
    assert thread_occupancy((8,), None) is None and thread_occupancy(None, (128,)) is None
    assert thread_occupancy((8,), (0,)) is None
    assert list(thread_occupancies([(264,), None], [(1024,), (128,)])) == [1.0, 1.0]


def test_occupancy_scales_the_base_of_simt_kernels_and_a_roofline_kernel_keeps_it():
    bw = H200.mem_bandwidth_gbs[-1] * 1e9
    t = 1e-5
    nbytes = [0.05 * bw * t, 0.05 * bw * t, 0.9 * bw * t, 0.05 * bw * t]
    cats = ["norm", "norm", "optimizer", "gemm"]
    occ = [0.24, 1.0, 0.6, 0.2]
    args = ([0, 0, 0, 0], nbytes, ["simt"] * 4, [t] * 4, [1980] * 4, cats)
    plain = activity_from_work(H200, *args)[0]
    base = dict(H200.work_activity)["base"]
    uc = activity_from_work(_with(occ_exp=0.75), *args, occupancy=occ)[0]
    assert plain[0] - uc[0] == pytest.approx(base * (1 - 0.24 ** 0.75))
    assert uc[1] == pytest.approx(plain[1]) and uc[3] == pytest.approx(plain[3])  # full card; a GEMM keeps its base
    assert plain[2] - uc[2] == pytest.approx(base * (1 - 0.6 ** 0.75))
    # with the rate floor the foreach kernel at 90 % of the bandwidth keeps 90 % of its base; the slow norm is as before
    fl = activity_from_work(_with(occ_exp=0.75, occ_rate_floor=1.0), *args, occupancy=occ)[0]
    assert plain[2] - fl[2] == pytest.approx(base * 0.1)
    assert fl[0] == pytest.approx(uc[0])


def test_tensor_rate_scales_only_tensor_core_kernels():
    args = ([1e9, 1e9], [1e6, 1e6], ["tensor16", "simt"], [1e-3, 1e-3], [1980, 1980], ["gemm", "elementwise"])
    plain = activity_from_work(H200, *args)[0]
    uc = activity_from_work(_with(tensor_rate_exp=0.5), *args)[0]
    util = 1e9 / (H200.peak_flops("tensor16") * 1e-3)
    assert plain[0] - uc[0] == pytest.approx(dict(H200.work_activity)["base"] * (1 - util ** 0.5))
    assert uc[1] == pytest.approx(plain[1])


def test_tensor_sm_floor_scales_only_tensor_core_kernels_by_their_grid():
    # session 10 (the tiny-grid set): a GEMM of 10 blocks on 132 SMs keeps floor + (1 − floor) · 10/132 of its base;
    # an elementwise kernel of as few blocks keeps all of it (that is sm-occupancy's and warp-occupancy's business)
    args = ([1e9, 1e9], [1e6, 1e6], ["tensor16", "simt"], [1e-3, 1e-3], [1980, 1980], ["gemm", "elementwise"])
    phi = [10 / 132, 10 / 132]
    plain = activity_from_work(H200, *args, sm_fraction=phi)[0]
    uc = activity_from_work(_with(tensor_sm_floor=0.25), *args, sm_fraction=phi)[0]
    base = dict(H200.work_activity)["base"]
    assert plain[0] - uc[0] == pytest.approx(base * 0.75 * (1 - 10 / 132))
    assert uc[1] == pytest.approx(plain[1])
    full = activity_from_work(_with(tensor_sm_floor=0.25), *args, sm_fraction=[1.0, 1.0])[0]
    assert full[0] == pytest.approx(activity_from_work(H200, *args)[0][0])  # a full grid keeps its base
    assert _extra_fields("warp-occupancy+tensor-sm") == ("occ_exp", "tensor_sm_floor")


def test_zoo_entries_take_the_recorded_launch_grids():
    r = {"launch_grids": [{"name": "ln", "us": 3.0, "grid": [512, 1, 1], "block": [32, 4, 1]}],
         "cuda_kernels": [{"name": "ln", "us": 3.0}]}
    assert zoo_sm_fraction(r) == 1.0
    assert zoo_sm_fraction(r, occupancy=True) == pytest.approx(512 * 128 / (132 * 2048))


def test_the_bundled_fit_is_the_default_structure_on_the_default_data():
    import json
    from pathlib import Path

    from kdvfs.calibrate_h200 import DEFAULT_DATA, DEFAULT_STRUCTURE

    root = Path(__file__).resolve().parents[1]
    fit = json.loads((root / "traces/h200.fit.json").read_text())
    assert fit["structure"] == DEFAULT_STRUCTURE and [Path(p).name for p in fit["data"]] == [Path(p).name for p in DEFAULT_DATA]
    wa = dict(get_gpu("h200").work_activity)
    assert 0.5 < wa["occ_exp"] < 1.0 and wa["conv_dot"] == 1.0 and "occ_rate_floor" not in wa
    assert fit["fit"]["meet_both"] == 76 and fit["heldout"]["test"]["meet_both"] == 39
