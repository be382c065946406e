"""Issue 12, session 12: the structures tried on the two newest zoo sets (``tensor-knee``, ``strided-copy``;
``kdvfs.model.activity_from_work``, ``kdvfs.access``) and the comparison's rows (``simulator.h200_lightfit``)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

from kdvfs.access import strided_copies, strided_copy
from kdvfs.gpus import get_gpu
from kdvfs.h200_fit import STRUCTURES, _extra_fields
from kdvfs.h200_rows import zoo_strided_copy
from kdvfs.model import activity_from_work

STRIDED = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_"
           "kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()(")
VECTOR = ("void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
          "::{lambda()#3}>(int, at::native::direct_copy_kernel_cuda)")
UNROLLED = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
ADD = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float>"


def test_strided_copy_is_atens_copy_between_layouts_only():
    assert strided_copy(STRIDED)
    assert not strided_copy(VECTOR) and not strided_copy(UNROLLED)  # contiguous copies and casts
    assert not strided_copy(ADD)  # a strided add is not a copy
    assert not strided_copy("") and not strided_copy(None)
    assert strided_copies([STRIDED, VECTOR]) == [True, False]


def test_zoo_strided_copy_judges_by_time_and_leaves_out_the_graph_summary():
    """A graph replay's kernel list ends with ``(+N more)``, the remaining launches of the same kernels: counted, it
    made the 1024² transpose's 8 listed µs a minority of its time."""
    r = {"cuda_kernels": [{"name": STRIDED, "us": 8.0}, {"name": STRIDED, "us": 8.5}, {"name": "(+492 more)",
                                                                                        "us": 3950.0}]}
    assert zoo_strided_copy(r)
    r = {"cuda_kernels": [{"name": STRIDED, "us": 10.0}, {"name": VECTOR, "us": 30.0}]}
    assert not zoo_strided_copy(r)
    assert not zoo_strided_copy({})


def _act(co: dict, **kw):
    spec = get_gpu("h200")
    from dataclasses import replace

    spec = replace(spec, work_activity=tuple({**dict(spec.work_activity), **co}.items()))
    # a large GEMM at 60 % of the tensor peak, a few-tile one at 2 %, and a copy moving 1 TB/s
    peak = spec.peak_flops("tensor16")
    t = np.array([1e-3, 1e-3, 1e-3])
    flops = np.array([0.6 * peak * 1e-3, 0.02 * peak * 1e-3, 0.0])
    nbytes = np.array([1e6, 1e5, 1e12 * 1e-3])
    return activity_from_work(spec, flops, nbytes, ["tensor16", "tensor16", "simt"], t,
                              np.full(3, spec.boost_core_mhz), ["gemm", "gemm", "copy"],
                              strided=[False, False, True], **kw)


def test_tensor_knee_scales_only_tensor_kernels_below_the_knee():
    uc0, um0 = _act({})
    uc, um = _act({"tensor_knee": 0.4, "tensor_knee_exp": 0.5})
    base = dict(get_gpu("h200").work_activity)["base"]
    assert uc[0] == pytest.approx(uc0[0])  # 60 % > the knee: its fitted base stays
    assert uc[1] == pytest.approx(uc0[1] - base + base * (0.02 / 0.4) ** 0.5)
    assert uc[2] == pytest.approx(uc0[2]) and np.allclose(um, um0)  # the copy is not a tensor kernel


def test_strided_traffic_multiplies_the_flagged_kernels_traffic_only():
    uc0, um0 = _act({})
    uc, um = _act({"strided_traffic": 2.5})
    assert np.allclose(uc, uc0)
    assert um[2] == pytest.approx(3.5 * um0[2]) and um[:2] == pytest.approx(um0[:2])
    assert um0[2] > 0


def test_the_new_structures_are_fitted_fields_of_their_own():
    assert _extra_fields("warp-occupancy+conv-dot+tensor-knee") == ("occ_exp", "tensor_knee", "tensor_knee_exp",
                                                                     "conv_dot")
    assert _extra_fields("strided-copy") == ("strided_traffic",)
    assert "tensor-knee" in STRUCTURES and "strided-copy" in STRUCTURES


def test_comparison_rows_are_prefixes_with_the_same_heldout_rows():
    """The nine files, then c15, c16 and c14: every data set a prefix, characterization14's three repeats of the nine
    files and three of characterization15 dropped (a row measured twice keeps its first measurement)."""
    from simulator.h200_lightfit import PARTS, _part_rows

    prefixes, labels, gws = _part_rows(ROOT, "thermal")
    assert [labels.count(k) for k in PARTS] == [124, 14, 12, 6]
    assert [len(p) for p in prefixes] == [124, 138, 150, 156]
    assert all(p[i]["name"] == prefixes[-1][i]["name"] for p in prefixes for i in range(len(p)))
    flagged = [r["name"] for r in prefixes[-1] if r.get("strided")]
    assert flagged == ["transpose_bf16_16384x16384", "transpose_fp32_8192x8192", "transpose_bf16_1024x1024_graph512",
                       "copy_nhwc_fp32_16x150x512x512"]


def test_check_refuses_a_file_the_fits_saw_before_fitting(tmp_path, capsys):
    from scripts.h200_lightfit import main

    for bad in ("validation/h200/characterization/characterization16.json.gz", str(tmp_path / "missing.json.gz")):
        with pytest.raises(SystemExit) as e:
            main(["--check", str(ROOT / bad) if not bad.startswith("/") else bad, "-o", str(tmp_path / "o.json")])
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "not held out" in err and "is not a file" in err
    assert not (tmp_path / "o.json").exists()
