"""Session 12, hostile tester (tester12b): the importer's new rules (``kdvfs.work_ops``) fed what real traces hold and
what they should not. The records below are copied from CPU torch 2.13's profiler (``record_shapes=True``) where
they say so: the same argument layout the CUDA traces carry (validation/user-findings12b/README.md)."""

from __future__ import annotations

import itertools
import math

import pytest

from kdvfs.work import op_rule, op_work

F = "float"


# ------------------------------------------------------------------------------------ finding 1: .vec scale factors
def test_vec_scale_factors_as_the_profiler_writes_them():
    """F.interpolate(scale_factor=2) records the .vec overload with ``'[2., 2.]'`` (C++'s float format, which JSON
    does not read): it gave no work. It now equals the inner op's, which records the output size."""
    near_vec = op_work("aten::upsample_nearest2d", [[2, 3, 8, 8], [], []], [F, "", "ScalarList"],
                       concrete=["", "", "[2., 2.]"])
    near = op_work("aten::upsample_nearest2d", [[2, 3, 8, 8], [], [], []], [F, "ScalarList", "Scalar", "Scalar"],
                   concrete=["", "[16, 16]", "2.", "2."])
    assert near_vec is not None and near_vec == near and near.bytes == 4.0 * (384 + 1536)
    bil_vec = op_work("aten::upsample_bilinear2d", [[2, 3, 8, 8], [], [], []], [F, "", "Scalar", "ScalarList"],
                      concrete=["", "", "False", "[2., 2.]"])
    assert bil_vec is not None and bil_vec.flops == 9.0 * 1536
    # nearest-exact at 1.5: floor(8 · 1.5) = 12
    ex = op_work("aten::_upsample_nearest_exact2d", [[2, 3, 8, 8], [], []], [F, "", "ScalarList"],
                 concrete=["", "", "[1.5, 1.5]"])
    assert ex is not None and ex.bytes == 4.0 * (384 + 6 * 144)


# ------------------------------------------------------------------------ finding 2: corrupt arguments, no crash
_BAD = [None, "", "None", "[]", "[-4, -4]", "[0, 0]", "[16]", "[1e400]", "[NaN, NaN]", "[Infinity, 2]",
        "[-2.0, 2.0]", "[99999999999999999999999999999999, 2]", "[" + "9" * 400 + ", 2]", 3, "[2., 2.]",
        "[true, true]", "abc", "[[1,2]]", "-1"]
_OPS = {
    "aten::upsample_bilinear2d": (lambda v: ["", v, "False", v], [[2, 3, 8, 8]]),
    "aten::upsample_nearest2d": (lambda v: ["", v, v], [[2, 3, 8, 8]]),
    "aten::upsample_trilinear3d": (lambda v: ["", v, "False", v], [[1, 2, 4, 4, 4]]),
    "aten::upsample_bilinear2d_backward": (lambda v: ["", v, v, "False"], [[2, 3, 16, 16]]),
    "aten::upsample_nearest2d_backward": (lambda v: ["", "[16, 16]", v], [[2, 3, 16, 16]]),
    "aten::avg_pool2d": (lambda v: ["", v, v, v, v, v], [[2, 3, 8, 8]]),
    "aten::max_pool2d_with_indices": (lambda v: ["", "[3, 3]", v, v, v, v], [[2, 3, 8, 8]]),
    "aten::max_pool2d_with_indices_backward": (lambda v: ["", "", v, v, v, v, "False"], [[2, 3, 4, 4], [2, 3, 8, 8]]),
    "aten::avg_pool2d_backward": (lambda v: ["", "", "[3, 3]", v, v, "True"], [[2, 3, 4, 4], [2, 3, 8, 8]]),
    "aten::adaptive_avg_pool2d": (lambda v: ["", v], [[2, 3, 8, 8]]),
    "aten::adaptive_max_pool2d": (lambda v: ["", v], [[2, 3, 8, 8]]),
    "aten::im2col": (lambda v: ["", v, v, v, v], [[2, 3, 8, 8]]),
    "aten::col2im": (lambda v: ["", v, v, "[1, 1]", "[0, 0]", "[1, 1]"], [[2, 27, 16]]),
    "aten::index_put_": (lambda v: ["", "", "", v], [[4, 5], [], [3, 5]]),
    "aten::scatter_add_": (lambda v: ["", v, "", ""], [[4, 5], [], [3, 5], [3, 5]]),
    "aten::_softmax": (lambda v: ["", v, "False"], [[2, 3, 8, 8]]),
}


@pytest.mark.parametrize("op", sorted(_OPS))
def test_corrupt_arguments_give_no_work_or_a_sane_one(op):
    """Negative, zero, NaN, infinite or beyond-int64 sizes and scales gave negative work (a -2.0 scale: -13 824
    FLOPs), astronomic work (1e34 FLOPs) or crashed the importer (OverflowError, ValueError; col2im's zero kernel a
    ZeroDivisionError). Each is now no work (the kernel's name prices it) or a finite non-negative one."""
    make, shapes = _OPS[op]
    for v in _BAD:
        w = op_work(op, shapes + [[]] * 8, [F] * 9, concrete=make(v))
        if w is not None:
            assert 0 <= w.flops < 1e25 and 0 <= w.bytes < 1e25, (op, v, w)
            assert math.isfinite(w.flops) and math.isfinite(w.bytes), (op, v, w)
    for conc in (None, "str", [None] * 9, [1, 2, 3], {}):
        for dims in (None, [], [None], [[2, 3, 8, 8], None], [[-1, 3, 8, 8]], [[2, 3, 8]], [[8]], [[0, 3, 8, 8]]):
            op_work(op, dims, [F, None, 5], concrete=conc)  # never raises


def test_col2im_with_a_zero_kernel_is_no_work():
    assert op_work("aten::col2im", [[2, 27, 16]] + [[]] * 5, [F],
                   concrete=["", "[8, 8]", "[0, 0]", "[1, 1]", "[0, 0]", "[1, 1]"]) is None


def test_a_negative_upsampling_size_is_no_work():
    assert op_work("aten::upsample_bilinear2d", [[2, 3, 8, 8]] + [[]] * 3, [F], concrete=["", "-1", "False", ""]) is None
    assert op_work("aten::upsample_bilinear2d", [[2, 3, 8, 8]] + [[]] * 3, [F],
                   concrete=["", "", "False", "[-2.0, 2.0]"]) is None


# ------------------------------------------------------------------ finding 3: adaptive pooling's overlapping windows
def test_adaptive_pairs_is_atens_window_sum():
    """ATen's window o spans [floor(o·I/O), ceil((o+1)·I/O)); checked against CPU torch's Jacobian of
    adaptive_avg_pool1d (nonzeros) for I < 20, O < 25 when written; here against the definition."""
    from kdvfs.work_ops import adaptive_pairs

    for i, o in itertools.product(range(1, 20), range(1, 25)):
        assert adaptive_pairs(i, o) == sum(-(-((k + 1) * i) // o) - (k * i) // o for k in range(o))


def test_adaptive_average_pooling_to_a_larger_size():
    """adaptive_avg_pool2d of [2, 3, 8, 8] to 12 × 12 (CPU torch's record): each output averages one or two inputs,
    16 × 16 (window, element) pairs per channel. It was priced as in + out = 1 248 FLOPs, half the 2 400."""
    f = op_work("aten::_adaptive_avg_pool2d", [[2, 3, 8, 8], []], [F, "ScalarList"], concrete=["", "[12, 12]"])
    assert (f.flops, f.bytes) == (6 * 256 + 6 * 144, 4.0 * 6 * (64 + 144))
    b = op_work("aten::_adaptive_avg_pool2d_backward", [[2, 3, 12, 12], [2, 3, 8, 8]], [F, F], concrete=["", ""])
    assert b.flops == 2.0 * 6 * 256
    # to 1 × 1 and to a divisor: the windows tile the input, as before
    g = op_work("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], [F, "ScalarList"], concrete=["", "[1, 1]"])
    assert g.flops == 384 + 6


def test_adaptive_max_pooling_is_priced():
    """It went to the catch-all (an elementwise op over its input): now three operations per (window, element) pair,
    the int64 index written beside each output; its backward one atomic add per output gradient."""
    assert op_rule("aten::adaptive_max_pool2d") == "pool" and op_rule("aten::adaptive_max_pool2d_backward") == "pool"
    f = op_work("aten::adaptive_max_pool2d", [[2, 3, 8, 8], []], [F, "ScalarList"], concrete=["", "[3, 3]"])
    assert (f.flops, f.bytes) == (3.0 * 6 * 100, 4.0 * 384 + 12.0 * 54)  # 8 → 3: windows of 3, 4, 3 (10 pairs)
    b = op_work("aten::adaptive_max_pool2d_backward", [[2, 3, 3, 3], [2, 3, 8, 8], [2, 3, 3, 3]],
                [F, F, "long int"], concrete=["", "", ""])
    assert (b.flops, b.bytes) == (54.0, 12.0 * 54 + 4.0 * 384)


# ------------------------------------------------------------------------ finding 4: linear1d and trilinear3d
def test_trilinear_and_linear_upsampling_are_priced_by_their_taps():
    """upsample_trilinear3d (a 3-D U-Net's decoder) went to the catch-all: 128 FLOPs for 1 024 outputs of eight taps.
    Now 21 per output (nested pairs: 14 multiplies, 7 adds), 32 in the backward (three multiplies and an atomic add per
    tap); linear1d 3 and 4. Records from CPU torch."""
    from kdvfs.work_ops import linear_upsample_flops

    assert [linear_upsample_flops(n) for n in (1, 2, 3)] == [3.0, 9.0, 21.0]
    assert [linear_upsample_flops(n, backward=True) for n in (1, 2, 3)] == [4.0, 12.0, 32.0]
    t = op_work("aten::upsample_trilinear3d", [[1, 2, 4, 4, 4], [], [], [], [], []],
                [F, "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"], concrete=["", "[8, 8, 8]", "False", "2.", "2.", "2."])
    assert (t.flops, t.bytes) == (21.0 * 1024, 4.0 * (128 + 1024))
    tv = op_work("aten::upsample_trilinear3d", [[1, 2, 4, 4, 4], [], [], []], [F, "", "Scalar", "ScalarList"],
                 concrete=["", "", "False", "[2., 2., 2.]"])
    assert tv == t
    tb = op_work("aten::upsample_trilinear3d_backward", [[1, 2, 8, 8, 8]] + [[]] * 6, [F],
                 concrete=["", "[8, 8, 8]", "[1, 2, 4, 4, 4]", "False", "2.", "2.", "2."])
    assert (tb.flops, tb.bytes) == (32.0 * 1024, 4.0 * (1024 + 256))
    lin = op_work("aten::upsample_linear1d", [[2, 3, 8], [], [], []], [F], concrete=["", "[16]", "False", "2."])
    assert (lin.flops, lin.bytes) == (3.0 * 96, 4.0 * (48 + 96))
    assert op_rule("aten::upsample_bicubic2d") == "elementwise"  # left to the catch-all (README)


# ------------------------------------------------------------------------ finding 5: operands at their own dtypes
def test_integer_operands_are_counted_at_their_size():
    """A uint8 label map upsampled by nearest (segmentation's target resize) was counted at 4 bytes an element; the
    int64 index_put_ of Mixtral-MoE's routing (steps12's trace) at 4 instead of 8. The Work's dtype stays the op's
    float dtype (fp32 where none is recorded)."""
    u8 = op_work("aten::upsample_nearest2d", [[1, 1, 4, 4], [], [], []], ["unsigned char", "ScalarList", "Scalar", "Scalar"],
                 concrete=["", "[8, 8]", "2.", "2."])
    assert (u8.bytes, u8.dtype) == (16.0 + 64.0, "fp32")
    moe = op_work("aten::index_put_", [[4096], [], [4096], []], ["long int", "", "long int", "Scalar"],
                  concrete=["", "", "", "False"], strides=[[1], [], [1], []])
    assert moe.bytes == 8.0 * 2 * 4096
    h = op_work("aten::upsample_nearest2d", [[2, 3, 8, 8], [], []], ["c10::Half", "", "ScalarList"],
                concrete=["", "", "[2., 2.]"])
    assert (h.bytes, h.dtype) == (2.0 * (384 + 1536), "fp16")


# ------------------------------------------------------------------------ finding 6: scatter_add_'s smaller index
def test_scatter_add_visits_its_index_not_all_of_src():
    """scatter_add_(dim, index [2, 5], src [3, 5]) adds 10 elements, not 15 (ATen loops over the index; src may be
    larger along any dimension). A negative dim changes nothing."""
    w = op_work("aten::scatter_add_", [[4, 5], [], [2, 5], [3, 5]], [F, "Scalar", "long int", F],
                concrete=["", "-2", "", ""], strides=[[5, 1], [], [5, 1], [5, 1]])
    assert (w.flops, w.bytes) == (10.0, 4.0 * 10 + 8.0 * 10 + 2 * 4.0 * 10)


# ------------------------------------------------------------------ finding 7: the pooling's rank comes from its name
def test_a_single_kernel_value_stands_for_every_dimension():
    """avg_pool2d(x, kernel_size=(3,)) pools 3 × 3 (ATen repeats a single value): it was priced as a 1-D pool along
    the last dimension, with the height kept as a batch dimension (8× the outputs)."""
    one = op_work("aten::avg_pool2d", [[1, 1, 8, 8]] + [[]] * 6, [F], concrete=["", "[3]", "[2]", "[1]", "False"])
    two = op_work("aten::avg_pool2d", [[1, 1, 8, 8]] + [[]] * 6, [F], concrete=["", "[3, 3]", "[2, 2]", "[1, 1]", "False"])
    assert one == two and two.flops == 10.0 * 16


def test_max_pool_with_ceil_mode_and_dilation_from_cpu_torchs_record():
    """max_pool2d(k 3, stride 2, padding 1, dilation 2, ceil_mode) of [2, 3, 8, 8]: torch's output is 4 × 4."""
    conc = ["", "[3, 3]", "[2, 2]", "[1, 1]", "[2, 2]", "True"]
    f = op_work("aten::max_pool2d_with_indices", [[2, 3, 8, 8]] + [[]] * 5,
                [F, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"], concrete=conc)
    assert (f.flops, f.bytes) == (3.0 * 9 * 96, 4.0 * 384 + 12.0 * 96)
    p3 = op_work("aten::avg_pool3d", [[1, 2, 4, 4, 4]] + [[]] * 6, [F],
                 concrete=["", "[2, 2, 2]", "[]", "[0, 0, 0]", "False", "True", ""])
    assert (p3.flops, p3.bytes) == (9.0 * 16, 4.0 * (128 + 16))


def test_boolean_mask_assignment_of_a_scalar_is_left_to_the_kernels_name():
    """x[mask] = 1.0 records index_put_ with the indices' list and the 0-dim value unrecorded: how many places it
    writes is not in the record, so no work from shapes (not a guess)."""
    assert op_work("aten::index_put_", [[4, 5], [], [], []], [F, "", F, "Scalar"], concrete=["", "", "", "False"]) is None


# ------------------------------------------------------------------ the CLI path on a trace holding such records
def _kineto_window_ops() -> dict:
    """A small Kineto trace: bilinear upsampling's .vec record as the profiler writes it, an average pooling, and two
    corrupt records (col2im with a zero kernel, upsampling by NaN), one kernel each."""
    ops = [
        ("aten::upsample_bilinear2d", [[4, 150, 128, 128], [], [], []], [F, "", "Scalar", "ScalarList"],
         ["", "", "False", "[4., 4.]"], "void at::native::(anonymous namespace)::upsample_bilinear2d_out_frame<float, "
                                        "float>(int, float, float, bool)"),
        ("aten::avg_pool2d", [[32, 64, 56, 56]] + [[]] * 6, [F], ["", "[3, 3]", "[1, 1]", "[1, 1]", "False", "False", ""],
         "void at::native::(anonymous namespace)::avg_pool2d_out_cuda_frame<float, float, false, true>(int)"),
        ("aten::col2im", [[4, 3456, 512]] + [[]] * 5, [F], ["", "[512, 1]", "[0, 0]", "[1, 1]", "[4, 0]", "[1, 1]"],
         "void at::native::col2im_kernel<float, float>(long)"),
        ("aten::upsample_nearest2d", [[4, 19, 64, 64], [], []], [F, "", "ScalarList"], ["", "", "[NaN, NaN]"],
         "void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<float>(float const*)"),
    ]
    ev = []
    for i, (name, dims, types, conc, kernel) in enumerate(ops):
        t = 1000.0 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": t, "dur": 50, "pid": 1, "tid": 1,
                   "args": {"External id": i + 1, "Input Dims": dims, "Input type": types, "Concrete Inputs": conc}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 10, "dur": 5, "pid": 1,
                   "tid": 1, "args": {"correlation": i + 1, "External id": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": t + 100, "dur": 400, "pid": 0, "tid": 7,
                   "args": {"correlation": i + 1, "External id": i + 1, "grid": [4096, 1, 1], "block": [256, 1, 1],
                            "stream": 7}})
    return {"traceEvents": ev}


def test_trace_import_show_and_profile_on_window_ops(tmp_path, capsys):
    """integ12 stopped `kdvfs trace import` with a ZeroDivisionError traceback on the corrupt col2im record; now the
    corrupt records' kernels take their work from their names, the rest from their shapes."""
    import gzip
    import json

    from conftest import run_cli

    from kdvfs.trace import load_trace

    src = tmp_path / "w.json.gz"
    src.write_bytes(gzip.compress(json.dumps(_kineto_window_ops()).encode()))
    out = tmp_path / "w.trace.json"
    code, _, err = run_cli(["trace", "import", str(src), "-o", str(out)], capsys)
    assert code == 0 and "Traceback" not in err
    ks = [k for s in load_trace(out).segments for k in s.kernels]
    by = {k.name.split("<")[0].split("::")[-1]: k for k in ks}
    up = by["upsample_bilinear2d_out_frame"]
    assert (up.work_source, up.flops) == ("shapes", 9.0 * 4 * 150 * 512 * 512)
    assert by["avg_pool2d_out_cuda_frame"].work_source == "shapes"
    assert by["col2im_kernel"].work_source != "shapes" and by["upsample_nearest2d_out_frame"].work_source != "shapes"
    code, text, err = run_cli(["trace", "show", str(out)], capsys)
    assert code == 0 and "Traceback" not in err
    code, _, err = run_cli(["profile", "build", "--trace", str(out), "--gpu", "h200", "-o", str(tmp_path / "p.json")],
                           capsys)
    assert code == 0 and "Traceback" not in err
