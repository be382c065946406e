"""Workloads as the sweep and validation see them: units of work that map onto trace kernels.

``SimulatedWorkload`` runs a trace's kernels on ``FakeNvml`` (advancing its simulated time); ``TorchWorkload`` replays
the recorded block's stages on a real GPU (a stage launches the trace kernels labelled ``stage:<name>``; a kernel's
share of its stage's time and energy is its share of the stage's recorded kernel time).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kdvfs.errors import InputError
from kdvfs.trace import Trace, stages_of

__all__ = ["Unit", "Workload", "SimulatedWorkload", "TorchWorkload", "block_step", "stages_of"]


@dataclass(frozen=True, slots=True)
class Unit:
    """Attributes: name; keys of the trace kernels it runs; share of each kernel in its time and energy."""

    name: str
    keys: tuple[str, ...]
    shares: tuple[float, ...]


class Workload(Protocol):
    """What the sweep and live validation drive: units of work measured alone, and whole steps with a callback at
    every boundary (``boundaries`` says which: ``"instance"`` calls ``before(i)`` with the instance index,
    ``"stage"`` calls ``before(name)`` with the stage's name)."""

    boundaries: str

    def units(self) -> list[Unit]: ...

    def unit_time_estimate_s(self, unit: Unit) -> float: ...

    def run_unit(self, unit: Unit, repeats: int = 1) -> None: ...

    def sync(self) -> None: ...

    def clock(self) -> float: ...

    def run_step(self, before: Callable[[Any], None] | None = None) -> None: ...


class SimulatedWorkload:
    """The trace's kernels on a fake GPU: each kernel is its own unit."""

    boundaries = "instance"  # run_step calls back before every instance

    def __init__(self, trace: Trace, fake) -> None:
        self.trace, self.fake = trace, fake
        if fake.params is None or len(fake.params.keys) != len(trace.kernels):
            raise InputError("the fake GPU's kernel params must cover the trace's kernels (build them with "
                             "kdvfs.model.default_params or a fit)")
        self._idx = {k: i for i, k in enumerate(trace.kernel_keys)}

    def units(self) -> list[Unit]:
        return [Unit(k, (k,), (1.0,)) for k in self.trace.kernel_keys]

    def unit_time_estimate_s(self, unit: Unit) -> float:
        return self.trace.kernels[self._idx[unit.keys[0]]].time_s

    def run_unit(self, unit: Unit, repeats: int = 1) -> None:
        self.fake.run_kernel(self._idx[unit.keys[0]], repeats)

    def sync(self) -> None:
        return None

    def clock(self) -> float:
        return self.fake.now_s

    def run_step(self, before: Callable[[int], None] | None = None) -> None:
        """One iteration: every instance in order; ``before(i)`` runs before instance i (clock switching)."""
        for i, k in enumerate(self.trace.instances().tolist()):
            if before is not None:
                before(i)
            self.fake.run_kernel(k, 1)


class TorchWorkload:
    """The recorded transformer block on a real GPU; units are the block's stages."""

    boundaries = "stage"  # run_step calls back at stage boundaries, with the stage's name

    def __init__(self, trace: Trace, precision: str = "bf16", batch: int | None = None, seq: int | None = None) -> None:
        from hw_backend.workloads import BlockConfig, BlockWorkload, require_torch_cuda

        self.trace = trace
        by_stage: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for key, st in zip(trace.kernel_keys, stages_of(trace)):
            by_stage[st].append((key, trace.kernels[trace.kernel_index(key)].time_s))
        self._units = []
        for st, items in by_stage.items():
            tot = sum(t for _, t in items)
            self._units.append(Unit(st, tuple(k for k, _ in items), tuple(t / tot for _, t in items)))
        self.torch = require_torch_cuda()
        self.wl = BlockWorkload(BlockConfig(batch=batch or trace.batch_size or 8, seq=seq or trace.seq_len or 2048,
                                            precision=precision))
        self.wl.step()
        self.wl.prepare()
        self._time = {u.name: sum(trace.kernels[trace.kernel_index(k)].time_s for k in u.keys) for u in self._units}

    def units(self) -> list[Unit]:
        return self._units

    def unit_time_estimate_s(self, unit: Unit) -> float:
        return self._time[unit.name]

    def run_unit(self, unit: Unit, repeats: int = 1) -> None:
        for _ in range(repeats):
            self.wl.run_stage(unit.name)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def clock(self) -> float:
        return time.perf_counter()

    def run_step(self, before: Callable[[str], None] | None = None) -> None:
        """One step; ``before(stage)`` runs at every stage boundary (the switch points of live validation)."""
        block_step(self.wl, before)


def block_step(wl, before: Callable[[str], None] | None = None) -> None:
    """One training step of a ``hw_backend.workloads.BlockWorkload``; ``before(stage)`` runs at every stage boundary
    (each ``kdvfs.op:<stage>`` label), where given."""
    if before is None:
        wl.step()
        return
    labels = wl._label
    at_boundary: Callable[[str], None] = before  # the closure below sees it as set

    class _Hook:
        def __init__(self, name):
            self.name, self.ctx = name, labels(name)

        def __enter__(self):
            if self.name.startswith("kdvfs.op:"):
                at_boundary(self.name[len("kdvfs.op:"):])
            return self.ctx.__enter__()

        def __exit__(self, *exc):
            return self.ctx.__exit__(*exc)

    wl._label = _Hook
    try:
        wl.step(label=True)
    finally:
        wl._label = labels
