"""Arrays inside frozen values: copied and read-only at construction, so that a frozen value is frozen all through
(``s.core_mhz[0] = 1234`` raises instead of silently changing a schedule someone else holds)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["frozen_array"]


def frozen_array(a: Any, dtype: Any = None) -> np.ndarray:
    """``a`` as a read-only array no other reference can write to.

    An array that is already read-only and owns its data is shared as it is (values built from values copy nothing
    twice); anything else (a list, a writeable array, a view of one) is copied first.
    """
    if isinstance(a, np.ndarray):
        if (dtype is None or a.dtype == dtype) and not a.flags.writeable and a.flags.owndata:
            return a
        arr = np.array(a, dtype=dtype, copy=True)
    else:
        arr = np.array(a, dtype=dtype)  # from a list or scalar: a fresh array nobody else holds
    arr.setflags(write=False)
    return arr
