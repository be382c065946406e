"""The kernel time/power model, with power-cap throttling to an effective clock.

For a kernel with parameters (t0, tc, tm, uc, um) on a card ``spec``, at effective core clock fc and memory clock fm:

- time: ``t = t0 + ((tc·F/fc·s(fc))^p + (tm·B_ref/B(fm))^p)^(1/p)`` — a smooth maximum of a core term and a memory
  term (F the boost clock, B the memory bandwidth, p ``spec.smooth_p_at(fm)``); p = 1 is the additive form of
  DESIGN.md. ``s(f) = 1 + (f_slow/f)^k`` (``spec.slow_core_mhz``, ``spec.slow_exponent``; 1 when unset) lets the core
  term grow faster than 1/f below a clock, as real sweeps of some cards show.
- power: ``P = P_idle(fm) + Pc·uc·V(fc)²fc/(V(F)²F) + Pm·um·tm/t`` — idle power with a memory-clock-proportional part,
  core dynamic power on the card's voltage curve, and memory traffic power proportional to bytes per second; with
  the driver's auto memory clock, ``(auto_mem_extra_w + auto_mem_traffic_w·um·tm/t) · spec.auto_mem_ramp(fc)`` more.
- throttling: when ``P`` at the requested clocks exceeds the cap, the core clock falls to where ``P = cap``. The driver
  holds the cap by moving between adjacent clock bins, so by default the effective clock is that time-averaged value;
  ``binned=True`` instead takes the highest supported bin under the cap (DESIGN.md's literal rule).
- auto: the driver's own choice: boost clock and highest memory clock, throttled the same way.

Evaluation is vectorised over kernels × settings; there is no Python loop over the clock grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.trace import Trace

__all__ = ["KernelParams", "ModelEval", "evaluate", "default_params", "anchor_power", "CATEGORY_PRIORS"]

# Category → (core share of time, memory share of time, core activity, memory activity). Used only when nothing was
# measured: GEMMs and attention are compute-bound and busy; elementwise, norm and copy kernels are memory-bound.
CATEGORY_PRIORS: dict[str, tuple[float, float, float, float]] = {
    "gemm": (0.92, 0.25, 1.00, 0.8),
    "attention": (0.85, 0.40, 0.90, 0.9),
    "norm": (0.15, 0.95, 0.55, 1.0),
    "elementwise": (0.12, 0.95, 0.50, 1.0),
    "reduction": (0.30, 0.90, 0.55, 1.0),
    "copy": (0.10, 0.95, 0.45, 1.0),
    "optimizer": (0.15, 0.95, 0.50, 1.0),
    "collective": (0.10, 0.30, 0.30, 0.5),
    "other": (0.50, 0.60, 0.60, 0.8),
}


@dataclass(frozen=True, slots=True)
class KernelParams:
    """Per-kernel model parameters (arrays over the kernels of a trace).

    Attributes:
        keys: kernel keys (``segment.index``) in trace order.
        t0_s: fixed time (launch, latency-bound tail), seconds.
        tc_s: core-bound time at the boost clock, seconds.
        tm_s: memory-bound time at the highest memory bandwidth, seconds.
        uc: core activity (dynamic core power relative to a fully busy core).
        um: memory activity (traffic power relative to full bandwidth use).
        source: ``model`` (from category/FLOPs/bytes) or ``fitted`` (to measurements).
        p0_w: per-kernel power offset, watts (zero except in fits to cards the catalog does not know).
    """

    keys: tuple[str, ...]
    t0_s: np.ndarray
    tc_s: np.ndarray
    tm_s: np.ndarray
    uc: np.ndarray
    um: np.ndarray
    source: str = "model"
    p0_w: np.ndarray | None = None

    def take(self, idx: np.ndarray) -> KernelParams:
        return KernelParams(tuple(self.keys[i] for i in idx), self.t0_s[idx], self.tc_s[idx], self.tm_s[idx],
                            self.uc[idx], self.um[idx], self.source, None if self.p0_w is None else self.p0_w[idx])

    @property
    def offsets_w(self) -> np.ndarray:
        return np.zeros(len(self.keys)) if self.p0_w is None else self.p0_w

    def as_rows(self) -> list[dict]:
        return [dict(kernel=k, t0_s=float(a), tc_s=float(b), tm_s=float(c), uc=float(d), um=float(e))
                for k, a, b, c, d, e in zip(self.keys, self.t0_s, self.tc_s, self.tm_s, self.uc, self.um)]


@dataclass(frozen=True, slots=True)
class ModelEval:
    """Model output, arrays of one shape.

    Attributes:
        time_s: duration of one invocation.
        power_w: average power during it.
        energy_j: ``time_s * power_w``.
        core_mhz: effective (possibly throttled) core clock.
        mem_mhz: effective memory clock.
        throttled: whether the cap lowered the core clock.
    """

    time_s: np.ndarray
    power_w: np.ndarray
    energy_j: np.ndarray
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    throttled: np.ndarray


def _time(spec: GpuSpec, t0, tc, tm, fc, fm) -> np.ndarray:
    p = spec.smooth_p_at(fm)
    a = tc * (spec.boost_core_mhz / fc)
    if spec.slow_core_mhz > 0:
        a = a * (1 + (spec.slow_core_mhz / fc) ** spec.slow_exponent)
    b = tm * (spec.mem_bandwidth_gbs[-1] / spec.bandwidth_gbs(fm))
    if np.isscalar(p) and p == 1.0:
        return t0 + a + b
    m = np.maximum(a, b)
    m = np.where(m > 0, m, 1.0)
    return t0 + m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


def _power(spec: GpuSpec, tc, tm, uc, um, fc, fm, t, extra, auto_mem=None) -> np.ndarray:
    idle = spec.idle_power_w - spec.mem_power_w[-1] + np.interp(fm, spec.mem_clocks_mhz, spec.mem_power_w) + extra
    traffic = um * tm / t
    if auto_mem is not None and (spec.auto_mem_extra_w or spec.auto_mem_traffic_w):
        # what the driver's auto memory costs over a locked clock, more the busier the memory is; on the 3080 Ti only
        # once the core runs near its top clocks: with the core locked at 1050 MHz, auto memory and 9501 MHz draw the
        # same (the study)
        idle = idle + np.where(auto_mem, (spec.auto_mem_extra_w + spec.auto_mem_traffic_w * traffic)
                               * spec.auto_mem_ramp(fc), 0.0)
    return idle + spec.core_power_w * uc * spec.core_power_shape(fc) + spec.mem_traffic_power_w * traffic


def evaluate(spec: GpuSpec, params: KernelParams, core_mhz, mem_mhz, *, kernel_index=None, cap_w: float | None = None,
             binned: bool = False) -> ModelEval:
    """Time and power of kernels at requested clocks.

    Args:
        spec: the card.
        params: per-kernel parameters.
        core_mhz, mem_mhz: requested clocks (``AUTO`` = 0 for the driver's choice). With ``kernel_index=None`` they are
            a grid of S settings and the result has shape (kernels, S); otherwise they pair element-wise with
            ``kernel_index``.
        kernel_index: which kernel each requested setting is for.
        cap_w: power cap (default ``spec.cap_w``); ``inf`` disables throttling.
        binned: snap the throttled clock down to a supported bin instead of the time-averaged value.
    """
    core = np.asarray(core_mhz)
    mem = np.asarray(mem_mhz)
    fields = (params.t0_s, params.tc_s, params.tm_s, params.uc, params.um, params.offsets_w)
    if kernel_index is None:
        sl = (slice(None), None)
        t0, tc, tm, uc, um, p0 = (x[sl] for x in fields)
        core, mem = core[None, :], mem[None, :]
    else:
        ki = np.asarray(kernel_index)
        t0, tc, tm, uc, um, p0 = (x[ki] for x in fields)
    fc, fm = spec.effective_request(core, mem)
    auto_mem = mem == AUTO
    extra = p0
    fc, fm, t0, tc, tm, uc, um, extra, auto_mem = np.broadcast_arrays(fc, fm, t0, tc, tm, uc, um, extra, auto_mem)
    cap = spec.cap_w if cap_w is None else cap_w

    t = _time(spec, t0, tc, tm, fc, fm)
    pw = _power(spec, tc, tm, uc, um, fc, fm, t, extra, auto_mem)
    over = pw > cap
    eff = fc.astype(float).copy()
    if np.any(over):
        idx = np.nonzero(over)
        lo = np.full(idx[0].shape, float(spec.core_clocks_mhz[0]))
        hi = fc[idx].astype(float)
        a = (t0[idx], tc[idx], tm[idx], uc[idx], um[idx], fm[idx], extra[idx], auto_mem[idx])
        def over_cap(f):
            return _power(spec, a[1], a[2], a[3], a[4], f, a[5], _time(spec, a[0], a[1], a[2], f, a[5]), a[6],
                          a[7]) - cap

        for _ in range(16):  # bisection (power rises monotonically with the core clock) to a bracket of < 0.1 MHz …
            mid = 0.5 * (lo + hi)
            ok = over_cap(mid) <= 0
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        # … then regula falsi inside it: power is smooth there, so the root is found to rounding, and the effective
        # clock is a smooth function of the parameters (what a fit's finite differences need)
        glo, ghi = over_cap(lo), over_cap(hi)
        for _ in range(2):
            f = np.clip(lo - glo * (hi - lo) / np.where(ghi > glo, ghi - glo, 1.0), lo, hi)
            g = over_cap(f)
            ok = g <= 0
            lo, glo = np.where(ok, f, lo), np.where(ok, g, glo)
            hi, ghi = np.where(ok, hi, f), np.where(ok, ghi, g)
        f = np.clip(lo - glo * (hi - lo) / np.where(ghi > glo, ghi - glo, 1.0), lo, hi)
        if binned:
            bins = np.asarray(spec.core_clocks_mhz, dtype=float)
            f = bins[np.clip(np.searchsorted(bins, f, side="right") - 1, 0, len(bins) - 1)]
        eff[idx] = f
        t = _time(spec, t0, tc, tm, eff, fm)
        pw = _power(spec, tc, tm, uc, um, eff, fm, t, extra, auto_mem)
    return ModelEval(time_s=t, power_w=pw, energy_j=t * pw, core_mhz=eff, mem_mhz=fm.astype(float), throttled=over)


def default_params(trace: Trace, spec: GpuSpec) -> KernelParams:
    """Model parameters from category, FLOPs and bytes, scaled so that time at the capture clocks matches the trace.

    Where the trace has each kernel's energy at capture, the core activity is solved so that power matches too.
    """
    ks = trace.kernels
    pri = np.array([CATEGORY_PRIORS[k.category] for k in ks])
    core_share, mem_share, uc, um = pri.T.copy()
    for i, k in enumerate(ks):  # FLOPs and bytes, when known, set the balance of the two terms
        if k.flops and k.bytes and spec.peak_tflops:
            tcore = k.flops / (spec.peak_tflops * 1e12)
            tmem = k.bytes / (spec.mem_bandwidth_gbs[-1] * 1e9)
            s = max(tcore, tmem)
            core_share[i], mem_share[i] = tcore / s, tmem / s
    t0 = 0.02 * np.ones(len(ks))
    unit = KernelParams(trace.kernel_keys, t0, core_share, mem_share, uc, um)
    cc = trace.capture_core_mhz or 0
    cm = trace.capture_mem_mhz or 0
    ki = np.arange(len(ks))
    ev = evaluate(spec, unit, np.full(len(ks), cc), np.full(len(ks), cm), kernel_index=ki)
    scale = trace.times_s / ev.time_s  # time is homogeneous in (t0, tc, tm) and power depends on their ratios only
    params = KernelParams(trace.kernel_keys, t0 * scale, core_share * scale, mem_share * scale, uc, um, "model")
    energies = [k.energy_j for k in ks]
    if all(e is not None for e in energies):
        params = anchor_power(spec, params, np.asarray(energies) / trace.times_s, cc, cm)
    return params


def anchor_power(spec: GpuSpec, params: KernelParams, power_w: np.ndarray, core_mhz: int = 0, mem_mhz: int = 0,
                 times_s: np.ndarray | None = None) -> KernelParams:
    """Solve each kernel's core activity (and rescale its times) so that the model gives ``power_w`` (and
    ``times_s``) at the given clocks. Used to anchor a model profile on measured per-kernel power."""
    power_w = np.asarray(power_w, dtype=float)
    if np.any(~np.isfinite(power_w)) or np.any(power_w <= 0):
        raise InputError("anchor power: every power must be a positive number of watts")
    n = len(params.keys)
    ki = np.arange(n)
    target_t = times_s if times_s is not None else evaluate(spec, params, np.full(n, core_mhz), np.full(n, mem_mhz),
                                                            kernel_index=ki).time_s
    lo, hi = np.zeros(n), np.full(n, 4.0)
    p = params
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        p = KernelParams(params.keys, params.t0_s, params.tc_s, params.tm_s, mid, params.um, params.source, params.p0_w)
        ev = evaluate(spec, p, np.full(n, core_mhz), np.full(n, mem_mhz), kernel_index=ki)
        low = ev.power_w < power_w
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    uc = 0.5 * (lo + hi)
    p = KernelParams(params.keys, params.t0_s, params.tc_s, params.tm_s, uc, params.um, params.source, params.p0_w)
    ev = evaluate(spec, p, np.full(n, core_mhz), np.full(n, mem_mhz), kernel_index=ki)
    s = np.asarray(target_t) / ev.time_s
    return KernelParams(params.keys, p.t0_s * s, p.tc_s * s, p.tm_s * s, uc, params.um, params.source, params.p0_w)
