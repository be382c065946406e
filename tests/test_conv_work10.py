"""Issue 12, session 10: the work of the conv set's ops, from their arithmetic (ATen's kernels), in the importer's
path (``kdvfs.work.op_work``) and the zoo's (``hw_backend.zoo``): one definition of work for the fit and the steps."""

import pytest

from kdvfs.work import ACTIVATION_FLOPS, op_work

BF = "c10::BFloat16"


def _zoo(name: str):
    from hw_backend.zoo import ZOO_SETS

    z = {k.name: k for k in ZOO_SETS["conv"]()}[name]
    w = z.work
    g = max(1, z.graph)
    return w.flops / g, w.bytes / g  # one launch


def test_depthwise_forward_op_is_a_convolution_at_its_stride():
    """``aten::_conv_depthwise2d`` is the op ATen's depthwise kernels are joined to (EfficientNet-B0's step). It was
    priced as an elementwise op: one FLOP per input element where each output takes k² multiply-adds."""
    n, c, h, k = 128, 144, 59, 5  # the step's padded input, a 5 × 5 kernel at stride 2: 28 × 28 out
    out = (h - k) // 2 + 1
    w = op_work("aten::_conv_depthwise2d", [[n, c, h, h], [c, 1, k, k], [], [], [], [], []],
                [BF, BF, "ScalarList", "", "ScalarList", "ScalarList", "ScalarList"],
                concrete=["", "", "[5, 5]", "", "[2, 2]", "[0, 0]", "[1, 1]"])
    assert out == 28
    assert w.flops == 2.0 * n * c * out * out * k * k
    assert w.bytes == (n * c * h * h + c * k * k + n * c * out * out) * 2  # input and weights read, output written
    # the same convolution through the outer op (aten::convolution, groups = C) gives the same count
    via = op_work("aten::convolution", [[n, c, h, h], [c, 1, k, k], [], [], [], [], [], [], []], [BF, BF],
                  concrete=["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", str(c)])
    assert (via.flops, via.bytes) == (w.flops, w.bytes)


def test_depthwise_forward_work_is_the_zoos():
    """At stride 1 with "same" padding (the zoo's definition) the importer's count is the zoo entry's."""
    n, c, h, k = 128, 240, 28, 5
    w = op_work("aten::_conv_depthwise2d", [[n, c, h + 4, h + 4], [c, 1, k, k], [], [], [], [], []], [BF, BF],
                concrete=["", "", "[5, 5]", "", "[1, 1]", "[0, 0]", "[1, 1]"])
    zf, zb = _zoo("dwconv_bf16_128x240x28x28_k5_s1_graph32")
    assert w.flops == zf
    # the importer sees the padded input (the step pads explicitly): more bytes by exactly the border
    assert w.bytes - zb == pytest.approx(n * c * ((h + 4) ** 2 - h * h) * 2)


def test_convolution_backward_reads_grad_output_once_per_gradient():
    """The input's and the weight's gradients are two kernels (ATen's depthwise ``backward_kernel`` and
    ``grad_weight_kernel``; cuDNN's dgrad and wgrad), each reading grad_output: dy, w → dx and dy, x → dw."""
    n, c, h, k = 128, 672, 14, 5
    g, x, wt = [n, c, h, h], [n, c, h, h], [c, 1, k, k]
    both = op_work("aten::convolution_backward", [g, x, wt] + [[]] * 8, [BF] * 3,
                   concrete=["", "", "", "[0]", "[1, 1]", "[2, 2]", "[1, 1]", "False", "[0, 0]", str(c),
                             "[True, True, False]"])
    out = inp = n * c * h * h
    assert both.flops == 2 * 2.0 * out * k * k
    assert both.bytes == (2 * out + 2 * inp + 2 * c * k * k) * 2
    assert (both.flops, both.bytes) == _zoo("dwconv_bwd_bf16_128x672x14x14_k5_s1_graph16")
    wonly = op_work("aten::convolution_backward", [g, x, wt] + [[]] * 8, [BF] * 3,
                    concrete=["", "", "", "[0]", "[1, 1]", "[2, 2]", "[1, 1]", "False", "[0, 0]", str(c),
                              "[False, True, False]"])
    assert wonly.bytes == (out + inp + c * k * k) * 2  # dy and x read, dw written


def test_batch_norm_backward_reads_its_input_and_gradient_twice():
    """ATen's channels-first batch-norm backward (one block per channel) reduces Σdy and Σdy·(x − mean) over the
    channel, then reads dy and x again to write dx: 5 passes, not 3. In eval mode only the second pass is left."""
    shp = [128, 1280, 7, 7]
    n = 128 * 1280 * 49
    dims = [shp, shp, [1280], [1280], [1280], [1280], [1280], [], [], []]
    types = [BF, BF] + ["float"] * 5 + ["Scalar", "Scalar", "ScalarList"]
    train = op_work("aten::native_batch_norm_backward", dims, types,
                    concrete=[""] * 7 + ["True", "0.001", "[True, True, True]"])
    assert train.bytes == 5 * n * 2
    evalm = op_work("aten::native_batch_norm_backward", dims, types,
                    concrete=[""] * 7 + ["False", "0.001", "[True, True, True]"])
    assert evalm.bytes == 3 * n * 2
    # the zoo's batch_norm_bwd entry takes the same count
    assert _zoo("batch_norm_bwd_bf16_128x16x112x112_graph4")[1] == 5 * 128 * 16 * 112 * 112 * 2


def test_layer_norm_backward_rereads_only_for_the_parameters_gradients():
    """LayerNorm's backward runs layer_norm_grad_input_kernel (dy, x → dx) and, where the weight or bias needs a
    gradient, GammaBetaBackwardCUDAKernel (dy, x again): 5 passes with them, 3 without."""
    shp = [16, 1024, 1024]
    n = 16 * 1024 * 1024
    dims = [shp, shp, [], [16, 1024, 1], [16, 1024, 1], [1024], [1024], []]
    types = ["float", "float", "ScalarList", "float", "float", "float", "float", "ScalarList"]
    with_params = op_work("aten::native_layer_norm_backward", dims, types,
                          concrete=["", "", "[1024]", "", "", "", "", "[True, True, True]"])
    no_params = op_work("aten::native_layer_norm_backward", dims, types,
                        concrete=["", "", "[1024]", "", "", "", "", "[True, False, False]"])
    assert with_params.bytes == 5 * n * 4 and no_params.bytes == 3 * n * 4
    assert with_params.flops == no_params.flops == 12 * n


@pytest.mark.parametrize("op, zoo_name", [("aten::silu", "silu_bf16_128x96x112x112_graph8"),
                                          ("aten::silu_", "silu_bf16_128x96x112x112_graph8"),
                                          ("aten::sigmoid", "sigmoid_bf16_128x1152_graph1024")])
def test_activations_take_their_functors_operations(op, zoo_name):
    """SiLU and the sigmoid are negate, exp, add, divide per element (4), as the zoo counts them; the importer gave
    every activation 1, so a step's SiLU had a quarter of the SIMT work the model was fitted with."""
    shape = [128, 96, 112, 112] if "silu" in op else [128, 1152]
    n = 1
    for d in shape:
        n *= d
    w = op_work(op, [shape], [BF])
    assert w.flops == 4 * n and w.bytes == 2 * n * 2
    assert (w.flops, w.bytes) == _zoo(zoo_name)


def test_activation_counts_from_the_formulas():
    """The table's counts, each from its ATen formula (kdvfs.work.ACTIVATION_FLOPS), and the backward ops read the
    gradient and the saved tensor."""
    assert ACTIVATION_FLOPS["gelu"] == 1 + 4 + 1 + 1 + 1  # x/√2, erf, 1 +, · 0.5, · x
    assert ACTIVATION_FLOPS["silu_backward"] == ACTIVATION_FLOPS["sigmoid"] + 5
    assert ACTIVATION_FLOPS["gelu_backward"] == (ACTIVATION_FLOPS["gelu"] - 1) + 4 + 3
    n = 4096 * 1024
    g = op_work("aten::gelu_backward", [[4096, 1024], [4096, 1024]], [BF, BF])
    assert g.flops == 14 * n and g.bytes == 3 * n * 2
    s = op_work("aten::sigmoid_backward", [[128, 1152], [128, 1152]], [BF, BF])
    assert s.flops == 3 * 128 * 1152
    # not an activation: one operation per element, as before
    assert op_work("aten::add", [[4096, 1024], [4096, 1024]], [BF, BF]).flops == n


def test_global_average_pooling_writes_one_mean_per_channel():
    """``mean(x, [-1, -2])`` over N × C × H × W writes N × C results (it wrote one); the zoo's avg_pool counts so."""
    shp = [128, 1152, 7, 7]
    w = op_work("aten::mean", [shp, [], [], []], [BF, "ScalarList", "Scalar", ""], concrete=["", "[-1, -2]", "True", ""])
    assert w.bytes == (128 * 1152 * 49 + 128 * 1152) * 2
    assert (w.flops, w.bytes) == _zoo("avg_pool_bf16_128x1152x7x7_graph64")
    # without the dimensions recorded: a full reduction, one result
    assert op_work("aten::sum", [[128, 1000]], [BF]).bytes == (128 * 1000 + 1) * 2


def test_a_conv_set_file_takes_todays_work_in_the_fit():
    """The fit re-derives each zoo entry's work from its definition (as a trace's kernels are re-imported), also for
    the sets outside ``full_zoo`` (``conv``, ``thermal``, ``warm-cool``): a file measured with the three-pass
    batch-norm backward is fitted with five."""
    from kdvfs.calibrate_h200 import zoo_rows

    name = "batch_norm_bwd_bf16_128x16x112x112_graph4"
    n = 128 * 16 * 112 * 112
    rec = {"name": name, "category": "norm", "role": "kernel", "time_s": 0.011, "power_w": 165.5,
           "sm_mhz": 1980.0, "flops": 12.0 * n * 4, "bytes": 3.0 * n * 2 * 4}
    (row,) = zoo_rows({"kernels": [rec]})
    assert row["bytes"] == 5.0 * n * 2 * 4 and row["recorded_bytes"] == 3.0 * n * 2 * 4
    assert row["ws_bytes"] == 5.0 * n * 2  # one launch of the four in the graph


def test_conv_rate_prices_only_direct_convolutions_simt_flops():
    """The structure tried in session 10 (``conv-rate``): a direct convolution's SIMT FLOPs take the fitted
    ``conv_rate`` in place of ``simt`` (conv-dot) or ``ew``; other kernels, and a GEMM named like one, are unchanged."""
    from dataclasses import replace

    from kdvfs.gpus import get_gpu
    from kdvfs.model import activity_from_work

    spec = get_gpu("h200")
    co = dict(spec.work_activity)
    flops, nbytes, t = [2e9, 2e9, 2e9], [1e8, 1e8, 1e8], [1e-3, 1e-3, 1e-3]
    args = (flops, nbytes, ["simt", "simt", "tensor16"], t, [1980.0] * 3)
    kw = dict(categories=["copy", "elementwise", "gemm"], dot_product=[True, False, True])
    base, _ = activity_from_work(spec, *args, **kw)
    with_rate = replace(spec, work_activity=tuple((co | {"conv_rate": 10.0}).items()))
    got, _ = activity_from_work(with_rate, *args, **kw)
    util = 2e9 / (spec.peak_flops("simt") * 1e-3)
    coef = co["simt"] if co.get("conv_dot") else co["ew"]
    assert got[0] - base[0] == pytest.approx((10.0 - coef) * util)
    assert got[1] == base[1] and got[2] == base[2]


def test_channels_last_batch_norm_backward_ops_keep_their_one_pass_each():
    """The channels-last (and SyncBN) backward is two ops, batch_norm_backward_reduce and _elemt, each one kernel and
    one pass over its operands: the re-read is the channels-first kernel's alone."""
    shp = [32, 64, 56, 56]
    n = 32 * 64 * 56 * 56
    for op in ("aten::batch_norm_backward_reduce", "aten::batch_norm_backward_elemt"):
        assert op_work(op, [shp, shp, [64], [64], [64]], [BF, BF, "float", "float", "float"]).bytes == 3 * n * 2
