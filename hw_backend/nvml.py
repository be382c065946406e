"""``NvmlBackend``: the GPU through nvidia-ml-py (module ``pynvml``) — or through any pynvml-shaped object such as
``hw_backend.fake.FakeNvml``. NVML errors are translated here, once, into kdvfs errors that say how to fix them.

Clocks are locked as the study did: the core as a range [lowest supported, target] (the card may still throttle
below the target), the memory at one value; both are read back. ``observe_only=True`` (the default) refuses every
write with ``ObserveOnlyError`` before anything reaches the driver.

The card is chosen by ``device``: an NVML index, a UUID (``GPU-…``, a unique prefix is enough, as CUDA accepts) or a PCI
bus id (``0000:65:00.0``). Without ``device`` the first entry of ``CUDA_VISIBLE_DEVICES`` is used when it is set, so
the backend meters and locks the card PyTorch runs on (an integer there is taken as the NVML index, which is CUDA's
index when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; use UUIDs to be sure); else index 0.

What the backend needs beside NVML's functions comes through the same object, as its ``host`` (:class:`Host`): how to
wait for a clock change to land, and whether this process may lock clocks. ``load_pynvml()`` pairs the real library
with :class:`SystemHost` (wall-clock sleep, root check); ``FakeNvml`` brings its own (simulated idle time; permission
modelled by its NVML errors). The backend never asks which one it has.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from hw_backend.base import Capabilities
from kdvfs.errors import (
    HardwareError,
    InputError,
    NoGpuError,
    ObserveOnlyError,
    PermissionDeniedError,
    UnsupportedClockError,
)

__all__ = ["Host", "NvmlBackend", "Pynvml", "SystemHost", "clock_step_mhz", "load_pynvml", "machine_identity",
           "refuse_other_card", "select_device"]

log = logging.getLogger(__name__)

# pynvml's numeric codes (nvml.h)
_NO_PERMISSION, _NOT_SUPPORTED, _UNINITIALIZED, _LIB_NOT_FOUND, _DRIVER_NOT_LOADED, _GPU_LOST = 4, 3, 1, 12, 9, 15
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2


class Host(Protocol):
    """The machine the NVML library runs on, as the backend sees it."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` with nothing running (for a clock change to land)."""
        ...

    def clock_privilege(self) -> str:
        """Empty when this process may lock clocks; otherwise why it may not (and how to fix it)."""
        ...


class SystemHost:
    """This machine: real time, and clock locking needs root (or CAP_SYS_ADMIN)."""

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def clock_privilege(self) -> str:
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            return "not root: locking clocks needs root or CAP_SYS_ADMIN"
        return ""


class Pynvml:
    """The pynvml module with the host it runs on: NVML's names are the module's, ``host`` is a :class:`Host`."""

    def __init__(self, module: Any, host: Host | None = None) -> None:
        self._module = module
        self.host: Host = host if host is not None else SystemHost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def load_pynvml() -> Pynvml:
    """The real pynvml library on this machine, or ``NoGpuError``."""
    try:
        import pynvml
    except ImportError:
        raise NoGpuError("nvidia-ml-py is not installed: `pip install nvidia-ml-py`") from None
    return Pynvml(pynvml)


def clock_step_mhz(clocks: tuple[int, ...] | list[int]) -> int:
    """The smallest spacing of a card's supported clocks (MHz); 0 for a single clock."""
    c = sorted(set(int(x) for x in clocks))
    return min((b - a for a, b in zip(c, c[1:])), default=0)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _norm_bus(b: str) -> str:
    """PCI bus ids compare without case and with the domain widened to 8 digits (NVML's form)."""
    parts = b.strip().upper().split(":")
    try:
        if len(parts) == 3:
            return f"{int(parts[0], 16):08X}:{parts[1]}:{parts[2]}"
        if len(parts) == 2:
            return f"00000000:{parts[0]}:{parts[1]}"
    except ValueError:
        pass
    return b.strip().upper()


def select_device(device: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """What to open: ``device`` when given, else the first ``CUDA_VISIBLE_DEVICES`` entry, else None (index 0)."""
    if device is not None and str(device).strip():
        return str(device).strip()
    cvd = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None
    first = cvd.split(",")[0].strip()
    if not first or first.startswith("-"):
        raise NoGpuError(f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU; unset it or name a card with --device")
    return first


class NvmlBackend:
    """One GPU through NVML (an engine: it holds the handle).

    Args:
        nvml: NVML's functions with their ``host`` (:class:`Host`): ``load_pynvml()`` (the default) or ``FakeNvml``.
        index: GPU index (when ``device`` is not given and ``CUDA_VISIBLE_DEVICES`` is not set).
        observe_only: refuse every write (the default; the lent H200 is only ever used so).
        device: index, UUID (or unique prefix) or PCI bus id of the card; default: ``select_device``.
        env: the environment to read ``CUDA_VISIBLE_DEVICES`` from (default ``os.environ``).
        state_dir: where the clock marker lives (default ``hw_backend.safety.state_dir()``).
    """

    def __init__(self, nvml: Any = None, index: int = 0, observe_only: bool = True,
                 sleep: Callable[[float], None] | None = None, settle_s: float = 1.0, device: str | None = None,
                 env: dict | None = None, state_dir=None) -> None:
        self.nvml = nvml if nvml is not None else load_pynvml()
        self.observe_only = observe_only
        # how to wait for a clock change to land: the host's time (real, or the fake's simulated idle time)
        self.sleep: Callable[[float], None] = sleep or self.nvml.host.sleep
        self.settle_s = settle_s
        self._call(self.nvml.nvmlInit, what="initialise NVML")
        count = self._call(self.nvml.nvmlDeviceGetCount, what="count GPUs")
        if count < 1:
            raise NoGpuError("NVML sees no GPU; check `nvidia-smi`")
        chosen = select_device(device, env)
        self.handle = self._open(chosen if chosen is not None else str(index), count)
        nm = self._call(self.nvml.nvmlDeviceGetName, self.handle, what="read the name")
        self.name = nm.decode() if isinstance(nm, bytes) else str(nm)
        try:
            self.uuid = _text(self._call(self.nvml.nvmlDeviceGetUUID, self.handle, what="read the UUID"))
        except (HardwareError, AttributeError):
            self.uuid = ""
        self._caps: Capabilities | None = None
        from hw_backend.safety import ClockMarker

        card_id = self.uuid or f"index-{chosen or index}"
        self.marker = ClockMarker(card_id, self.name, self.uuid or str(chosen or index), state_dir)

    @property
    def clock_marker(self):
        """The marker ``ClockGuard`` writes before locking clocks (None when this backend cannot lock them)."""
        return None if self.observe_only else self.marker

    def _uuids(self, count: int) -> list[str]:
        out = []
        for i in range(count):
            h = self._call(self.nvml.nvmlDeviceGetHandleByIndex, i, what=f"open GPU {i}")
            out.append(_text(self._call(self.nvml.nvmlDeviceGetUUID, h, what=f"read GPU {i}'s UUID")))
        return out

    def _open(self, dev: str, count: int):
        """Handle of the card named by an index, a UUID (or unique prefix) or a PCI bus id."""
        if dev.isdigit():
            i = int(dev)
            if not 0 <= i < count:
                raise InputError(f"GPU index {i} does not exist: NVML sees {count} GPU(s), 0–{count - 1}; "
                                 "see `nvidia-smi -L`")
            return self._call(self.nvml.nvmlDeviceGetHandleByIndex, i, what="open the GPU")
        if dev.upper().startswith(("GPU-", "MIG-")):
            if dev.upper().startswith("MIG-"):
                raise InputError(f"device {dev!r} is a MIG slice: slices cannot be metered for power or energy; "
                                 "name the whole GPU (its GPU-… UUID from `nvidia-smi -L`)")
            hits = [i for i, u in enumerate(self._uuids(count)) if u.lower().startswith(dev.lower())]
            if len(hits) != 1:
                raise InputError(f"device {dev!r} matches {len(hits)} of the {count} GPU(s) by UUID; give a UUID (or a "
                                 "unique prefix) from `nvidia-smi -L`")
            return self._call(self.nvml.nvmlDeviceGetHandleByIndex, hits[0], what="open the GPU")
        if re.fullmatch(r"([0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", dev):
            want = _norm_bus(dev)
            for i in range(count):
                h = self._call(self.nvml.nvmlDeviceGetHandleByIndex, i, what=f"open GPU {i}")
                info = self._call(self.nvml.nvmlDeviceGetPciInfo, h, what=f"read GPU {i}'s PCI bus id")
                if _norm_bus(_text(info.busId)) == want:
                    return h
            raise InputError(f"no GPU has PCI bus id {dev!r}; see `nvidia-smi --query-gpu=pci.bus_id --format=csv`")
        raise InputError(f"device {dev!r} is not an index, a GPU UUID (GPU-…) or a PCI bus id (0000:65:00.0); see "
                         "`nvidia-smi -L`")

    # ------------------------------------------------------------------ errors, once
    def _call(self, fn: Callable, *args, what: str) -> Any:
        err_type = getattr(self.nvml, "NVMLError", None)
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 — only NVMLError is translated, the rest re-raised
            if err_type is None or not isinstance(e, err_type):
                raise
            code = getattr(e, "value", None)
            if code == _NO_PERMISSION:
                raise PermissionDeniedError(
                    f"NVML refused to {what}: no permission. Locking clocks needs root or CAP_SYS_ADMIN "
                    "(run with sudo, or `sudo setcap cap_sys_admin+ep $(which python3)`)"
                ) from e
            if code == _NOT_SUPPORTED:
                raise HardwareError(f"NVML cannot {what} on this GPU: not supported ({e}); locked clocks need Volta or "
                                    "newer, locked memory clocks Ampere or newer") from e
            if code in (_LIB_NOT_FOUND, _DRIVER_NOT_LOADED, _UNINITIALIZED):
                raise NoGpuError(f"NVML is not usable ({e}): is the NVIDIA driver installed and loaded? Check `nvidia-smi`") from e
            if code == _GPU_LOST:
                raise HardwareError(f"the GPU fell off the bus while trying to {what} ({e}); the machine needs attention") from e
            raise HardwareError(f"NVML failed to {what}: {e}") from e

    def _write(self, what: str) -> None:
        if self.observe_only:
            raise ObserveOnlyError(
                f"refused to {what}: this backend is observe-only; pass --allow-clock-control (on a card you may "
                "change) to let kdvfs lock clocks"
            )

    # ------------------------------------------------------------------ reads
    def capabilities(self) -> Capabilities:
        if self._caps is not None:
            return self._caps
        n, h = self.nvml, self.handle
        try:
            mig = bool(self._call(n.nvmlDeviceGetMigMode, h, what="read MIG mode")[0])
        except HardwareError:
            mig = False
        try:
            self._call(n.nvmlDeviceGetTotalEnergyConsumption, h, what="read the energy counter")
            energy = True
        except HardwareError:
            energy = False
        supported: dict[int, tuple[int, ...]] = {}
        for m in self._call(n.nvmlDeviceGetSupportedMemoryClocks, h, what="list memory clocks"):
            cores = self._call(n.nvmlDeviceGetSupportedGraphicsClocks, h, m, what="list core clocks")
            supported[int(m)] = tuple(sorted(int(c) for c in cores))
        limit = self._call(n.nvmlDeviceGetPowerManagementLimit, h, what="read the power limit") / 1000.0
        reason = ""
        can = not self.observe_only and not mig
        if self.observe_only:
            reason = "observe-only backend"
        elif mig:
            reason = "MIG is on: slices cannot be metered for power or energy; disable MIG to use kdvfs on this GPU"
        else:
            reason = n.host.clock_privilege()
        self._caps = Capabilities(self.name, energy, can and not reason, self.observe_only, mig, supported, limit, reason)
        return self._caps

    def energy_mj(self) -> int:
        return int(self._call(self.nvml.nvmlDeviceGetTotalEnergyConsumption, self.handle, what="read the energy counter"))

    def power_mw(self) -> int:
        return int(self._call(self.nvml.nvmlDeviceGetPowerUsage, self.handle, what="read power"))

    def temperature_c(self) -> float | None:
        try:
            return float(self._call(self.nvml.nvmlDeviceGetTemperature, self.handle, 0, what="read the temperature"))
        except (HardwareError, AttributeError):
            return None

    def clocks_mhz(self) -> tuple[int, int]:
        c = self._call(self.nvml.nvmlDeviceGetClockInfo, self.handle, NVML_CLOCK_SM, what="read the SM clock")
        m = self._call(self.nvml.nvmlDeviceGetClockInfo, self.handle, NVML_CLOCK_MEM, what="read the memory clock")
        return int(c), int(m)

    # ------------------------------------------------------------------ writes
    def set_clocks_mhz(self, core_mhz: int, mem_mhz: int, verify: bool = True) -> None:
        """Lock core to [lowest, core_mhz] and memory to mem_mhz (0 = leave that clock to the driver); verify by
        reading back (not in live switching, where the next kernels run while the clocks relock)."""
        self._write(f"set clocks {core_mhz or 'auto'}/{mem_mhz or 'auto'} MHz")
        caps = self.capabilities()
        if caps.mig:
            raise HardwareError(caps.reason)
        if mem_mhz and mem_mhz not in caps.supported:
            raise UnsupportedClockError(
                f"memory clock {mem_mhz} MHz is not supported by {self.name}; supported: "
                f"{', '.join(map(str, sorted(caps.supported)))} MHz")
        cores = caps.supported[mem_mhz or max(caps.supported)]
        if core_mhz and core_mhz not in cores:
            raise UnsupportedClockError(
                f"core clock {core_mhz} MHz is not supported by {self.name} with memory {mem_mhz or 'auto'} MHz "
                f"({cores[0]}–{cores[-1]} MHz, {len(cores)} values); pick one of them")
        n, h = self.nvml, self.handle
        if mem_mhz:
            self._call(n.nvmlDeviceSetMemoryLockedClocks, h, mem_mhz, mem_mhz, what=f"lock the memory clock at {mem_mhz} MHz")
        else:
            self._call(n.nvmlDeviceResetMemoryLockedClocks, h, what="reset the memory clock")
        if core_mhz:
            self._call(n.nvmlDeviceSetGpuLockedClocks, h, cores[0], core_mhz, what=f"lock the core clock at ≤ {core_mhz} MHz")
        else:
            self._call(n.nvmlDeviceResetGpuLockedClocks, h, what="reset the core clock")
        # read back: the new clocks land after the switch latency; poll until they hold
        if not verify:
            return
        # the driver may report the clock one step above the lock (the read-back rounds to its own bins): the tolerance
        # is this card's core clock step at that memory clock (15 MHz on the RTX 3080 Ti), not a fixed number
        tol = clock_step_mhz(cores)
        waited = 0.0
        while True:
            core_now, mem_now = self.clocks_mhz()
            if (not core_mhz or core_now <= core_mhz + tol) and (not mem_mhz or mem_now == mem_mhz):
                break
            if waited >= self.settle_s:
                raise HardwareError(
                    f"read-back: clocks are {core_now}/{mem_now} MHz {waited:.2f} s after locking at ≤ {core_mhz}/"
                    f"{mem_mhz} MHz; the driver did not apply the lock (run `kdvfs reset-clocks` and retry)")
            self.sleep(0.005)
            waited += 0.005
        log.debug("clocks locked at %s/%s MHz (now %d/%d)", core_mhz, mem_mhz, core_now, mem_now)

    def reset_clocks(self) -> None:
        self._write("reset clocks")
        n, h = self.nvml, self.handle
        self._call(n.nvmlDeviceResetGpuLockedClocks, h, what="reset the core clock")
        self._call(n.nvmlDeviceResetMemoryLockedClocks, h, what="reset the memory clock")
        self.marker.clear()

    def close(self) -> None:
        with contextlib.suppress(HardwareError):
            self._call(self.nvml.nvmlShutdown, what="shut NVML down")


def refuse_other_card(out, doc: dict, be, what: str) -> None:
    """Refuse resuming ``out`` (a measurement file whose document is ``doc``) on another card than it holds: the two
    cards' entries would be read as one card's, under the first one's UUID. Only where both UUIDs are known."""
    had, now = doc.get("gpu_uuid"), getattr(be, "uuid", None) or None
    if had and now and str(had) != str(now):
        raise InputError(f"{str(out)!r} holds {what} measured on card {had}; this run is on card {now} (another lease "
                         "or GPU), so its results cannot be added there (resuming continues one card's measurement); "
                         "give a new -o")


def machine_identity(be, cpuinfo: str = "/proc/cpuinfo") -> dict:
    """Which card and host a measurement ran on, read only: the card's UUID (``be.uuid``; None where the backend has
    none) and the host CPU's model name (None where ``cpuinfo`` cannot be read). A lent machine may be another card or
    host at each lease, and step energy moved by up to ±9 % between two leases on the H200 (session 9): files that
    record it let a later reader tell card-to-card from run-to-run differences."""
    cpu = None
    with contextlib.suppress(OSError), open(cpuinfo, encoding="utf-8", errors="replace") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.lower().startswith("model name")), None)
    return {"gpu_uuid": getattr(be, "uuid", None) or None, "host_cpu": cpu}
