"""The GPU catalog: ``GpuSpec`` (clocks, quirks, power, voltage curve, memory bandwidth) and ``SwitchModel``.

Every number carries its source in ``GpuSpec.sources`` (``hardware_facts`` is ``shared/reference/hardware_facts.md``
of the project, which cites the public sources); numbers nobody has published are marked ``assumption``; numbers fitted
to published measurements say which script fitted them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kdvfs.errors import FormatError, InputError, KdvfsError, UnsupportedClockError

__all__ = ["AUTO", "GpuSpec", "SwitchModel", "check_grid_latency", "get_gpu", "gpu_names", "PRESETS", "H200_UNFITTED", "apply_h200_fit", "check_h200_fit_params"]

AUTO = 0
"""Clock value meaning "the driver's own choice" in clock arrays (printed and stored as ``auto``)."""


@dataclass(frozen=True, slots=True)
class SwitchModel:
    """What one clock switch costs.

    Attributes:
        host_call_s: time the host is blocked in the driver call; a synchronous or callback switch stalls the GPU
            this long.
        transition_s: time from the call's return until the new clock holds; the GPU keeps running at the old clock
            meanwhile (unless ``stall_while_relocking``).
        spread: relative spread (lognormal sigma) of both latencies between switches.
        stall_while_relocking: whether the GPU stops during the transition instead of running at the old clock.
        source: where the numbers come from.
    """

    host_call_s: float
    transition_s: float
    spread: float = 0.0
    stall_while_relocking: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        for nm in ("host_call_s", "transition_s", "spread"):
            v = getattr(self, nm)
            if not np.isfinite(v) or v < 0:
                raise InputError(f"switch model: {nm} must be ≥ 0, got {v!r}")

    @property
    def total_s(self) -> float:
        return self.host_call_s + self.transition_s

    def scaled_to(self, latency_s: float) -> SwitchModel:
        """This model at another total latency, split into host call and transition as this one is (``from_latency``
        checks the value)."""
        share = self.host_call_s / self.total_s if self.total_s > 0 else 0.25
        return SwitchModel.from_latency(latency_s, share, self.spread)

    @classmethod
    def from_latency(cls, latency_s: float, host_share: float = 0.25, spread: float = 0.0) -> SwitchModel:
        """A switch model of a given total latency, split into host call and transition (``--switch-latency``)."""
        # the longest switch measured or assumed anywhere is ~25 ms (Ampere); 10 s leaves room for what-ifs while
        # refusing typos (1e9 s would add 10¹⁴ ms per iteration without a word)
        if not np.isfinite(latency_s) or latency_s <= 0 or latency_s > 10.0:
            raise InputError(
                f"switch latency must be a positive number of seconds up to 10, got {latency_s!r}; "
                "e.g. 6e-3 for Hopper, 1e-7 for integrated voltage regulators"
            )
        return cls(host_call_s=latency_s * host_share, transition_s=latency_s * (1 - host_share), spread=spread,
                   source=f"--switch-latency {latency_s:g} s ({host_share:.0%} host call, rest transition)")



def check_grid_latency(latency_s: float | None) -> None:
    """A what-if grid's switch latency (``kdvfs whatif --latency``; ``None``: the card's own): the range
    ``SwitchModel.from_latency`` takes, (0, 10] s, in the grid's words."""
    if latency_s is not None and (not np.isfinite(latency_s) or latency_s <= 0 or latency_s > 10.0):
        raise InputError(f"switch latency must be in (0, 10] s, got {latency_s!r}; e.g. 6e-3 for Hopper")

@dataclass(frozen=True, slots=True)
class GpuSpec:
    """A GPU and the card-level constants of the kernel model.

    Attributes:
        name: catalog key (``rtx3080ti``).
        full_name: marketing name.
        arch: architecture (Ampere, Hopper, …).
        core_clocks_mhz: supported core clocks, ascending.
        mem_clocks_mhz: supported memory clocks, ascending.
        mem_max_core_mhz: quirks: memory clock → highest core clock it is honoured with.
        quirk_mem_fallback_mhz: memory clock the driver uses instead when a quirk is violated.
        boost_core_mhz: highest core clock the driver sustains under load ("auto" never exceeds it).
        power_limit_w: default power limit.
        cap_w: power the driver's controller holds a capped kernel at (at or slightly below the limit).
        idle_power_w: power with nothing running, memory at its highest clock.
        v_min, v_max: core voltage below the knee and at the highest core clock (relative units).
        vf_knee_mhz: core clock above which voltage rises.
        mem_bandwidth_gbs: bandwidth per memory clock (same order as ``mem_clocks_mhz``).
        core_power_w: dynamic core power at ``boost_core_mhz`` and activity 1.
        mem_power_w: memory-subsystem power with no traffic at each memory clock (same order as ``mem_clocks_mhz``).
        auto_mem_extra_w: extra power when the memory clock is left to the driver (auto) rather than locked.
        mem_traffic_power_w: memory power at full bandwidth use.
        smooth_p: exponent of the smooth maximum of the core and memory time terms.
        peak_tflops: dense peak rate at the boost clock (bf16 tensor for datacentre parts), TFLOP/s.
        peak_tflops_dtype: peak rate per math class (``kdvfs.work.math_class``: ``tensor16``, ``tf32``, ``fp8``,
            ``simt``), TFLOP/s at the boost clock; empty = ``peak_tflops`` for every class.
        work_activity: coefficients of core activity from each kernel's work (``kdvfs.model.activity_from_work``):
            ``base``, ``tensor16``, ``tf32``, ``simt``, ``mem``; empty = activity from the category priors only.
        vf_exponent: shape of the voltage rise above the knee (1: linear in the clock; > 1: bending up late).
        core_floor_mhz: the lowest core clock the card really runs under load: a request f runs at
            ``(f⁴ + floor⁴)^¼`` (0: every request is honoured; the 3080 Ti's 210 MHz runs faster than 210 MHz).
        auto_mem_traffic_w: extra power of the driver's auto memory per unit of memory traffic (``um·tm/t``), on top of
            ``auto_mem_extra_w`` (0: the auto-memory cost is the same for every kernel).
        auto_mem_onset_mhz: core clock above which the auto-memory cost appears, rising linearly to its full value at
            ``boost_core_mhz`` (0: the same at every core clock).
        smooth_p_mem: memory clock → smooth-maximum exponent where it differs from ``smooth_p`` (the 3080 Ti's 405 and
            810 MHz low-power memory modes overlap compute and memory traffic less: their times nearly add up).
        slow_core_mhz, slow_exponent: low-clock slowdown of the core time term, ``× (1 + (slow_core_mhz/f)^k)``
            (0: time ∝ 1/f at every clock; real sweeps of older cards run compute-bound kernels 6–7× slower at 405 than
            at 1380 MHz, a clock ratio of 3.41).
        quirk_core_clamp_mhz: quirks: memory clock → core clock the driver holds instead of any higher request
            (the 3080 Ti's 405 MHz memory with core > 420 MHz runs as (420, 405)); applied before
            ``quirk_mem_fallback_mhz``.
        auto_mem_bw_factor: memory bandwidth with the memory clock on auto relative to the highest clock locked (1: the
            same).
        mem_traffic_scale: memory traffic power per memory clock, relative to ``mem_traffic_power_w`` (one factor per
            ``mem_clocks_mhz`` entry; empty: 1 at every clock): moving a byte at a lower memory clock and voltage
            costs less energy. Only the joint RTX 3080 Ti calibration sets it (``structure=memtraffic``).
        leak_w: core static power (leakage) that follows the core voltage: the card draws
            ``leak_w · ((V(f)/V(F))^leak_exponent − 1)`` more than ``idle_power_w`` at core clock f (F the boost
            clock), i.e. less below the boost clock's voltage, whatever the kernel does (0: static power does not
            depend on the core clock). Only RTX 3080 Ti calibrations with ``structure=leak`` set it.
        leak_exponent: how leakage grows with the voltage (2: ∝ V²).
        vf_low_drop: the voltage below the knee falls linearly from ``v_min`` at the knee to ``v_min·(1 −
            vf_low_drop)`` at the lowest core clock (0: flat below the knee). Only ``structure=vflow`` sets it.
        switch: the clock-switch latency model.
        sources: field name → source of its number.
    """

    name: str
    full_name: str
    arch: str
    core_clocks_mhz: tuple[int, ...]
    mem_clocks_mhz: tuple[int, ...]
    boost_core_mhz: float  # a calibration fits it (1899.7 MHz is not a clock step, but it is the fitted value)
    power_limit_w: float
    cap_w: float
    idle_power_w: float
    v_min: float
    v_max: float
    vf_knee_mhz: float
    mem_bandwidth_gbs: tuple[float, ...]
    core_power_w: float
    mem_power_w: tuple[float, ...]
    mem_traffic_power_w: float
    switch: SwitchModel
    smooth_p: float = 4.0
    auto_mem_extra_w: float = 0.0
    mem_max_core_mhz: tuple[tuple[int, int], ...] = ()
    quirk_mem_fallback_mhz: tuple[tuple[int, int], ...] = ()
    peak_tflops: float = 0.0
    vf_exponent: float = 1.0
    core_floor_mhz: float = 0.0
    auto_mem_traffic_w: float = 0.0
    auto_mem_onset_mhz: float = 0.0
    smooth_p_mem: tuple[tuple[int, float], ...] = ()
    slow_core_mhz: float = 0.0
    slow_exponent: float = 4.0
    quirk_core_clamp_mhz: tuple[tuple[int, int], ...] = ()
    auto_mem_bw_factor: float = 1.0
    mem_traffic_scale: tuple[float, ...] = ()
    leak_w: float = 0.0
    leak_exponent: float = 2.0
    vf_low_drop: float = 0.0
    sources: tuple[tuple[str, str], ...] = field(default=())
    peak_tflops_dtype: tuple[tuple[str, float], ...] = ()
    work_activity: tuple[tuple[str, float], ...] = ()

    # ------------------------------------------------------------------ clocks
    @property
    def max_core_mhz(self) -> int:
        return self.core_clocks_mhz[-1]

    @property
    def max_mem_mhz(self) -> int:
        return self.mem_clocks_mhz[-1]

    def describe_clocks(self) -> str:
        c = self.core_clocks_mhz
        steps = set(np.diff(c).tolist())
        core = f"{c[0]}–{c[-1]} MHz" + (f" in {steps.pop()} MHz steps" if len(steps) == 1 else "")
        return f"core {core}; memory {', '.join(map(str, self.mem_clocks_mhz))} MHz"

    def check_setting(self, core_mhz: int, mem_mhz: int) -> None:
        """Raise ``UnsupportedClockError`` unless (core, mem) is a supported pair (``AUTO`` allowed)."""
        if core_mhz != AUTO and core_mhz not in self.core_clocks_mhz:
            near = min(self.core_clocks_mhz, key=lambda c: abs(c - core_mhz))
            raise UnsupportedClockError(
                f"core clock {core_mhz} MHz is not supported by {self.name} ({self.describe_clocks()}); "
                f"the nearest supported is {near} MHz, or use auto"
            )
        if mem_mhz != AUTO and mem_mhz not in self.mem_clocks_mhz:
            raise UnsupportedClockError(
                f"memory clock {mem_mhz} MHz is not supported by {self.name} ({self.describe_clocks()}); "
                f"pick one of {', '.join(map(str, self.mem_clocks_mhz))} or auto"
            )
        limit = dict(self.mem_max_core_mhz).get(mem_mhz)
        # a quirk with a core clamp is a request the driver accepts and runs clamped (the study measured those rows)
        clamped = mem_mhz in dict(self.quirk_core_clamp_mhz)
        if limit is not None and not clamped and (core_mhz == AUTO or core_mhz > limit):
            raise UnsupportedClockError(
                f"memory clock {mem_mhz} MHz is only honoured by {self.name} with core ≤ {limit} MHz, got core "
                f"{'auto' if core_mhz == AUTO else core_mhz} MHz; lower the core clock or pick another memory clock"
            )

    def settings(self, include_auto: bool = True) -> list[tuple[int, int]]:
        """Every supported (core, mem) pair, quirks honoured, plus the ``auto`` combinations."""
        quirks = dict(self.mem_max_core_mhz)
        out = []
        cores = ([AUTO] if include_auto else []) + list(self.core_clocks_mhz)
        mems = ([AUTO] if include_auto else []) + list(self.mem_clocks_mhz)
        for m in mems:
            for c in cores:
                lim = quirks.get(m)
                if lim is not None and (c == AUTO or c > lim):
                    continue
                out.append((c, m))
        return out

    def effective_request(self, core_mhz: np.ndarray, mem_mhz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the driver actually asks of the hardware: auto → boost / highest memory clock; quirks applied.

        An out-of-quirk request (e.g. 405 MHz memory with core 630 MHz on the 3080 Ti) runs as the driver runs it: the
        core held at the quirk's clamp (``quirk_core_clamp_mhz``; the study measured (405, 630 … 2100, auto) exactly as
        (405, 420)) or else the fallback memory clock; ``check_setting`` refuses such a request, this maps it for
        sweeps that made it anyway. A request below ``core_floor_mhz`` runs near the floor.
        """
        c = np.where(np.asarray(core_mhz) == AUTO, self.boost_core_mhz, np.minimum(core_mhz, self.boost_core_mhz))
        m = np.where(np.asarray(mem_mhz) == AUTO, self.max_mem_mhz, mem_mhz)
        for mem, clamp in self.quirk_core_clamp_mhz:
            c = np.where(m == mem, np.minimum(c, clamp), c)
        for mem, lim in self.mem_max_core_mhz:
            fb = dict(self.quirk_mem_fallback_mhz).get(mem, self.max_mem_mhz)
            m = np.where((m == mem) & (c > lim), fb, m)
        if self.core_floor_mhz > 0:  # after the quirks: they act on the requested clock
            c = (np.asarray(c, dtype=float) ** 4 + self.core_floor_mhz ** 4) ** 0.25
        return c.astype(float), m.astype(float)

    def bandwidth_gbs(self, mem_mhz: np.ndarray) -> np.ndarray:
        """Memory bandwidth at the given memory clocks (interpolated between listed clocks)."""
        return np.interp(mem_mhz, self.mem_clocks_mhz, self.mem_bandwidth_gbs)

    def voltage(self, core_mhz: np.ndarray) -> np.ndarray:
        """Relative core voltage: flat below the knee (or falling by ``vf_low_drop`` to the lowest clock), rising
        linearly (``vf_exponent`` 1) to ``v_max`` at the highest clock."""
        f = np.asarray(core_mhz, dtype=float)
        span = max(self.max_core_mhz - self.vf_knee_mhz, 1.0)
        x = np.clip((f - self.vf_knee_mhz) / span, 0.0, None)
        v = self.v_min + (self.v_max - self.v_min) * (x if self.vf_exponent == 1.0 else x ** self.vf_exponent)
        if self.vf_low_drop:  # off on every preset: the expression above stays bit-for-bit what it was
            below = max(self.vf_knee_mhz - self.core_clocks_mhz[0], 1.0)
            v = v - self.v_min * self.vf_low_drop * np.clip((self.vf_knee_mhz - f) / below, 0.0, None)
        return v

    def smooth_p_at(self, mem_mhz: np.ndarray) -> np.ndarray | float:
        """The smooth-maximum exponent at effective memory clocks (``smooth_p`` unless ``smooth_p_mem`` says)."""
        if not self.smooth_p_mem:
            return self.smooth_p
        p = np.full(np.shape(mem_mhz), float(self.smooth_p))
        for m, v in self.smooth_p_mem:
            p = np.where(np.asarray(mem_mhz) == m, v, p)
        return p

    def auto_mem_ramp(self, core_mhz: np.ndarray) -> np.ndarray:
        """Share of the auto-memory cost paid at a core clock (1 everywhere unless ``auto_mem_onset_mhz`` is set)."""
        if self.auto_mem_onset_mhz <= 0:
            return np.ones_like(np.asarray(core_mhz, dtype=float))
        span = max(self.boost_core_mhz - self.auto_mem_onset_mhz, 1.0)
        return np.clip((np.asarray(core_mhz, dtype=float) - self.auto_mem_onset_mhz) / span, 0.0, 1.0)

    def core_power_shape(self, core_mhz: np.ndarray) -> np.ndarray:
        """V(f)²·f relative to its value at the boost clock."""
        f = np.asarray(core_mhz, dtype=float)
        ref = self.voltage(np.array(self.boost_core_mhz)) ** 2 * self.boost_core_mhz
        return self.voltage(f) ** 2 * f / ref

    def leak_delta_w(self, core_mhz: np.ndarray) -> np.ndarray:
        """Static power at core clock f over ``idle_power_w`` (≤ 0 below the boost clock): ``leak_w · ((V(f)/V(F))^a
        − 1)``, a the ``leak_exponent``."""
        ref = self.voltage(np.array(self.boost_core_mhz))
        return self.leak_w * ((self.voltage(core_mhz) / ref) ** self.leak_exponent - 1.0)

    def peak_flops(self, math: str | None) -> float:
        """Peak FLOP/s at the boost clock for a math class (``peak_tflops`` where the table lacks it)."""
        table = dict(self.peak_tflops_dtype)
        return 1e12 * float(table.get(math or "", self.peak_tflops) or self.peak_tflops)

    def source_of(self, fieldname: str) -> str:
        return dict(self.sources).get(fieldname, "assumption")

    def with_switch(self, switch: SwitchModel) -> GpuSpec:
        return replace(self, switch=switch)

    def to_dict(self) -> dict:
        return {
            "name": self.name, "full_name": self.full_name, "arch": self.arch,
            "clocks": self.describe_clocks(), "core_clocks": len(self.core_clocks_mhz),
            "mem_clocks_mhz": list(self.mem_clocks_mhz), "quirks": {str(m): c for m, c in self.mem_max_core_mhz},
            "boost_core_mhz": self.boost_core_mhz, "power_limit_w": self.power_limit_w, "cap_w": self.cap_w,
            "idle_power_w": self.idle_power_w,
            "voltage_curve": {"v_min": self.v_min, "v_max": self.v_max, "knee_mhz": self.vf_knee_mhz},
            "mem_bandwidth_gbs": dict(zip(map(str, self.mem_clocks_mhz), self.mem_bandwidth_gbs)),
            "core_power_w": self.core_power_w, "mem_power_w": dict(zip(map(str, self.mem_clocks_mhz), self.mem_power_w)),
            "auto_mem_extra_w": self.auto_mem_extra_w,
            "vf_exponent": self.vf_exponent, "core_floor_mhz": self.core_floor_mhz,
            "auto_mem_traffic_w": self.auto_mem_traffic_w, "auto_mem_onset_mhz": self.auto_mem_onset_mhz, "smooth_p_mem": {str(m): v for m, v in self.smooth_p_mem},
            "slow_core_mhz": self.slow_core_mhz, "slow_exponent": self.slow_exponent,
            "quirk_core_clamp": {str(m): c for m, c in self.quirk_core_clamp_mhz},
            "auto_mem_bw_factor": self.auto_mem_bw_factor,
            **({"leak_w": self.leak_w, "leak_exponent": self.leak_exponent} if self.leak_w else {}),
            **({"vf_low_drop": self.vf_low_drop} if self.vf_low_drop else {}),
            "mem_traffic_power_w": self.mem_traffic_power_w, "smooth_p": self.smooth_p,
            "peak_tflops": self.peak_tflops, "peak_tflops_dtype": dict(self.peak_tflops_dtype),
            "work_activity": dict(self.work_activity),
            "switch": {"host_call_s": self.switch.host_call_s, "transition_s": self.switch.transition_s,
                       "spread": self.switch.spread, "stall_while_relocking": self.switch.stall_while_relocking,
                       "source": self.switch.source},
            # every number with its source; a number without a cited source is an assumption
            "sources": {f: self.source_of(f) for f in _SOURCED_FIELDS},
        }


_SOURCED_FIELDS = ("core_clocks_mhz", "mem_clocks_mhz", "mem_max_core_mhz", "boost_core_mhz", "power_limit_w", "cap_w",
                   "idle_power_w", "v_min", "v_max", "vf_knee_mhz", "mem_bandwidth_gbs", "core_power_w", "mem_power_w",
                   "auto_mem_extra_w", "mem_traffic_power_w", "smooth_p", "peak_tflops", "peak_tflops_dtype",
                   "work_activity", "switch", "auto_mem_traffic_w", "vf_exponent", "core_floor_mhz", "auto_mem_onset_mhz",
                   "smooth_p_mem", "slow_core_mhz", "quirk_core_clamp_mhz", "auto_mem_bw_factor")


def _clocks(lo: int, hi: int, step: int = 15) -> tuple[int, ...]:
    return tuple(range(lo, hi + 1, step))


_HF = "hardware_facts (shared/reference/hardware_facts.md)"
_FIT = ("fitted by `kdvfs profile calibrate spaan2026` (table method) to Spaan et al. 2026 Table 1 / Figure 5; "
        "checked on the pass-level sweep of Figures 3/4")
_VELICKA = "Velička et al., IPDPSW 2025 (arXiv:2502.20075): ~6 ms on GH200/H200; host/transition split is an assumption"
_V100 = ("assumption for Ampere: a public V100 benchmark of nvmlDeviceSetGpuLockedClocks (call ~4.5 ms, clock in effect "
         "~20 ms later); no Ampere latency is published in a form we could read (hardware_facts)")

_AMPERE_SWITCH = SwitchModel(host_call_s=4.5e-3, transition_s=20e-3, spread=0.25, source=_V100)
_HOPPER_SWITCH = SwitchModel(host_call_s=1.5e-3, transition_s=4.5e-3, spread=0.25, source=_VELICKA)

# The RTX 3080 Ti constants marked _FIT below are the values of the bundled calibration when this file was written; the
# preset ``rtx3080ti`` reads them from that calibration (``_rtx3080ti_fitted``: traces/gpt3xl-llmc-rtx3080ti
# .calibration.json, written by `kdvfs profile calibrate spaan2026`), so the catalog and the profile are one fit.
RTX3080TI_WRITTEN = GpuSpec(
    name="rtx3080ti", full_name="NVIDIA GeForce RTX 3080 Ti", arch="Ampere (GA102)",
    core_clocks_mhz=_clocks(210, 2100), mem_clocks_mhz=(405, 810, 5001, 9251, 9501),
    mem_max_core_mhz=((405, 420),), quirk_core_clamp_mhz=((405, 420),), quirk_mem_fallback_mhz=(),
    boost_core_mhz=1900.0000125480813, power_limit_w=350.0, cap_w=342.0000011533213, idle_power_w=76.76889573353365,
    v_min=0.6914004106727106, v_max=1.0, vf_knee_mhz=1679.999998449538,
    # 912 GB/s at 9501 (384-bit × 19 Gbps), ∝ clock for 5001/9251; 405/810 run in a low-power mode, fitted
    mem_bandwidth_gbs=(30.43112486412522, 176.39990282293562, 480.0, 888.0, 912.0),
    core_power_w=215.0,
    mem_power_w=(0.05900760002584511, 1.286993322153781, 9.744899492081986, 36.87232956917443, 61.092442133831796),
    auto_mem_extra_w=7.475289734612889, mem_traffic_power_w=45.0, smooth_p=16.279957101401273,
    peak_tflops=34.1, switch=_AMPERE_SWITCH,
    sources=(("core_clocks_mhz", _HF), ("mem_clocks_mhz", _HF), ("mem_max_core_mhz", _HF), ("power_limit_w", _HF),
             ("mem_bandwidth_gbs", _HF + "; 405/810 MHz values " + _FIT), ("boost_core_mhz", _FIT), ("cap_w", _FIT),
             ("idle_power_w", _FIT), ("v_min", _FIT), ("v_max", _FIT), ("vf_knee_mhz", _FIT),
             ("core_power_w", "scale (assumption): the per-kernel activities absorb it"), ("mem_power_w", _FIT),
             ("auto_mem_extra_w", _FIT),
             ("mem_traffic_power_w", "scale (assumption): the per-kernel memory activities absorb it"),
             ("smooth_p", _FIT),
             ("quirk_core_clamp_mhz", "Spaan et al. 2026 Figures 3/4: (405, >420) measured as (405, 420)"),
             ("peak_tflops", "NVIDIA GA102 whitepaper: 34.1 TFLOP/s FP32 at boost"), ("switch", _V100)),
)

A100 = GpuSpec(
    name="a100", full_name="NVIDIA A100 SXM4 80GB", arch="Ampere (GA100)",
    core_clocks_mhz=_clocks(210, 1410), mem_clocks_mhz=(1593,), boost_core_mhz=1410,
    power_limit_w=400.0, cap_w=396.0, idle_power_w=60.0, v_min=0.70, v_max=1.00, vf_knee_mhz=900.0,
    mem_bandwidth_gbs=(2039.0,), core_power_w=260.0, mem_power_w=(40.0,), mem_traffic_power_w=60.0,
    smooth_p=4.0, peak_tflops=312.0, switch=_AMPERE_SWITCH,
    sources=(("core_clocks_mhz", _HF), ("mem_clocks_mhz", _HF + " (one memory clock, ml-energy/zeus #48)"),
             ("power_limit_w", _HF), ("mem_bandwidth_gbs", "NVIDIA A100 datasheet (80 GB SXM4)"),
             ("peak_tflops", "NVIDIA A100 datasheet, dense bf16"), ("switch", _V100)),
)

H100 = GpuSpec(
    name="h100", full_name="NVIDIA H100 SXM", arch="Hopper (GH100)",
    core_clocks_mhz=_clocks(345, 1980), mem_clocks_mhz=(2619,), boost_core_mhz=1980,
    power_limit_w=700.0, cap_w=698.0, idle_power_w=115.0, v_min=0.70, v_max=1.00, vf_knee_mhz=1200.0,
    mem_bandwidth_gbs=(3350.0,), core_power_w=560.0, mem_power_w=(45.0,), mem_traffic_power_w=90.0,
    smooth_p=4.0, peak_tflops=989.0, switch=_HOPPER_SWITCH,
    sources=(("core_clocks_mhz", _HF), ("mem_clocks_mhz", _HF), ("power_limit_w", _HF),
             ("mem_bandwidth_gbs", "NVIDIA H100 SXM datasheet"), ("peak_tflops", "NVIDIA H100 datasheet, dense bf16"),
             ("switch", _VELICKA)),
)

# H200 before the fit: clocks, limit and idle read off a real card (h200_probe.json); core_power_w chosen so that a
# large bf16 GEMM (activity 1) exceeds the 700 W cap at 1980 MHz and settles near 1350-1700 MHz, as the probe saw.
# The preset ``h200`` is this with the constants fitted to the characterisation zoo (``_h200_fitted`` below).
H200_UNFITTED = GpuSpec(
    name="h200", full_name="NVIDIA H200 SXM", arch="Hopper (GH100)",
    core_clocks_mhz=_clocks(345, 1980), mem_clocks_mhz=(2201, 3201), boost_core_mhz=1980,
    power_limit_w=700.0, cap_w=698.0, idle_power_w=122.0, v_min=0.70, v_max=1.00, vf_knee_mhz=1200.0,
    mem_bandwidth_gbs=(3300.0, 4800.0), core_power_w=760.0, mem_power_w=(45.0, 45.0), mem_traffic_power_w=110.0,
    smooth_p=4.0, peak_tflops=989.0, switch=_HOPPER_SWITCH,
    sources=(("core_clocks_mhz", _HF + ", read here (h200_probe.json)"), ("mem_clocks_mhz", "read here (NVML lists 2201 and 3201)"),
             ("power_limit_w", "read here"), ("cap_w", "read here: 698 W under a bf16 GEMM"),
             ("idle_power_w", "read here: 122 W at P0"), ("mem_bandwidth_gbs", "NVIDIA H200 datasheet 4.8 TB/s; 2201 MHz ∝ clock"),
             ("core_power_w", "assumption anchored on the probe: a bf16 GEMM throttles to 1350–1980 MHz at 700 W"),
             # the memory clock was never set (observe-only): a saving at 2201 MHz is not measured, and assuming one
             # (it was 30 W there) made capped GEMMs faster at 2201 MHz than at auto, i.e. "faster and cheaper than auto"
             ("mem_power_w", "not measured at 2201 MHz (observe-only): no saving assumed there (45 W at both clocks)"),
             ("peak_tflops", "NVIDIA H200 datasheet, dense bf16"), ("switch", _VELICKA)),
)

H200_FIT_FILE = "h200.fit.json"
"""The stored fit the h200 preset reads (bundled beside the traces; written by ``kdvfs calibrate-h200``)."""

_H200_FIT_FIELDS = ("core_power_w", "v_min", "vf_knee_mhz", "mem_traffic_power_w", "cap_w")


def check_h200_fit_params(params, where: str = "the fit") -> None:
    """Refuse ``params`` of a ``kdvfs-h200-fit/1`` document that are not a fit's: each card constant a positive finite
    number, ``work_activity`` and ``peak_tflops_dtype`` objects of finite numbers ≥ 0 (> 0 for the peak rates). A NaN
    or negative constant would otherwise turn every prediction into NaN or a power below idle without a word."""
    fix = "rewrite the fit with `kdvfs calibrate-h200` (or restore it from git)"
    if not isinstance(params, dict):
        raise FormatError(f"{where}: 'params' must be an object of fitted constants, got {params!r:.60}; {fix}")

    def num(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    for k in _H200_FIT_FIELDS:
        v = params.get(k)
        if not (num(v) and v is not None and v > 0):  # "is not None" narrows the type for mypy
            raise FormatError(f"{where}: params[{k!r}] must be a positive finite number, got {v!r}; {fix}")
    gap = params.get("gap_power_w")  # optional: fits before session 6 have none
    if gap is not None and not (num(gap) and gap > 0):
        raise FormatError(f"{where}: params['gap_power_w'] must be a positive finite number, got {gap!r}; {fix}")
    for key, positive in (("work_activity", False), ("peak_tflops_dtype", True)):
        d = params.get(key)
        if not isinstance(d, dict) or not d:
            raise FormatError(f"{where}: params[{key!r}] must be a non-empty object of numbers, got {d!r:.60}; {fix}")
        for k, v in d.items():
            if not (num(v) and (v > 0 if positive else v >= 0)):
                raise FormatError(f"{where}: params[{key!r}][{k!r}] must be a finite number "
                                  f"{'> 0' if positive else '≥ 0'}, got {v!r}; {fix}")


def apply_h200_fit(base: GpuSpec, params: Any, source: str, where: str = "the fit") -> GpuSpec:
    """``base`` with fitted constants (``params`` of a ``kdvfs-h200-fit/1`` document), each sourced to ``source``;
    ``where`` names the document in the error if ``params`` are not a fit's (``check_h200_fit_params``)."""
    check_h200_fit_params(params, where)
    card: dict = {k: float(params[k]) for k in _H200_FIT_FIELDS}  # values of several field types for replace()
    fitted = set(_H200_FIT_FIELDS) | {"work_activity"}
    sources = tuple((k, v) for k, v in base.sources if k not in fitted | {"peak_tflops_dtype"})
    sources += tuple((k, source) for k in sorted(fitted))
    sources += (("peak_tflops_dtype", "NVIDIA H100/H200 SXM datasheet, dense: tensor16 (bf16/fp16) 989, fp8 1979, "
                                      "tf32 495, simt (fp32 CUDA cores) 67"),)
    return replace(base, **card, work_activity=tuple((str(k), float(v)) for k, v in params["work_activity"].items()),
                   peak_tflops_dtype=tuple((str(k), float(v)) for k, v in params["peak_tflops_dtype"].items()),
                   sources=sources)


def _h200_fitted(base: GpuSpec) -> GpuSpec:
    """The h200 preset: ``base`` with the constants of the bundled fit (``traces/h200.fit.json``), or ``base`` alone
    (logged) where the file is missing."""
    import json
    import logging

    from kdvfs.bundled import bundled_dir

    path = bundled_dir() / H200_FIT_FILE
    if not path.exists():
        logging.getLogger(__name__).warning("%s is missing: the h200 preset uses its unfitted constants", path)
        return base
    global _H200_FIT_PROBLEM
    try:  # a broken bundled fit must not break `import kdvfs` (every command, other cards too): get_gpu("h200") says it
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("format") != "kdvfs-h200-fit/1":
            raise KdvfsError(f"its format is {doc.get('format') if isinstance(doc, dict) else None!r}, not "
                             "'kdvfs-h200-fit/1'")
        src = (f"fitted to the observe-only characterisation zoo ({doc.get('data', '?')}) by `{doc.get('command', '')}`; "
               f"stored in traces/{H200_FIT_FILE}")
        return apply_h200_fit(base, doc.get("params"), src, where=str(path))
    except (OSError, ValueError, KdvfsError) as e:
        _H200_FIT_PROBLEM = (f"the h200 preset's bundled fit {str(path)!r} is not usable ({e}); restore it "
                             f"(`git checkout traces/{H200_FIT_FILE}`) or rewrite it with `kdvfs calibrate-h200`")
        logging.getLogger(__name__).warning("%s", _H200_FIT_PROBLEM)
        return base


_H200_FIT_PROBLEM: str | None = None
"""Why the bundled H200 fit could not be read, if it could not (``get_gpu("h200")`` then refuses with this)."""


H200 = _h200_fitted(H200_UNFITTED)

B200 = GpuSpec(
    name="b200", full_name="NVIDIA B200", arch="Blackwell (GB100)",
    core_clocks_mhz=_clocks(345, 1965), mem_clocks_mhz=(3996,), boost_core_mhz=1965,
    power_limit_w=1000.0, cap_w=995.0, idle_power_w=160.0, v_min=0.70, v_max=1.00, vf_knee_mhz=1200.0,
    mem_bandwidth_gbs=(8000.0,), core_power_w=800.0, mem_power_w=(60.0,), mem_traffic_power_w=150.0,
    smooth_p=4.0, peak_tflops=2250.0,
    switch=SwitchModel(host_call_s=0.2e-3, transition_s=0.8e-3, spread=0.25,
                       source="assumption: 'much faster than earlier parts' (Spaan et al.; hardware_facts); no published latency"),
    sources=(("power_limit_w", _HF + " (~1000 W)"), ("mem_bandwidth_gbs", "NVIDIA B200 datasheet (8 TB/s)"),
             ("switch", "assumption: 1 ms total, 'much faster than earlier parts' (Spaan et al.); no published latency"),
             ("peak_tflops", "NVIDIA B200 datasheet, dense bf16"), ("core_clocks_mhz", "assumption")),
)

# A hypothetical card with integrated voltage regulators: the RTX 3080 Ti's clocks and power, ns-scale switching.
RTX3080TI_CALIBRATION_FILE = "gpt3xl-llmc-rtx3080ti.calibration.json"
"""The bundled calibration the rtx3080ti preset reads its fitted constants from (its ``card`` entry)."""

_RTX_FIT_FIELDS = ("boost_core_mhz", "cap_w", "idle_power_w", "v_min", "v_max", "vf_knee_mhz", "mem_power_w",
                   "auto_mem_extra_w", "mem_bandwidth_gbs", "core_power_w", "mem_traffic_power_w", "smooth_p")


def _rtx3080ti_fitted(base: GpuSpec) -> GpuSpec:
    """``base`` with the card constants of the bundled calibration, or ``base`` alone (logged) where it is missing."""
    import json
    import logging

    from kdvfs.bundled import bundled_dir

    path = bundled_dir() / RTX3080TI_CALIBRATION_FILE
    if not path.exists():
        logging.getLogger(__name__).warning("%s is missing: the rtx3080ti preset uses the constants written in gpus.py",
                                            path)
        return base
    card = json.loads(path.read_text())["card"]
    fitted: dict[str, Any] = {k: (tuple(float(x) for x in card[k]) if isinstance(card[k], list) else float(card[k]))
                              for k in _RTX_FIT_FIELDS}
    return replace(base, **fitted)


RTX3080TI = _rtx3080ti_fitted(RTX3080TI_WRITTEN)

IVR = replace(
    RTX3080TI, name="ivr", full_name="hypothetical RTX 3080 Ti with integrated voltage regulators", arch="hypothetical",
    switch=SwitchModel(host_call_s=0.0, transition_s=100e-9, spread=0.0,
                       source="Bharadwaj et al., 'Predict; Don't React', ASPLOS 2023: ns to µs with IVRs (simulated)"),
    sources=tuple((k, v) for k, v in RTX3080TI.sources if k != "switch")
    + (("switch", "assumption within the range of Bharadwaj et al., ASPLOS 2023 (ns to µs with IVRs, simulated)"),),
)

PRESETS: dict[str, GpuSpec] = {g.name: g for g in (RTX3080TI, A100, H100, H200, B200, IVR)}


def gpu_names() -> list[str]:
    return list(PRESETS)


def get_gpu(name: str) -> GpuSpec:
    """A preset by name (case-insensitive)."""
    g = PRESETS.get(name.lower().replace("-", "").replace(" ", "")) if isinstance(name, str) else None
    if g is None:
        raise InputError(f"unknown GPU {name!r}; the catalog has {', '.join(PRESETS)} (see `kdvfs gpu list`)")
    if g.name == "h200" and _H200_FIT_PROBLEM:
        raise FormatError(_H200_FIT_PROBLEM)
    return g
