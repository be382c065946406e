"""The hardware backend: the ``GpuBackend`` protocol and its implementations.

- ``base`` — ``GpuBackend``, ``Capabilities``, ``ClockGuard`` (restores clocks on every exit path).
- ``nvml`` — ``NvmlBackend`` over nvidia-ml-py (observe-only by default); NVML errors translated once.
- ``fake`` — ``FakeNvml``, a pynvml-shaped fake GPU driven by the kernel model (public, for CI).
- ``measure`` — energy-counter-aligned measurement windows.
- ``workloads`` — the GPT-3-style block in PyTorch (stage replay); ``sim_workload`` — workload units for sweeps;
  ``record`` — one profiled step of the block, imported as a trace (``kdvfs record``).
- ``sweep`` — resumable sweeps, and sparse ones whose rounds ``kdvfs.fit`` chooses; ``validate`` — isolated and live
  validation against the simulator.
- ``safety`` — the sweep output's exclusive lock and the marker for clocks a killed run left locked.
- ``runtime`` — ``ClockRuntime``: applies a schedule inside a training loop from boundary events, writes off the
  training thread; ``torch_runtime`` — ``KdvfsRuntime``, the PyTorch glue (module and optimizer hooks, CUDA events).
- ``characterize`` — the observe-only kernel zoo and limiter step responses (``FakeZoo``; ``zoo_torch.TorchZoo`` on a
  GPU); ``steps`` — real training steps measured observe-only (the block, Hugging Face models from config), their
  modules marked in the recorded step by ``module_ranges``;
  ``ddp`` — a data-parallel step over several GPUs measured observe-only (run under ``torchrun``).
pynvml and torch are imported only where needed.
"""

import logging

from hw_backend.base import Capabilities, ClockGuard, ClockWriter, GpuBackend
from hw_backend.fake import FakeNvml
from hw_backend.measure import WindowResult, measure_window
from hw_backend.nvml import NvmlBackend
from hw_backend.runtime import ClockRuntime, NoopWriter, StepRecord, SwitchRecord
from hw_backend.sim_workload import SimulatedWorkload, TorchWorkload, Unit, Workload

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "Capabilities", "ClockGuard", "ClockRuntime", "ClockWriter", "FakeNvml", "GpuBackend", "NoopWriter", "NvmlBackend",
    "SimulatedWorkload", "StepRecord", "SwitchRecord", "TorchWorkload", "Unit", "WindowResult", "Workload",
    "measure_window",
]
