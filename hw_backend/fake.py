"""``FakeNvml``: a pynvml-shaped fake GPU driven by the kernel model and a GPU preset (public API, for CI and demos).

It keeps simulated time (it never reads the wall clock). Workloads advance it with ``run_kernel``; locked clocks
take effect after the preset's switch latency; the energy counter steps every 100 ms; the power reading is a 1 s
average; readings carry seeded noise; permission and support errors can be switched on; every call is recorded in
``calls``. ``NvmlBackend(FakeNvml(...))`` runs unchanged against it.

With ``devices=N`` it shows N cards (handles ``fake-gpu-I``, UUIDs ``GPU-fake000I-…``, PCI bus ids
``00000000:0I:00.0``, I = 1-based for the bus); the workload runs on ``workload_device``, whose clocks are the simulated
ones; clock locks on the other cards are recorded in ``other_locks`` (so a test sees which card a backend touched).
"""

from __future__ import annotations

import math

import numpy as np

from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.model import KernelParams, evaluate

__all__ = ["FakeHost", "FakeNvml", "NVMLError"]

NVML_SUCCESS, NVML_ERROR_UNINITIALIZED, NVML_ERROR_INVALID_ARGUMENT = 0, 1, 2
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
_NAMES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions"}


class NVMLError(Exception):
    """Shaped like pynvml's: ``.value`` holds the NVML return code."""

    def __init__(self, value: int):
        super().__init__(_NAMES.get(value, f"NVML error {value}"))
        self.value = value


class FakeHost:
    """The fake's host (``hw_backend.nvml.Host``): waiting is simulated idle time on the fake card, and any process
    may try to lock clocks (the fake's ``permission`` answers with NVML's own error)."""

    def __init__(self, fake: FakeNvml) -> None:
        self.fake = fake

    def sleep(self, seconds: float) -> None:
        self.fake.idle(seconds)

    def clock_privilege(self) -> str:
        return ""


class FakeNvml:
    """One fake GPU.

    Args:
        spec: the card (clocks, power, switch latency).
        params: kernel model parameters of the workload's kernels (``run_kernel`` takes an index into them).
        seed: noise seed.
        time_noise, power_noise: relative noise of each kernel run's time and power (lognormal sigma).
        energy_step_s: the energy counter's update period.
        power_window_s: the averaging window of the power reading.
        permission: whether clock writes are allowed (else NoPermission).
        supported: whether locked clocks are supported (else NotSupported).
        mig: report MIG mode on.
        temperature_c: reported temperature.
        devices: how many cards NVML shows.
        workload_device: index of the card the workload runs on (the simulated one).
    """

    NVMLError = NVMLError

    def __init__(self, spec: GpuSpec, params: KernelParams | None = None, *, seed: int = 0, time_noise: float = 0.0,
                 power_noise: float = 0.0, energy_step_s: float = 0.1, power_window_s: float = 1.0,
                 permission: bool = True, supported: bool = True, mig: bool = False, temperature_c: float = 65.0,
                 devices: int = 1, workload_device: int = 0):
        if not 0 <= workload_device < devices:
            raise ValueError(f"workload_device {workload_device} is not one of the {devices} fake devices")
        self.devices, self.workload_device = int(devices), int(workload_device)
        self.other_locks: dict[int, tuple[int | None, int | None]] = {}
        self.spec, self.params = spec, params
        self.rng = np.random.default_rng(seed)
        self.time_noise, self.power_noise = time_noise, power_noise
        self.energy_step_s, self.power_window_s = energy_step_s, power_window_s
        self.permission, self.supported, self.mig, self.temperature_c = permission, supported, mig, temperature_c
        self.now_s = 0.0
        self.energy_j = 0.0
        self.calls: list[tuple] = []
        self.initialised = False
        self.locked_core: int | None = None  # target of the locked range
        self.locked_mem: int | None = None
        self.eff_core: int = AUTO  # what is in effect now
        self.eff_mem: int = AUTO
        self.pending: tuple[int, int, float] | None = None  # (core, mem, lands at)
        self._hist: list[tuple[float, float]] = [(0.0, 0.0)]  # (time, energy) at counter steps
        self.last_core_mhz = spec.boost_core_mhz
        self._ran_since_write = True
        self.replay: dict[str, tuple[float, float, float]] = {}  # kernel name → (time_s, power_w, core_mhz)
        self.host = FakeHost(self)

    @classmethod
    def from_characterization(cls, source, spec: GpuSpec, **kw) -> FakeNvml:
        """A fake that replays a characterisation (``kdvfs-characterization/1`` file or document): each measured zoo
        kernel runs at its recorded time, power and SM clock (``run_recorded``); other kernels use the model."""
        from hw_backend.characterize import load_characterization

        doc = source if isinstance(source, dict) else load_characterization(source)
        fake = cls(spec, **kw)
        fake.replay = {k["name"]: (float(k["time_s"]), float(k["power_w"]), float(k["sm_mhz_median"]))
                       for k in doc.get("kernels", []) if "skipped" not in k}
        return fake

    def run_recorded(self, name: str, repeats: int = 1) -> float:
        """Run a replayed kernel ``repeats`` times back to back at its recorded time, power and clock."""
        t, p, mhz = self.replay[name]
        self.last_core_mhz = int(round(mhz))
        self._ran_since_write = True
        self._advance(t * repeats, p)
        return t * repeats

    # ------------------------------------------------------------------ simulated execution
    def _advance(self, dur: float, power_w: float) -> None:
        end = self.now_s + dur
        step = self.energy_step_s
        t = self.now_s
        while True:
            nxt = (math.floor(t / step + 1e-9) + 1) * step
            if nxt > end:
                break
            self.energy_j += (nxt - t) * power_w
            t = nxt
            self._hist.append((t, self.energy_j))
        self.energy_j += (end - t) * power_w
        self.now_s = end
        if len(self._hist) > 400:
            self._hist = self._hist[-200:]

    def _land_if_due(self) -> None:
        if self.pending is not None and self.pending[2] <= self.now_s + 1e-15:
            self.eff_core, self.eff_mem = self.pending[0], self.pending[1]
            self.pending = None

    def idle(self, dur: float) -> None:
        """Advance time with nothing running."""
        while dur > 0:
            self._land_if_due()
            d = dur if self.pending is None else min(dur, max(self.pending[2] - self.now_s, 0.0))
            p = self.spec.idle_power_w * (1 + self.power_noise * float(self.rng.standard_normal()))
            self._advance(d, p)
            dur -= d
            if d == 0:
                self._land_if_due()

    def run_kernel(self, k: int, repeats: int = 1) -> float:
        """Run kernel ``k`` of ``params`` back to back ``repeats`` times at the clocks in effect; returns the time."""
        if self.params is None:
            raise RuntimeError("FakeNvml was built without kernel params; pass params= to run kernels")
        start = self.now_s
        self._ran_since_write = True
        left = float(repeats)
        while left > 1e-12:
            self._land_if_due()
            ev = evaluate(self.spec, self.params, np.array([self.eff_core]), np.array([self.eff_mem]),
                          kernel_index=np.array([k]))
            t1 = float(ev.time_s[0]) * float(self.rng.lognormal(0, self.time_noise)) if self.time_noise else float(ev.time_s[0])
            p = float(ev.power_w[0]) * float(self.rng.lognormal(0, self.power_noise)) if self.power_noise else float(ev.power_w[0])
            self.last_core_mhz = int(ev.core_mhz[0])
            span = left * t1
            if self.pending is not None and self.pending[2] < self.now_s + span:
                d = max(self.pending[2] - self.now_s, 0.0)
                self._advance(d, p)
                left -= d / t1
                self._land_if_due()
                continue
            self._advance(span, p)
            left = 0.0
        return self.now_s - start

    # ------------------------------------------------------------------ pynvml surface
    def _rec(self, name: str, *args) -> None:
        self.calls.append((name, *args))

    def nvmlInit(self) -> None:
        self._rec("nvmlInit")
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._rec("nvmlShutdown")
        self.initialised = False

    def _check(self) -> None:
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, i: int):
        self._check()
        if not isinstance(i, int) or not 0 <= i < self.devices:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return f"fake-gpu-{i}"

    @staticmethod
    def uuid_of(i: int) -> str:
        return f"GPU-fake{i:04d}-0000-4000-8000-{i:012d}"

    @staticmethod
    def pci_bus_id_of(i: int) -> str:
        return f"00000000:{i + 1:02X}:00.0"

    def _index(self, h) -> int:
        try:
            i = int(str(h).rsplit("-", 1)[1])
        except (IndexError, ValueError):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT) from None
        if not 0 <= i < self.devices:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self._check()
        u = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        for i in range(self.devices):
            if self.uuid_of(i) == u:
                return f"fake-gpu-{i}"
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        self._check()
        b = (bus.decode() if isinstance(bus, bytes) else str(bus)).upper()
        for i in range(self.devices):
            if self.pci_bus_id_of(i) == b:
                return f"fake-gpu-{i}"
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetUUID(self, h) -> str:
        return self.uuid_of(self._index(h))

    def nvmlDeviceGetPciInfo(self, h):
        class PciInfo:
            busId = self.pci_bus_id_of(self._index(h))

        return PciInfo()

    def nvmlDeviceGetName(self, h) -> str:
        return f"{self.spec.full_name} (fake)"

    def nvmlDeviceGetMigMode(self, h):
        return [int(self.mig), int(self.mig)]

    def nvmlDeviceGetSupportedMemoryClocks(self, h):
        return sorted(self.spec.mem_clocks_mhz, reverse=True)

    def nvmlDeviceGetSupportedGraphicsClocks(self, h, mem):
        lim = dict(self.spec.mem_max_core_mhz).get(int(mem))
        return sorted((c for c in self.spec.core_clocks_mhz if lim is None or c <= lim), reverse=True)

    def nvmlDeviceGetPowerManagementLimit(self, h) -> int:
        return int(self.spec.power_limit_w * 1000)

    def nvmlDeviceGetTemperature(self, h, sensor=0) -> int:
        return int(self.temperature_c)

    def nvmlDeviceGetTotalEnergyConsumption(self, h) -> int:
        self._rec("nvmlDeviceGetTotalEnergyConsumption")
        return int(self._hist[-1][1] * 1000)  # the counter only shows the last step

    def nvmlDeviceGetPowerUsage(self, h) -> int:
        t1, e1 = self._hist[-1]
        older = [x for x in self._hist if x[0] <= t1 - self.power_window_s]
        t0, e0 = older[-1] if older else self._hist[0]
        p = (e1 - e0) / (t1 - t0) if t1 > t0 else self.spec.idle_power_w
        return int(p * 1000)

    def nvmlDeviceGetClockInfo(self, h, kind: int) -> int:
        i = self._index(h)
        if i != self.workload_device:  # an idle card: its locked clock, else the idle defaults
            lc, lm = self.other_locks.get(i, (None, None))
            if kind == NVML_CLOCK_MEM:
                return int(lm or self.spec.max_mem_mhz)
            return int(min(lc or self.spec.boost_core_mhz, self.spec.boost_core_mhz))
        self._land_if_due()
        if kind == NVML_CLOCK_MEM:
            return int(self.spec.max_mem_mhz if self.eff_mem == AUTO else self.eff_mem)
        if self.eff_core == AUTO:
            return int(self.last_core_mhz)
        return int(min(self.eff_core, self.last_core_mhz, self.spec.boost_core_mhz))

    def _write(self, name: str, *args) -> None:
        self._rec(name, *args)
        self._check()
        if not self.supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not self.permission:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)

    def _schedule(self) -> None:
        core = AUTO if self.locked_core is None else self.locked_core
        mem = AUTO if self.locked_mem is None else self.locked_mem
        sw = self.spec.switch
        # the driver call blocks the host (half the host-call latency per call: a switch locks core and memory);
        # the GPU has nothing queued meanwhile, then the new clocks land after the transition. A transition still
        # pending completes first (the same rule as kdvfs.switching).
        # (the two calls of one switch, memory then core, make one transition)
        same_switch = self.pending is not None and not self._ran_since_write
        if self.pending is not None and not same_switch:
            self.eff_core, self.eff_mem = self.pending[0], self.pending[1]
        self.pending = None
        self.idle(sw.host_call_s / 2)
        self._ran_since_write = False
        self.pending = (core, mem, self.now_s + sw.transition_s)

    def _other(self, h, core=..., mem=...) -> bool:
        """Apply a lock to a card other than the workload's; False when ``h`` is the workload's card."""
        i = self._index(h)
        if i == self.workload_device:
            return False
        lc, lm = self.other_locks.get(i, (None, None))
        lc, lm = (lc if core is ... else core), (lm if mem is ... else mem)
        if lc is None and lm is None:
            self.other_locks.pop(i, None)
        else:
            self.other_locks[i] = (lc, lm)
        return True

    def nvmlDeviceSetGpuLockedClocks(self, h, min_mhz: int, max_mhz: int) -> None:
        self._write("nvmlDeviceSetGpuLockedClocks", min_mhz, max_mhz)
        if max_mhz not in self.spec.core_clocks_mhz or min_mhz > max_mhz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if self._other(h, core=int(max_mhz)):
            return
        self.locked_core = int(max_mhz)
        self._schedule()

    def nvmlDeviceResetGpuLockedClocks(self, h) -> None:
        self._write("nvmlDeviceResetGpuLockedClocks")
        if self._other(h, core=None):
            return
        self.locked_core = None
        self._schedule()

    def nvmlDeviceSetMemoryLockedClocks(self, h, min_mhz: int, max_mhz: int) -> None:
        self._write("nvmlDeviceSetMemoryLockedClocks", min_mhz, max_mhz)
        if max_mhz not in self.spec.mem_clocks_mhz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if self._other(h, mem=int(max_mhz)):
            return
        self.locked_mem = int(max_mhz)
        self._schedule()

    def nvmlDeviceResetMemoryLockedClocks(self, h) -> None:
        self._write("nvmlDeviceResetMemoryLockedClocks")
        if self._other(h, mem=None):
            return
        self.locked_mem = None
        self._schedule()

    @property
    def at_default_clocks(self) -> bool:
        """Whether no clock is locked (what every exit path must leave behind)."""
        return self.locked_core is None and self.locked_mem is None
