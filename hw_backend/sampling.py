"""The readers of a characterisation window: ``Sampler`` (SM and memory clocks, power, in a thread or at each tick),
``CounterWatch`` (the energy counter read in a thread of its own, its steps timed there) and ``counter_window`` (one
zoo entry's window, opened and closed at counter steps). Only reads; used by ``hw_backend.characterize`` and
``hw_backend.steps``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from hw_backend.zoo import ZooKernel
from kdvfs.errors import HardwareError

__all__ = ["COUNTER_READ_PERIOD_S", "CounterWatch", "Sampler", "counter_window", "instant_power_reader"]

log = logging.getLogger(__name__)


def instant_power_reader(be) -> Callable[[], float | None] | None:
    """A reader of NVML's instantaneous power field (``NVML_FI_DEV_POWER_INSTANT``, watts), or ``None`` where the
    card or the NVML module lacks it (``nvmlDeviceGetPowerUsage`` is a 1 s average on Hopper)."""
    fn = getattr(getattr(be, "nvml", None), "nvmlDeviceGetFieldValues", None)
    if fn is None:
        return None

    def read() -> float | None:
        v = fn(be.handle, [186])[0]
        if v.nvmlReturn != 0:
            return None
        val = {0: v.value.dVal, 1: v.value.uiVal, 2: v.value.ulVal, 3: v.value.ullVal, 4: v.value.sllVal,
               5: getattr(v.value, "siVal", 0)}.get(v.valueType, v.value.uiVal)
        return float(val) / 1000.0

    try:
        return read if read() is not None else None
    except Exception:  # noqa: BLE001 — an optional reading; NVML errors mean "not available"
        return None


_P = TypeVar("_P", bound="_Poller")


class _Poller:
    """A reading repeated every ``period_s`` in a thread (``threaded``: a real card) or at each ``tick()`` from the
    measuring loop (the fake, whose time is simulated); ``_once`` is the reading, ``_begin`` what a ``with`` block
    does before the thread starts. Only reads."""

    threaded: bool
    period_s: float

    def _init_thread(self) -> None:
        self._stop = threading.Event()
        self._th: threading.Thread | None = None

    def _once(self) -> None:
        raise NotImplementedError

    def _begin(self) -> None:
        pass

    def tick(self) -> None:
        """Called by the measuring loop: reads unless a thread does."""
        if not self.threaded:
            self._once()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._once()
            time.sleep(self.period_s)

    def __enter__(self: _P) -> _P:
        self._begin()
        if self.threaded:
            self._th = threading.Thread(target=self._loop, daemon=True)
            self._th.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._th is not None:
            self._th.join()


class Sampler(_Poller):
    """Reads SM clock, memory clock, power (1 s average) and instantaneous power, every ``period_s`` in a thread
    (``threaded``) or whenever ``sample()`` is called (the fake, whose time is simulated). Only reads.
    ``clocks_only``: the two clocks alone (power left NaN), for fast sampling that must not disturb the host loop."""

    def __init__(self, be, now: Callable[[], float], *, threaded: bool, period_s: float = 0.01,
                 clocks_only: bool = False) -> None:
        self.be, self.now, self.threaded, self.period_s = be, now, threaded, period_s
        self.clocks_only = clocks_only
        self.instant = None if clocks_only else instant_power_reader(be)
        self.rows: list[tuple[float, int, int, float, float | None]] = []
        self.t0 = now()
        self._init_thread()

    def sample(self) -> None:
        c, m = self.be.clocks_mhz()
        p = float("nan") if self.clocks_only else self.be.power_mw() / 1000.0
        pi = self.instant() if self.instant else None
        self.rows.append((self.now() - self.t0, c, m, p, pi))

    _once = sample

    def _begin(self) -> None:
        self.t0 = self.now()


# The counter thread's pause between reads: a read itself takes ~3 ms on the H200 (validation/h200/characterization/
# energy_read_probe/), and its counter steps every ~80 ms, so a step is timed to a few ms either way.
COUNTER_READ_PERIOD_S = 0.001


class CounterWatch(_Poller):
    """Reads the energy counter and times its steps, in a thread of its own (``threaded``; a real card, where one
    read takes ~3 ms on the H200) or at each ``tick()`` (the fake, whose time is simulated), so the measuring loop
    never waits on NVML. A step is known to lie between the start of the last read that saw the old value and the
    end of the first read that sees the new one; ``steps`` holds (centre of that bracket s, counter mJ, half its
    width s) for every step seen. Only reads."""

    def __init__(self, be, now: Callable[[], float], *, threaded: bool, period_s: float = COUNTER_READ_PERIOD_S) -> None:
        self.be, self.now, self.threaded, self.period_s = be, now, threaded, period_s
        self.steps: list[tuple[float, int, float]] = []
        self._last: tuple[float, int] | None = None  # (start of the last read, its value)
        self._init_thread()

    def read(self) -> None:
        a = self.now()
        v = self.be.energy_mj()
        b = self.now()
        if self._last is not None and v != self._last[1]:
            self.steps.append(((self._last[0] + b) / 2, v, (b - self._last[0]) / 2))
        self._last = (a, v)

    _once = read

    def _begin(self) -> None:
        self.read()  # the value the first step is seen against


def counter_window(be, k: ZooKernel, now: Callable[[], float], step: Callable[[], tuple[float, int]], sampler: Sampler,
                    watch: CounterWatch, *, start: float, window_s: float, max_s: float) -> dict:
    """The measured window of one zoo entry: ``step()`` runs the next unit of work (returns the time per invocation
    and the invocations it completed) while ``watch`` times the energy counter's steps; the window opens at the first
    step and closes at the first step at least ``window_s`` later, so its energy is the counter's difference between
    two steps whose times are known (to ``watch``'s bracket), whatever the units of work. Times per invocation come
    from the units that overlap the window. Returns the window's fields for ``_record``."""
    runs: list[tuple[float, float, float, int]] = []  # (start s, end s, time per invocation s, invocations)
    with sampler as smp, watch:
        while True:
            t0 = now()
            t, c = step()
            t1 = now()
            runs.append((t0, t1, t, c))
            smp.tick()
            watch.tick()
            st = list(watch.steps)
            if st and st[-1][0] - st[0][0] >= window_s:
                close = next(s for s in st if s[0] - st[0][0] >= window_s)
                break
            if not st and t1 - start > max_s:
                raise HardwareError(
                    f"the energy counter of {be.name} did not advance in {max_s:.0f} s of running {k.name}: this card "
                    "has no usable energy counter (nvmlDeviceGetTotalEnergyConsumption), so energy cannot be measured")
            if st and t1 - st[0][0] > max_s:
                if len(st) < 2:
                    raise HardwareError(
                        f"{k.name}: the energy counter of {be.name} stepped once and then not again in {max_s:.0f} s, "
                        "so the window has no closing step and no energy; measure the entry again (a counter that "
                        "stalls while the card is busy is a driver fault)")
                close = st[-1]
                log.warning("%s: the window closed at the counter's last step, %.2f s after it opened (asked %.2f s)",
                            k.name, close[0] - st[0][0], window_s)
                break
    (t_open, e_open, u_open), (t_close, e_close, u_close) = st[0], close
    inside = [r for r in runs if r[1] > t_open and r[0] < t_close]
    iters = sum(r[3] for r in inside)
    if not iters:  # a duty chunk shorter than one burst never completes an invocation: no time to record
        raise HardwareError(f"{k.name}: no invocation completed inside its measured window ({t_close - t_open:.2f} s); "
                            "lengthen --window, or the entry's burst is longer than the measuring chunk")
    lo, hi = inside[0][0] - smp.t0, inside[-1][1] - smp.t0
    rows = [r for r in smp.rows if lo <= r[0] <= hi] or smp.rows
    return {"per": [r[2] for r in inside if r[3]], "iters": iters, "busy_s": sum(r[1] - r[0] for r in inside),
            "span": t_close - t_open, "energy": (e_close - e_open) / 1000.0, "edge_s": max(u_open, u_close),
            "rows": rows}
