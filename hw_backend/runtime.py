"""``ClockRuntime``: applies a ``RuntimePlan`` while a training loop runs, with the clock writes off the training thread.

The training thread only reports *events* (``runtime.event("forward.GPT2Block")``), from module hooks
(``hw_backend.torch_runtime``) or any other source — the core knows nothing of torch, so it is tested with a fake
module tree and the fake NVML device. An event's occurrence within the iteration names a region of the plan; when the
region's setting differs from the one last requested, a switch is queued for a worker thread (as Zeus's frequency
controller runs its writes in a separate process), which optionally waits until the GPU reaches the boundary (a CUDA
event recorded at the hook: the CPU runs ahead of the GPU) and then writes through the backend.

Per iteration (``begin_step`` … ``end_step``) a ``StepRecord`` says which boundaries were hit and in which order, the
switches issued, and the *late* ones: a write that completed only after the GPU (or, without GPU events, the host)
had already reached the next region, so that region started at the old clock. Mismatches between the live model and
the trace (a boundary missing, out of order) are logged as warnings once per kind and counted.

Writes go through any ``GpuBackend``: ``NvmlBackend`` (real), ``NvmlBackend(FakeNvml(...))`` (tests), or, with
``noop=True``, nowhere: ``NoopWriter`` records each write and sends none (observe-only validation on a shared card).
Clocks are restored on every exit path by ``ClockGuard`` (normal exit, exceptions, SIGINT/SIGTERM, interpreter exit).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hw_backend.base import ClockGuard, GpuBackend
from kdvfs.errors import InputError
from kdvfs.runtime_plan import RuntimePlan

__all__ = ["ClockRuntime", "NoopWriter", "StepRecord", "SwitchRecord"]

log = logging.getLogger(__name__)


class NoopWriter:
    """A backend stand-in that records clock writes and sends none (reads go to ``backend`` when given).

    Attributes:
        calls: ``("set", core_mhz, mem_mhz)`` and ``("reset",)`` in the order asked.
    """

    def __init__(self, backend: GpuBackend | None = None) -> None:
        self.backend = backend
        self.name = f"no-op writes ({backend.name})" if backend is not None else "no-op writes"
        self.calls: list[tuple] = []
        self._lock = threading.Lock()

    def set_clocks_mhz(self, core_mhz: int, mem_mhz: int, verify: bool = False) -> None:  # noqa: ARG002
        with self._lock:
            self.calls.append(("set", int(core_mhz), int(mem_mhz)))

    def reset_clocks(self) -> None:
        with self._lock:
            self.calls.append(("reset",))

    def clocks_mhz(self) -> tuple[int, int]:
        return self.backend.clocks_mhz() if self.backend is not None else (0, 0)


@dataclass(frozen=True, slots=True)
class SwitchRecord:
    """One clock write.

    Attributes:
        region: index of the region it is for.
        core_mhz, mem_mhz: the setting written (``AUTO`` = 0).
        requested_s: when the training thread reached the boundary (host clock, from the step's start).
        done_s: when the write returned (same clock).
        late: the next region had started (on the GPU, or on the host without GPU events) before it returned.
    """

    region: int
    core_mhz: int
    mem_mhz: int
    requested_s: float
    done_s: float
    late: bool


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What the runtime saw and did in one iteration.

    Attributes:
        step: 0-based iteration number under the runtime.
        boundaries_expected: regions in the plan; boundaries_hit: how many opened.
        in_order: every region opened in the plan's order.
        missing: regions (``event#occurrence``) that never opened; out_of_order: those that opened out of order.
        switches: the writes issued, in order.
        late: how many of them were late.
        time_s: host time from ``begin_step`` to ``end_step`` (the writes drained).
    """

    step: int
    boundaries_expected: int
    boundaries_hit: int
    in_order: bool
    missing: tuple[str, ...]
    out_of_order: tuple[str, ...]
    switches: tuple[SwitchRecord, ...]
    late: int
    time_s: float

    @property
    def n_switches(self) -> int:
        return len(self.switches)


class ClockRuntime:
    """Applies a plan from events reported by the training thread (see the module docstring).

    Args:
        plan: the regions and their settings.
        backend: where writes go (ignored for writes when ``noop``).
        noop: record writes instead of sending them.
        clock: host clock in seconds (injected so tests are deterministic).
        wait: ``wait(token)`` blocks until the GPU reached the boundary marked by ``token`` (e.g. a CUDA event's
            ``synchronize``); None writes as soon as the worker gets the switch.
        reached: ``reached(token)`` says whether the GPU has passed ``token`` (CUDA event ``query``); None compares
            host times instead.
        mark: ``mark()`` returns a token for "now" in the GPU's stream (records a CUDA event); None for no GPU.
    """

    def __init__(self, plan: RuntimePlan, backend: GpuBackend | None = None, *, noop: bool = False,
                 clock: Callable[[], float] = time.perf_counter, wait: Callable[[Any], None] | None = None,
                 reached: Callable[[Any], bool] | None = None, mark: Callable[[], Any] | None = None) -> None:
        if backend is None and not noop:
            raise InputError("ClockRuntime needs a backend to write clocks through (NvmlBackend, or NvmlBackend(FakeNvml(…)) "
                             "in tests); pass one, or noop=True to record the writes without sending them")
        self.plan = plan
        self.writer: GpuBackend | NoopWriter
        if noop:
            self.writer = NoopWriter(backend)
        else:
            assert backend is not None  # refused above
            self.writer = backend
        self.noop = noop
        self.clock, self.wait, self.reached, self.mark = clock, wait, reached, mark
        self._index = {(r.event, r.occurrence): i for i, r in enumerate(plan.regions)}
        self._kinds = set(plan.events)
        self.guard = ClockGuard(self.writer)
        self.records: list[StepRecord] = []
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._in_step = False
        self._last_setting: tuple[int, int] | None = None
        self._reset_step()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ClockRuntime:
        self.guard.__enter__()
        self._thread = threading.Thread(target=self._worker, name="kdvfs-clock-writer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._q.put(None)
            if self._thread is not None:
                self._thread.join(timeout=10)
        finally:
            self._last_setting = None
            self.guard.__exit__(*exc)

    def _reset_step(self) -> None:
        self._count: dict[str, int] = defaultdict(int)
        self._opened: list[int] = []
        self._open_t: dict[int, float] = {}
        self._tokens: dict[int, Any] = {}
        self._switches: list[SwitchRecord] = []
        self._out_of_order: list[str] = []

    # ------------------------------------------------------------------ training thread
    def begin_step(self) -> None:
        """Start an iteration; a first region that no module opens (``step``) opens now."""
        self._reset_step()
        self._in_step = True
        self._t0 = self.clock()
        if self.plan.regions[0].event == "step":
            self._open(0)

    def event(self, kind: str) -> None:
        """A hook fired; cheap when the kind is not in the plan."""
        if not self._in_step or kind not in self._kinds:
            return
        occ = self._count[kind]
        self._count[kind] = occ + 1
        i = self._index.get((kind, occ))
        if i is not None:
            self._open(i)

    def _open(self, i: int) -> None:
        expected = self._opened[-1] + 1 if self._opened else 0
        if i != expected:
            r = self.plan.regions[i]
            self._out_of_order.append(f"{r.event}#{r.occurrence}")
        self._opened.append(i)
        now = self.clock() - self._t0
        self._open_t[i] = now
        token = self.mark() if self.mark is not None else None
        self._tokens[i] = token
        r = self.plan.regions[i]
        setting = (r.core_mhz, r.mem_mhz)
        if setting != self._last_setting:
            self._last_setting = setting
            self._q.put((i, setting, now, token))

    def end_step(self) -> StepRecord:
        """Finish an iteration (after the step's last launch): wait for the writes, record and check it."""
        self._q.join()
        self._in_step = False
        t = self.clock() - self._t0
        n = len(self.plan.regions)
        opened = set(self._opened)
        missing = tuple(f"{r.event}#{r.occurrence}" for i, r in enumerate(self.plan.regions) if i not in opened)
        with self._lock:
            sw = tuple(self._switches)
        rec = StepRecord(step=len(self.records), boundaries_expected=n, boundaries_hit=len(opened),
                         in_order=not self._out_of_order and not missing, missing=missing,
                         out_of_order=tuple(self._out_of_order), switches=sw, late=sum(s.late for s in sw), time_s=t)
        self.records.append(rec)
        if missing:
            self._warn("missing", f"the model does not match the trace: {len(missing)} of {n} boundaries never came "
                                  f"(first: {missing[0]}); the clocks of those regions were not applied — import a "
                                  "trace of this model and make the plan again")
        if self._out_of_order:
            self._warn("order", f"boundaries came out of the plan's order (first: {self._out_of_order[0]}): the model "
                                "runs its modules in another order than the trace")
        return rec

    def _warn(self, kind: str, msg: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(msg)

    # ------------------------------------------------------------------ worker thread
    def _worker(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                i, (core, mem), t_req, token = item
                if self.wait is not None and token is not None:
                    self.wait(token)
                # through the guard (it then restores, and a backend's clock marker is written before the first
                # lock); no read-back on the training's time
                self.guard.set(core, mem, verify=False)
                done = self.clock() - self._t0
                late = self._is_late(i, done)
                with self._lock:
                    self._switches.append(SwitchRecord(i, core, mem, t_req, done, late))
            except Exception:  # noqa: BLE001 — a failed write must not kill the training loop; it is logged
                log.exception("clock write failed")
            finally:
                self._q.task_done()

    def _is_late(self, i: int, done_s: float) -> bool:
        nxt = i + 1
        if nxt >= len(self.plan.regions):
            return False
        if self.reached is not None and self._tokens.get(nxt) is not None:
            return bool(self.reached(self._tokens[nxt]))
        t = self._open_t.get(nxt)
        return t is not None and t < done_s
