"""The work a kernel does: floating-point operations and bytes moved through device memory.

Three sources, best first, recorded in ``Work.source`` (and ``Kernel.work_source``):

- ``shapes`` — from the launching op's input shapes and dtypes (PyTorch profiler traces recorded with
  ``record_shapes=True``: the CPU op's ``args["Input Dims"]`` / ``args["Input type"]``), by op formula: matmul,
  addmm, bmm, linear, conv, scaled-dot-product attention (flash / efficient / cudnn, forward and backward),
  elementwise, reductions, norms, softmax, copies and the optimizer's ``_foreach_*`` ops;
- ``name`` — no shapes, but the kernel's name says what it is (a GEMM tile ``256x128``, an elementwise
  ``vectorized_elementwise_kernel<4, ...>``) and its launch grid bounds the elements it touches: for elementwise,
  norm, reduction, copy and optimizer kernels ``bytes ≈ threads × vector width × bytes per element × 2`` (one read,
  one write), and for GEMM tiles ``flops ≈ 2 · tiles · tile_m · tile_n · K`` with K unknown, estimated from the
  kernel's duration at the card's peak rate (the time model is then compute-bound, as the name says);
- ``category`` — nothing else is known: the model falls back to its category priors (``kdvfs.model.CATEGORY_PRIORS``).

The same formulas size the characterisation zoo (``hw_backend.characterize``), so the activity model is fitted to
and applied on one definition of work.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DTYPE_BYTES", "Work", "WORK_SOURCES", "ATTENTION_TILE", "attention_work", "copy_work", "elementwise_work", "gemm_work",
    "norm_work", "NORM_FORWARD_FLOPS", "ACTIVATION_FLOPS", "OP_RULES", "WINDOW_OPS", "op_rule", "op_work", "reduction_work", "MAX_REDUCTION_FLOPS", "softmax_work", "SOFTMAX_SMEM_BYTES", "work_from_name", "torch_dtype_name", "first_dtype", "MATH_CLASSES",
    "math_class", "writes_constant", "NAME_PEAK_FLOPS", "simt_by_name",
]

log = logging.getLogger(__name__)

MATH_CLASSES = ("tensor16", "tf32", "fp8", "simt")
"""Where a kernel's arithmetic runs: 16-bit tensor cores, tf32 tensor cores, fp8 tensor cores, or the CUDA cores
(SIMT: fp32 GEMMs without tf32, and every elementwise, norm, reduction, copy or optimizer kernel)."""


def math_class(category: str, dtype: str | None, tensor: bool | None = None) -> str:
    """The math class of a kernel: tensor cores only for GEMMs and attention in 16-bit, fp8 or tf32."""
    if tensor is False or category not in ("gemm", "attention"):
        return "simt"
    if dtype in ("bf16", "fp16"):
        return "tensor16"
    if dtype in ("tf32", "fp8"):
        return dtype
    return "tensor16" if tensor and dtype is None else "simt"

# cuDNN's legacy implicit-GEMM convolution engines (IMPLICIT_GEMM, PRECOMP_GEMM): ``implicit_convolve_sgemm<__nv_bfloat16,
# ...>`` and ``precomputed_convolve_sgemm<...>`` multiply-add on the CUDA cores ("sgemm": FP32 FMA, whatever the storage
# dtype), where cuDNN's tensor-core kernels are named ``xmma``, ``tensorop``/``s16816``, ``hmma`` or ``gmma``. wav2vec
# 2.0's grouped position convolution runs forward on them (validation/h200/steps11): at batch 16 the zoo's entry of it
# does 5.6 TFLOP/s, 0.6 % of the bf16 tensor peak, where its backward (cutlass tensorop dgrad, xmma wgrad) does 111.
_SIMT_KERNEL = re.compile(r"(?:implicit|precomputed|explicit)_convolve_sgemm")


def simt_by_name(name: str | None) -> bool:
    """Whether a kernel's name says its arithmetic runs on the CUDA cores even where its op and dtype would put it on
    tensor cores (cuDNN's ``*_convolve_sgemm`` convolution engines on bf16 or fp16 data)."""
    return bool(_SIMT_KERNEL.search(name or ""))


WORK_SOURCES = ("shapes", "name", "category")

DTYPE_BYTES: dict[str, int] = {
    "bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp64": 8, "fp8": 1, "int64": 8, "int32": 4, "int8": 1, "bool": 1,
}

# PyTorch's "Input type" strings → our short dtype names
_TORCH_DTYPES = {
    "c10::BFloat16": "bf16", "BFloat16": "bf16", "bfloat16": "bf16", "c10::Half": "fp16", "Half": "fp16",
    "float16": "fp16", "float": "fp32", "Float": "fp32", "float32": "fp32", "double": "fp64", "Double": "fp64",
    "long int": "int64", "Long": "int64", "int64": "int64", "int": "int32", "Int": "int32", "bool": "bool",
    "Bool": "bool", "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "unsigned char": "int8",
    "signed char": "int8",
}


def torch_dtype_name(s: str | None) -> str | None:
    """Our dtype name for a profiler "Input type" or ``torch.dtype`` string (``None`` when unknown)."""
    if not s:
        return None
    s = str(s).replace("torch.", "")
    return _TORCH_DTYPES.get(s)


def first_dtype(types: object, allowed: Sequence[str]) -> str:
    """The first of an op record's "Input type" entries (``torch_dtype_name``) that is one of ``allowed``; else fp32."""
    tl = types if isinstance(types, list) else []
    return next((d for d in (torch_dtype_name(t) if isinstance(t, str) else None for t in tl) if d in allowed),
                None) or "fp32"


@dataclass(frozen=True, slots=True)
class Work:
    """What one invocation of a kernel does.

    Attributes:
        flops: floating-point operations.
        bytes: bytes moved through device memory (each operand read once, each result written once).
        dtype: the arithmetic's dtype (``bf16``, ``fp16``, ``fp32``, ``tf32``); decides the peak rate.
        tensor: whether the arithmetic runs on tensor cores (GEMMs and attention in 16-bit or tf32).
        source: ``shapes``, ``name`` or ``category`` (see the module docstring).
    """

    flops: float
    bytes: float
    dtype: str = "fp32"
    tensor: bool = False
    source: str = "shapes"


def _size(dtype: str) -> int:
    return DTYPE_BYTES.get(dtype, 4)


def gemm_work(m: int, n: int, k: int, dtype: str = "bf16", batch: int = 1, *, bias: bool = False,
              tf32: bool = False, source: str = "shapes") -> Work:
    """C[m,n] = A[m,k] · B[k,n] (``batch`` of them): 2mnk FLOPs, A, B and C each through memory once."""
    s = _size(dtype)
    flops = 2.0 * m * n * k * batch + (m * n * batch if bias else 0)
    nbytes = (m * k + k * n + m * n) * batch * s + (n * s if bias else 0)
    d = "tf32" if (dtype == "fp32" and tf32) else dtype
    return Work(float(flops), float(nbytes), d, d in ("bf16", "fp16", "tf32", "fp8"), source)


ATTENTION_TILE = 128
"""Key-tile width of the fused attention kernels (FlashAttention-2's and cuDNN's sm90 kernels: 128), for the tiles a
causal mask only half fills."""


def attention_work(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, dtype: str = "bf16", *,
                   causal: bool = False, backward: bool = False, source: str = "shapes",
                   kv_heads: int | None = None) -> Work:
    """Fused scaled-dot-product attention (flash / memory-efficient): QKᵀ and PV are 4·b·h·sq·sk·d FLOPs, about half
    of it under a causal mask (``0.5 + ATTENTION_TILE / (2·sk)``: the diagonal's tiles are computed whole); the
    backward recomputes QKᵀ and computes four products, 2.5× the forward (FlashAttention-2 paper's accounting).
    Memory: Q, K, V and O (and dO, dQ, dK, dV in the backward) once each, K and V (and their gradients) with
    ``kv_heads`` heads (grouped-query attention; default ``heads``: Gemma's one KV head for eight query heads was
    priced as eight)."""
    s = _size(dtype)
    hk = heads if kv_heads is None else kv_heads
    # under a causal mask the kernel still computes the whole tiles the diagonal crosses (it masks inside them): about
    # half the score matrix plus half a tile column per row, with FlashAttention's 128-wide key tiles
    causal_share = min(1.0, 0.5 + ATTENTION_TILE / (2.0 * max(seq_k, 1)))
    f = 4.0 * batch * heads * seq_q * seq_k * head_dim * (causal_share if causal else 1.0)
    io = batch * (2 * seq_q * heads + 2 * seq_k * hk) * head_dim * s
    if backward:
        f *= 2.5
        io *= 2
    return Work(f, float(io), dtype, dtype in ("bf16", "fp16"), source)


ACTIVATION_FLOPS: dict[str, float] = {
    "gelu": 8.0, "silu": 4.0, "sigmoid": 4.0, "relu": 1.0,
    "gelu_backward": 14.0, "silu_backward": 9.0, "sigmoid_backward": 3.0, "threshold_backward": 1.0,
}
"""FLOPs per element of ATen's activation functors (an exponential, the error function and a division counted as one
operation each, erf's polynomial as four, so GELU is the zoo's 8 and SiLU and the sigmoid its 4):
``sigmoid`` ``1/(1 + exp(−x))``: negate, exp, add, divide (4); ``silu`` ``x/(1 + exp(−x))`` (4); ``gelu`` (erf form)
``x · 0.5 · (1 + erf(x/√2))``: three multiplies, an add and erf (8); ``relu`` one compare-select. Backward, from the
saved input: ``silu_backward`` recomputes the sigmoid s (4) then ``dy · s · (1 + x · (1 − s))`` (5); ``gelu_backward``
``dy · (Φ(x) + x · φ(x))``: the cdf Φ as the forward's (7 without the product with x), the pdf
``exp(−x²/2) · β`` (4), then multiply, add, multiply (3): 14; ``sigmoid_backward`` from the output y:
``dy · (1 − y) · y`` (3); ReLU's ``threshold_backward`` a compare-select (1). The zoo's entries
(``hw_backend.zoo``: gelu 8, silu 4, sigmoid 4, relu 1) use the forward counts; profiled ops took 1 per element
before, so a step's GELU or SiLU had an eighth or a quarter of the SIMT work the model was fitted with."""
_ACTIVATION_OPS = re.compile(r"aten::(gelu|silu|sigmoid|relu|gelu_backward|silu_backward|sigmoid_backward|"
                             r"threshold_backward)_?$", re.I)


def elementwise_work(numel: int, dtype: str = "bf16", *, inputs: int = 1, outputs: int = 1,
                     flops_per_element: float = 1.0, source: str = "shapes") -> Work:
    """An elementwise op over ``numel`` elements: ``inputs`` reads and ``outputs`` writes of each."""
    return Work(float(numel * flops_per_element), float(numel * (inputs + outputs) * _size(dtype)), dtype, False, source)


MAX_REDUCTION_FLOPS = 3.0
"""Operations per element of a max/min reduction: ATen's ``MaxNanFunctor``/``MinNanFunctor`` propagate NaN,
``(isnan(a) || a > b) ? a : b`` — a NaN test, a comparison and a select, where a sum adds once."""
_MAX_LIKE = re.compile(r"aten::(max|min|amax|amin|argmax|argmin)$", re.I)


def reduction_work(numel: int, out_numel: int, dtype: str = "fp32", source: str = "shapes", *,
                   flops_per_element: float = 1.0) -> Work:
    """A reduction of ``numel`` elements into ``out_numel``: one read of the input, ``flops_per_element`` operations
    per element (1 for a sum; ``MAX_REDUCTION_FLOPS`` for a max or min)."""
    return Work(float(numel * flops_per_element), float((numel + out_numel) * _size(dtype)), dtype, False, source)


NORM_FORWARD_FLOPS = {"layer": 12.0, "rms": 4.0}
"""FLOPs per element of a forward norm, counted from ATen's ``vectorized_layer_norm_kernel`` (layer_norm_kernel.cu;
RMS norm is its ``rms_norm`` template): LayerNorm's Welford update (``delta = x − mean``, the count, its reciprocal,
``mean += delta · r``, ``x − mean``, ``m2 += delta · (x − mean)``: 8) then ``(x − mean) · rstd · γ + β`` (4); RMS norm
accumulates ``x²`` (2) then ``x · rstd · γ`` (2). The zoo measured the two at one shape: RMS norm ran at 3.3 TB/s and
1965 MHz, LayerNorm at 2.5 TB/s and 1890 MHz (both at the cap): the same count for both cannot say that."""


def norm_work(numel: int, dtype: str = "bf16", *, backward: bool = False, source: str = "shapes",
              rms: bool = False, reread: bool = True) -> Work:
    """Layer / RMS / batch norm: reads x, writes y. The backward reads x and dy and writes dx (3 passes), and with
    ``reread`` (the default) reads x and dy a second time (5 passes): ATen's LayerNorm backward runs
    ``layer_norm_grad_input_kernel`` (dy, x → dx) and then ``GammaBetaBackwardCUDAKernel`` (dy, x → dγ, dβ) when the
    affine parameters need gradients (the op's output mask), and its channels-first batch-norm backward
    (``batch_norm_backward_kernel``, one block per channel, Normalization.cuh) first reduces Σdy and Σdy·(x − mean)
    over the channel, then reads dy and x again to write dx — in training always, whatever the mask. ``reread=False``:
    a LayerNorm backward without parameter gradients (3 passes). FLOPs per element: ``NORM_FORWARD_FLOPS`` forward
    (``rms``: RMS norm, else LayerNorm), 12 backward (not split by kind: no backward norm was measured alone)."""
    passes = (5 if reread else 3) if backward else 2
    fpe = 12.0 if backward else NORM_FORWARD_FLOPS["rms" if rms else "layer"]
    return Work(float(numel * fpe), float(numel * passes * _size(dtype)), dtype, False, source)


SOFTMAX_SMEM_BYTES = 48 * 1024
"""PyTorch's softmax keeps a row on chip when it fits in a block's default shared memory (48 KiB; the warp-per-row
kernel for short rows, ``cunn_SoftMaxForwardSmem`` for longer ones); a longer row (a vocabulary's log-softmax in fp32:
32 000 × 4 B) runs ``cunn_SoftMaxForward`` / ``cunn_SoftMaxBackward``, which read it once per pass (ATen SoftMax.cu)."""


def softmax_work(numel: int, dtype: str = "bf16", source: str = "shapes", *, row: int | None = None,
                 backward: bool = False, log: bool = False) -> Work:
    """Softmax (or, ``log``, log-softmax) along the last dimension of ``row`` elements: max, exp, sum, divide (~5 FLOPs
    per element). Forward: one read, one write, or, for a row longer than ``SOFTMAX_SMEM_BYTES``, three reads (max, sum
    of exponentials, output) and one write. Backward: the gradient and the output read, the input's gradient written
    (three accesses), or for a long row: softmax's ``y·(g − Σ g·y)`` reads both twice (the row's dot product, then the
    result): five; log-softmax's ``g − exp(y)·Σ g`` reads only the gradient for its sum: four (counted as five, the
    vocabulary's log-softmax backward ran at 5.06 TB/s, above the H200's 4.8)."""
    long_row = row is not None and row * _size(dtype) > SOFTMAX_SMEM_BYTES
    passes = ((4 if log else 5) if long_row else 3) if backward else (4 if long_row else 2)
    return Work(float(numel * 5), float(numel * passes * _size(dtype)), dtype, False, source)


def copy_work(numel: int, dtype: str = "bf16", *, out_dtype: str | None = None, source: str = "shapes") -> Work:
    """A copy (or cast, or layout change) of ``numel`` elements: one read, one write, no arithmetic."""
    return Work(0.0, float(numel * (_size(dtype) + _size(out_dtype or dtype))), dtype, False, source)


_CONSTANT_WRITE = re.compile(r"FillFunctor|\bMemset\b|fill_kernel|zero_kernel", re.I)


def writes_constant(name: str) -> bool:
    """Whether a GPU kernel (by its name) only writes one repeated value: ATen's ``FillFunctor`` (``fill_``,
    ``zero_``, ``torch.zeros``/``full``) or a memset. Its bytes do not toggle the memory bus (``kdvfs.model``)."""
    return bool(_CONSTANT_WRITE.search(name or ""))


# ---------------------------------------------------------------------- from op shapes (profiler "Input Dims")
def _numel(dims: Sequence[int] | None) -> int:
    if not dims:
        return 0
    return int(math.prod(int(d) for d in dims))


def _shape_list(dims: object) -> list[list[int]]:
    out: list[list[int]] = []
    if not isinstance(dims, list):
        return out
    for d in dims:
        if isinstance(d, list) and all(isinstance(x, int) and x >= 0 for x in d):
            out.append([int(x) for x in d])
        else:
            out.append([])  # scalars, tensor lists, None; a negative size (a corrupt trace) is no shape either
    return out


_GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
             "aten::_addmm_activation")
_ATTN_OPS = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention", re.I)
# the lists' depth: TensorListMetadata<N>, or TensorListScalarListMetadata<scalar_t, N> (ops with a list of scalars,
# such as the foreach AdamW's addcdiv_ and div_ by the bias corrections)
_MULTI_TENSOR = re.compile(r"multi_tensor_apply_kernel<.*?TensorList(?:ScalarList)?Metadata<(?:\w+,\s*)?(\d+)", re.I)
# the functor's template (ATen ForeachFunctors.cuh): <scalar_t, depth, r_args_depth, res_arg_index>: r_args_depth lists
# are read, the result goes to list res_arg_index (0: in place, over a list that was read)
_FOREACH_FUNCTOR = re.compile(r"Functor<[\w:]+,\s*(\d+),\s*(\d+),\s*(\d+)>")
_BMHK = re.compile(r"aten::_(efficient_attention|flash_attention)_(forward|backward)", re.I)
_NORM_OPS = re.compile(r"layer_norm|rms_norm|group_norm|batch_norm", re.I)
_SOFTMAX_OPS = re.compile(r"softmax", re.I)
_REDUCE_OPS = re.compile(r"aten::(sum|mean|max|min|amax|amin|norm|linalg_vector_norm|var|std|all|any|"
                         r"cross_entropy|argmax|_foreach_norm)", re.I)
_COPY_OPS = re.compile(r"aten::(copy_|_to_copy|to|clone|contiguous|cat|index|index_select|embedding|gather|scatter|"
                       r"fill_|zero_|zeros|ones|empty_like|transpose|permute|_reshape_alias|masked_fill)", re.I)
_FOREACH = re.compile(r"_foreach_|_fused_adam", re.I)
_NLL_OPS = re.compile(r"aten::nll_loss", re.I)
_FLOAT_DTYPES = ("bf16", "fp16", "fp32", "fp64", "fp8")
_FILL_OPS = re.compile(r"aten::(fill_|zero_|zeros|ones|full|new_zeros|new_ones|new_full)$", re.I)
# ops whose result is bool whatever their inputs (comparisons, tests, logical ops)
_BOOL_OUT_OPS = re.compile(r"aten::(eq|ne|lt|le|gt|ge|isinf|isnan|isneginf|isposinf|isfinite|logical_\w+|"
                           r"all|any)_?$", re.I)
_CONV_OPS = re.compile(r"aten::(conv|convolution|cudnn_convolution|_convolution|_conv_depthwise2d)", re.I)


def _operand_size(dts: Sequence[str | None], i: int, default: str) -> int:
    """Bytes per element of operand ``i`` (its recorded dtype, else ``default``'s)."""
    d = dts[i] if i < len(dts) else None
    return _size(d or default)


def _stride_of(strides: object, i: int) -> list[int] | None:
    if not isinstance(strides, list) or i >= len(strides) or not isinstance(strides[i], list):
        return None
    st = strides[i]
    return [int(x) for x in st] if all(isinstance(x, int) for x in st) else None


def _distinct(dims: Sequence[int], strides: Sequence[int] | None) -> int:
    """Distinct elements of a tensor view: a dimension of stride 0 (broadcast by ``expand``) adds none."""
    if strides is None or len(strides) != len(dims):
        return _numel(dims)
    return int(math.prod(int(d) for d, st in zip(dims, strides) if st != 0))


# position of ``is_causal`` in each attention op's arguments (PyTorch's native_functions.yaml)
_CAUSAL_ARG = {
    "aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_cudnn_attention_forward": 10, "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_scaled_dot_product_efficient_attention_backward": 11, "aten::_scaled_dot_product_cudnn_attention_backward": 14,
    "aten::_cudnn_attention_backward": 14, "aten::_flash_attention_forward": 7, "aten::_flash_attention_backward": 10,
    "aten::_efficient_attention_forward": 7, "aten::_efficient_attention_backward": 10,
}


OP_RULES = ("gemm", "conv", "attention", "foreach", "norm", "softmax", "nll", "upsample", "pool", "fold", "scatter",
            "reduction", "copy", "fill", "gather", "activation", "elementwise")
"""The rules of ``op_work``, in the order it tries them (``op_rule``): ``upsample``, ``pool``, ``fold`` (im2col,
col2im) and ``scatter`` are ``kdvfs.work_ops``'s; ``elementwise`` is the last branch, an elementwise op over its
largest operand, whatever the op (``activation``: the same with ``ACTIVATION_FLOPS`` per element)."""
_WINDOW_RULE_NAMES = ("upsample", "pool", "fold", "scatter")
WINDOW_OPS = (  # the ops of kdvfs.work_ops's rules (it reads these patterns from here)
    ("upsample", re.compile(r"aten::_?upsample_(linear1d|bilinear2d|trilinear3d|nearest(?:_exact)?[123]d)(_backward)?"
                            r"(?:\.vec)?$", re.I)),
    ("pool", re.compile(r"aten::(avg_pool[123]d|max_pool[123]d(?:_with_indices)?|_?adaptive_(?:avg|max)_pool[123]d)"
                        r"(_backward)?$", re.I)),
    ("fold", re.compile(r"aten::(im2col|col2im)$", re.I)),
    ("scatter", re.compile(r"aten::(scatter_add_?|index_add_?|_index_put_impl_|index_put_?)$", re.I)),
)


def op_rule(op: str) -> str:
    """Which rule of ``op_work`` prices ``op`` (an aten op name, with or without ``aten::``): one of ``OP_RULES``,
    decided by the name alone. ``op_work`` dispatches on it, so a report that groups kernels by rule
    (``simulator.step_breakdown.op_family``) follows the importer without repeating its branch order. A few rules fall
    back within themselves where the record lacks what they need (``copy_`` without the source's dtype, ``gather``
    without its index, ``cat`` without its tensor list: a copy over the largest operand; ``stack`` without it: the
    last branch), and any rule gives ``None`` where the shapes do not say enough."""
    full = op if "::" in op else f"aten::{op}"
    if full in _GEMM_OPS:
        return "gemm"
    for rule, pat in (("conv", _CONV_OPS), ("attention", _ATTN_OPS), ("foreach", _FOREACH), ("norm", _NORM_OPS),
                      ("softmax", _SOFTMAX_OPS), ("nll", _NLL_OPS)):
        if pat.search(full):
            return rule
    for rule, pat in WINDOW_OPS:  # before the reductions: max_pool2d begins like max, index_add_ like index
        if pat.match(full):
            return rule
    if _REDUCE_OPS.search(full):
        return "reduction"
    if full in ("aten::copy_", "aten::cat", "aten::stack"):
        return "copy"
    if _FILL_OPS.search(full):
        return "fill"
    if full in ("aten::gather", "aten::index_select", "aten::embedding"):
        return "gather"
    if _COPY_OPS.search(full):
        return "copy"
    return "activation" if _ACTIVATION_OPS.match(full) else "elementwise"


def _softmax_row(x: Sequence[int], name: str, concrete: object) -> int | None:
    """The length of the dimension a softmax reduces over: its ``dim`` argument (argument 1; 2 for
    ``_softmax_backward_data`` and ``_log_softmax_backward_data``), else the last. SegFormer's loss head takes the
    log-softmax along the 150 classes of [N, 150, 512, 512] (ATen's ``cunn_SpatialSoftMaxForward``), not along 512."""
    if not x:
        return None
    from kdvfs.work_passes import softmax_split  # (it imports this module)

    split = softmax_split(x, name, concrete)  # one reading of the dim argument, shared with the spatial passes
    return split[1] if split is not None else int(x[-1])


def op_work(op: str, dims: object, types: object, *, backward: bool = False, tf32: bool = False,
            autocast_dtype: str | None = None, concrete: object = None, strides: object = None) -> Work | None:
    """Work of one launch of ``op`` from the profiler's ``Input Dims`` and ``Input type`` lists, or ``None`` when the
    op or its shapes are not understood (the caller then falls back to the kernel's name).

    Args:
        op: the aten op name (``aten::addmm``).
        dims: ``args["Input Dims"]`` of the op's event.
        types: ``args["Input type"]``.
        backward: the op runs in the backward pass (attention and norms cost more there).
        tf32: fp32 GEMMs use tf32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``).
        autocast_dtype: dtype the op computes in when its inputs are fp32 under autocast, if known.
        concrete: ``args["Concrete Inputs"]`` (scalar arguments as strings): gives attention's ``is_causal``.
        strides: ``args["Input Strides"]``: an operand broadcast along a dimension (stride 0, an ``expand``) is read
            once per distinct element, not once per element of its shape; a ``copy_`` between operands of different
            strides moves what ``kdvfs.work_copies.copy_traffic`` says reaches DRAM.
    """
    shapes = _shape_list(dims)
    tl = types if isinstance(types, list) else []
    dts = [torch_dtype_name(t) if isinstance(t, str) else None for t in tl]
    tensor_dt = next((d for d in dts if d in ("bf16", "fp16", "fp32", "fp64", "fp8")), None) or "fp32"
    dt = tensor_dt
    if not shapes:
        return None
    name = op.split("::")[-1] if "::" in op else op
    full = op if "::" in op else f"aten::{op}"
    rule = op_rule(full)
    if rule == "gemm":
        return _gemm_from(full, shapes, dt, tf32)
    if rule == "conv":
        return _conv_from(shapes, dt, tf32, full, concrete)
    if rule == "attention":
        bwd = backward or "backward" in name
        qi = 1 if bwd and "backward" in name else 0  # backward ops take grad_out first
        if len(shapes) < qi + 2:
            return None
        q, k = shapes[qi], shapes[qi + 1]
        if len(q) != 4 or len(k) != 4:
            return None
        b, h, sq, d = q
        sk = k[2]
        if _BMHK.search(full):  # the memory-efficient and flash kernels' own ops take (batch, seq, heads, dim)
            b, sq, h, d = q
            sk = k[1]
        ci = _CAUSAL_ARG.get(full)
        conc = concrete if isinstance(concrete, list) else []
        causal = ci is not None and ci < len(conc) and str(conc[ci]) == "True"
        # K's heads as stored: fewer than Q's under grouped-query attention, also when expanded to Q's (stride 0)
        hk = _distinct(k, _stride_of(strides, qi + 1)) // max(1, b * sk * d)
        return attention_work(b, h, sq, sk, d, dt, causal=causal, backward=bwd, kv_heads=max(1, min(h, hk)))
    if rule == "foreach":
        n = sum(_numel(s) for s in shapes[:1]) if shapes else 0
        lists = [s for s in (dims if isinstance(dims, list) else []) if isinstance(s, list) and s and
                 all(isinstance(x, list) for x in s)]
        if lists:  # a tensor list: its first list holds every parameter's shape
            n = sum(_numel(s) for s in lists[0])
            n_lists = len(lists)
        else:
            n_lists = max(1, len([s for s in shapes if s]))
        if n == 0:
            return None
        # AdamW touches param, grad, exp_avg, exp_avg_sq (read all, write three), ~12 FLOPs per element
        adam = "adam" in full.lower()
        return Work(float(n * (12 if adam else 1)), float(n * (7 if adam else n_lists + 1) * _size(dt)), dt, False, "shapes")
    if rule == "norm":
        bwd = backward or "backward" in name
        if "group_norm" in full:  # (native_)group_norm(_backward): the passes of its own kernels
            from kdvfs.work_passes import group_norm_input_grad, group_norm_work

            return group_norm_work(_numel(shapes[0]), dt, backward=bwd, input_grad=group_norm_input_grad(full, concrete))
        return norm_work(_numel(shapes[0]), dt, backward=bwd, rms="rms" in name.lower(),
                         reread=not bwd or _norm_rereads(full, concrete))
    if rule == "softmax":
        from kdvfs.work_passes import softmax_split, spatial_softmax_work

        outer_dim_inner = softmax_split(shapes[0], name, concrete)
        if outer_dim_inner is not None and outer_dim_inner[2] > 1:  # not along the last dimension: the spatial kernels
            return spatial_softmax_work(*outer_dim_inner, dt, backward=backward or "backward" in name,
                                        log="log_softmax" in name)
        return softmax_work(_numel(shapes[0]), dt, row=_softmax_row(shapes[0], name, concrete),
                            backward=backward or "backward" in name, log="log_softmax" in name)
    if rule == "nll":
        # nll_loss reads one element per target (the target's class), not the whole [N, C] input; the backward
        # writes one element per target into a gradient a fill_ zeroed before
        ti = 2 if "backward" in name else 1
        n = _numel(shapes[ti]) if len(shapes) > ti and shapes[ti] else 0
        return Work(float(n), float(n * (_size(dt) + _operand_size(dts, ti, "int64"))), dt, False, "shapes") if n else None
    if rule in _WINDOW_RULE_NAMES:  # kdvfs.work_ops: upsampling, pooling windows, im2col/col2im, scatter-adds
        from kdvfs.work_ops import window_op_work

        return window_op_work(rule, full, shapes, dts, dt, concrete, strides)
    if rule == "reduction":
        n = _numel(shapes[0])  # the input read at its own dtype (a bool mask is one byte), the results written
        fpe = MAX_REDUCTION_FLOPS if _MAX_LIKE.match(full) else 1.0
        out = DTYPE_BYTES["bool"] if _BOOL_OUT_OPS.search(full) else _size(dt)  # all(), any(): a bool result
        return Work(float(n * fpe), float(n * _operand_size(dts, 0, dt) + _reduced_numel(shapes[0], concrete) * out),
                    dt, False, "shapes")
    if rule == "copy" and full == "aten::copy_" and len(dts) >= 2:  # copy_(dst, src): a cast when the dtypes differ
        n = _numel(shapes[0])
        st_dst, st_src = _stride_of(strides, 0), _stride_of(strides, 1)
        if n and st_dst is not None and st_src is not None and len(shapes) > 1 and shapes[1] == shapes[0]:
            # both operands' strides recorded: what the copy moves through DRAM from them (kdvfs.work_copies; a
            # layout change whose lines leave L2 before their neighbours are read moves whole sectors)
            from kdvfs.work_copies import copy_traffic, copy_traffic_work

            tr = copy_traffic(shapes[0], st_dst, st_src, dts[0] or dt, dts[1] or dt)
            if tr is not None:
                return copy_traffic_work(tr, dts[1] or dt)
        return copy_work(n, dts[1] or dt, out_dtype=dts[0] or dt) if n else None
    if rule == "copy" and full in ("aten::cat", "aten::stack") and isinstance(dims, list) and dims and isinstance(dims[0], list) \
            and dims[0] and all(isinstance(x, list) for x in dims[0]):
        n = sum(_numel(x) for x in dims[0])  # a tensor list: every input read once, the result written once
        return copy_work(n, dt) if n else None
    if rule == "fill":  # writes its output, reads nothing (the zoo's fill is priced so too)
        n = _numel(shapes[0])
        return Work(0.0, float(n * _operand_size(dts, 0, dt)), dt, False, "shapes") if n else None
    if rule == "gather" and full != "aten::gather":  # index_select, embedding: the selected slices (kdvfs.work_ops)
        from kdvfs.work_ops import row_gather_work

        w = row_gather_work(full, shapes, dts, dt, concrete)
        if w is not None:
            return Work(w.flops, w.bytes, w.dtype, w.tensor, "shapes")
    if rule == "gather" and full == "aten::gather" and len(shapes) > 2 and shapes[2]:
        # gather(self, dim, index): one element of self read and one written per index element (not all of self);
        # the index itself read once per distinct element (an embedding's index is expanded along the hidden size)
        n = _numel(shapes[2])
        idx = _distinct(shapes[2], _stride_of(strides, 2)) * _operand_size(dts, 2, "int64")
        return Work(0.0, float(n * 2 * _size(dt) + idx), dt, False, "shapes")
    if rule in ("copy", "gather") and _COPY_OPS.search(full):  # (``stack`` without its tensor list: the last branch)
        n = max((_numel(s) for s in shapes), default=0)
        return copy_work(n, dt) if n else None
    # anything else that takes tensors: an elementwise op over its largest operand, reading each tensor input once
    # (each at its own dtype: a dropout mask or a where's condition is bool; a broadcast operand once per distinct
    # element) and writing the result (bool for a predicate such as isneginf or eq)
    sizes = [_numel(s) for s in shapes if s]
    if not sizes:
        return None
    n = max(sizes)
    read = sum(_distinct(s, _stride_of(strides, i)) * _operand_size(dts, i, dt) for i, s in enumerate(shapes) if s)
    # the result takes the promoted dtype of the tensor operands: bf16 × fp32 (RoPE's q · cos) writes fp32
    floats = [_size(d) for i, d in enumerate(dts) if d in _FLOAT_DTYPES and i < len(shapes) and shapes[i]]
    out = DTYPE_BYTES["bool"] if _BOOL_OUT_OPS.search(full) else max(floats, default=_size(dt))
    act = _ACTIVATION_OPS.match(full)  # an activation's functor does more than one operation per element
    fpe = ACTIVATION_FLOPS[act.group(1).lower()] if act else 1.0
    return Work(float(n * fpe), float(read + n * out), dt, False, "shapes")


def _reduced_numel(x: Sequence[int], concrete: object) -> int:
    """Elements a reduction writes: its input's less the dimensions it reduces over, from the dimension list it
    recorded (``sum``/``mean``/``amax``'s argument 1: a global average pooling ``mean(x, [-1, -2])`` of an N × C × H × W
    input writes N × C), else one (a full reduction)."""
    conc = concrete if isinstance(concrete, list) else []
    dims = _int_list(conc[1]) if len(conc) > 1 else None
    if not dims or not x:
        return 1
    nd = len(x)
    red = {d % nd for d in dims if -nd <= d < nd}
    return max(1, int(math.prod(int(s) for i, s in enumerate(x) if i not in red)))


def _norm_rereads(op: str, concrete: object) -> bool:
    """Whether a norm's backward reads x and dy a second time (``norm_work``'s ``reread``): a batch norm's in training
    (``native_batch_norm_backward``'s ``train``, argument 7), a layer or group norm's where its output mask asks for
    the weight's or the bias's gradient (``native_layer_norm_backward``'s argument 7, ``native_group_norm_backward``'s
    9). Unrecorded arguments: yes (training with affine parameters, the usual case)."""
    conc = concrete if isinstance(concrete, list) else []
    if re.search(r"_(reduce|elemt)$", op):  # the channels-last / SyncBN backward's two ops: one pass each, as before
        return False
    if "batch_norm" in op:
        return not (len(conc) > 7 and str(conc[7]).strip() == "False")
    flags = _output_mask(conc, 9 if "group_norm" in op else 7)
    return len(flags) < 3 or flags[1] or flags[2]


def _output_mask(concrete: object, i: int) -> list[bool]:
    """A backward op's output mask, argument ``i`` as the profiler records it (``"[True, False, True]"``): which
    gradients it computes; empty where it is not recorded."""
    conc = concrete if isinstance(concrete, list) else []
    mask = str(conc[i]) if len(conc) > i else ""
    return [m.strip() == "True" for m in mask.strip("[]").split(",")] if mask.strip("[]") else []


def _gemm_from(op: str, shapes: list[list[int]], dt: str, tf32: bool) -> Work | None:
    try:
        if op == "aten::linear":
            x, w = shapes[0], shapes[1]
            m, k = _numel(x[:-1]), x[-1]
            return gemm_work(m, w[0], k, dt, bias=len(shapes) > 2 and bool(shapes[2]), tf32=tf32)
        if op in ("aten::addmm", "aten::_addmm_activation"):
            a, b = shapes[1], shapes[2]
            return gemm_work(a[0], b[1], a[1], dt, bias=True, tf32=tf32)
        if op == "aten::mm":
            a, b = shapes[0], shapes[1]
            return gemm_work(a[0], b[1], a[1], dt, tf32=tf32)
        if op in ("aten::bmm", "aten::baddbmm"):
            a, b = (shapes[1], shapes[2]) if op == "aten::baddbmm" else (shapes[0], shapes[1])
            return gemm_work(a[1], b[2], a[2], dt, batch=a[0], tf32=tf32)
        if op == "aten::matmul":
            a, b = shapes[0], shapes[1]
            if len(a) >= 2 and len(b) >= 2:
                batch = _numel(a[:-2]) or 1
                return gemm_work(a[-2], b[-1], a[-1], dt, batch=batch, tf32=tf32)
            return None
    except (IndexError, TypeError):
        return None
    return None


# positions of (stride, padding, dilation) in each convolution op's arguments (PyTorch's native_functions.yaml)
_CONV_ARGS = {"aten::conv1d": (3, 4, 5), "aten::conv2d": (3, 4, 5), "aten::conv3d": (3, 4, 5),
              "aten::convolution": (3, 4, 5), "aten::_convolution": (3, 4, 5), "aten::cudnn_convolution": (3, 2, 4),
              "aten::_conv_depthwise2d": (4, 5, 6)}
# (``_conv_depthwise2d(self, weight, kernel_size, bias, stride, padding, dilation)`` is the innermost op of ATen's
# depthwise convolutions, the one their kernels are joined to: unmatched, it was priced as an elementwise op, one FLOP
# per input element, 2k² times too few, and the input read twice)


def _int_list(v: object) -> list[int] | None:
    """``"[16, 16]"`` (a profiler's concrete input) as ``[16, 16]``; None where it is not such a list."""
    try:
        out = json.loads(v) if isinstance(v, str) else None
    except ValueError:
        return None
    return [int(x) for x in out] if isinstance(out, list) and all(isinstance(x, int) for x in out) else None


def _conv_out(x: list[int], w: list[int], op: str, concrete: object) -> list[int]:
    """The output's spatial sizes: from the stride, padding and dilation the op recorded (a ViT's patch embedding
    has stride 16: its output is 14 × 14, not 224 × 224), else the input's (stride 1, same padding)."""
    pos = _CONV_ARGS.get(op)
    conc = concrete if isinstance(concrete, list) else []
    if pos is not None and max(pos) < len(conc):
        st, pad, dil = (_int_list(conc[i]) for i in pos)
        nd = len(x) - 2
        # a stride or dilation of 0 (a corrupt trace) divided by zero: such a record is no stride, as a missing one
        if st and pad and dil and len(st) == len(pad) == len(dil) == nd and min(st + dil) > 0 and min(pad) >= 0:
            return [max(1, (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // st[i] + 1) for i in range(nd)]
    return list(x[2:])


def _conv_from(shapes: list[list[int]], dt: str, tf32: bool, op: str = "", concrete: object = None) -> Work | None:
    """Direct convolution: 2 · N · Cout · Hout · Wout · Cin/groups · kH · kW (the output's size from the recorded
    stride and padding, ``_conv_out``). ``convolution_backward`` (grad_output, input, weight, …, output_mask) computes
    that once for the input's gradient and once for the weight's, each only where its output_mask asks for it."""
    d = "tf32" if (dt == "fp32" and tf32) else dt
    try:
        if "backward" in op:
            g, x, w = shapes[0], shapes[1], shapes[2]
            mask = concrete[10] if isinstance(concrete, list) and len(concrete) > 10 else ""
            want = [str(m).strip() == "True" for m in str(mask).strip("[]").split(",")] if mask else [True, True]
            passes = int(want[0]) + int(len(want) > 1 and want[1])
            flops = 2.0 * g[0] * g[1] * _numel(g[2:]) * _numel(w[1:]) * passes
            # each gradient is its own kernel and reads grad_output: the input's reads the weight and writes dx, the
            # weight's reads the input and writes dw (ATen's depthwise backward_kernel and grad_weight_kernel, cuDNN's
            # dgrad and wgrad)
            want_w = len(want) > 1 and want[1]
            nbytes = (want[0] * (_numel(g) + _numel(w) + _numel(x))
                      + want_w * (_numel(g) + _numel(x) + _numel(w))) * _size(dt)
            return Work(flops, float(nbytes), d, d in ("bf16", "fp16", "tf32"), "shapes")
        x, w = shapes[0], shapes[1]
        spatial_out = _numel(_conv_out(x, w, op, concrete))
        flops = 2.0 * x[0] * w[0] * spatial_out * _numel(w[1:])
        nbytes = (_numel(x) + _numel(w) + x[0] * w[0] * spatial_out) * _size(dt)
    except (IndexError, TypeError):
        return None
    return Work(flops, float(nbytes), d, d in ("bf16", "fp16", "tf32"), "shapes")


# ---------------------------------------------------------------------- from the kernel's name and grid
_TILE = re.compile(r"(\d{2,3})x(\d{2,3})(?:x(\d{2,3}))?")
# elements per thread: vectorized_elementwise_kernel<vec_size, ...>, but elementwise_kernel<nt, vt, ...> (threads per
# block, then items per thread: ATen's CUDALoops.cuh); reading nt there priced elementwise_kernel<128, 2> at 64×
_VEC = re.compile(r"vectorized_elementwise_kernel<(\d+)|(?<!vectorized_)elementwise_kernel<\d+,\s*(\d+)")
_NAME_DTYPE = (("bf16", re.compile(r"bf16|bfloat16|BFloat16", re.I)), ("fp16", re.compile(r"f16|half|fp16", re.I)),
               ("tf32", re.compile(r"tf32", re.I)), ("fp32", re.compile(r"f32|float|sgemm", re.I)))


def _name_dtype(name: str, category: str = "") -> str:
    for d, pat in _NAME_DTYPE:
        if pat.search(name):
            return d
    # cuBLAS's nvjet / cuDNN's sdpa names do not always say; in LLM training they are bf16
    return "bf16" if category in ("gemm", "attention") else "fp32"


def work_from_name(name: str, category: str, grid: Sequence[int] | None, block: Sequence[int] | None,
                   time_s: float, *, peak_flops: Mapping[str, float] | None = None) -> Work | None:
    """A documented estimate of a kernel's work from its name and launch grid, or ``None`` when it gives nothing.

    GEMM and attention kernels: compute-bound by their name; FLOPs are what the kernel's duration allows at 70 % of
    the dtype's peak rate (``peak_flops``, FLOP/s); bytes the compulsory traffic of the cube GEMM with those FLOPs
    (3 n² elements for 2 n³ FLOPs), the least such a GEMM moves. On the H200 steps recorded with shapes this gives
    0.55–0.95× the shapes' bytes (time-weighted) where the earlier "a fortieth of the FLOPs" gave 13–133×, which
    maxed out the memory-traffic power of every shape-less GEMM. Memory-bound categories: the launch's threads × the vector width
    (from ``elementwise_kernel<N``, else 4) elements, read and written once in the name's dtype.
    """
    dt = _name_dtype(name, category)
    if any(not (isinstance(x, numbers.Real) and x >= 0) for x in (*(grid or ()), *(block or ()))):
        return None  # a negative or non-integer launch size (a corrupt trace) says nothing: priced as unknown
    if category in ("gemm", "attention"):
        if not peak_flops:
            return None
        simt = simt_by_name(name)  # a convolve_sgemm engine: its peak is the CUDA cores' (fp32), not the tensor cores'
        rate = peak_flops.get("fp32" if simt else dt) or peak_flops.get("bf16")
        if not rate:
            return None
        flops = rate * time_s * 0.7  # a named tile GEMM reaches ~70 % of peak (the zoo's large GEMMs: 65–80 %)
        # the compulsory traffic of the cube GEMM with those FLOPs (n³ multiply-adds: A, B read and C written once, n²
        # elements each): the least a GEMM of that size moves; a rectangular one moves up to ~2× more
        n = (flops / 2.0) ** (1.0 / 3.0)
        return Work(flops, 3.0 * n * n * _size(dt), dt, dt in ("bf16", "fp16", "tf32") and not simt, "name")
    mt = _MULTI_TENSOR.search(name)
    if mt and grid:
        # PyTorch's multi_tensor_apply (the foreach optimizer ops, whose tensor-list shapes the profiler does not
        # record): each block walks one chunk of kChunkSize = 65536 elements (ATen's MultiTensorApply.cuh) of the
        # N = depth tensor lists, reading the functor's r_args_depth of them (all N where its name does not say) and
        # writing one: an out-of-place op (``_foreach_sqrt``: UnaryOpFunctor<float, 2, 1, 1>) reads one list of two
        depth = int(mt.group(1))
        fn = _FOREACH_FUNCTOR.search(name, mt.end())
        reads = min(depth, int(fn.group(2))) if fn and int(fn.group(2)) > 0 else depth
        numel = _numel(list(grid)) * 65536
        return Work(float(numel * depth), float(numel * (reads + 1) * _size(dt)), dt, False, "name")
    if category in ("elementwise", "norm", "reduction", "copy", "optimizer") and grid and block:
        threads = _numel(list(grid)) * _numel(list(block))
        m = _VEC.search(name)
        vec = int(next(g for g in m.groups() if g)) if m else 4
        numel = threads * vec
        return Work(float(numel), float(numel * 2 * _size(dt)), dt, False, "name")
    return None


# ---------------------------------------------------------------------- peak rates for the name estimates
# Peak rates used only to turn a named GEMM's duration into FLOPs when its shapes were not recorded (H100/H200 SXM
# dense datasheet values; the estimate says "compute-bound at 70 % of peak", whatever the card)
NAME_PEAK_FLOPS = {"bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12, "fp8": 1978.9e12}
