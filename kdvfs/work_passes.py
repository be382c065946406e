"""The passes over global memory that some ops' kernels make beyond reading each input once and writing each result
once: the spatial softmax, group norm, and cuDNN's layout conversions around a convolution.

Each formula counts what the kernel's own code does (PyTorch 2.x ``aten/src/ATen/native/cuda/``; cuDNN's conversion
kernels from the names and launch grids the traces record). Nothing is fitted. Session 11's ``step-ops`` zoo set
(``validation/h200/characterization/characterization16.json.gz``) measured these ops alone and the bundled fit read
them 13–29 % low in power at the right clock; the work had counted one read and one write
(``validation/h200/work12/README.md``, "Session 12, second part"). Kept apart from ``kdvfs.work`` for length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kdvfs.work import NORM_FORWARD_FLOPS, Work, _output_mask, _size
from kdvfs.work_copies import layout_copy_traffic

__all__ = ["L2_BYTES_MAX", "L2_EDGE_EXP", "RESIDENT_BLOCKS_MIN", "SMS", "THREADS_PER_SM", "group_norm_input_grad",
           "group_norm_work", "layout_copy_bytes", "layout_direction", "layout_tiles", "softmax_split",
           "spatial_softmax_block", "spatial_softmax_reread_share", "spatial_softmax_resident_bytes",
           "spatial_softmax_spills", "spatial_softmax_work"]

L2_BYTES_MAX = 50 * 2**20
"""The largest L2 of the cards the project models: H100 and H200 report ``l2CacheSize`` = 50 MiB (A100: 40 MiB). A
re-read within a kernel is counted as a pass over device memory only where the data the resident blocks hold between
the two reads is larger than this, so that no pass is counted that might have come from L2 (conservative)."""

RESIDENT_BLOCKS_MIN = 108
"""The fewest 1024-thread blocks the modelled cards hold at once: one per SM of the smallest (A100: 108 SMs; H100
and H200: 132 SMs, two each). The H200 ran characterization16's spatial log-softmax as a [2, 256] grid of
[1, 1024] blocks, 264 resident (two per SM): 2.6 times this bound."""

SMS = 132
"""Streaming multiprocessors of the H100 and H200 (``kdvfs.occupancy.SM_COUNT``): the work estimates are the
H200's."""

THREADS_PER_SM = 2048
"""Resident threads an SM of compute capability 8.0–9.0 holds: two of the spatial softmax's 1024-thread blocks (30–32
registers a thread, no shared memory: characterization16/17's launch records)."""

L2_EDGE_EXP = 4.0
"""The steepness of the L2's edge: the share of a working set ``ws`` that comes from device memory is
``1 / (1 + (L2 / ws)^4)``, the curve ``kdvfs.model.dram_fraction`` gives every kernel (there with the fit's L2 size,
47.8 MB, here with the card's own 50 MiB: the work estimates do not depend on a fit)."""


def spatial_softmax_block(dim: int, inner: int) -> tuple[int, int]:
    """ATen's block for the spatial softmax (``SpatialSoftMax_getBlockSize``): ``(dim_threads, inner_threads)``,
    ``inner_threads = min(inner, 1024)`` positions of the inner dimensions, and ``dim_threads`` > 1 (the largest power
    of two with ``inner_threads · dim_threads ≤ 1024`` and ``≤ dim``) only where ``inner ≤ 64`` and ``dim ≥ 64``."""
    it = max(1, min(int(inner), 1024))
    dt = 1
    if it <= 64 and dim >= 64:
        while it * dt * 2 <= 1024 and dt * 2 <= dim:
            dt *= 2
    return dt, it


def spatial_softmax_resident_bytes(outer: int, dim: int, inner: int, element_bytes: float) -> float:
    """The bytes the resident blocks of ``cunn_SpatialSoftMaxForward``/``Backward`` hold between two passes over their
    columns: ``positions × dim × element_bytes`` (``element_bytes``: the bytes of every tensor one iteration reads or
    writes at one index, e.g. input and output). ATen sizes the grid to the blocks the card holds at once
    (``SpatialSoftMax_getGridSize``) and each block walks its ``inner_threads`` positions' ``dim`` elements once per
    pass, at a stride of ``inner`` elements, staging nothing in shared memory; the card holds
    ``THREADS_PER_SM // threads per block`` blocks per SM: ``positions = min(outer · inner, SMS · blocks per SM ·
    inner_threads)``. characterization17's [32, 19, 512²] fp32 forward: 264 × 1024 × 19 × (4 + 4) B = 41 MB;
    [16, 150, 256²] bf16: 264 × 1024 × 150 × (2 + 2) B = 162 MB; characterization16's [16, 150, 512²] fp32: 324 MB."""
    dt, it = spatial_softmax_block(dim, inner)
    per_sm = max(1, min(32, THREADS_PER_SM // (dt * it)))
    positions = min(int(outer) * int(inner), SMS * per_sm * it)
    return float(positions) * float(dim) * float(element_bytes)


def spatial_softmax_reread_share(outer: int, dim: int, inner: int, dtype: str, *, backward: bool = False) -> float:
    """Session 13's candidate, not used by the model (held-out light-ops3 read it worse than ``spatial_softmax_spills``;
    ``spatial_softmax_work``): the share of a spatial softmax's re-reads that come from device memory: ``1 / (1 + (L2 / ws)^4)``
    (``L2_EDGE_EXP``), ``ws`` the columns the resident blocks hold between two reads of an element
    (``spatial_softmax_resident_bytes``) of every tensor an iteration touches — forward: the input it reads three
    times and the output it writes; backward: the output's gradient it reads twice, the output, and the input's
    gradient it writes. Nothing here is fitted: the L2 is the card's, the curve the model's."""
    ws = spatial_softmax_resident_bytes(outer, dim, inner, (3 if backward else 2) * _size(dtype))
    return 1.0 / (1.0 + (L2_BYTES_MAX / max(ws, 1.0)) ** L2_EDGE_EXP)


def spatial_softmax_spills(outer: int, dim: int, inner: int, dtype: str) -> bool:
    """Whether ``cunn_SpatialSoftMaxForward``/``Backward``'s re-reads go to device memory (session 12's rule, the one
    the model uses).

    ATen launches ``block = (dim_threads, min(inner, 1024))`` (``SpatialSoftMax_getBlockSize``: each ``threadIdx.y``
    one position of the inner dimensions; ``dim_threads`` > 1 only where ``inner ≤ 64`` and ``dim ≥ 64``) and no more
    blocks than the card holds at once (``SpatialSoftMax_getGridSize`` caps the grid at the occupancy's
    ``max_active_blocks``). Each block walks its positions' ``dim`` elements once per pass, at a stride of ``inner``
    elements: nothing is staged in shared memory (only the block's reduction). Between two passes the resident blocks
    hold ``positions × dim`` elements, ``positions = min(outer · inner, RESIDENT_BLOCKS_MIN · min(inner, 1024))``. Where
    that exceeds ``L2_BYTES_MAX`` the second and third pass re-read device memory; otherwise they are counted as hits
    (L1 or L2). SegFormer's loss head, [16, 150, 512, 512] fp32 along the 150 classes: 108 × 1024 × 150 × 4 B = 66 MB
    (164 MB with the 264 blocks the H200 held): spills. At 19 classes (Cityscapes), or in bf16 at 150: counted as
    hits."""
    positions = min(outer * inner, RESIDENT_BLOCKS_MIN * min(inner, 1024))
    return positions * dim * _size(dtype) > L2_BYTES_MAX


def spatial_softmax_work(outer: int, dim: int, inner: int, dtype: str = "fp32", *, backward: bool = False,
                         log: bool = False, source: str = "shapes") -> Work:
    """A softmax (or, ``log``, log-softmax) over a dimension that is not the last: ``outer × dim × inner`` elements,
    reduced along ``dim`` for each of the ``outer · inner`` positions (ATen ``SoftMax.cu``, ``host_softmax`` with
    ``inner_size > 1``: ``cunn_SpatialSoftMaxForward`` and ``cunn_SpatialSoftMaxBackward``).

    Forward: a pass for the maximum, one for the sum of exponentials, one that writes the result (each reads the
    input): 3 reads + 1 write where ``spatial_softmax_spills``, else 1 + 1. Backward: a pass for the sum of the
    output's gradient, then one that reads the gradient and the output and writes the input's gradient: 2 + 1 reads +
    1 write, else 1 + 1 + 1. Softmax (not log) first forms ``tmp = grad · output`` in an elementwise kernel of the same
    op (``softmax_backward_cuda_out``: 2 reads + 1 write, one FLOP) and runs the same kernel on it. FLOPs: 5 per
    element as ``kdvfs.work.softmax_work`` counts.

    Session 13 tried a graded rule instead (1 + 2φ reads forward, (1 + φ) + 1 backward, φ =
    ``spatial_softmax_reread_share``), written after characterization17 had shown this one wrong both ways. The
    held-out set light-ops3 (characterization19 and 19b: seven spatial softmaxes at new shapes on two cards, measured
    before the graded rule was written) read it worse: mean |power error| 10.0 → 12.4 %, its errors moving up on
    both cards (``validation/h200/characterization/check19/``). This rule stays; the graded share is kept for the
    diagnosis (``validation/h200/work13/diagnose.py``) and the next decision."""
    n = outer * dim * inner
    spills = spatial_softmax_spills(outer, dim, inner, dtype)
    if backward:
        passes = 4 if spills else 3
        extra_passes, extra_flops = (0, 0) if log else (3, 1)
        return Work(float(n * (5 + extra_flops)), float(n * (passes + extra_passes) * _size(dtype)), dtype, False,
                    source)
    return Work(float(n * 5), float(n * (4 if spills else 2) * _size(dtype)), dtype, False, source)


def group_norm_work(numel: int, dtype: str = "fp32", *, backward: bool = False, input_grad: bool = True,
                    source: str = "shapes") -> Work:
    """Group norm (``native_group_norm`` and its backward; ATen ``group_norm_kernel.cu``).

    Forward (``GroupNormKernelImplInternal``): ``RowwiseMomentsCUDAKernel`` reads x for each group's mean and rstd,
    ``ComputeFusedParamsCUDAKernel`` turns them and γ, β into a scale and shift per (sample, channel) (N · C values,
    not counted), and an elementwise kernel reads x again and writes y: 3 passes, where ``kdvfs.work.norm_work`` (layer
    and batch norm, whose forward makes one pass) counts 2. As for every other op, whether a re-read comes from L2 is
    left to the model's working-set term (``kdvfs.model.dram_fraction``). Backward
    (``GroupNormBackwardKernelImplInternal``): ``ComputeInternalGradientsCUDAKernel`` reads dy and x (Σ dy·x and Σ dy
    per channel), then, where the input's gradient is asked for (``input_grad``, the output mask's first flag), the
    elementwise kernel reads dy and x and writes dx: 5 passes, else 2; γ's and β's gradients come from the per-channel
    sums (``GammaBetaBackwardCUDAKernel``, N · C values, not counted) and re-read nothing. FLOPs: 12 per element
    forward and backward, as ``norm_work`` counts LayerNorm's (Welford, then the scale and shift)."""
    passes = (5 if input_grad else 2) if backward else 3
    return Work(float(numel * (12.0 if backward else NORM_FORWARD_FLOPS["layer"])), float(numel * passes * _size(dtype)),
                dtype, False, source)


def softmax_split(x: Sequence[int], name: str, concrete: object) -> tuple[int, int, int] | None:
    """(outer, dim, inner) sizes around the dimension a softmax reduces over (``kdvfs.work._softmax_row``'s ``dim`` argument), or
    ``None`` where the argument is not recorded (then the last dimension, as before)."""
    conc = concrete if isinstance(concrete, list) else []
    i = 2 if "backward" in name else 1
    try:
        d = int(str(conc[i]).strip()) if i < len(conc) else None
    except ValueError:
        d = None
    if not x or d is None or not -len(x) <= d < len(x):
        return None
    d %= len(x)
    return (int(math.prod(int(s) for s in x[:d])), int(x[d]), int(math.prod(int(s) for s in x[d + 1:])))


def group_norm_input_grad(op: str, concrete: object) -> bool:
    """Whether ``native_group_norm_backward`` computes the input's gradient: its output mask's first flag (argument 9);
    unrecorded: yes."""
    if "backward" not in op:
        return True
    flags = _output_mask(concrete, 9)
    return not flags or flags[0]


# ----------------------------------------------------------------------------------- cuDNN's layout conversions
# cuDNN runs an NCHW convolution on NHWC kernels and converts around them: cudnn::engines_precompiled::nchwToNhwcKernel
# before (the input, the output's gradient, the weights where their layout differs) and nhwcToNchwKernel after (the
# output, the input's gradient). characterization16's 1 × 1 bf16 convolution forward, [128, 320, 14, 14] to 1280
# channels: nchwToNhwc on grid [7, 10, 128] (16 µs), the GEMM (41 µs), nhwcToNchw on grid [7, 40, 128] (70 µs) — one
# block per 32 × 32 tile of (channels × pixels) of each image: [⌈196/32⌉, ⌈320/32⌉, 128] is the input's, [7, 40, 128]
# the output's.
_TILE = 32


def layout_direction(name: str) -> str | None:
    """``to_nhwc`` or ``to_nchw`` for cuDNN's layout-conversion kernels (by name), else ``None``."""
    if "nchwToNhwc" in name:
        return "to_nhwc"
    if "nhwcToNchw" in name:
        return "to_nchw"
    return None


def layout_tiles(shape: Sequence[int]) -> int:
    """Blocks a conversion kernel launches for a tensor of ``shape`` (N, C, spatial…): N · ⌈C/32⌉ · ⌈Π spatial/32⌉."""
    if len(shape) < 3:
        return 0
    hw = math.prod(int(s) for s in shape[2:])
    return int(shape[0]) * -(-int(shape[1]) // _TILE) * -(-hw // _TILE)


def layout_copy_bytes(grid: Sequence[int] | None, tensors: Sequence[Sequence[int]], dtype: str) -> float | None:
    """Bytes one cuDNN layout-conversion kernel moves: a copy (one read, one write) of the tensor it converts. The
    tensor is the one among ``tensors`` (the op's operands and results, each N, C, spatial…) whose tile count
    (``layout_tiles``) equals the kernel's block count (the product of its ``grid``), and the bytes are what the
    stride rule says its tiled conversion moves through DRAM (``kdvfs.work_copies.layout_copy_traffic``: nothing
    spills, so one read and one write); where none does (a tensor the record does not hold), the grid's own extent,
    32 × 32 elements per block (an upper bound: partial tiles counted whole). ``None`` without a grid."""
    if not grid:
        return None
    blocks = math.prod(int(g) for g in grid)
    if blocks <= 0:
        return None
    for t in tensors:
        if layout_tiles(t) == blocks:
            return layout_copy_traffic(t, dtype).dram_bytes
    return 2.0 * blocks * _TILE * _TILE * _size(dtype)
