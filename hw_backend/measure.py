"""Measuring a repeated unit of GPU work with the energy counter, the way the study did (long windows).

The energy counter advances in steps (every 100 ms on the H200 read here), so a window is aligned to counter steps: it
opens at the first step seen after warm-up and closes at the first step seen after ``window_s``; work runs in batches
with a synchronisation after each, and the iterations in between are counted. The window lasts at least
``max(window_s, min_steps × step period)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from kdvfs.errors import InputError

__all__ = ["WindowResult", "measure_window"]


@dataclass(frozen=True, slots=True)
class WindowResult:
    """Attributes:
        iterations: units of work completed inside the window.
        time_s: window length.
        energy_j: energy counter difference over the window.
        time_per_iter_s, energy_per_iter_j, power_w: derived.
        counter_steps: how many counter steps the window spans.
        clocks_mhz: (core, mem) samples read during the window (min, max of core; memory seen).
    """

    iterations: int
    time_s: float
    energy_j: float
    counter_steps: int
    core_mhz_min: int
    core_mhz_max: int
    mem_mhz: int

    @property
    def time_per_iter_s(self) -> float:
        return self.time_s / self.iterations

    @property
    def energy_per_iter_j(self) -> float:
        return self.energy_j / self.iterations

    @property
    def power_w(self) -> float:
        return self.energy_j / self.time_s

    def to_dict(self) -> dict:
        return {"iterations": self.iterations, "time_s": self.time_s, "energy_j": self.energy_j,
                "time_per_iter_s": self.time_per_iter_s, "energy_per_iter_j": self.energy_per_iter_j,
                "power_w": self.power_w, "counter_steps": self.counter_steps,
                "core_mhz_min": self.core_mhz_min, "core_mhz_max": self.core_mhz_max, "mem_mhz": self.mem_mhz}


def measure_window(unit: Callable[[], None], sync: Callable[[], None], backend, *, window_s: float = 5.0,
                   warmup_s: float = 1.0, batch: int = 1, min_steps: int = 20, clock: Callable[[], float] = time.perf_counter,
                   max_s: float = 120.0) -> WindowResult:
    """Run ``unit`` repeatedly and measure it over an energy-counter-aligned window.

    Args:
        unit: one unit of work (launches GPU work, need not wait for it).
        sync: waits for the GPU (``torch.cuda.synchronize``; a no-op for simulated work).
        backend: a ``GpuBackend`` (only read from).
        window_s: minimum window length.
        warmup_s: run this long before the window opens.
        batch: units per synchronisation (choose so a batch lasts ~10–20 ms).
        min_steps: the window spans at least this many counter steps.
        clock: seconds (wall clock for real GPUs, simulated time for the fake).
        max_s: give up after this long.
    """
    if window_s <= 0 or batch < 1:
        raise InputError(f"window_s must be > 0 and batch ≥ 1, got {window_s}, {batch}")

    def run_batch() -> None:
        for _ in range(batch):
            unit()
        sync()

    t_start = clock()
    while clock() - t_start < warmup_s:
        run_batch()
    # open at a counter step
    e0 = backend.energy_mj()
    while (e_open := backend.energy_mj()) == e0:
        run_batch()
        if clock() - t_start > max_s:
            raise InputError("the energy counter did not advance: this GPU has no usable energy counter")
    t_open = clock()
    iters = 0
    steps = 0
    last = e_open
    cmin, cmax, mem = 10**9, 0, 0
    step_times = []
    while True:
        run_batch()
        iters += batch
        e = backend.energy_mj()
        if e != last:
            steps += 1
            last = e
            step_times.append(clock())
            c, m = backend.clocks_mhz()
            cmin, cmax, mem = min(cmin, c), max(cmax, c), m
            elapsed = clock() - t_open
            period = (step_times[-1] - t_open) / steps
            if elapsed >= window_s and steps >= min(min_steps, math.ceil(window_s / max(period, 1e-3))):
                break
        if clock() - t_open > max_s:
            break
    t_close = clock()
    return WindowResult(iterations=iters, time_s=t_close - t_open, energy_j=(last - e_open) / 1000.0,
                        counter_steps=steps, core_mhz_min=cmin if cmax else 0, core_mhz_max=cmax, mem_mhz=mem)
