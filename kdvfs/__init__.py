"""kdvfs — kernel-level DVFS for LLM training.

Modules: ``trace`` (Kernel, Segment, Trace and the kdvfs-trace/1 format), ``importers`` (PyTorch profiler traces, the
Spaan et al. table), ``kineto`` (the streaming Kineto reader), ``structure`` (repeats from module units or period
detection), ``runtime_plan`` (regions a training-loop runtime can see, boundary-level schedules), ``analyze`` (a trace
to an answer), ``results`` (docs/results.md from validation/), ``gpus`` (GpuSpec catalog, SwitchModel), ``model`` (kernel time/power with power-cap throttling),
``limiter`` (the card's windowed power limiter: model, ceiling tables, steady state), ``limiter_fit`` (its dynamics
fitted to step responses), ``profile`` (per-kernel × per-setting tables), ``work`` (each kernel's FLOPs and bytes from op shapes, names and
grids), ``kernelwork`` (a profiler trace's kernels joined to their ops' work), ``occupancy`` (a launch's share of the SMs and
of the resident-thread slots, from its grid and block), ``worktable`` (that work and the rates it implies, to check by eye), ``fit`` (fitting sweeps, cross-validation), ``calibrate`` (the per-kernel table and report), ``calibrate_joint`` (the RTX 3080 Ti calibration on the table and the
pass-level sweep), ``calibrate_spaan2026`` (that calibration run: inputs, fit, report, files), ``diagnosis`` (why a calibration gives up
the table's best settings), ``vfshape`` (where the RTX 3080 Ti's energy minima lie along the core clock), ``passweep`` (the study's pass-level sweep, its 66 settings), ``blas`` (single-threaded BLAS), ``calibrate_h200``
(the H200's constants fitted to the characterisation zoo), ``schedule`` (Schedule and its JSON), ``optimize`` (local/global/pass/EDP/switch-aware
optimisers), ``switching`` (switch cost semantics), ``reproduce`` (the study's Table 2), ``executor`` (local/Ray),
``plots``, ``identity`` (which trace a profile, schedule or sweep belongs to: name +
content hash), ``fileio`` (output paths checked first, atomic writes) and ``cli`` (the ``kdvfs`` command). ``simulator`` and ``hw_backend`` are
sibling packages. Importing kdvfs never imports torch or pynvml.
"""

import logging
import typing

from kdvfs.errors import (
    FormatError,
    HardwareError,
    InfeasibleError,
    InputError,
    KdvfsError,
    NoGpuError,
    ObserveOnlyError,
    PermissionDeniedError,
    UnsupportedClockError,
)

if typing.TYPE_CHECKING:
    from kdvfs.gpus import AUTO, GpuSpec, SwitchModel, get_gpu, gpu_names
    from kdvfs.model import KernelParams, default_params, evaluate
    from kdvfs.profile import Profile, build_profile, load_profile, save_profile
    from kdvfs.schedule import Schedule, load_schedule, save_schedule
    from kdvfs.trace import Kernel, Segment, Trace, load_trace, save_trace

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "AUTO", "FormatError", "GpuSpec", "HardwareError", "InfeasibleError", "InputError", "KdvfsError", "Kernel",
    "KernelParams", "NoGpuError", "ObserveOnlyError", "PermissionDeniedError", "Profile", "Schedule", "Segment",
    "SwitchModel", "Trace", "UnsupportedClockError", "build_profile", "default_params", "evaluate", "get_gpu",
    "gpu_names", "load_profile", "load_schedule", "load_trace", "save_profile", "save_schedule", "save_trace",
]

# The rest of the API loads on first use (PEP 562): ``import kdvfs`` then costs no numpy, so that the command line
# (``kdvfs.__main__``) can choose numpy's BLAS threads before numpy starts; ``from kdvfs import Trace`` works as before.
_LAZY = {
    "kdvfs.gpus": ("AUTO", "GpuSpec", "SwitchModel", "get_gpu", "gpu_names"),
    "kdvfs.model": ("KernelParams", "default_params", "evaluate"),
    "kdvfs.profile": ("Profile", "build_profile", "load_profile", "save_profile"),
    "kdvfs.schedule": ("Schedule", "load_schedule", "save_schedule"),
    "kdvfs.trace": ("Kernel", "Segment", "Trace", "load_trace", "save_trace"),
}
_MODULE_OF = {name: mod for mod, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    mod = _MODULE_OF.get(name)
    if mod is None:
        raise AttributeError(f"module 'kdvfs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value  # once: later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
