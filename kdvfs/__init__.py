"""kdvfs — kernel-level DVFS for LLM training.

Modules: ``trace`` (Kernel, Segment, Trace and the kdvfs-trace/1 format), ``importers`` (PyTorch profiler traces, the
Spaan et al. table), ``kineto`` (the streaming Kineto reader), ``structure`` (repeats from module units or period
detection), ``runtime_plan`` (regions a training-loop runtime can see, boundary-level schedules), ``analyze`` (a trace
to an answer), ``results`` (docs/results.md from validation/), ``gpus`` (GpuSpec catalog, SwitchModel), ``model`` (kernel time/power with power-cap throttling),
``limiter`` (the card's windowed power limiter: model, ceiling tables, steady state), ``limiter_fit`` (its dynamics
fitted to step responses), ``profile`` (per-kernel × per-setting tables), ``work`` (each kernel's FLOPs and bytes from op shapes, names and
grids), ``kernelwork`` (a profiler trace's kernels joined to their ops' work), ``worktable`` (that work and the rates it implies, to check by eye), ``fit`` (fitting sweeps, cross-validation), ``calibrate`` (the per-kernel table and report), ``calibrate_joint`` (the RTX 3080 Ti calibration on the table and the
pass-level sweep), ``calibrate_spaan2026`` (that calibration run: inputs, fit, report, files), ``passweep`` (the study's pass-level sweep, its 66 settings), ``blas`` (single-threaded BLAS), ``calibrate_h200``
(the H200's constants fitted to the characterisation zoo), ``schedule`` (Schedule and its JSON), ``optimize`` (local/global/pass/EDP/switch-aware
optimisers), ``switching`` (switch cost semantics), ``reproduce`` (the study's Table 2), ``executor`` (local/Ray),
``plots``, ``identity`` (which trace a profile, schedule or sweep belongs to: name +
content hash), ``fileio`` (output paths checked first, atomic writes) and ``cli`` (the ``kdvfs`` command). ``simulator`` and ``hw_backend`` are
sibling packages. Importing kdvfs never imports torch or pynvml.
"""

import logging

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
