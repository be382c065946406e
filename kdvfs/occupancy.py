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
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["SM_COUNT", "direct_convolution", "sm_fraction", "sm_fractions"]

# Streaming multiprocessors per card (vendor whitepapers / datasheets; the same table as kdvfs.scaling.SM_COUNT, kept
# here because the model imports this module and kdvfs.scaling imports the model)
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


# cuDNN's direct (depthwise) convolution kernels on the CUDA cores, as the recorded steps name them (ConvNeXt-T's 7×7
# depthwise convolutions, validation/h200/steps7): conv2d_c1_k1_nhwc_specialized (forward), dgrad2d_c1_k1_nhwc_…
# (input gradient), wgrad2d_c1_k1_nhwc (weight gradient); not their ``_reduce`` helper (a reduction of partial sums)
_DIRECT_CONV = re.compile(r"^(?:void\s+)?(?:conv|dgrad|wgrad)[123]d_c\d+_k\d+(?!.*_reduce)")


def direct_convolution(name: str) -> bool:
    """Whether a kernel is a direct convolution on the CUDA cores (its FLOPs are dot-product multiply-adds)."""
    return bool(_DIRECT_CONV.match(name or ""))
