"""The ``GpuBackend`` protocol, the capability record, and ``ClockGuard``, which always undoes clock changes."""

from __future__ import annotations

import atexit
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, runtime_checkable

_SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What ``signal.getsignal`` returns: a handler, SIG_DFL/SIG_IGN, or None (installed outside Python)."""

__all__ = ["Capabilities", "ClockGuard", "ClockWriter", "GpuBackend"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do on its card.

    Attributes:
        name: the card's name.
        energy_counter: whether the total-energy counter is available.
        can_set_clocks: whether this process may lock clocks (root / CAP_SYS_ADMIN, supported card).
        observe_only: whether the backend refuses every write.
        mig: whether MIG mode is on (power and energy cannot be metered per slice).
        supported: memory clock → supported core clocks, MHz.
        power_limit_w: current power limit.
        reason: why clocks cannot be set, when they cannot.
    """

    name: str
    energy_counter: bool
    can_set_clocks: bool
    observe_only: bool
    mig: bool
    supported: dict[int, tuple[int, ...]]
    power_limit_w: float
    reason: str = ""


@runtime_checkable
class GpuBackend(Protocol):
    """A narrow view of one GPU, in domain units."""

    name: str

    def capabilities(self) -> Capabilities: ...

    def set_clocks_mhz(self, core_mhz: int, mem_mhz: int, verify: bool = True) -> None:
        """Lock the clocks (0 = leave that clock to the driver); ``verify`` reads them back until they hold, which live
        switching skips (the next kernels run while the clocks relock)."""
        ...

    def reset_clocks(self) -> None: ...

    def energy_mj(self) -> int: ...

    def power_mw(self) -> int: ...

    def clocks_mhz(self) -> tuple[int, int]: ...


class ClockWriter(Protocol):
    """What :class:`ClockGuard` needs: a name, clock writes and the reset (a ``GpuBackend`` is one; so is the
    runtime's no-op writer)."""

    name: str

    def set_clocks_mhz(self, core_mhz: int, mem_mhz: int, verify: bool = True) -> None: ...

    def reset_clocks(self) -> None: ...


class ClockGuard:
    """Context manager that restores the card's default clocks on every exit path.

    Normal exit, exceptions, SIGINT and SIGTERM (the handlers reset, then behave as before: KeyboardInterrupt or
    exit status 128 + signal), and interpreter exit (atexit) all call ``backend.reset_clocks()`` once, if anything was
    changed through ``set``. A second signal arriving while a restore runs restores again in its handler (the lock is
    re-entrant: a plain lock deadlocked there) and then ends the process as the first would have.
    SIGKILL cannot be caught: where the backend carries a ``clock_marker``
    (``hw_backend.safety.ClockMarker``), it is written before the first change and removed after the restore, so a
    killed run leaves a marker that the next command on the card reports.
    """

    def __init__(self, backend: ClockWriter) -> None:
        self.backend = backend
        self.changed = False
        self._old: dict[int, _SignalHandler] = {}
        self._lock = threading.RLock()

    def set(self, core_mhz: int, mem_mhz: int, verify: bool = True) -> None:
        """Lock the clocks through the backend; from here on the guard restores them."""
        marker = getattr(self.backend, "clock_marker", None)
        if not self.changed and marker is not None:
            marker.write()  # before the lock: a SIGKILL between the two leaves a marker, never a silent lock
        self.changed = True
        self.backend.set_clocks_mhz(core_mhz, mem_mhz, verify)

    def reset(self) -> None:
        """Return the clocks to the driver's defaults now, through the guard (nothing is left to restore)."""
        with self._lock:
            self.backend.reset_clocks()
            self.changed = False

    def restore(self) -> None:
        with self._lock:
            if self.changed:
                try:
                    self.backend.reset_clocks()
                    log.info("clocks of %s restored to defaults", self.backend.name)
                    marker = getattr(self.backend, "clock_marker", None)
                    if marker is not None:
                        marker.clear()
                finally:
                    self.changed = False

    def _handler(self, signum, frame):  # noqa: ARG002
        self.restore()
        old = self._old.get(signum)
        if signum == signal.SIGINT and (old is None or old in (signal.SIG_DFL, signal.default_int_handler)):
            raise KeyboardInterrupt
        if callable(old):
            return old(signum, frame)
        raise SystemExit(128 + signum)

    def __enter__(self) -> ClockGuard:
        atexit.register(self.restore)
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.getsignal(s)
                signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.restore()
        finally:
            for s, h in self._old.items():
                signal.signal(s, h)  # what getsignal returned before: a handler, SIG_DFL/SIG_IGN or None
            self._old.clear()
            atexit.unregister(self.restore)
