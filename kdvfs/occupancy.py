"""How many of a card's streaming multiprocessors (SMs) a kernel keeps busy, from its launch grid.

A CUDA launch of ``B`` thread blocks places each block on one SM; the hardware block scheduler spreads a launch's
blocks over the SMs before it stacks a second block on any SM (breadth first), so a launch of ``B`` < ``sms``
blocks keeps ``B`` SMs busy and leaves the rest without a resident block. An SM without a resident block is
clock-gated: it draws no dynamic power beyond what the uncore (L2, crossbar, memory controllers, clock tree) keeps
drawing. Hence the share of SMs busy is ``min(1, B / sms)``.

Only the first wave is counted: the tail of a launch with more blocks than SMs leaves some SMs idle while the last
blocks finish, but how many blocks one SM holds at once depends on the kernel's registers and shared memory, which
traces do not record, so the tail is not estimated (a launch of ``B`` ≥ ``sms`` blocks counts as all SMs busy).

``sm_fraction`` returns ``None`` where the grid is not known (a trace without launch grids, a zoo entry whose grid
is not recorded and not certain); the model then takes all SMs busy (``kdvfs.model.activity_from_work``), which is
what it did before this structure existed.

``thread_occupancy`` is the finer share the bundled H200 model uses (``occ_exp``; ``sm_fraction`` is the structure
``sm-occupancy``, tried and not kept): the first wave's share of the card's resident-thread slots, blocks × threads
per block over ``sms × THREADS_PER_SM``. ``direct_convolution`` names the kernels the ``conv-dot`` switch prices as
dot products (``kdvfs.calibrate_h200.STRUCTURES``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["SM_COUNT", "THREADS_PER_SM", "direct_convolution", "sm_fraction", "sm_fractions", "thread_occupancy",
           "thread_occupancies"]

THREADS_PER_SM = 2048
"""Resident threads one SM holds at most (64 warps: compute capability 8.0 and 9.0, the A100, H100 and H200; CUDA
C++ Programming Guide, "Technical Specifications per Compute Capability")."""

# Streaming multiprocessors per card (vendor whitepapers / datasheets); kdvfs.scaling re-exports it. It lives here,
# not in kdvfs.scaling, because the model imports this module and kdvfs.scaling imports the model.
SM_COUNT = {"rtx3080ti": 80, "ivr": 80, "a100": 108, "h100": 132, "h200": 132, "b200": 148}


def sm_fraction(grid: Sequence[int] | None, block: Sequence[int] | None = None, sms: int = 132) -> float | None:
    """The share of ``sms`` SMs a launch of ``grid`` blocks keeps busy (``min(1, blocks / sms)``), or ``None`` where
    the grid is unknown or not a list of positive integers. ``block`` is accepted for the record and not used: the
    block size decides how many blocks one SM can hold, which matters only for launches of more blocks than SMs,
    and those count as all SMs busy (module docstring)."""
    if not grid:
        return None
    try:
        dims = [int(g) for g in grid]
    except (TypeError, ValueError):
        return None
    if any(d <= 0 for d in dims):
        return None
    blocks = math.prod(dims)
    return min(1.0, blocks / float(sms))


def sm_fractions(grids, sms: int = 132) -> np.ndarray:
    """``sm_fraction`` of each grid as an array, 1 (all SMs busy: the fallback) where a grid is unknown."""
    return np.array([1.0 if (f := sm_fraction(g, None, sms)) is None else f for g in grids], dtype=float)


# Direct (depthwise) convolution kernels on the CUDA cores: cuDNN's, as the recorded steps name them (ConvNeXt-T's
# 7×7 depthwise convolutions, validation/h200/steps7): conv2d_c1_k1_nhwc_specialized (forward), dgrad2d_c1_k1_nhwc_…
# (input gradient), wgrad2d_c1_k1_nhwc (weight gradient), not their ``_reduce`` helper (a reduction of partial sums);
# and ATen's own (aten/src/ATen/native/cuda/DepthwiseConv2d.cu: conv_depthwise2d_forward_kernel…,
# conv_depthwise2d_backward_kernel…, conv_depthwise2d_grad_weight_kernel…; the zoo's dwconv entries)
_DIRECT_CONV = re.compile(r"^(?:void\s+)?(?:conv|dgrad|wgrad)[123]d_c\d+_k\d+(?!.*_reduce)"
                          r"|::conv_depthwise[23]d_(?:forward|backward|grad_weight)_kernel")


def direct_convolution(name: str) -> bool:
    """Whether a kernel is a direct convolution on the CUDA cores (its FLOPs are dot-product multiply-adds)."""
    return bool(_DIRECT_CONV.search(name or ""))


def thread_occupancy(grid: Sequence[int] | None, block: Sequence[int] | None, sms: int = 132,
                     threads_per_sm: int = THREADS_PER_SM) -> float | None:
    """The share of the card's resident-thread slots a launch fills in its first wave: ``min(1, blocks × threads per
    block / (sms × threads_per_sm))``, or ``None`` where the grid or block is unknown. A launch of 512 blocks of 128
    threads (a LayerNorm over 512 rows) fills 24 % of the H200's slots; its SMs hold 4 warps of 64 each, and the
    warp schedulers issue from those alone. Registers and shared memory can hold fewer blocks than this says (the
    traces do not record them), so it is an upper bound of the first wave's residency."""
    f = sm_fraction(grid, None, sms)
    if f is None or not block:
        return None
    try:
        threads = math.prod([int(b) for b in block])
    except (TypeError, ValueError):
        return None
    if threads <= 0:
        return None
    blocks = math.prod([int(g) for g in grid or ()])  # a grid sm_fraction accepted: positive integers
    return min(1.0, blocks * threads / float(sms * threads_per_sm))


def thread_occupancies(grids, blocks, sms: int = 132) -> np.ndarray:
    """``thread_occupancy`` of each launch as an array, 1 (the fallback: a full card) where it is unknown."""
    return np.array([1.0 if (o := thread_occupancy(g, b, sms)) is None else o for g, b in zip(grids, blocks)],
                    dtype=float)
