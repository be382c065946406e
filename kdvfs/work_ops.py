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
import re
from collections.abc import Sequence

from kdvfs.work import DTYPE_BYTES, MAX_REDUCTION_FLOPS, WINDOW_OPS, Work, _size

__all__ = ["MAX_NUMEL", "UPSAMPLE_FLOPS", "adaptive_avg_pool_work", "adaptive_max_pool_work", "adaptive_pairs",
           "avg_pool_work", "bilinear_upsample_work", "col2im_work", "im2col_work", "linear_upsample_flops",
           "linear_upsample_work", "max_pool_work", "nearest_upsample_work", "pool_out_size", "scatter_add_work",
           "index_select_work", "row_gather_work", "window_op_work"]

UPSAMPLE_FLOPS = {"forward": 9.0, "backward": 12.0}
"""FLOPs per output element of ATen's bilinear upsampling (UpSampleBilinear2d.cu): the forward blends four inputs,
``h0λ·(w0λ·x00 + w1λ·x01) + h1λ·(w0λ·x10 + w1λ·x11)`` (six multiplies, three adds); the backward scatters each
output gradient to its four inputs, ``atomicAdd(gx, hλ·wλ·gy)`` four times (eight multiplies, four adds)."""



def linear_upsample_flops(nd: int, *, backward: bool = False) -> float:
    """FLOPs per output element of ATen's (multi)linear upsampling over ``nd`` dimensions (``upsample_linear1d``,
    ``upsample_bilinear2d``, ``upsample_trilinear3d``): the forward blends ``2^nd`` taps as nested pairs,
    ``λ0·a + λ1·b`` at each level (``3·2^nd − 3``: 3, 9, 21); the backward scatters the output gradient to each tap,
    ``atomicAdd(gx, λ_1 ⋯ λ_nd · gy)`` (``nd`` multiplies and one add per tap: 4, 12, 32). ``nd = 2`` is
    ``UPSAMPLE_FLOPS``."""
    taps = 2 ** nd
    return float(taps * (nd + 1) if backward else 3 * taps - 3)


def linear_upsample_work(in_numel: int, out_numel: int, nd: int, dtype: str = "fp32", *,
                         backward: bool = False) -> Work:
    """Linear, bilinear or trilinear upsampling (``nd`` 1, 2, 3) of ``in_numel`` elements to ``out_numel``
    (``linear_upsample_flops`` per output element), through memory as ``bilinear_upsample_work``."""
    s = _size(dtype)
    flops = linear_upsample_flops(nd, backward=backward) * out_numel
    if backward:
        return Work(flops, float((out_numel + 2 * in_numel) * s), dtype, False)
    return Work(flops, float((in_numel + out_numel) * s), dtype, False)


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


def adaptive_pairs(in_size: int, out_size: int) -> int:
    """(window, input element) pairs of an adaptive pooling along one dimension: ATen's window ``o`` spans
    ``[floor(o·I/O), ceil((o+1)·I/O))``, and the lengths sum to ``I + O − gcd(I, O)``: ``I`` where ``O`` divides it
    (windows that tile the input), more where they overlap (7 → 3: 9; 8 → 12, a pooling to a size larger than its
    input: 16, each input element in one or two windows)."""
    return in_size + out_size - math.gcd(in_size, out_size) if in_size and out_size else 0


def adaptive_avg_pool_work(in_numel: int, out_numel: int, dtype: str = "fp32", *, backward: bool = False,
                           pairs: int | None = None) -> Work:
    """Adaptive average pooling (AdaptiveAveragePooling.cu): forward, one add per (window, element) pair and a divide
    per output; backward (one thread per input element over the windows that cover it), a divide and an add per
    pair. ``pairs``: their count (``adaptive_pairs`` per dimension, times the leading dimensions); ``in_numel``, the
    windows that tile the input, where not given. Input and output each once through memory."""
    s = _size(dtype)
    p = in_numel if pairs is None else pairs
    flops = 2 * p if backward else p + out_numel
    return Work(float(flops), float((in_numel + out_numel) * s), dtype, False)


def adaptive_max_pool_work(in_numel: int, out_numel: int, dtype: str = "fp32", *, backward: bool = False,
                           pairs: int | None = None) -> Work:
    """Adaptive max pooling (AdaptiveMaxPooling2d.cu): forward, one thread per output scans its window
    (``MAX_REDUCTION_FLOPS`` per pair), the input read once, the output written with its int64 index; backward
    (``atomic_adaptivemaxgradinput``), one atomic add per output gradient at its argmax, the gradient and the indices
    read, the input's gradient written (zeroing it first is its own ``fill_`` kernel)."""
    s, idx = _size(dtype), DTYPE_BYTES["int64"]
    if backward:
        return Work(float(out_numel), float(out_numel * (s + idx) + in_numel * s), dtype, False)
    p = in_numel if pairs is None else pairs
    return Work(MAX_REDUCTION_FLOPS * p, float(in_numel * s + out_numel * (s + idx)), dtype, False)


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


def index_select_work(rows: int, row_numel: int, dtype: str = "fp32", index_bytes: float = 0.0) -> Work:
    """``index_select(self, dim, index)`` and ``embedding(weight, indices)`` (Indexing.cu ``indexSelectLargeIndex`` /
    ``index_select_out_cuda_impl``; the embedding's forward is an ``index_select`` along dimension 0): each of the
    ``rows`` indices copies one slice of ``row_numel`` elements, read and written once, and the index is read once; no
    FLOPs. The rest of ``self`` is not touched: the copy rule had priced it as a copy of its largest operand, the
    whole table (DeBERTa's 128 100 × 768 vocabulary for 8 192 tokens: 15 times the bytes)."""
    n = rows * row_numel
    return Work(0.0, float(2 * n * _size(dtype) + index_bytes), dtype, False)


def row_gather_work(op: str, shapes: list[list[int]], dts: list, dt: str, concrete: object) -> Work | None:
    """``index_select_work`` from an ``aten::index_select`` or ``aten::embedding`` record (its shapes, dtypes and the
    ``dim`` argument), or ``None`` where the record does not say enough."""
    name = op.split("::")[-1].lower()
    if len(shapes) < 2 or not shapes[0]:
        return None
    x = shapes[0]
    if name == "embedding":  # (weight [V, …], indices, padding_idx, scale_grad_by_freq, sparse)
        idx_i, d = 1, 0
    else:  # index_select(self, dim, index)
        idx_i = 2
        try:
            d = int(str(_arg(concrete if isinstance(concrete, list) else [], 1)).strip())
        except ValueError:
            return None
        if not -len(x) <= d < len(x):
            return None
        d %= len(x)
    if len(shapes) <= idx_i or x[d] <= 0:
        return None
    rows = _numel(shapes[idx_i]) if shapes[idx_i] else 1  # a 0-dim index selects one slice
    row = _numel(x) // x[d]
    idx_dt = dts[idx_i] if len(dts) > idx_i and dts[idx_i] else "int64"
    return index_select_work(rows, row, _dtype_of(dts, 0, dt), float(rows * _size(idx_dt)))


# ---------------------------------------------------------------------- from a profiler record
MAX_NUMEL = 2 ** 63 - 1
"""The most elements a tensor can hold (PyTorch counts them in an int64): a recorded size or an element count beyond
it is not a tensor's (a corrupt trace), and the record says nothing."""


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


def _sizes(v: object, lo: int = 1) -> list[int] | None:
    """``_ints`` where every value is a size, stride or padding: at least ``lo`` and at most ``MAX_NUMEL`` (a
    negative output size or a zero stride is no geometry: None)."""
    out = _ints(v)
    return out if out is not None and all(lo <= x <= MAX_NUMEL for x in out) else None


def _floats(v: object) -> list[float] | None:
    """Scale factors as the profiler writes them: ``"[2., 2.]"`` (C++'s ``2.``, which JSON does not read), or
    ``"[1.5, 1.5]"``; None unless each is a finite positive number."""
    if not isinstance(v, str) or not v.strip().startswith("[") or not v.strip().endswith("]"):
        return None
    parts = [p.strip() for p in v.strip()[1:-1].split(",")]
    try:
        out = [float(p) for p in parts]
    except ValueError:
        return None
    return out if out and all(math.isfinite(x) and x > 0 for x in out) else None


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


def _rank(op: str) -> int | None:
    """The spatial dimensions an op works over, from its name (``avg_pool3d``, ``upsample_linear1d``: 3, 1)."""
    m = re.search(r"([123])d(?:_with_indices)?(?:_backward)?(?:\.vec)?$", op)
    return int(m.group(1)) if m else None


def _per_dim(v: list[int], nd: int) -> list[int] | None:
    """A per-dimension argument as ``nd`` values: one value stands for all (``kernel_size=(3,)`` of a 2-D pooling)."""
    return v * nd if len(v) == 1 else (v if len(v) == nd else None)


def _pool_geometry(x: list[int], conc: list, ki: int, nd: int, with_dilation: bool) -> tuple[int, int] | None:
    """(window elements, output elements) of an ``nd``-D pooling op over input ``x`` whose kernel size is argument
    ``ki``, followed by stride, padding, (dilation,) ceil_mode (``avg_pool2d``, ``max_pool2d_with_indices``)."""
    k = _per_dim(_sizes(_arg(conc, ki)) or [], nd)
    if not k or len(x) < nd + 1:
        return None
    # an empty stride means the kernel's size; no padding, no dilation where none is recorded
    st = _opt(conc, ki + 1, 1, k, nd)
    pad = _opt(conc, ki + 2, 0, [0], nd)
    dil = _opt(conc, ki + 3, 1, [1], nd) if with_dilation else [1] * nd
    if st is None or pad is None or dil is None:
        return None
    ceil = _arg(conc, ki + (4 if with_dilation else 3)).strip() == "True"
    spatial = [pool_out_size(x[-nd + i], k[i], st[i], pad[i], dil[i], ceil) for i in range(nd)]
    return _window(k, x, pad), _numel(x[:-nd]) * _numel(spatial)


def _opt(conc: list, i: int, lo: int, default: list[int], nd: int) -> list[int] | None:
    """Argument ``i`` as ``nd`` values of at least ``lo``; ``default`` where it is not recorded (``""``, ``"[]"``,
    ``"None"``); None where it is recorded but is no such list (a zero stride, a negative padding)."""
    raw = _arg(conc, i).strip()
    v = default if raw in ("", "[]", "None") else _sizes(raw, lo)
    return _per_dim(v, nd) if v else None


def _window(k: list[int], x: list[int], pad: list[int]) -> int:
    """A pooling window's elements, each side clipped to the padded input (a global pooling recorded as a window
    wider than its input: EfficientNet-B0's traces hold avg_pool2d over 7 × 7 with a 1280 × 1280 kernel)."""
    nd = len(k)
    return _numel([min(k[i], x[-nd + i] + 2 * pad[i]) for i in range(nd)])


_UPSAMPLE = dict(WINDOW_OPS)["upsample"]


def _dtype_of(dts: Sequence[str | None], i: int, dt: str) -> str:
    """Operand ``i``'s recorded dtype (a uint8 mask upsampled, an int64 count scatter-added), else the op's."""
    d = dts[i] if i < len(dts) else None
    return d if d in DTYPE_BYTES else dt


def window_op_work(rule: str, op: str, shapes: list[list[int]], dts: Sequence[str | None], dt: str,
                   concrete: object, strides: object = None) -> Work | None:
    """The work of ``op`` (full ``aten::`` name) under one of ``kdvfs.work.WINDOW_OPS``'s rules from the profiler's
    input shapes, their dtypes (``dts``; ``dt`` the op's float dtype) and its concrete arguments; ``None`` where they
    do not say enough or say what no tensor can be (the caller then falls back to the kernel's name). The bytes
    count each tensor at its own recorded dtype; the Work's dtype is the op's float dtype."""
    w = _window_op_work(rule, op, shapes, dts, dt, concrete, strides)
    if w is None or w.dtype == dt:
        return w
    return Work(w.flops, w.bytes, dt, w.tensor, w.source)


def _window_op_work(rule: str, op: str, shapes: list[list[int]], dts: Sequence[str | None], dt: str,
                    concrete: object, strides: object) -> Work | None:
    conc = concrete if isinstance(concrete, list) else []
    x = shapes[0] if shapes else []
    if not x or _numel(x) > MAX_NUMEL:
        return None
    nd = _rank(op)
    if rule == "upsample":
        m = _UPSAMPLE.match(op)
        if not m or nd is None:
            return None
        bwd = bool(m.group(2))
        if bwd:  # (grad_output, output_size, input_size, ...): the input's full size is recorded
            small = _numel(_sizes(_arg(conc, 2), lo=0) or [])
            big = _numel(x)
        else:  # (input, output_size, ...), else the .vec overload's scale factors (linear's argument 3, nearest's 2)
            small = _numel(x)
            size = _sizes(_arg(conc, 1), lo=0)
            scales = None if size else _floats(_arg(conc, 2 if "nearest" in m.group(1).lower() else 3))
            out_sp = size or ([int(math.floor(x[-nd + i] * scales[i])) for i in range(nd)]
                              if scales and len(scales) == nd and len(x) >= nd + 1 else None)
            if not out_sp or len(out_sp) != nd or len(x) < nd + 1:
                return None
            big = _numel(x[:-nd]) * _numel(out_sp)
        if not small or not big or max(small, big) > MAX_NUMEL:
            return None
        kind, d0 = m.group(1).lower(), _dtype_of(dts, 0, dt)
        if "nearest" in kind:
            return nearest_upsample_work(small, big, d0, backward=bwd)
        return linear_upsample_work(small, big, nd, d0, backward=bwd)
    if rule == "pool":
        if nd is None:
            return None
        low, d0 = op.lower(), _dtype_of(dts, 0, dt)
        if "adaptive" in low:
            is_max = "adaptive_max" in low
            pool_a = adaptive_max_pool_work if is_max else adaptive_avg_pool_work
            if "backward" in op:  # (grad_output, self[, indices])
                inp = shapes[1] if len(shapes) > 1 else []
                if len(inp) < nd + 1 or len(x) != len(inp) or _numel(inp) > MAX_NUMEL:
                    return None
                pairs = _numel(inp[:-nd]) * _numel([adaptive_pairs(inp[-nd + i], x[-nd + i]) for i in range(nd)])
                return pool_a(_numel(inp), _numel(x), d0, backward=True, pairs=pairs)
            size = _per_dim(_sizes(_arg(conc, 1)) or [], nd)
            if not size or len(x) < nd + 1:
                return None
            out = _numel(x[:-nd]) * _numel(size)
            if out > MAX_NUMEL:
                return None
            pairs = _numel(x[:-nd]) * _numel([adaptive_pairs(x[-nd + i], size[i]) for i in range(nd)])
            return pool_a(_numel(x), out, d0, pairs=pairs)
        is_max = "max_pool" in low
        if "backward" in op:  # (grad_output, self, kernel_size, ...): both sizes recorded
            if len(shapes) < 2 or len(shapes[1]) < nd + 1 or _numel(shapes[1]) > MAX_NUMEL:
                return None
            k = _per_dim(_sizes(_arg(conc, 2)) or [], nd)
            pad = _opt(conc, 4, 0, [0], nd)
            if not k or pad is None:
                return None
            pool = max_pool_work if is_max else avg_pool_work
            return pool(_numel(shapes[1]), _numel(x), _window(k, shapes[1], pad), d0, backward=True)
        geo = _pool_geometry(x, conc, 1, nd, with_dilation=is_max)
        if geo is None:
            return None
        window, n_out = geo
        return (max_pool_work if is_max else avg_pool_work)(_numel(x), n_out, window, d0)
    if rule == "fold":
        d0 = _dtype_of(dts, 0, dt)
        if op.lower().endswith("col2im"):  # (columns [N, C·window, L], output_size, kernel_size, ...)
            k, size = _sizes(_arg(conc, 2)), _sizes(_arg(conc, 1))
            if not k or not size or len(x) != 3 or x[1] % _numel(k):
                return None
            image = x[0] * (x[1] // _numel(k)) * _numel(size)
            return col2im_work(_numel(x), image, d0) if image <= MAX_NUMEL else None
        # im2col(image [N, C, *spatial], kernel_size, dilation, padding, stride)
        k = _sizes(_arg(conc, 1))
        if not k or len(x) != len(k) + 2:
            return None
        n = len(k)
        dil, pad, st = (_opt(conc, i, lo, [d], n) for i, d, lo in ((2, 1, 1), (3, 0, 0), (4, 1, 1)))
        if dil is None or pad is None or st is None:
            return None
        length = _numel([pool_out_size(x[2 + i], k[i], st[i], pad[i], dil[i]) for i in range(n)])
        cols = x[0] * x[1] * _numel(k) * length
        return im2col_work(_numel(x), cols, d0) if cols <= MAX_NUMEL else None
    if rule == "scatter":
        name = op.split("::")[-1].lower()
        if name.startswith(("scatter_add", "index_add")):  # (self, dim, index, src[, alpha])
            if len(shapes) < 4 or not shapes[3] or not shapes[2]:
                return None
            idx_dt = dts[2] if len(dts) > 2 and dts[2] else "int64"
            idx = _distinct(shapes[2], strides, 2) * _size(idx_dt)
            # scatter_add_ visits the index's elements (it may be smaller than src along any dimension); index_add_
            # adds all of source (its index is one entry per slice)
            n = _numel(shapes[2]) if name.startswith("scatter_add") else _numel(shapes[3])
            return scatter_add_work(n, float(idx), _dtype_of(dts, 3, dt), self_numel=_numel(x))
        # index_put_(self, indices, values, accumulate): the indices' list is not recorded (its size is not counted);
        # a 0-dim value (``x[mask] = 1.0``) is recorded without a shape: how many places it reaches is not known
        if len(shapes) < 3 or not shapes[2]:
            return None
        acc = _arg(conc, 3).strip() == "True"
        return scatter_add_work(_numel(shapes[2]), 0.0, _dtype_of(dts, 2, dt), self_numel=_numel(x), accumulate=acc)
    return None


def _distinct(dims: list[int], strides: object, i: int) -> int:
    """Distinct elements of operand ``i`` (a dimension of stride 0, broadcast by ``expand``, adds none)."""
    st = strides[i] if isinstance(strides, list) and i < len(strides) else None
    if not isinstance(st, list) or len(st) != len(dims) or not all(isinstance(v, int) for v in st):
        return _numel(dims)
    return int(math.prod(int(d) for d, s in zip(dims, st) if s != 0))
