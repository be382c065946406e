"""Kernels whose memory traffic exceeds the bytes their work counts, recognised by name (issue 12, session 12).

ATen copies between tensors of different layouts (a transpose made contiguous, channels-last to contiguous) run the
non-vectorised ``elementwise_kernel<…direct_copy_kernel_cuda…>`` of ``gpu_kernel_impl_nocast``: TensorIterator
takes that path when the operands' strides differ. Consecutive threads then read (or write) elements one stride
apart, and each 4-byte access moves a whole 32-byte sector through L2 (and to DRAM where the lines are evicted before
the neighbours are used), so the traffic is several times the useful bytes. Contiguous copies take
``vectorized_elementwise_kernel`` or ``unrolled_elementwise_kernel`` (casts) and are not matched. The zoo measured
three transposes and a channels-last copy of this kind: the bundled fit priced them 8–38 % low
(``validation/h200/lightfit/README.md``).
"""

from __future__ import annotations

import re

__all__ = ["strided_copy", "strided_copies"]

_STRIDED_COPY = re.compile(r"(?<![A-Za-z_])elementwise_kernel<\d+,\s*\d+,\s*at::native::gpu_kernel_impl_nocast<"
                           r"at::native::direct_copy_kernel_cuda")


def strided_copy(name: str) -> bool:
    """Whether a kernel is ATen's copy between operands of different strides (a layout change)."""
    return bool(_STRIDED_COPY.search(name or ""))


def strided_copies(names) -> list[bool]:
    """``strided_copy`` of each name."""
    return [strided_copy(str(n)) for n in names]
