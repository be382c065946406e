"""The work of the ops beyond ``kdvfs.work``'s dense core: resampling, pooling windows, im2col/col2im and scatter-adds.

``kdvfs.work.op_work`` prices these from the shapes and arguments a PyTorch profiler trace records (its rules
``upsample``, ``pool``, ``fold`` and ``scatter``, ``kdvfs.work.op_rule``), and the characterisation zoo's ``step-ops``
set (``hw_backend.zoo``) sizes its entries with the same functions: one definition of each op's work. Before
(session 11), the importer's last branch priced them as elementwise ops over their largest operand: bilinear
upsampling got 0.7 % of its FLOPs and 12 % of its bytes, 3 × 3 average pooling 10 % of its FLOPs
(``validation/h200/step_breakdown/``).

Each formula counts what ATen's CUDA kernel does (PyTorch 2.x, ``aten/src/ATen/native/cuda/``): the FLOPs per output
or input element of its loop, each tensor read once and each result written once through device memory (the
overlapping windows' re-reads come from the caches, as in the convolution and GEMM formulas). Nothing is fitted.
This module is kept apart from ``kdvfs.work`` only for length.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from kdvfs.work import DTYPE_BYTES, MAX_REDUCTION_FLOPS, WINDOW_OPS, Work

__all__ = ["UPSAMPLE_FLOPS", "adaptive_avg_pool_work", "avg_pool_work", "bilinear_upsample_work", "col2im_work",
           "im2col_work", "max_pool_work", "nearest_upsample_work", "pool_out_size", "scatter_add_work",
           "window_op_work"]

UPSAMPLE_FLOPS = {"forward": 9.0, "backward": 12.0}
"""FLOPs per output element of ATen's bilinear upsampling (UpSampleBilinear2d.cu): the forward blends four inputs,
``h0λ·(w0λ·x00 + w1λ·x01) + h1λ·(w0λ·x10 + w1λ·x11)`` (six multiplies, three adds); the backward scatters each
output gradient to its four inputs, ``atomicAdd(gx, hλ·wλ·gy)`` four times (eight multiplies, four adds)."""


def _size(dtype: str) -> int:
    return DTYPE_BYTES.get(dtype, 4)


def bilinear_upsample_work(in_numel: int, out_numel: int, dtype: str = "fp32", *, backward: bool = False) -> Work:
    """Bilinear upsampling of ``in_numel`` elements to ``out_numel`` (``UPSAMPLE_FLOPS`` per output element).
    Forward (``upsample_bilinear2d_out_frame``): the input read once (a pixel's four neighbours are its neighbours',
    from cache), the output written. Backward (``upsample_bilinear2d_backward_out_frame``): the output's gradient read
    once and accumulated into the input's gradient by atomic adds (read and written: ``2 · in_numel``); zeroing that
    gradient first is its own ``fill_`` kernel, priced as such."""
    s = _size(dtype)
    if backward:
        return Work(UPSAMPLE_FLOPS["backward"] * out_numel, float((out_numel + 2 * in_numel) * s), dtype, False)
    return Work(UPSAMPLE_FLOPS["forward"] * out_numel, float((in_numel + out_numel) * s), dtype, False)


def nearest_upsample_work(in_numel: int, out_numel: int, dtype: str = "fp32", *, backward: bool = False) -> Work:
    """Nearest-neighbour upsampling (UpSampleNearest2d.cu). Forward: each output copies one input (index arithmetic
    only, no FLOPs on the data), the input read once, the output written. Backward: one thread per input element sums
    the output gradients that copied it (one add each: ``out_numel`` FLOPs), reading them once and writing the input's
    gradient."""
    s = _size(dtype)
    return Work(float(out_numel) if backward else 0.0, float((in_numel + out_numel) * s), dtype, False)


def avg_pool_work(in_numel: int, out_numel: int, window: int, dtype: str = "fp32", *, backward: bool = False) -> Work:
    """Average pooling with a ``window``-element window (``k · k``). Forward (``avg_pool2d_out_cuda_frame``): one
    thread per output sums its window and divides (``window + 1`` FLOPs per output); the input read once, the output
    written. Backward (``avg_pool2d_backward_out_cuda_frame``): one thread per input element adds each covering
    window's gradient divided by its count, two FLOPs per (window, element) pair: ``2 · window · out_numel``; the
    output's gradient read once, the input's written."""
    s = _size(dtype)
    flops = 2 * window * out_numel if backward else (window + 1) * out_numel
    return Work(float(flops), float((in_numel + out_numel) * s), dtype, False)


def max_pool_work(in_numel: int, out_numel: int, window: int, dtype: str = "fp32", *, backward: bool = False) -> Work:
    """Max pooling that keeps the argmax (``max_pool2d_with_indices``). Forward: one thread per output scans its
    window, ``(val > max) || isnan(val)`` then a select (``MAX_REDUCTION_FLOPS`` per window element); the input read
    once, the output written with its int64 index. Backward (``max_pool2d_with_indices_backward_out_cuda_frame``): one
    thread per input element visits the outputs whose window covers it, compares their index with its own and adds
    the match's gradient (two per pair, ``2 · window · out_numel``); the output's gradient and indices read once, the
    input's gradient written."""
    s, idx = _size(dtype), DTYPE_BYTES["int64"]
    if backward:
        return Work(float(2 * window * out_numel), float(out_numel * (s + idx) + in_numel * s), dtype, False)
    return Work(MAX_REDUCTION_FLOPS * window * out_numel, float(in_numel * s + out_numel * (s + idx)), dtype, False)


def adaptive_avg_pool_work(in_numel: int, out_numel: int, dtype: str = "fp32", *, backward: bool = False) -> Work:
    """Adaptive average pooling (AdaptiveAveragePooling.cu), windows that tile the input: forward, one add per input
    element and a divide per output; backward, each input element's share of its window's gradient (a divide and an
    add). Input and output each once through memory."""
    s = _size(dtype)
    flops = 2 * in_numel if backward else in_numel + out_numel
    return Work(float(flops), float((in_numel + out_numel) * s), dtype, False)


def col2im_work(cols_numel: int, image_numel: int, dtype: str = "fp32") -> Work:
    """``col2im`` (``nn.Fold``, the backward of ``nn.Unfold``; im2col.cuh ``col2im_kernel``): one thread per image
    element sums the column entries that cover it, one add per column entry; the columns read once, the image
    written."""
    return Work(float(cols_numel), float((cols_numel + image_numel) * _size(dtype)), dtype, False)


def im2col_work(image_numel: int, cols_numel: int, dtype: str = "fp32") -> Work:
    """``im2col`` (``nn.Unfold``; ``im2col_kernel``): each column entry copies one image element (no FLOPs); the
    image read once (overlapping windows from cache), the ``window``-times larger columns written."""
    return Work(0.0, float((image_numel + cols_numel) * _size(dtype)), dtype, False)


def scatter_add_work(src_numel: int, index_bytes: float, dtype: str = "fp32", *, self_numel: int | None = None,
                     accumulate: bool = True) -> Work:
    """``scatter_add_`` / ``index_add_`` / ``index_put_(accumulate=True)`` (ScatterGatherKernel.cu, Indexing.cu):
    one atomic add per source element into the destination; the source and the index read once, each destination
    element it reaches read and written (at most ``min(self_numel, src_numel)`` of them). Without ``accumulate``
    (``index_put_``): a copy of the source to its places, no FLOPs."""
    s = _size(dtype)
    touched = src_numel if self_numel is None else min(self_numel, src_numel)
    if not accumulate:
        return Work(0.0, float(src_numel * s + index_bytes + touched * s), dtype, False)
    return Work(float(src_numel), float(src_numel * s + index_bytes + 2 * touched * s), dtype, False)


# ---------------------------------------------------------------------- from a profiler record
def _numel(dims: Sequence[int] | None) -> int:
    return int(math.prod(int(d) for d in dims)) if dims else 0


def _ints(v: object) -> list[int] | None:
    """``"[3, 3]"`` (a profiler's concrete input) as ``[3, 3]``; ``"4"`` as ``[4]``; None where it is neither."""
    try:
        out = json.loads(v) if isinstance(v, str) and v.strip() else None
    except ValueError:
        return None
    if isinstance(out, int) and not isinstance(out, bool):
        return [out]
    return [int(x) for x in out] if isinstance(out, list) and out and all(
        isinstance(x, int) and not isinstance(x, bool) for x in out) else None


def _floats(v: object) -> list[float] | None:
    try:
        out = json.loads(v) if isinstance(v, str) and v.strip() else None
    except ValueError:
        return None
    if not isinstance(out, list) or not out:
        return None
    ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in out)
    return [float(x) for x in out] if ok else None


def pool_out_size(size: int, k: int, stride: int, pad: int, dilation: int = 1, ceil_mode: bool = False) -> int:
    """A pooling window's output length (ATen's ``pooling_output_shape``): ``(size + 2·pad − dilation·(k − 1) − 1) /
    stride + 1``, rounded up with ``ceil_mode`` (the last window must then start inside the input or its padding)."""
    span = size + 2 * pad - dilation * (k - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return max(1, out)


def _arg(conc: list, i: int) -> str:
    return str(conc[i]) if i < len(conc) else ""


def _pool_geometry(x: list[int], conc: list, ki: int, with_dilation: bool) -> tuple[int, int] | None:
    """(window elements, output elements) of a pooling op over input ``x`` whose kernel size is argument ``ki``,
    followed by stride, padding, (dilation,) ceil_mode (``avg_pool2d``, ``max_pool2d_with_indices``)."""
    k = _ints(_arg(conc, ki))
    if not k or min(k) <= 0 or len(x) < len(k) + 1:
        return None
    nd = len(k)
    st = _ints(_arg(conc, ki + 1)) or k  # an empty stride means the kernel's size
    pad = _ints(_arg(conc, ki + 2)) or [0]
    dil = (_ints(_arg(conc, ki + 3)) or [1]) if with_dilation else [1]
    ceil = _arg(conc, ki + (4 if with_dilation else 3)).strip() == "True"

    def at(v: list[int], i: int) -> int:
        return v[i] if len(v) == nd else v[0]

    if min(st) <= 0 or min(dil) <= 0 or min(pad) < 0:
        return None
    spatial = [pool_out_size(x[-nd + i], k[i], at(st, i), at(pad, i), at(dil, i), ceil) for i in range(nd)]
    return _window(k, x, pad), _numel(x[:-nd]) * _numel(spatial)


def _window(k: list[int], x: list[int], pad: list[int]) -> int:
    """A pooling window's elements, each side clipped to the padded input (a global pooling recorded as a window
    wider than its input: EfficientNet-B0's traces hold avg_pool2d over 7 × 7 with a 1280 × 1280 kernel)."""
    nd = len(k)
    return _numel([min(k[i], x[-nd + i] + 2 * (pad[i] if len(pad) == nd else pad[0])) for i in range(nd)])


_UPSAMPLE = dict(WINDOW_OPS)["upsample"]


def window_op_work(rule: str, op: str, shapes: list[list[int]], dts: Sequence[str | None], dt: str,
                   concrete: object, strides: object = None) -> Work | None:
    """The work of ``op`` (full ``aten::`` name) under one of ``kdvfs.work.WINDOW_OPS``'s rules from the profiler's input shapes, their
    dtypes (``dts``; ``dt`` the op's float dtype) and its concrete arguments; ``None`` where they do not say enough
    (the caller then falls back to the kernel's name)."""
    conc = concrete if isinstance(concrete, list) else []
    x = shapes[0] if shapes else []
    if not x:
        return None
    if rule == "upsample":
        m = _UPSAMPLE.match(op)
        if not m:
            return None
        bwd = bool(m.group(2))
        if bwd:  # (grad_output, output_size, input_size, ...): the input's full size is recorded
            small = _numel(_ints(_arg(conc, 2)) or [])
            big = _numel(x)
        else:  # (input, output_size, ...), else the .vec overload's scale factors (argument 3; nearest's: 2)
            small = _numel(x)
            size = _ints(_arg(conc, 1))
            scales = (_floats(_arg(conc, 3)) or _floats(_arg(conc, 2))) if not size else None
            nd = len(size or scales or [])
            if not nd or len(x) < nd + 1:
                return None
            out = size or [int(math.floor(x[-nd + i] * scales[i])) for i in range(nd)]  # type: ignore[index]
            big = _numel(x[:-nd]) * _numel(out)
        if not small or not big:
            return None
        resample = bilinear_upsample_work if m.group(1).lower() == "bilinear2d" else nearest_upsample_work
        return resample(small, big, dt, backward=bwd)
    if rule == "pool":
        low = op.lower()
        if "adaptive" in low:
            if "backward" in op:  # (grad_output, self)
                return adaptive_avg_pool_work(_numel(shapes[1]) if len(shapes) > 1 else 0, _numel(x), dt,
                                              backward=True) if len(shapes) > 1 and shapes[1] else None
            size = _ints(_arg(conc, 1))
            if not size or len(x) < len(size) + 1:
                return None
            return adaptive_avg_pool_work(_numel(x), _numel(x[:-len(size)]) * _numel(size), dt)
        is_max = "max_pool" in low
        if "backward" in op:  # (grad_output, self, kernel_size, ...): both sizes recorded
            if len(shapes) < 2 or not shapes[1]:
                return None
            k = _ints(_arg(conc, 2))
            if not k or min(k) <= 0 or len(shapes[1]) < len(k) + 1:
                return None
            pad = _ints(_arg(conc, 4)) or [0]
            pool = max_pool_work if is_max else avg_pool_work
            return pool(_numel(shapes[1]), _numel(x), _window(k, shapes[1], pad), dt, backward=True)
        geo = _pool_geometry(x, conc, 1, with_dilation=is_max)
        if geo is None:
            return None
        window, n_out = geo
        return (max_pool_work if is_max else avg_pool_work)(_numel(x), n_out, window, dt)
    if rule == "fold":
        if op.lower().endswith("col2im"):  # (columns [N, C·window, L], output_size, kernel_size, ...)
            k, size = _ints(_arg(conc, 2)), _ints(_arg(conc, 1))
            if not k or not size or len(x) != 3 or x[1] % _numel(k):
                return None
            return col2im_work(_numel(x), x[0] * (x[1] // _numel(k)) * _numel(size), dt)
        # im2col(image [N, C, *spatial], kernel_size, dilation, padding, stride)
        k = _ints(_arg(conc, 1))
        if not k or len(x) != len(k) + 2:
            return None
        nd = len(k)
        dil, pad, st = (_ints(_arg(conc, i)) or [d] for i, d in ((2, 1), (3, 0), (4, 1)))
        if min(k + dil + st) <= 0 or min(pad) < 0:
            return None
        length = _numel([pool_out_size(x[2 + i], k[i], st[i % len(st)], pad[i % len(pad)], dil[i % len(dil)])
                         for i in range(nd)])
        return im2col_work(_numel(x), x[0] * x[1] * _numel(k) * length, dt)
    if rule == "scatter":
        name = op.split("::")[-1].lower()
        if name.startswith(("scatter_add", "index_add")):  # (self, dim, index, src[, alpha])
            if len(shapes) < 4 or not shapes[3] or not shapes[2]:
                return None
            idx_dt = dts[2] if len(dts) > 2 and dts[2] else "int64"
            idx = _distinct(shapes[2], strides, 2) * _size(idx_dt)
            return scatter_add_work(_numel(shapes[3]), float(idx), dt, self_numel=_numel(x))
        # index_put_(self, indices, values, accumulate): the indices' list is not recorded (its size is not counted)
        if len(shapes) < 3 or not shapes[2]:
            return None
        acc = _arg(conc, 3).strip() == "True"
        return scatter_add_work(_numel(shapes[2]), 0.0, dt, self_numel=_numel(x), accumulate=acc)
    return None


def _distinct(dims: list[int], strides: object, i: int) -> int:
    """Distinct elements of operand ``i`` (a dimension of stride 0, broadcast by ``expand``, adds none)."""
    st = strides[i] if isinstance(strides, list) and i < len(strides) else None
    if not isinstance(st, list) or len(st) != len(dims) or not all(isinstance(v, int) for v in st):
        return _numel(dims)
    return int(math.prod(int(d) for d, s in zip(dims, st) if s != 0))
