"""The characterisation zoo: ``ZooKernel`` and its sets (``default_zoo``, ``cache_gap_zoo``, ``step_shape_zoo``,
``duty_zoo``), the step responses' probe and light load. Each entry's work (FLOPs and bytes) comes from
``kdvfs.work``'s formulas, the ones trace kernels are sized with. ``hw_backend.characterize`` measures them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.card_anchor import ANCHOR_NAMES
from kdvfs.errors import InputError
from kdvfs.work import (
    MAX_REDUCTION_FLOPS,
    Work,
    attention_work,
    elementwise_work,
    gemm_work,
    norm_work,
    reduction_work,
    softmax_work,
)
from kdvfs.work_copies import (
    CopyTraffic,
    channels_last_strides,
    contiguous_strides,
    copy_traffic,
    copy_traffic_work,
    transpose_strides,
)
from kdvfs.work_ops import UPSAMPLE_FLOPS, avg_pool_work, bilinear_upsample_work, col2im_work

__all__ = ["ANCHOR_NAMES", "LIGHT", "PROBE", "UPSAMPLE_FLOPS", "ZOO_SETS", "ZooKernel", "anchor_zoo", "attention_zoo", "cache_gap_zoo", "conv_zoo", "copies_zoo", "default_zoo", "duty_zoo", "full_zoo",
           "held_duty_zoo", "light_ops2_zoo", "light_ops3_zoo", "light_ops4_zoo", "small_zoo", "step_ops_zoo", "step_shape_zoo", "thermal_zoo", "tiny_grid2_zoo", "tiny_grid_zoo",
           "top_clock_zoo",
           "warm_cool_zoo"]


@dataclass(frozen=True, slots=True)
class ZooKernel:
    """One kernel of the zoo.

    Attributes:
        name: unique name (``gemm_bf16_8192``).
        category: trace category (gemm, attention, elementwise, reduction, norm, copy, optimizer).
        op: what runs: ``gemm``, ``bmm`` (a batch of GEMMs, shape ``(batch, m, n, k)``), ``sdpa``, ``sdpa_bwd``, ``add``, ``mul``, ``gelu``, ``silu``, ``relu``, ``sum``,
            ``amax``, ``layer_norm``, ``rms_norm``, ``softmax``, ``copy``, ``transpose``, ``cast``, ``fill``, ``adamw``,
            ``dwconv`` and ``dwconv_bwd`` (a depthwise convolution, shape ``(N, C, H, W, k)`` or ``(N, C, H, W, k,
            stride)``, and its backward), ``batch_norm`` and ``batch_norm_bwd`` (training-mode batch norm over
            ``(N, C, H, W)``, and its backward), ``sigmoid``, ``avg_pool`` (global average pooling of ``(N, C, H, W)``
            to ``(N, C)``), ``gconv1d`` and ``gconv1d_bwd`` (a grouped 1-D convolution, shape ``(N, C, L, k,
            groups)``, "same" padding k // 2, C channels in and out, and its backward); the ``step-ops`` set's
            ``upsample_bilinear`` (``(N, C, h, w, scale)``), ``log_softmax_ch`` (along dim 1 of ``(N, C, H, W)``),
            ``copy_nhwc`` (channels-last to contiguous), ``avg_pool2d`` (``(N, C, H, W, k)``, stride 1),
            ``group_norm`` (``(N, C, H, W, groups)``), each with a ``_bwd``, ``col2im`` (``(N, C, L, k)``) and
            ``conv2d``/``conv2d_bwd`` (dense, ``(N, Cin, H, W, Cout, k)``, stride 1, "same" padding).
        dtype: ``bf16``, ``fp16``, ``fp32`` or ``tf32`` (fp32 storage, tf32 tensor cores).
        shape: the op's sizes (GEMM ``(m, n, k)``, attention ``(b, h, s, d)``, else the tensor's shape).
        causal: attention with a causal mask.
        graph: > 0: one invocation is a CUDA-graph replay of this many launches of the op (no host launch gaps
            between them: what a kernel itself draws, even one shorter than a launch); its work is theirs summed.
        gap_s: after each invocation the host waits this long (spinning) before the next launch, so the GPU idles
            between kernels at whatever clock the driver keeps: the power of a training step's host gaps.
    """

    name: str
    category: str
    op: str
    dtype: str
    shape: tuple[int, ...]
    causal: bool = False
    graph: int = 0
    gap_s: float = 0.0

    @property
    def role(self) -> str:
        """``kernel`` (the op's own draw), ``gap`` (the GPU idle between sparse launches, or with nothing launched),
        ``launch`` (tiny kernels launched back to back: the GPU waits on the host most of the time) or ``duty`` (a
        burst of ``graph`` launches, then ``gap_s`` idle: the window average stays below the cap, so the burst runs
        at the clock the driver gives an unthrottled card — the power of a heavy kernel above its own capped clock)."""
        if self.op != "idle" and self.gap_s > 0 and self.graph > 0:
            return "duty"
        if self.op == "idle" or self.gap_s > 0:
            return "gap"
        return "launch" if self.name.startswith("launch_") else "kernel"

    @property
    def work(self) -> Work:
        w = self._work1()
        g = max(1, self.graph)
        return w if g == 1 else Work(w.flops * g, w.bytes * g, w.dtype, w.tensor)

    def copy_traffic(self) -> CopyTraffic | None:
        """What a copy entry moves by the stride rule (``kdvfs.work_copies.copy_traffic``) from the strides its
        operands have when ``hw_backend.zoo_torch`` runs it: ``copy`` and ``cast`` contiguous to contiguous,
        ``transpose`` ``c.copy_(a.t())`` (``c`` contiguous, ``shape`` = ``a``'s), ``copy_nhwc`` a channels-last
        (N, C, H, W) tensor to a contiguous one; None for other ops. One launch (a graph replay runs ``graph``)."""
        s, d = self.shape, ("fp32" if self.dtype == "tf32" else self.dtype)
        if self.op in ("copy", "cast"):
            out = ("bf16" if d == "fp32" else "fp32") if self.op == "cast" else d
            return copy_traffic(s, contiguous_strides(s), contiguous_strides(s), out, d)
        if self.op == "transpose":
            view = (s[1], s[0])
            return copy_traffic(view, contiguous_strides(view), transpose_strides(s[0], s[1]), d)
        if self.op == "copy_nhwc":
            return copy_traffic(s, contiguous_strides(s), channels_last_strides(s), d)
        return None

    def _work1(self) -> Work:
        s, d = self.shape, ("fp32" if self.dtype == "tf32" else self.dtype)
        n = int(np.prod(s))
        if self.op == "idle":
            return Work(0.0, 0.0, d, False)
        if self.op == "gemm":
            return gemm_work(s[0], s[1], s[2], d, tf32=self.dtype == "tf32")
        if self.op == "bmm":  # a batch of independent GEMMs: shape (batch, m, n, k)
            return gemm_work(s[1], s[2], s[3], d, batch=s[0], tf32=self.dtype == "tf32")
        if self.op in ("sdpa", "sdpa_bwd"):
            return attention_work(s[0], s[1], s[2], s[2], s[3], d, causal=self.causal, backward=self.op == "sdpa_bwd")
        if self.op in ("add", "mul"):
            return elementwise_work(n, d, inputs=2)
        if self.op in ("gelu", "silu", "relu", "sigmoid"):
            return elementwise_work(n, d, flops_per_element={"gelu": 8.0, "silu": 4.0, "relu": 1.0, "sigmoid": 4.0}[self.op])
        if self.op == "avg_pool":  # global average pooling: the whole input read, N·C means written
            return reduction_work(n, s[0] * s[1], d)
        if self.op in ("batch_norm", "batch_norm_bwd"):  # sized as the Kineto importer sizes aten's batch_norm ops
            return norm_work(n, d, backward=self.op == "batch_norm_bwd")
        if self.op in ("sum", "amax"):
            return reduction_work(n, s[0] if len(s) > 1 else 1, d,
                                  flops_per_element=MAX_REDUCTION_FLOPS if self.op == "amax" else 1.0)
        if self.op in ("layer_norm", "rms_norm"):
            return norm_work(n, d, rms=self.op == "rms_norm")
        if self.op == "softmax":
            return softmax_work(n, d, row=s[-1])
        if self.op in ("copy", "transpose", "cast", "copy_nhwc"):  # the stride rule, as the importer prices copy_
            tr = self.copy_traffic()
            if tr is None:
                raise InputError(f"zoo kernel {self.name!r}: the stride rule (kdvfs.work_copies) cannot describe a "
                                 f"{self.op} of shape {s}; give a shape of positive sizes")
            return copy_traffic_work(tr, d)
        if self.op == "fill":
            return Work(0.0, float(n * 2 if d in ("bf16", "fp16") else n * 4), d, False)
        if self.op in ("dwconv", "dwconv_bwd"):  # depthwise k × k, "same" padding: shape (N, C, H, W, k[, stride])
            nb, c, h, w, kk = s[:5]
            st = s[5] if len(s) > 5 else 1
            out = nb * c * (-(-h // st)) * (-(-w // st))
            return _conv_work(out * kk * kk, nb * c * h * w, out, c * kk * kk, d, self.op == "dwconv_bwd")
        if self.op in ("gconv1d", "gconv1d_bwd"):  # grouped 1-D, padding k // 2: shape (N, C, L, k, groups)
            nb, c, length, kk, grp = s[:5]
            out = nb * c * (length + 2 * (kk // 2) - kk + 1)
            # cuDNN runs the forward on its convolve_sgemm engines (CUDA cores) and the backward on tensor-core dgrad
            # and wgrad kernels (cutlass tensorop s16816dgrad, xmma wgrad; characterization14's kernel names): the
            # backward at batch 16 did 111 TFLOP/s, beyond the CUDA cores' 67 (kdvfs.work.simt_by_name)
            return _conv_work(out * (c // grp) * kk, nb * c * length, out, c * (c // grp) * kk, d,
                              self.op == "gconv1d_bwd", tensor=self.op == "gconv1d_bwd" and d in ("bf16", "fp16"))
        if self.op in _STEP_OPS:
            return _step_op_work(self.op, s, d)
        if self.op == "adamw":  # param, grad, exp_avg, exp_avg_sq read, three written, fp32
            return Work(float(n * 12), float(n * 7 * 4), "fp32", False)
        raise InputError(f"zoo kernel {self.name!r}: op {self.op!r} is unknown")


def _conv_work(macs: int, inp: int, out: int, weights: int, dtype: str, backward: bool,
               tensor: bool = False) -> Work:
    """A direct convolution's work from its multiply-adds and its input, output and weight sizes (elements), as the
    Kineto importer counts aten's convolutions (``kdvfs.work``): forward reads the input and the weights and writes the
    output; backward computes the input's and the weights' gradients, each a kernel that reads grad_output, the one
    reading the weights and writing the input's gradient, the other reading the input and writing the weights'.
    ``tensor``: the kernels that run it are tensor-core ones (by their names, as the campaign recorded them)."""
    size = 2 if dtype in ("bf16", "fp16") else 4
    if backward:
        return Work(4.0 * macs, float((2 * out + 2 * inp + 2 * weights) * size), dtype, tensor)
    return Work(2.0 * macs, float((inp + out + weights) * size), dtype, tensor)


_STEP_OPS = ("upsample_bilinear", "upsample_bilinear_bwd", "log_softmax_ch", "log_softmax_ch_bwd", "copy_nhwc",
             "avg_pool2d", "avg_pool2d_bwd", "group_norm", "group_norm_bwd", "col2im", "conv2d", "conv2d_bwd")

def _step_op_work(op: str, s: tuple[int, ...], d: str) -> Work:
    """The work of the ``step-ops`` set's ops, from their arithmetic: the importer's own formulas (upsampling,
    pooling windows and col2im from ``kdvfs.work_ops``; ``softmax_work``, ``norm_work``; the dense
    convolution as ``_conv_work`` counts it), one definition for the zoo and the traces."""
    if op in ("upsample_bilinear", "upsample_bilinear_bwd"):  # (N, C, h, w, scale): h × w up to (h·scale) × (w·scale)
        nb, c, h, w, sc = s
        small, big = nb * c * h * w, nb * c * h * sc * w * sc
        return bilinear_upsample_work(small, big, d, backward=op == "upsample_bilinear_bwd")
    if op in ("log_softmax_ch", "log_softmax_ch_bwd"):  # (N, C, H, W), along C: cross-entropy over pixels
        from kdvfs.work_passes import spatial_softmax_work

        return spatial_softmax_work(s[0], s[1], int(np.prod(s[2:])), d, backward=op.endswith("_bwd"), log=True)
    if op in ("avg_pool2d", "avg_pool2d_bwd"):  # (N, C, H, W, k): k × k window, stride 1, padding k // 2
        n, kk = int(np.prod(s[:4])), s[4]
        return avg_pool_work(n, n, kk * kk, d, backward=op == "avg_pool2d_bwd")
    if op in ("group_norm", "group_norm_bwd"):  # (N, C, H, W, groups): sized as the importer sizes native_group_norm
        from kdvfs.work_passes import group_norm_work

        return group_norm_work(int(np.prod(s[:4])), d, backward=op == "group_norm_bwd")
    if op == "col2im":  # (N, C, L, k): nn.Fold of [N, C·k, L] columns to [N, C, L, 1] (padding k // 2), one add each
        nb, c, length, kk = s
        return col2im_work(nb * c * kk * length, nb * c * length, d)
    # conv2d / conv2d_bwd: (N, Cin, H, W, Cout, k), dense, stride 1, "same" padding
    nb, ci, h, w, co, kk = s
    # One Work for the entry, as for every zoo row: the GEMM's. cuDNN ran the 16-bit NCHW forward as nchwToNhwc, the
    # NHWC GEMM and nhwcToNchw (characterization16's recorded kernels), one after another. The importer prices those
    # conversions as copies of their own (kdvfs.kernelwork._layout_copy), but a zoo row is checked as one kernel:
    # adding their bytes to the GEMM's rate sums activities that never ran together. It did so for one check
    # (session 12): light-ops2's 1 × 1 convolution forward, held out, measured at 1980 MHz, was predicted at 1233.
    # (Session 13: its conversions had not run there. A measured row takes the work of the kernels it recorded,
    # conversions included where they ran: kdvfs.work_conv.recorded_conv_work in kdvfs.h200_rows.zoo_rows.)
    if op == "conv2d_bwd":
        # convolution_backward(dy, x, w, …, [True, True, True]), the work of every kernel it ran: the dgrad and
        # wgrad GEMMs, cuDNN's reduce_wgrad_nchw_helper over the wgrad's per-image fp32 partials (characterization16
        # and 17 both ran it: one partial per image) and the bias's sum over dy (kdvfs.work_conv, the importer's parts)
        from kdvfs.work_conv import conv_backward_work

        return conv_backward_work((nb, co, h, w), (nb, ci, h, w), (co, ci, kk, kk), d, mask=(True, True, True),
                                  partials=nb, tensor=d in ("bf16", "fp16"))
    return _conv_work(nb * co * h * w * ci * kk * kk, nb * ci * h * w, nb * co * h * w, co * ci * kk * kk, d,
                      False, tensor=d in ("bf16", "fp16"))


def _g(dt: str, m: int, n: int | None = None, k: int | None = None, graph: int = 0) -> ZooKernel:
    n, k = n or m, k or m
    tag = f"{m}" if m == n == k else f"{m}x{n}x{k}"
    return ZooKernel(f"gemm_{dt}_{tag}" + (f"_graph{graph}" if graph else ""), "gemm", "gemm", dt, (m, n, k), graph=graph)


def default_zoo() -> tuple[ZooKernel, ...]:
    """The campaign's kernels, from the most compute-bound to the most memory-bound (36 entries)."""
    gib = 1 << 29  # elements of 1 GiB in bf16
    return (
        _g("bf16", 16384), _g("bf16", 8192), _g("bf16", 6144), _g("bf16", 4096), _g("bf16", 3072), _g("bf16", 2048),
        _g("bf16", 1024), _g("bf16", 16384, 16384, 1024), _g("bf16", 8192, 8192, 256), _g("bf16", 65536, 2048, 128),
        _g("bf16", 32768, 8192, 2048), _g("fp16", 8192), _g("fp32", 8192), _g("fp32", 4096), _g("fp32", 2048),
        _g("tf32", 8192), _g("tf32", 4096),
        ZooKernel("sdpa_bf16_causal_8x16x2048x128", "attention", "sdpa", "bf16", (8, 16, 2048, 128), True),
        ZooKernel("sdpa_bf16_8x16x2048x128", "attention", "sdpa", "bf16", (8, 16, 2048, 128)),
        ZooKernel("sdpa_bf16_causal_2x32x8192x128", "attention", "sdpa", "bf16", (2, 32, 8192, 128), True),
        ZooKernel("sdpa_bf16_16x16x512x64", "attention", "sdpa", "bf16", (16, 16, 512, 64)),
        ZooKernel("sdpa_bwd_bf16_causal_8x16x2048x128", "attention", "sdpa_bwd", "bf16", (8, 16, 2048, 128), True),
        ZooKernel("gelu_bf16_1GiB", "elementwise", "gelu", "bf16", (gib,)),
        ZooKernel("gelu_fp32_1GiB", "elementwise", "gelu", "fp32", (gib // 2,)),
        ZooKernel("add_bf16_1GiB", "elementwise", "add", "bf16", (gib,)),
        ZooKernel("mul_fp32_1GiB", "elementwise", "mul", "fp32", (gib // 2,)),
        ZooKernel("silu_bf16_256MiB", "elementwise", "silu", "bf16", (gib // 4,)),
        ZooKernel("relu_bf16_16MiB", "elementwise", "relu", "bf16", (1 << 23,)),
        ZooKernel("sum_fp32_1GiB", "reduction", "sum", "fp32", (gib // 2,)),
        ZooKernel("amax_bf16_rows_16384x16384", "reduction", "amax", "bf16", (16384, 16384)),
        ZooKernel("layer_norm_bf16_16384x4096", "norm", "layer_norm", "bf16", (16384, 4096)),
        ZooKernel("rms_norm_bf16_16384x4096", "norm", "rms_norm", "bf16", (16384, 4096)),
        ZooKernel("softmax_bf16_8x16x2048x2048", "reduction", "softmax", "bf16", (8 * 16 * 2048, 2048)),
        ZooKernel("copy_bf16_1GiB", "copy", "copy", "bf16", (gib,)),
        ZooKernel("transpose_bf16_16384x16384", "copy", "transpose", "bf16", (16384, 16384)),
        ZooKernel("cast_bf16_to_fp32_512MiB", "copy", "cast", "bf16", (gib // 2,)),
        ZooKernel("fill_bf16_1GiB", "copy", "fill", "bf16", (gib,)),
        ZooKernel("adamw_fp32_100M", "optimizer", "adamw", "fp32", (100_000_000,)),
    )


def cache_gap_zoo() -> tuple[ZooKernel, ...]:
    """The second set (session 5): what the first zoo lacked.

    Working sets against the H200's 50 MB L2 — the same elementwise op and norm over tensors that stay in L2 and
    over ones that do not, each as a CUDA-graph replay so that launch gaps do not dilute a short kernel's power — and
    the GPU between kernels: tiny kernels launched back to back (launch-bound), a tiny kernel every 100 µs and every
    1 ms (the host-gap power of a training step) and nothing launched at all (idle)."""
    mib = 1 << 19  # bf16 elements of 1 MiB
    return (
        ZooKernel("add_bf16_4MiB_graph32", "elementwise", "add", "bf16", (4 * mib,), graph=32),
        ZooKernel("add_bf16_16MiB_graph16", "elementwise", "add", "bf16", (16 * mib,), graph=16),
        ZooKernel("add_bf16_64MiB_graph8", "elementwise", "add", "bf16", (64 * mib,), graph=8),
        ZooKernel("gelu_bf16_8MiB_graph32", "elementwise", "gelu", "bf16", (8 * mib,), graph=32),
        ZooKernel("gelu_bf16_64MiB_graph8", "elementwise", "gelu", "bf16", (64 * mib,), graph=8),
        ZooKernel("relu_bf16_16MiB_graph16", "elementwise", "relu", "bf16", (16 * mib,), graph=16),
        ZooKernel("layer_norm_bf16_4096x1024_graph32", "norm", "layer_norm", "bf16", (4096, 1024), graph=32),
        ZooKernel("layer_norm_bf16_16384x2048_graph8", "norm", "layer_norm", "bf16", (16384, 2048), graph=8),
        ZooKernel("softmax_bf16_16x16x512x512_graph8", "reduction", "softmax", "bf16", (16 * 16 * 512, 512), graph=8),
        ZooKernel("gemm_bf16_1024_graph32", "gemm", "gemm", "bf16", (1024, 1024, 1024), graph=32),
        ZooKernel("launch_add_bf16_4KiB", "elementwise", "add", "bf16", (2048,)),
        ZooKernel("gap_add_bf16_4KiB_100us", "elementwise", "add", "bf16", (2048,), gap_s=1e-4),
        ZooKernel("gap_add_bf16_4KiB_1ms", "elementwise", "add", "bf16", (2048,), gap_s=1e-3),
        ZooKernel("idle_10ms", "other", "idle", "bf16", (1,), gap_s=1e-2),
    )


def step_shape_zoo() -> tuple[ZooKernel, ...]:
    """The third set (session 5): kernels at the shapes real training steps launch — GEMMs of GPT-2/BERT-medium,
    Llama, Qwen2 and the GPT-3 XL block at 8–16 k tokens, which the driver may not throttle alone, and the elementwise,
    cast, norm and loss-softmax kernels of those steps at their sizes."""
    mib = 1 << 19
    return (
        _g("bf16", 16384, 1024, 1024), _g("bf16", 16384, 3072, 1024), _g("bf16", 16384, 4096, 1024),
        _g("bf16", 16384, 1024, 4096), _g("bf16", 16384, 2048, 2048), _g("bf16", 16384, 5632, 2048),
        _g("bf16", 8192, 4864, 896), _g("bf16", 8192, 896, 4864),
        ZooKernel("add_bf16_32MiB_graph8", "elementwise", "add", "bf16", (32 * mib,), graph=8),
        ZooKernel("gelu_bf16_128MiB", "elementwise", "gelu", "bf16", (128 * mib,)),
        ZooKernel("cast_fp32_to_bf16_16MiB_graph16", "copy", "cast", "fp32", (8 * mib,), graph=16),
        ZooKernel("layer_norm_bf16_16384x1024_graph8", "norm", "layer_norm", "bf16", (16384, 1024), graph=8),
        ZooKernel("softmax_fp32_8192x50272", "reduction", "softmax", "fp32", (8192, 50272)),
    )


def duty_zoo() -> tuple[ZooKernel, ...]:
    """The fourth set (session 5): heavy kernels in duty cycles, and the unaligned vocabulary GEMMs.

    Alone, every large GEMM sits at the cap (~690 W) at 1440–1740 MHz, which pins its FLOP rate but not how its power
    grows with the clock; inside a training step the limiter's window also holds lighter kernels and host gaps, and
    GEMMs run near the top clock. A burst of a few milliseconds followed by a few idle milliseconds keeps the window
    below the cap: the burst's power at the clock it gets is (energy − idle share) / busy time. Also the language
    model head's GEMMs of a vocabulary not a multiple of 8 (GPT-2's 50257, BERT's 30522), which take a slower kernel."""
    return (
        ZooKernel("duty_gemm_bf16_4096_x25_gap4ms", "gemm", "gemm", "bf16", (4096, 4096, 4096), graph=25, gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_4096_x25_gap8ms", "gemm", "gemm", "bf16", (4096, 4096, 4096), graph=25, gap_s=8e-3),
        ZooKernel("duty_gemm_bf16_4096_x50_gap2ms", "gemm", "gemm", "bf16", (4096, 4096, 4096), graph=50, gap_s=2e-3),
        ZooKernel("duty_gemm_bf16_16384x2048x2048_x20_gap4ms", "gemm", "gemm", "bf16", (16384, 2048, 2048), graph=20,
                  gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_16384x1024x1024_x60_gap4ms", "gemm", "gemm", "bf16", (16384, 1024, 1024), graph=60,
                  gap_s=4e-3),
        ZooKernel("duty_gelu_bf16_128MiB_x40_gap4ms", "elementwise", "gelu", "bf16", (1 << 26,), graph=40, gap_s=4e-3),
        _g("bf16", 16384, 50257, 1024), _g("bf16", 16384, 1024, 50257), _g("bf16", 50257, 1024, 16384),
    )


def top_clock_zoo() -> tuple[ZooKernel, ...]:
    """The fifth set (session 7): the power of a training step's heavy kernels near the top clock, and what memory
    traffic costs by direction.

    Inside the steps the limiter's window also holds light kernels and host gaps, so GEMMs and attention run at
    1830–1980 MHz, where alone they sit at the cap at 1400–1700 MHz: bursts of the steps' GEMM shapes (MLP and
    projection GEMMs at 16 k tokens) and of causal attention forward and backward, with idle gaps that keep the window
    below the cap; the probe GEMM with a 1 ms gap and in a shorter burst (does power depend on the burst's length or
    on the time since the last burst?). Then memory kernels whose traffic differs only in direction and width: a
    write-only fill and a copy in fp32 (the first zoo has them in bf16), a cast down from fp32 (reads twice what it
    writes; the first zoo's cast up writes twice what it reads), a bf16 sum (read-only), an fp32 transpose."""
    gib = 1 << 29  # elements of 1 GiB in bf16
    return (
        ZooKernel("duty_gemm_bf16_16384x4096x1024_x20_gap4ms", "gemm", "gemm", "bf16", (16384, 4096, 1024), graph=20,
                  gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_16384x1024x4096_x20_gap4ms", "gemm", "gemm", "bf16", (16384, 1024, 4096), graph=20,
                  gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_16384x8192x2048_x8_gap4ms", "gemm", "gemm", "bf16", (16384, 8192, 2048), graph=8,
                  gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_16384x5632x2048_x10_gap4ms", "gemm", "gemm", "bf16", (16384, 5632, 2048), graph=10,
                  gap_s=4e-3),
        ZooKernel("duty_gemm_bf16_4096_x25_gap1ms", "gemm", "gemm", "bf16", (4096, 4096, 4096), graph=25, gap_s=1e-3),
        ZooKernel("duty_gemm_bf16_4096_x10_gap4ms", "gemm", "gemm", "bf16", (4096, 4096, 4096), graph=10, gap_s=4e-3),
        ZooKernel("duty_sdpa_bf16_causal_8x16x2048x128_x20_gap4ms", "attention", "sdpa", "bf16", (8, 16, 2048, 128),
                  True, graph=20, gap_s=4e-3),
        ZooKernel("duty_sdpa_bwd_bf16_causal_8x16x2048x128_x8_gap4ms", "attention", "sdpa_bwd", "bf16",
                  (8, 16, 2048, 128), True, graph=8, gap_s=4e-3),
        ZooKernel("fill_fp32_1GiB", "copy", "fill", "fp32", (gib // 2,)),
        ZooKernel("copy_fp32_1GiB", "copy", "copy", "fp32", (gib // 2,)),
        ZooKernel("cast_fp32_to_bf16_1GiB", "copy", "cast", "fp32", (gib // 2,)),
        ZooKernel("sum_bf16_1GiB", "reduction", "sum", "bf16", (gib,)),
        ZooKernel("transpose_fp32_8192x8192", "copy", "transpose", "fp32", (8192, 8192)),
    )


def attention_zoo() -> tuple[ZooKernel, ...]:
    """The sixth set (session 7): attention near the top clock. Causal attention is the class the model under-powers
    most (the session-6 fit: −10.6 % on a causal burst at 1980 MHz, clocks 4–11 % high alone); bursts of causal and
    full attention at head dims 64 and 128 and at short and long sequences separate what scales with the score
    matrix (the in-kernel softmax: exponentials and rescaling per score, on the SIMT units) from what scales with the
    matrix products, and two entries alone at head dim 64 add the cap's view."""
    a = "attention"
    return (
        ZooKernel("duty_sdpa_bf16_8x16x2048x128_x10_gap4ms", a, "sdpa", "bf16", (8, 16, 2048, 128), graph=10,
                  gap_s=4e-3),
        ZooKernel("duty_sdpa_bf16_causal_16x16x2048x64_x20_gap4ms", a, "sdpa", "bf16", (16, 16, 2048, 64), True,
                  graph=20, gap_s=4e-3),
        ZooKernel("duty_sdpa_bf16_16x16x2048x64_x10_gap4ms", a, "sdpa", "bf16", (16, 16, 2048, 64), graph=10,
                  gap_s=4e-3),
        ZooKernel("duty_sdpa_bf16_causal_2x32x8192x128_x2_gap4ms", a, "sdpa", "bf16", (2, 32, 8192, 128), True,
                  graph=2, gap_s=4e-3),
        ZooKernel("duty_sdpa_bf16_16x16x512x64_x40_gap4ms", a, "sdpa", "bf16", (16, 16, 512, 64), graph=40, gap_s=4e-3),
        ZooKernel("sdpa_bf16_causal_16x16x2048x64", a, "sdpa", "bf16", (16, 16, 2048, 64), True),
        ZooKernel("sdpa_bf16_16x16x2048x64", a, "sdpa", "bf16", (16, 16, 2048, 64)),
    )


def held_duty_zoo() -> tuple[ZooKernel, ...]:
    """The seventh set (session 7): heavy GEMM bursts with gaps short enough that the limiter holds them between the
    cap's clock alone (~1500 MHz) and the top clock. Alone every large GEMM sits at the cap at one clock, and bursts
    with long gaps run at the top clock; these give each burst's power at the clocks in between (1600–1950 MHz), where
    the voltage curve was left loosely determined by the zoo and where the GEMMs of the heavy training steps run."""
    g, d = "gemm", "bf16"
    k4, k8, mlp = (4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 2048)
    return (
        ZooKernel("duty_gemm_bf16_4096_x25_gap500us", g, g, d, k4, graph=25, gap_s=5e-4),
        ZooKernel("duty_gemm_bf16_4096_x25_gap250us", g, g, d, k4, graph=25, gap_s=2.5e-4),
        ZooKernel("duty_gemm_bf16_4096_x50_gap1ms", g, g, d, k4, graph=50, gap_s=1e-3),
        ZooKernel("duty_gemm_bf16_4096_x100_gap1ms", g, g, d, k4, graph=100, gap_s=1e-3),
        ZooKernel("duty_gemm_bf16_4096_x100_gap2ms", g, g, d, k4, graph=100, gap_s=2e-3),
        ZooKernel("duty_gemm_bf16_8192_x4_gap1ms", g, g, d, k8, graph=4, gap_s=1e-3),
        ZooKernel("duty_gemm_bf16_8192_x4_gap500us", g, g, d, k8, graph=4, gap_s=5e-4),
        ZooKernel("duty_gemm_bf16_16384x8192x2048_x8_gap1ms", g, g, d, mlp, graph=8, gap_s=1e-3),
    )


def small_zoo() -> tuple[ZooKernel, ...]:
    """The eighth set (session 8): small kernels that keep few SMs busy, as in the steps the model over-powers most.

    The blind steps of session 7 (ConvNeXt-T, Swin-T, BLOOM) spend much of their time in kernels whose launch grids
    cover a fraction of the H200's 132 SMs or that run a few microseconds: channels-last LayerNorms over 96 channels,
    depthwise 7 × 7 convolutions and their gradients, small GEMMs, elementwise ops on small tensors. Each entry is a
    CUDA-graph replay, so that host launch gaps do not dilute it: the power is the kernel's own, at the size it runs in
    a step. The same op at several sizes separates what scales with the SMs a grid covers from what a running kernel
    draws at all. ``characterize`` records each entry's launch grids (``launch_grids``)."""
    e, nm, r, c = "elementwise", "norm", "reduction", "other"
    return (
        ZooKernel("add_bf16_16KiB_graph2048", e, "add", "bf16", (8192,), graph=2048),
        ZooKernel("add_bf16_256KiB_graph1024", e, "add", "bf16", (131072,), graph=1024),
        ZooKernel("add_bf16_1MiB_graph512", e, "add", "bf16", (524288,), graph=512),
        ZooKernel("gelu_bf16_256KiB_graph1024", e, "gelu", "bf16", (131072,), graph=1024),
        ZooKernel("layer_norm_bf16_512x768_graph1024", nm, "layer_norm", "bf16", (512, 768), graph=1024),
        ZooKernel("layer_norm_bf16_3136x768_graph256", nm, "layer_norm", "bf16", (3136, 768), graph=256),
        ZooKernel("layer_norm_bf16_200704x96_graph16", nm, "layer_norm", "bf16", (200704, 96), graph=16),
        ZooKernel("rms_norm_bf16_512x1024_graph1024", nm, "rms_norm", "bf16", (512, 1024), graph=1024),
        ZooKernel("softmax_bf16_4096x128_graph1024", r, "softmax", "bf16", (4096, 128), graph=1024),
        ZooKernel("sum_bf16_64KiB_graph2048", r, "sum", "bf16", (32768,), graph=2048),
        ZooKernel("transpose_bf16_1024x1024_graph512", "copy", "transpose", "bf16", (1024, 1024), graph=512),
        _g("bf16", 256, graph=1024), _g("bf16", 512, graph=512), _g("bf16", 128, 4096, 1024, graph=256),
        ZooKernel("dwconv_bf16_64x96x56x56_k7_graph16", c, "dwconv", "bf16", (64, 96, 56, 56, 7), graph=16),
        ZooKernel("dwconv_bwd_bf16_64x96x56x56_k7_graph8", c, "dwconv_bwd", "bf16", (64, 96, 56, 56, 7), graph=8),
        ZooKernel("dwconv_bf16_64x384x14x14_k7_graph64", c, "dwconv", "bf16", (64, 384, 14, 14, 7), graph=64),
    )


def thermal_zoo() -> tuple[ZooKernel, ...]:
    """The ninth set (session 9): the host-gap power and small kernels on a warm card, and short gaps after bursts.

    The gap entries of the second set (a tiny kernel every 100 µs or 1 ms, launch-bound tiny kernels, idle) were all
    measured on a cool card (32–33 °C), while training steps run at 37–56 °C and the zoo's heavy kernels at 45–58 °C;
    static power grows with temperature. Meant to run right after real training steps (a warm card): two windows of a
    large GEMM at the cap heat it, then the same gap entry is measured seven times as the card cools between other
    entries (each window records its temperature), the second set's small CUDA-graph replays again warm, and duty
    entries whose gaps (50 and 200 µs) are as short as a step's host gaps, after a GEMM and an elementwise burst (does
    the power fall at once when a burst ends?). Entries repeated for the cooling series carry a suffix (``_warm3``)."""
    mib = 1 << 19  # bf16 elements of 1 MiB
    e, g, d = "elementwise", "gemm", "bf16"

    def gap(i: int) -> ZooKernel:
        return ZooKernel(f"gap_add_bf16_4KiB_100us_warm{i}", e, "add", d, (2048,), gap_s=1e-4)

    heat = (8192, 8192, 8192)
    return (
        ZooKernel("gemm_bf16_8192_heat1", g, g, d, heat), ZooKernel("gemm_bf16_8192_heat2", g, g, d, heat),
        gap(1),
        ZooKernel("gemm_bf16_1024_graph32_warm", g, g, d, (1024, 1024, 1024), graph=32),
        ZooKernel("add_bf16_16MiB_graph16_warm", e, "add", d, (16 * mib,), graph=16),
        gap(2),
        ZooKernel("idle_10ms_warm", "other", "idle", d, (1,), gap_s=1e-2),
        ZooKernel("launch_add_bf16_4KiB_warm", e, "add", d, (2048,)),
        gap(3), gap(4), gap(5), gap(6),
        ZooKernel("gemm_bf16_8192_heat3", g, g, d, heat),
        ZooKernel("duty_gemm_bf16_2048_x20_gap50us", g, g, d, (2048, 2048, 2048), graph=20, gap_s=5e-5),
        ZooKernel("duty_gemm_bf16_2048_x20_gap200us", g, g, d, (2048, 2048, 2048), graph=20, gap_s=2e-4),
        ZooKernel("duty_gelu_bf16_32MiB_x20_gap50us", e, "gelu", d, (32 * mib,), graph=20, gap_s=5e-5),
        ZooKernel("duty_gelu_bf16_32MiB_x20_gap200us", e, "gelu", d, (32 * mib,), graph=20, gap_s=2e-4),
        gap(7),
    )


def warm_cool_zoo() -> tuple[ZooKernel, ...]:
    """The tenth set (session 9, asked for by the thermal diagnosis): the same kernels on a cool and a hot die in one
    lease, small kernels launched one by one (host bubbles between them) beside their graph replays, and more gap
    lengths after a medium burst.

    Run on a card idle for ≥ 30 s. First four kernels cool (an unthrottled fill and add, then a GEMM and an RMSNorm at
    the cap), three windows of the 8192³ GEMM at the cap to heat the die, the same four hot: static power and the
    capped clock against temperature without a lease between them. Then tiny kernels launched back to back without a
    graph (the eighth set has them as graph replays): if they read above their busy share at the kernel's power plus
    the rest at the gap power, the µs bubbles after a kernel draw more than an idle card (a tail). Then a GELU burst
    and a 1024³ GEMM burst with gaps from 100 µs to 1 ms (with the ninth set's 50 and 200 µs): is energy per period
    linear in the gap?"""
    e, nm, r, g, d = "elementwise", "norm", "reduction", "gemm", "bf16"
    gib = 1 << 29  # bf16 elements of 1 GiB

    def pair(tag: str) -> tuple[ZooKernel, ...]:
        return (ZooKernel(f"fill_bf16_1GiB_{tag}", "copy", "fill", d, (gib,)),
                ZooKernel(f"add_bf16_1GiB_{tag}", e, "add", d, (gib,)),
                ZooKernel(f"gemm_bf16_4096_{tag}", g, g, d, (4096, 4096, 4096)),
                ZooKernel(f"rms_norm_bf16_16384x4096_{tag}", nm, "rms_norm", d, (16384, 4096)))

    heat = tuple(ZooKernel(f"gemm_bf16_8192_heat{i}", g, g, d, (8192, 8192, 8192)) for i in (4, 5, 6))
    return (
        pair("cool") + heat + pair("hot") + (
            ZooKernel("launch_layer_norm_bf16_512x768", nm, "layer_norm", d, (512, 768)),
            ZooKernel("launch_rms_norm_bf16_512x1024", nm, "rms_norm", d, (512, 1024)),
            ZooKernel("launch_softmax_bf16_4096x128", r, "softmax", d, (4096, 128)),
            ZooKernel("launch_gemm_bf16_512", g, g, d, (512, 512, 512)),
            ZooKernel("launch_gelu_bf16_1MiB", e, "gelu", d, (524288,)),
            ZooKernel("launch_layer_norm_bf16_3136x768", nm, "layer_norm", d, (3136, 768)),
            ZooKernel("duty_gelu_bf16_32MiB_x20_gap100us", e, "gelu", d, (1 << 24,), graph=20, gap_s=1e-4),
            ZooKernel("duty_gelu_bf16_32MiB_x20_gap400us", e, "gelu", d, (1 << 24,), graph=20, gap_s=4e-4),
            ZooKernel("duty_gelu_bf16_32MiB_x20_gap1ms", e, "gelu", d, (1 << 24,), graph=20, gap_s=1e-3),
            ZooKernel("duty_gemm_bf16_1024_x40_gap100us", g, g, d, (1024, 1024, 1024), graph=40, gap_s=1e-4),
            ZooKernel("duty_gemm_bf16_1024_x40_gap400us", g, g, d, (1024, 1024, 1024), graph=40, gap_s=4e-4),
        )
    )


def conv_zoo() -> tuple[ZooKernel, ...]:
    """The eleventh set (session 9, issue 12's convolutional-step diagnosis, ``validation/h200/convsteps/``): the
    kernel classes of the small-kernel convolutional steps the model under-predicts in every lease (EfficientNet-B0,
    MobileNetV2, ResNet-50), at their shapes in those steps (batch 128 × 224² unless named).

    Most of those steps' time is in ATen's channels-first batch norm (statistics, transform, and a backward that
    was 27 % of EfficientNet-B0's kernel time) and its depthwise convolutions (``conv_depthwise2d``: forward, the
    input's and the weight's gradients; 3 × 3 and 5 × 5, stride 1 and 2); the zoo had neither batch norm nor MBConv's
    depthwise shapes (only ConvNeXt's 7 × 7 at stride 1). Also SiLU over the expanded activations, the squeeze-
    excitation's global average pooling, sigmoid gate and tiny GEMM. Each entry is a CUDA-graph replay sized to a few
    milliseconds, so host gaps do not dilute it; ``characterize`` records the launch grids. Not fitted when added."""
    e, nm, r, c, d = "elementwise", "norm", "reduction", "other", "bf16"

    def dw(n: int, ch: int, hw: int, kk: int, st: int, graph: int, bwd: bool = False) -> ZooKernel:
        op = "dwconv_bwd" if bwd else "dwconv"
        return ZooKernel(f"{op}_bf16_{n}x{ch}x{hw}x{hw}_k{kk}_s{st}_graph{graph}", c, op, d, (n, ch, hw, hw, kk, st),
                         graph=graph)

    def bn(n: int, ch: int, hw: int, graph: int, bwd: bool = False) -> ZooKernel:
        op = "batch_norm_bwd" if bwd else "batch_norm"
        return ZooKernel(f"{op}_bf16_{n}x{ch}x{hw}x{hw}_graph{graph}", nm, op, d, (n, ch, hw, hw), graph=graph)

    return (
        dw(128, 32, 112, 3, 1, 16), dw(128, 96, 112, 3, 2, 16), dw(128, 144, 56, 5, 2, 16), dw(128, 240, 28, 5, 1, 32),
        dw(128, 480, 14, 3, 1, 64), dw(128, 1152, 7, 5, 1, 64),
        dw(128, 32, 112, 3, 1, 8, True), dw(128, 144, 56, 3, 1, 8, True), dw(128, 240, 28, 5, 1, 16, True),
        dw(128, 672, 14, 5, 1, 16, True), dw(128, 1152, 7, 5, 1, 16, True),
        # one block per channel: the few-channel, large-image norms take most of the steps' batch-norm time
        bn(128, 32, 112, 4), bn(128, 144, 56, 8), bn(128, 1152, 7, 32),
        bn(128, 16, 112, 4, True), bn(128, 32, 112, 4, True), bn(128, 96, 112, 4, True), bn(128, 144, 56, 8, True),
        bn(128, 64, 56, 8, True),  # ResNet-50's first stage
        ZooKernel("silu_bf16_128x96x112x112_graph8", e, "silu", d, (128, 96, 112, 112), graph=8),
        ZooKernel("sigmoid_bf16_128x1152_graph1024", e, "sigmoid", d, (128, 1152), graph=1024),
        ZooKernel("avg_pool_bf16_128x480x14x14_graph64", r, "avg_pool", d, (128, 480, 14, 14), graph=64),
        ZooKernel("avg_pool_bf16_128x1152x7x7_graph64", r, "avg_pool", d, (128, 1152, 7, 7), graph=64),
        _g("bf16", 128, 48, 1152, graph=1024),  # squeeze-excitation's reduce at 1152 channels
    )


def tiny_grid_zoo() -> tuple[ZooKernel, ...]:
    """The thirteenth set (session 10, issue 12; measured for the next session's choice of structure, not fitted when
    added): tensor-core kernels whose launch fills few of the card's 132 SMs. The blind set steps11 found wav2vec 2.0
    over-predicted by 20–54 % on three cards: cuDNN runs its grouped position convolution (kernel 128, 16 groups) as
    kernels of 4–24 blocks, and the model gives a GEMM-category kernel its full base power whatever its grid. The zoo's
    tiny GEMMs read +59 … +138 % too. Here: that convolution at the step's shapes, forward and backward; GEMMs of
    few output tiles with long and short reductions; and the known misses again, on another card."""
    c, d = "gemm", "bf16"

    def gc(n: int, bwd: bool = False) -> ZooKernel:
        op = "gconv1d_bwd" if bwd else "gconv1d"
        return ZooKernel(f"{op}_bf16_{n}x768x499_k128_g16", c, op, d, (n, 768, 499, 128, 16))

    return (
        gc(4), gc(16), gc(4, True), gc(16, True),
        _g(d, 64, 64, 65536, graph=128), _g(d, 128, 256, 8192, graph=512), _g(d, 96, 96, 96, graph=2048),
        _g(d, 1024, 64, 1024, graph=1024), _g(d, 256, graph=1024), _g(d, 512, graph=512),
        _g(d, 128, 48, 1152, graph=1024), _g(d, 128, 4096, 1024, graph=256),
    )


def tiny_grid2_zoo() -> tuple[ZooKernel, ...]:
    """The fifteenth set (session 11, issue 12; held out for the next choice of structure, not fitted when added): the
    tiny-grid set (``tiny_grid_zoo``) left ``tensor-rate`` and ``tensor-sm`` tied at 40 held-out kernels on nine + c14,
    and no candidate priced the grouped 1-D convolutions. Here, at shapes c14 does not have: tensor-core GEMMs of few
    output tiles (a long reduction over 64 × 128 outputs, 192² with K 4096, a 32-row GEMM over 4096², 384³), batches of
    small GEMMs (``bmm``: attention-score-like products whose tiles are many but tiny), a depthwise 7 × 7 convolution
    at batch 8 (forward and backward), a grouped 1-D convolution at 8 groups and kernel 64 (forward and backward: which
    cuDNN engines and streams it takes is part of the question), and three c14 entries again on another card (the
    wav2vec position convolution at batch 4, 96³, the squeeze-excitation GEMM). Each GEMM is a CUDA-graph replay of
    about 2–5 ms on the H200 (the rates of c14's tiny GEMMs, 20–65 TFLOP/s); the convolutions are single calls of
    several milliseconds, as c14's were (cuDNN's own streams, not captured in a graph)."""
    c, d = "gemm", "bf16"

    def bmm(b: int, m: int, n: int, kk: int, graph: int) -> ZooKernel:
        return ZooKernel(f"bmm_{d}_{b}x{m}x{n}x{kk}_graph{graph}", c, "bmm", d, (b, m, n, kk), graph=graph)

    def gc(n: int, ch: int, length: int, kk: int, grp: int, bwd: bool = False) -> ZooKernel:
        op = "gconv1d_bwd" if bwd else "gconv1d"
        return ZooKernel(f"{op}_{d}_{n}x{ch}x{length}_k{kk}_g{grp}", c, op, d, (n, ch, length, kk, grp))

    def dw(n: int, ch: int, hw: int, kk: int, graph: int, bwd: bool = False) -> ZooKernel:
        op = "dwconv_bwd" if bwd else "dwconv"
        return ZooKernel(f"{op}_{d}_{n}x{ch}x{hw}x{hw}_k{kk}_graph{graph}", "other", op, d, (n, ch, hw, hw, kk),
                         graph=graph)

    return (
        _g(d, 64, 128, 32768, graph=256), _g(d, 192, 192, 4096, graph=512), _g(d, 32, 4096, 4096, graph=256),
        _g(d, 384, graph=1024),
        bmm(64, 64, 64, 64, 2048), bmm(32, 128, 128, 64, 2048), bmm(8, 256, 256, 256, 1024),
        dw(8, 384, 28, 7, 256), dw(8, 96, 56, 7, 128, True),
        gc(8, 512, 1000, 64, 8), gc(8, 512, 1000, 64, 8, True),
        # c14's entries again: the wav2vec position convolution, the 96³ GEMM, the squeeze-excitation GEMM
        gc(4, 768, 499, 128, 16), _g(d, 96, graph=2048), _g(d, 128, 48, 1152, graph=1024),
    )


def step_ops_zoo() -> tuple[ZooKernel, ...]:
    """The sixteenth set (session 11, issue 12; measured for the next session, not fitted when added): the ops that
    carry the blind set steps12's energy and that no other set runs alone (``validation/h200/step_breakdown/``), at
    the shapes those steps ran them (their traces' input shapes). SegFormer-B0's loss head at 512² pixels and batch 16
    in fp32 (bilinear upsampling of 150-class logits from 128² and its backward, the log-softmax along the classes and
    its backward, the channels-last-to-contiguous copy): 27 of the step's 56 ms of kernels; PoolFormer-S12's token
    mixer and norms at batch 128 in fp32 (3 × 3 average pooling and GroupNorm with one group, forward and backward)
    and its MLP's 1 × 1 convolutions in bf16 (forward and backward, 33 % of its predicted energy; the zoo's
    convolutions are depthwise and grouped only); ConvBERT's span convolution's ``col2im`` (nn.Unfold's backward).
    Each entry is a single call where one lasts milliseconds, else a CUDA-graph replay of about 2–5 ms."""
    e, nm, r, c = "elementwise", "norm", "reduction", "copy"
    f, b = "fp32", "bf16"
    seg, pool = (16, 150, 128, 128), (128, 64, 56, 56)
    return (
        ZooKernel("upsample_bilinear_fp32_16x150x128x128_x4", e, "upsample_bilinear", f, (*seg, 4)),
        ZooKernel("upsample_bilinear_bwd_fp32_16x150x128x128_x4", e, "upsample_bilinear_bwd", f, (*seg, 4)),
        ZooKernel("log_softmax_ch_fp32_16x150x512x512", r, "log_softmax_ch", f, (16, 150, 512, 512)),
        ZooKernel("log_softmax_ch_bwd_fp32_16x150x512x512", r, "log_softmax_ch_bwd", f, (16, 150, 512, 512)),
        ZooKernel("copy_nhwc_fp32_16x150x512x512", c, "copy_nhwc", f, (16, 150, 512, 512)),
        ZooKernel("avg_pool2d_fp32_128x64x56x56_k3_graph8", e, "avg_pool2d", f, (*pool, 3), graph=8),
        ZooKernel("avg_pool2d_bwd_fp32_128x64x56x56_k3_graph8", e, "avg_pool2d_bwd", f, (*pool, 3), graph=8),
        ZooKernel("group_norm_fp32_128x64x56x56_g1_graph16", nm, "group_norm", f, (*pool, 1), graph=16),
        ZooKernel("group_norm_bwd_fp32_128x64x56x56_g1_graph8", nm, "group_norm_bwd", f, (*pool, 1), graph=8),
        ZooKernel("col2im_bf16_16x384x512_k9_graph16", c, "col2im", b, (16, 384, 512, 9), graph=16),
        ZooKernel("conv2d_bf16_128x320x14x14_to1280_k1_graph32", "gemm", "conv2d", b, (128, 320, 14, 14, 1280, 1),
                  graph=32),
        ZooKernel("conv2d_bwd_bf16_128x320x14x14_to1280_k1_graph16", "gemm", "conv2d_bwd", b,
                  (128, 320, 14, 14, 1280, 1), graph=16),
    )


def light_ops2_zoo() -> tuple[ZooKernel, ...]:
    """The seventeenth set (session 12, issue 12; measured before that session's fit was final and kept sealed until
    it was, then checked once, never fitted): the ``step-ops`` set's light ops again at other shapes and dtypes, so
    that a model that reads those ops right for the right reasons can be told from one fitted to their shapes:
    bilinear upsampling and its backward in bf16 and at Cityscapes' 19 classes, the spatial log-softmax in bf16 and at
    19 classes, a bf16 channels-last copy, 3 × 3 average pooling in bf16 and at another shape, group norm with 32
    groups, col2im in fp32, and 1 × 1 convolutions of 64 to 256 channels at 56² pixels (a ResNet bottleneck's).
    Each entry is a single call where one lasts milliseconds, else a CUDA-graph replay of about 2–5 ms."""
    e, nm, r, c = "elementwise", "norm", "reduction", "copy"
    f, b = "fp32", "bf16"
    return (
        ZooKernel("upsample_bilinear_bf16_16x150x128x128_x4", e, "upsample_bilinear", b, (16, 150, 128, 128, 4)),
        ZooKernel("upsample_bilinear_fp32_32x19x128x128_x4_graph2", e, "upsample_bilinear", f, (32, 19, 128, 128, 4),
                  graph=2),
        ZooKernel("upsample_bilinear_bwd_bf16_16x150x128x128_x4", e, "upsample_bilinear_bwd", b,
                  (16, 150, 128, 128, 4)),
        ZooKernel("upsample_bilinear_bwd_fp32_16x64x64x64_x4_graph4", e, "upsample_bilinear_bwd", f,
                  (16, 64, 64, 64, 4), graph=4),
        ZooKernel("log_softmax_ch_fp32_32x19x512x512_graph4", r, "log_softmax_ch", f, (32, 19, 512, 512), graph=4),
        ZooKernel("log_softmax_ch_bf16_16x150x256x256_graph8", r, "log_softmax_ch", b, (16, 150, 256, 256), graph=8),
        ZooKernel("log_softmax_ch_bwd_fp32_32x19x512x512_graph4", r, "log_softmax_ch_bwd", f, (32, 19, 512, 512),
                  graph=4),
        ZooKernel("copy_nhwc_bf16_64x256x56x56_graph16", c, "copy_nhwc", b, (64, 256, 56, 56), graph=16),
        ZooKernel("avg_pool2d_bf16_128x64x56x56_k3_graph16", e, "avg_pool2d", b, (128, 64, 56, 56, 3), graph=16),
        ZooKernel("avg_pool2d_fp32_64x128x28x28_k3_graph32", e, "avg_pool2d", f, (64, 128, 28, 28, 3), graph=32),
        ZooKernel("avg_pool2d_bwd_fp32_64x128x28x28_k3_graph16", e, "avg_pool2d_bwd", f, (64, 128, 28, 28, 3),
                  graph=16),
        ZooKernel("group_norm_fp32_32x256x32x32_g32_graph32", nm, "group_norm", f, (32, 256, 32, 32, 32), graph=32),
        ZooKernel("group_norm_bwd_fp32_128x320x14x14_g1_graph32", nm, "group_norm_bwd", f, (128, 320, 14, 14, 1),
                  graph=32),
        ZooKernel("col2im_fp32_16x768x512_k9_graph4", c, "col2im", f, (16, 768, 512, 9), graph=4),
        ZooKernel("conv2d_bf16_64x64x56x56_to256_k1_graph64", "gemm", "conv2d", b, (64, 64, 56, 56, 256, 1), graph=64),
        ZooKernel("conv2d_bwd_bf16_64x64x56x56_to256_k1_graph32", "gemm", "conv2d_bwd", b, (64, 64, 56, 56, 256, 1),
                  graph=32),
    )


def copies_zoo() -> tuple[ZooKernel, ...]:
    """The eighteenth set (session 12, issue 12; measured for the next session and sealed, not fitted when added):
    ATen's strided copies, which read 8–38 % low in power in every set that ran them alone (the first zoo's
    transposes, characterization16's and 17's channels-last copies) and carry a fifth of SqueezeBERT's and
    Funnel-Transformer's predicted step energy (steps13), at more shapes and dtypes than a traffic term for them could
    be judged on before: batched transposes [B, L, C] → [B, C, L] at SqueezeBERT's shapes (as ``copy_nhwc`` with W = 1),
    channels-last copies of a CNN's activations and of 19 class maps, 2-D transposes at three sizes; and
    SqueezeBERT's grouped 1 × 1 convolution (four groups) forward and backward. Each entry is a single call where one
    lasts milliseconds, else a CUDA-graph replay of about 2–5 ms."""
    c, f, b = "copy", "fp32", "bf16"
    return (
        ZooKernel("copy_nhwc_bf16_32x768x512x1_graph64", c, "copy_nhwc", b, (32, 768, 512, 1), graph=64),
        ZooKernel("copy_nhwc_bf16_32x3072x512x1_graph16", c, "copy_nhwc", b, (32, 3072, 512, 1), graph=16),
        ZooKernel("copy_nhwc_fp32_32x768x512x1_graph32", c, "copy_nhwc", f, (32, 768, 512, 1), graph=32),
        ZooKernel("copy_nhwc_bf16_128x64x56x56_graph32", c, "copy_nhwc", b, (128, 64, 56, 56), graph=32),
        ZooKernel("copy_nhwc_fp32_64x19x512x512", c, "copy_nhwc", f, (64, 19, 512, 512)),
        ZooKernel("transpose_bf16_8192x4096_graph32", c, "transpose", b, (8192, 4096), graph=32),
        ZooKernel("transpose_fp32_4096x16384_graph8", c, "transpose", f, (4096, 16384), graph=8),
        ZooKernel("transpose_bf16_2048x2048_graph256", c, "transpose", b, (2048, 2048), graph=256),
        ZooKernel("gconv1d_bf16_32x768x512_k1_g4_graph16", "gemm", "gconv1d", b, (32, 768, 512, 1, 4), graph=16),
        ZooKernel("gconv1d_bwd_bf16_32x768x512_k1_g4_graph8", "gemm", "gconv1d_bwd", b, (32, 768, 512, 1, 4),
                  graph=8),
    )


def light_ops3_zoo() -> tuple[ZooKernel, ...]:
    """The nineteenth set (session 13, issue 12; measured before that session's softmax and 1 × 1 convolution rules
    were written, sealed until they were final, checked once, never fitted): the spatial log-softmax and its backward
    at other class counts, spatial sizes and dtypes than characterization16 and 17 (fp32 at 150 classes, bf16 at 19,
    a small map that stays in L2), the row softmax at a 1 024-wide fp32 and a 32 000-wide bf16 row, and 1 × 1
    convolutions forward and backward at a ResNet's 28² stage and a 128-channel 56² map. Each entry is a single call
    where one lasts milliseconds, else a CUDA-graph replay of about 2–5 ms."""
    r, f, b = "reduction", "fp32", "bf16"
    return (
        ZooKernel("log_softmax_ch_bf16_32x19x512x512_graph8", r, "log_softmax_ch", b, (32, 19, 512, 512), graph=8),
        ZooKernel("log_softmax_ch_fp32_16x150x256x256_graph4", r, "log_softmax_ch", f, (16, 150, 256, 256), graph=4),
        ZooKernel("log_softmax_ch_fp32_64x19x256x256_graph8", r, "log_softmax_ch", f, (64, 19, 256, 256), graph=8),
        ZooKernel("log_softmax_ch_bf16_8x150x512x512_graph4", r, "log_softmax_ch", b, (8, 150, 512, 512), graph=4),
        ZooKernel("log_softmax_ch_fp32_16x64x128x128_graph32", r, "log_softmax_ch", f, (16, 64, 128, 128), graph=32),
        ZooKernel("log_softmax_ch_bwd_bf16_16x150x256x256_graph4", r, "log_softmax_ch_bwd", b, (16, 150, 256, 256),
                  graph=4),
        ZooKernel("log_softmax_ch_bwd_fp32_16x150x256x256_graph2", r, "log_softmax_ch_bwd", f, (16, 150, 256, 256),
                  graph=2),
        ZooKernel("softmax_fp32_32768x1024_graph32", r, "softmax", f, (32768, 1024), graph=32),
        ZooKernel("softmax_bf16_4096x32000_graph16", r, "softmax", b, (4096, 32000), graph=16),
        ZooKernel("conv2d_bf16_128x256x28x28_to512_k1_graph64", "gemm", "conv2d", b, (128, 256, 28, 28, 512, 1),
                  graph=64),
        ZooKernel("conv2d_bwd_bf16_128x256x28x28_to512_k1_graph32", "gemm", "conv2d_bwd", b,
                  (128, 256, 28, 28, 512, 1), graph=32),
        ZooKernel("conv2d_bwd_bf16_32x128x56x56_to128_k1_graph64", "gemm", "conv2d_bwd", b,
                  (32, 128, 56, 56, 128, 1), graph=64),
    )


def light_ops4_zoo() -> tuple[ZooKernel, ...]:
    """The twentieth set (session 13, issue 12; measured for the next session and sealed, not fitted when added): what
    session 13's held-out checks left open, at shapes no set ran. Strided copies whose sector waste stays in L2 (the
    ``copies`` set read all of them 19–32 % low, the stride rule prices only waste that reaches DRAM), the spatial
    log-softmax in bf16 at 150 classes (over-predicted at any pass count: uneven waves), and 1 × 1 convolution
    backwards at a ResNet's 56² and 14² stages. Each entry is a single call where one lasts milliseconds, else a
    CUDA-graph replay of about 2–5 ms."""
    c, r, f, b = "copy", "reduction", "fp32", "bf16"
    return (
        ZooKernel("copy_nhwc_bf16_64x512x256x1_graph64", c, "copy_nhwc", b, (64, 512, 256, 1), graph=64),
        ZooKernel("copy_nhwc_fp32_32x1024x1024x1_graph8", c, "copy_nhwc", f, (32, 1024, 1024, 1), graph=8),
        ZooKernel("copy_nhwc_bf16_64x128x28x28_graph128", c, "copy_nhwc", b, (64, 128, 28, 28), graph=128),
        ZooKernel("copy_nhwc_fp32_32x64x112x112_graph16", c, "copy_nhwc", f, (32, 64, 112, 112), graph=16),
        ZooKernel("transpose_fp32_2048x32768_graph8", c, "transpose", f, (2048, 32768), graph=8),
        ZooKernel("transpose_bf16_4096x1024_graph256", c, "transpose", b, (4096, 1024), graph=256),
        ZooKernel("log_softmax_ch_bf16_16x150x128x128_graph16", r, "log_softmax_ch", b, (16, 150, 128, 128),
                  graph=16),
        ZooKernel("log_softmax_ch_bf16_4x150x512x512_graph8", r, "log_softmax_ch", b, (4, 150, 512, 512), graph=8),
        ZooKernel("log_softmax_ch_bwd_bf16_8x150x512x512_graph4", r, "log_softmax_ch_bwd", b, (8, 150, 512, 512),
                  graph=4),
        ZooKernel("conv2d_bwd_bf16_64x256x56x56_to64_k1_graph16", "gemm", "conv2d_bwd", b, (64, 256, 56, 56, 64, 1),
                  graph=16),
        ZooKernel("conv2d_bwd_bf16_128x512x14x14_to2048_k1_graph16", "gemm", "conv2d_bwd", b,
                  (128, 512, 14, 14, 2048, 1), graph=16),
    )


def anchor_zoo() -> tuple[ZooKernel, ...]:
    """The card's anchors (session 10, issue 12): eight entries of the earlier sets, the same definitions, measured in
    about a minute on the user's own card so that the model can be adapted to it (``kdvfs.card_anchor``). One card of
    a kind differs from the next, and a lease of the lent H200 from the next, by more than the 3 % target: a leakier or
    warmer die draws more at the same clock, and at the cap runs at a lower one. The anchors span what separates
    those: the idle and gap power, a small GEMM and a memory-bound add and norm below the cap, and two GEMMs and a
    GELU the cap throttles, whose clocks show the card's power at a clock."""
    by_name = {k.name: k for k in default_zoo() + cache_gap_zoo()}
    return tuple(by_name[n] for n in ANCHOR_NAMES)


ZOO_SETS = {"base": default_zoo, "cache-gaps": cache_gap_zoo, "step-shapes": step_shape_zoo, "duty": duty_zoo,
            "top-clock": top_clock_zoo, "attention": attention_zoo, "held-duty": held_duty_zoo, "small": small_zoo,
            "thermal": thermal_zoo, "warm-cool": warm_cool_zoo, "conv": conv_zoo,
            "anchor": anchor_zoo, "tiny-grid": tiny_grid_zoo, "tiny-grid2": tiny_grid2_zoo,
            "step-ops": step_ops_zoo, "light-ops2": light_ops2_zoo, "copies": copies_zoo,
            "light-ops3": light_ops3_zoo, "light-ops4": light_ops4_zoo}


def full_zoo() -> tuple[ZooKernel, ...]:
    """Every set: the first zoo (``default_zoo``), then ``cache_gap_zoo``, ``step_shape_zoo``, ``duty_zoo`` and
    ``top_clock_zoo``, ``attention_zoo``, ``held_duty_zoo``, ``small_zoo``."""
    return (default_zoo() + cache_gap_zoo() + step_shape_zoo() + duty_zoo() + top_clock_zoo() + attention_zoo()
            + held_duty_zoo() + small_zoo())


PROBE = ZooKernel("probe_gemm_bf16_4096", "gemm", "gemm", "bf16", (4096, 4096, 4096))
LIGHT = ZooKernel("light_add_bf16_256MiB", "elementwise", "add", "bf16", (1 << 27,))
