"""Errors kdvfs raises.

The hierarchy is kept shallow:

- ``KdvfsError`` — base of everything below.
  - ``InputError`` — bad input from a user: a file, a name, a value. The command line prints the message and exits 2.
    - ``FormatError`` — a trace, profile, schedule or sweep file that cannot be read or fails validation.
    - ``UnsupportedClockError`` — a clock setting the GPU does not support.
    - ``InfeasibleError`` — a time bound no schedule can meet.
  - ``HardwareError`` — the GPU or its driver said no (translated once from NVML in ``hw_backend.nvml``).
    - ``PermissionDeniedError`` — the caller may not change clocks.
    - ``ObserveOnlyError`` — a write was attempted on an observe-only backend.
    - ``NoGpuError`` — there is no usable GPU (or no NVML, or no torch with CUDA).

Every message names the thing, the rule, the bad value and the fix.
"""

from __future__ import annotations

__all__ = [
    "FormatError",
    "HardwareError",
    "InfeasibleError",
    "InputError",
    "KdvfsError",
    "NoGpuError",
    "ObserveOnlyError",
    "PermissionDeniedError",
    "UnsupportedClockError",
]


class KdvfsError(Exception):
    """Base of all kdvfs errors."""


class InputError(KdvfsError, ValueError):
    """Bad input from a user; the command line exits with status 2."""


class FormatError(InputError):
    """A file that cannot be read or does not validate."""


class UnsupportedClockError(InputError):
    """A clock setting the GPU does not support."""


class InfeasibleError(InputError):
    """A bound no schedule can meet."""


class HardwareError(KdvfsError, RuntimeError):
    """The GPU or its driver refused or failed."""


class PermissionDeniedError(HardwareError):
    """Changing clocks needs privileges the process does not have."""


class ObserveOnlyError(HardwareError):
    """A write was attempted on an observe-only backend."""


class NoGpuError(HardwareError):
    """No usable GPU, NVML or CUDA-enabled torch."""
