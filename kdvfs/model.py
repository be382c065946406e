"""The kernel time/power model, with power-cap throttling to an effective clock.

For a kernel with parameters (t0, tc, tm, uc, um) on a card ``spec``, at effective core clock fc and memory clock fm:

- time: ``t = t0 + ((tc·F/fc·s(fc))^p + (tm·B_ref/B(fm))^p)^(1/p)`` — a smooth maximum of a core term and a memory
  term (F the boost clock, B the memory bandwidth, p ``spec.smooth_p_at(fm)``); p = 1 is the additive form of
  DESIGN.md. ``s(f) = 1 + (f_slow/f)^k`` (``spec.slow_core_mhz``, ``spec.slow_exponent``; 1 when unset) lets the core
  term grow faster than 1/f below a clock, as real sweeps of some cards show.
- power: ``P = P_idle(fm) + Pc·uc·V(fc)²fc/(V(F)²F) + Pm·um·tm/t`` — idle power with a memory-clock-proportional part,
  core dynamic power on the card's voltage curve, and memory traffic power proportional to bytes per second; with
  the driver's auto memory clock, ``(auto_mem_extra_w + auto_mem_traffic_w·um·tm/t) · spec.auto_mem_ramp(fc)`` more;
  with ``spec.leak_w`` (off on every preset) static power follows the core voltage, ``leak_w·((V(fc)/V(F))^a − 1)``.
- throttling: when ``P`` at the requested clocks exceeds the cap, the core clock falls to where ``P = cap``. The driver
  holds the cap by moving between adjacent clock bins, so by default the effective clock is that time-averaged value;
  ``binned=True`` instead takes the highest supported bin under the cap (DESIGN.md's literal rule).
- auto: the driver's own choice: boost clock and highest memory clock, throttled the same way.
- activity from work (cards whose preset has ``work_activity``, the H200): a kernel's core activity is
  ``base + c_dtype · util_core + c_mem · util_mem`` with ``util_core`` its FLOP rate over the dtype's peak at the
  clock it runs at and ``util_mem`` its bytes per second over the memory bandwidth; memory traffic power is
  ``Pm · util_mem``. Its time splits into core and memory terms by FLOPs / peak and bytes / bandwidth. Kernels
  without FLOPs and bytes, and every other card, keep the category priors.

Evaluation is vectorised over kernels × settings; there is no Python loop over the clock grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kdvfs.arrays import frozen_array
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.trace import Trace

__all__ = ["KernelParams", "ModelEval", "evaluate", "default_params", "anchor_power", "CATEGORY_PRIORS",
           "activity_from_work", "params_from_work"]

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

    def __post_init__(self) -> None:
        # during construction only: the frozen value keeps read-only copies of the arrays it was given
        for nm in ("t0_s", "tc_s", "tm_s", "uc", "um"):
            object.__setattr__(self, nm, frozen_array(getattr(self, nm), float))
        if self.p0_w is not None:
            object.__setattr__(self, "p0_w", frozen_array(self.p0_w, float))

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
    if auto_mem is not None and (spec.auto_mem_extra_w or spec.auto_mem_traffic_w):
        traffic = um * tm / t
        # what the driver's auto memory costs over a locked clock, more the busier the memory is; on the 3080 Ti only
        # once the core runs near its top clocks: with the core locked at 1050 MHz, auto memory and 9501 MHz draw the
        # same (the study)
        idle = idle + np.where(auto_mem, (spec.auto_mem_extra_w + spec.auto_mem_traffic_w * traffic)
                               * spec.auto_mem_ramp(fc), 0.0)
    # the same order of operations as before the auto-memory term: stored fits are reproduced to the last bit
    traffic_w = spec.mem_traffic_power_w * um * tm / t
    if spec.mem_traffic_scale:  # energy per byte falls with the memory clock (default off: every card but a joint fit)
        traffic_w = traffic_w * np.interp(fm, spec.mem_clocks_mhz, spec.mem_traffic_scale)
    if spec.leak_w:  # static power that follows the core voltage (default off: every preset)
        idle = idle + spec.leak_delta_w(fc)
    return idle + spec.core_power_w * uc * spec.core_power_shape(fc) + traffic_w


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
    if spec.auto_mem_bw_factor != 1.0:
        # the driver's auto memory moves data a little faster than the same clock locked (the study's backward pass is
        # 0.39 % slower with memory locked at 9501 MHz than on auto, and 1.14 % at 9251): its memory term shrinks
        tm = tm / np.where(auto_mem, spec.auto_mem_bw_factor, 1.0)
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
        for _ in range(40):  # bisection: power rises monotonically with the core clock
            mid = 0.5 * (lo + hi)
            tt = _time(spec, a[0], a[1], a[2], mid, a[5])
            ok = _power(spec, a[1], a[2], a[3], a[4], mid, a[5], tt, a[6], a[7]) <= cap
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        f = lo
        if binned:
            bins = np.asarray(spec.core_clocks_mhz, dtype=float)
            f = bins[np.clip(np.searchsorted(bins, f, side="right") - 1, 0, len(bins) - 1)]
        eff[idx] = f
        t = _time(spec, t0, tc, tm, eff, fm)
        pw = _power(spec, tc, tm, uc, um, eff, fm, t, extra, auto_mem)
    return ModelEval(time_s=t, power_w=pw, energy_j=t * pw, core_mhz=eff, mem_mhz=fm.astype(float), throttled=over)


def default_params(trace: Trace, spec: GpuSpec) -> KernelParams:
    """Model parameters from category, FLOPs and bytes, scaled so that time at the capture clocks matches the trace.

    On a card with ``work_activity`` (the H200) every kernel's activity comes from its work (``params_from_work``):
    the trace's FLOPs and bytes, or for kernels without them the estimate from the kernel's name and launch grid
    (``kdvfs.work.work_from_name``); only kernels with neither keep the category priors.
    Where the trace has each kernel's energy at capture, the core activity is solved so that power matches too.
    """
    ks = trace.kernels
    cc = trace.capture_core_mhz or 0
    cm = trace.capture_mem_mhz or 0
    if spec.work_activity:
        from kdvfs.access import strided_copies
        from kdvfs.occupancy import SM_COUNT, direct_convolution, sm_fractions, thread_occupancies
        from kdvfs.work import NAME_PEAK_FLOPS, math_class, work_from_name, writes_constant

        fl, by, maths = [], [], []
        for k in ks:
            f, b, dt = k.flops, k.bytes, k.dtype
            if not (f or b):
                w = work_from_name(k.name, k.category, k.grid, k.block, k.time_s, peak_flops=NAME_PEAK_FLOPS)
                if w is not None:
                    f, b, dt = w.flops, w.bytes, w.dtype
            fl.append(f or 0.0)
            by.append(b or 0.0)
            maths.append(k.math or math_class(k.category, dt, None if dt else False))
        # a kernel that ran beside others of its op (``Kernel.concurrency``) kept their SMs busy too while it held its
        # share of the wall time
        conc = np.array([k.concurrency or 1.0 for k in ks])
        sms = SM_COUNT.get(spec.name, 132)
        params = params_from_work(spec, fl, by, maths, [k.category for k in ks], trace.kernel_keys, trace.times_s,
                                  core_mhz=cc or None, mem_mhz=cm or None,
                                  constant_write=[writes_constant(k.name) for k in ks],
                                  sm_fraction=np.minimum(1.0, sm_fractions([k.grid for k in ks], sms) * conc),
                                  dot_product=[direct_convolution(k.name) for k in ks],
                                  strided=strided_copies([k.name for k in ks]),
                                  occupancy=np.minimum(1.0, thread_occupancies([k.grid for k in ks],
                                                                               [k.block for k in ks], sms) * conc))
    else:
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


def dram_fraction(spec: GpuSpec, working_set_bytes) -> np.ndarray:
    """The share of a kernel's bytes that reach device memory: ``1 / (1 + (l2 / ws)^4)`` with ``l2`` =
    ``work_activity["l2_mb"]`` MB (fitted; absent: 1, every byte from memory). A kernel whose working set fits in L2
    (it was just written there, or is re-read) moves its bytes through L2 only."""
    ws = np.asarray(working_set_bytes, dtype=float)
    l2 = dict(spec.work_activity).get("l2_mb")
    if not l2:
        return np.ones_like(ws)
    return 1.0 / (1.0 + (l2 * 1e6 / np.maximum(ws, 1.0)) ** 4)


def activity_from_work(spec: GpuSpec, flops, nbytes, maths, time_s, core_mhz, categories=None,
                       working_set_bytes=None, constant_write=None, sm_fraction=None,
                       dot_product=None, occupancy=None, strided=None) -> tuple[np.ndarray, np.ndarray]:
    """(core activity, memory utilisation) of kernels from their work and their time at a core clock.

    ``util_core = flops / (peak(math) · f / F · t)`` (the share of the math class's peak rate at clock ``f``;
    ``kdvfs.work.math_class``: tensor16, tf32, fp8 or simt), ``util_mem = bytes / (B · t)``, both clipped to
    [0, 1.2]; core activity is ``base + c_math · util_core + c_mem · util_mem``, coefficients from
    ``spec.work_activity`` (fp8 uses tensor16's). Where ``work_activity`` has ``ew``, SIMT FLOPs of kernels that are
    not GEMMs or attention (given ``categories``) take that coefficient instead of ``simt``: an elementwise op's
    nominal FLOPs come with many more instructions each (loads, conversions, indexing) than a GEMM's. Where it has
    ``att``, the math coefficient of fused attention kernels (category ``attention``) is multiplied by it: beside its
    matrix products on the tensor cores a flash-attention kernel computes the softmax of every score (maximum,
    exponential, sum, rescaling) on the SIMT and special-function units, so it draws more per tensor FLOP than a GEMM
    (the zoo's attention bursts at 1980 MHz: 9–16 % above a GEMM's activity at their FLOP rate). The memory
    utilisation returned (memory-traffic power) counts only the bytes that reach device memory
    (``dram_fraction`` of ``working_set_bytes``, default the bytes themselves). ``constant_write`` (per kernel, optional;
    ``kdvfs.work.writes_constant``): a kernel that only writes one repeated value (a fill, a memset) moves no
    traffic power — its bits do not toggle on the memory bus.

    Structures for small launches (session 8; each acts only where ``work_activity`` has its field; the bundled fit
    has ``occ_exp`` without ``occ_rate_floor``, and ``conv_dot``: ``kdvfs.calibrate_h200.STRUCTURES`` and
    ``DEFAULT_STRUCTURE``, ``validation/h200/small_kernels/``):

    - ``occ_exp`` (γ) with ``occupancy`` (per kernel, the share of the card's resident-thread slots its first wave
      fills: ``kdvfs.occupancy.thread_occupancy``; 1 where unknown): the base activity of kernels other than GEMMs
      and attention is multiplied by ``occupancy^γ`` — the warp schedulers issue only from resident warps, and
      sub-partitions without one are clock-gated (the zoo's graph replays at 1980 MHz: a LayerNorm over 512 rows,
      24 % of the slots, draws 226 W, over 3136 rows 405 W). With the switch ``occ_rate_floor`` the factor is at
      least the kernel's achieved share of its roofline, ``max(util_core, util_mem)``: a kernel that reaches its
      roofline with fewer warps issues at full rate all the same. GEMMs and attention keep their base: they run one
      or two large blocks per SM by design, and their activity is in the tensor pipes, which their FLOP rate counts.
    - ``sm_floor`` with ``sm_fraction`` (per kernel, the share of the SMs with a resident block,
      ``kdvfs.occupancy.sm_fraction``): the base scales as ``sm_floor + (1 − sm_floor) · sm_fraction``.
    - ``rate_exp`` (γ): the base scales as ``u^γ``, ``u`` = ``max(util_core, util_mem)`` clipped to (0, 1].
    - ``tensor_rate_exp`` (γ): a GEMM's or attention's base scales as ``util_core^γ``.
    - ``tensor_sm_floor`` with ``sm_fraction``: a GEMM's or attention's base (only theirs) scales as
      ``tensor_sm_floor + (1 − tensor_sm_floor) · sm_fraction``.
    - ``conv_dot`` (a switch) with ``dot_product`` (``kdvfs.occupancy.direct_convolution``): a direct convolution's
      SIMT FLOPs take ``simt``, a GEMM's coefficient on the CUDA cores, not ``ew``.
    - ``conv_rate`` with ``dot_product``: a direct convolution's SIMT FLOPs take this fitted coefficient of their own
      (over ``conv_dot``'s ``simt`` and ``ew``): each multiply-add loads its input operand through L1.
    - ``tensor_knee`` (u₀) and ``tensor_knee_exp`` (γ): a GEMM's or attention's base scales as
      ``min(1, util_core / u₀)^γ``: tensor-rate below the card's saturation only.
    - ``strided_traffic`` (s) with ``strided`` (per kernel, ``kdvfs.access.strided_copy``): the memory traffic of a
      copy between operands of different strides is ``1 + s`` times its useful bytes (whole sectors per element).

    The work terms are never scaled: FLOPs and bytes per second are already the whole chip's. Kernels without work
    keep the category prior.
    """
    co = dict(spec.work_activity)
    flops, nbytes, t, f = (np.asarray(x, dtype=float) for x in (flops, nbytes, time_s, core_mhz))
    peak = np.array([spec.peak_flops(m) for m in maths])
    util_c = np.clip(flops / (peak * f / spec.boost_core_mhz * t), 0.0, 1.2)
    util_m = np.clip(nbytes / (spec.mem_bandwidth_gbs[-1] * 1e9 * t), 0.0, 1.2)
    keys = ["tensor16" if m == "fp8" else m for m in maths]
    if "ew" in co and categories is not None:
        dot = [bool(d) for d in dot_product] if dot_product is not None and co.get("conv_dot") else [False] * len(keys)
        keys = ["ew" if k == "simt" and c not in ("gemm", "attention") and not d else k
                for k, c, d in zip(keys, categories, dot)]
    cls = np.array([co.get(k, 1.0) for k in keys])
    if "att" in co and categories is not None:
        cls = cls * np.where(np.array([c == "attention" for c in categories], dtype=bool), co["att"], 1.0)
    if "conv_rate" in co and dot_product is not None and categories is not None:
        # a direct convolution's multiply-adds each load their input operand through L1 (no register tile reuses
        # it, as a GEMM's does), so its SIMT FLOPs take a coefficient of their own (session 10, the conv set)
        conv = np.array([bool(d) and c not in ("gemm", "attention") and k in ("simt", "ew")
                         for d, c, k in zip(dot_product, categories, keys)], dtype=bool)
        cls = np.where(conv, co["conv_rate"], cls)
    base: np.ndarray | float = co.get("base", 0.0)
    if "sm_floor" in co and sm_fraction is not None:
        phi = np.clip(np.asarray(sm_fraction, dtype=float), 0.0, 1.0)
        base = base * (co["sm_floor"] + (1.0 - co["sm_floor"]) * phi)
    if "occ_exp" in co and occupancy is not None:
        occ = np.clip(np.asarray(occupancy, dtype=float), 1e-6, 1.0)
        if categories is not None:  # tensor-core kernels run few, large blocks by design: their residency is no issue rate
            # (switch ``occ_simt``: only those on tensor cores; a GEMM-category kernel on the CUDA cores, such as cuDNN's
            # convolve_sgemm engines, issues from its resident warps as any SIMT kernel does)
            simt_too = bool(co.get("occ_simt"))
            occ = np.where(np.array([c in ("gemm", "attention") and not (simt_too and k in ("simt", "ew"))
                                     for c, k in zip(categories, keys)], dtype=bool), 1.0, occ)
        scale = occ ** co["occ_exp"]
        if co.get("occ_rate_floor"):  # a switch: a kernel at its roofline issues at full rate whatever its residency
            scale = np.maximum(scale, np.clip(np.maximum(util_c, util_m), 0.0, 1.0))
        base = base * scale
    if "tensor_sm_floor" in co and sm_fraction is not None and categories is not None:
        # a GEMM's or attention's tiles run one block per SM: a grid of fewer blocks than SMs leaves the others idle,
        # and their share of the tensor kernel's base power goes with them (session 10, the tiny-grid set)
        tens = np.array([c in ("gemm", "attention") for c in categories], dtype=bool)
        phi = np.clip(np.asarray(sm_fraction, dtype=float), 0.0, 1.0)
        base = base * np.where(tens, co["tensor_sm_floor"] + (1.0 - co["tensor_sm_floor"]) * phi, 1.0)
    if co.get("tensor_rate_exp") and categories is not None:
        # a GEMM's or attention's base scales with its tensor rate: tiny tiles leave resident blocks waiting
        tens = np.array([c in ("gemm", "attention") for c in categories], dtype=bool)
        base = base * np.where(tens, np.clip(util_c, 1e-6, 1.0) ** co["tensor_rate_exp"], 1.0)
    if co.get("tensor_knee") and categories is not None:
        # below the card's saturation only (session 12, the tiny-grid sets): a GEMM's or attention's base scales as
        # (util_core / knee)^γ under the knee, so few-tile and batched small GEMMs, whose resident blocks wait on
        # their operands, draw less, while the large GEMMs of real steps (above the knee) keep their fitted base
        tens = np.array([c in ("gemm", "attention") for c in categories], dtype=bool)
        rel = np.clip(util_c / co["tensor_knee"], 1e-6, 1.0) ** co.get("tensor_knee_exp", 1.0)
        base = base * np.where(tens, rel, 1.0)
    if co.get("rate_exp"):
        u = np.clip(np.maximum(util_c, util_m), 1e-6, 1.0)
        base = base * u ** co["rate_exp"]
    uc = base + cls * util_c + co.get("mem", 0.0) * util_m
    dram = dram_fraction(spec, nbytes if working_set_bytes is None else working_set_bytes)
    if "strided_traffic" in co and strided is not None:
        # a copy between layouts moves a whole sector per element: traffic beyond the useful bytes (session 12)
        util_m = util_m * np.where(np.asarray(strided, dtype=bool), 1.0 + co["strided_traffic"], 1.0)
    if constant_write is not None:
        # the I/O energy of DRAM and of the on-chip wires is spent on bits that toggle: writing one value over and over
        # toggles none (the zoo's fill: 401 W at 3.4 TB/s of writes, 13 W above a kernel that moves nothing, where a
        # copy of random data at 4.2 TB/s draws 618 W; the cast, 2/3 writes, says writes of data cost as reads do)
        dram = dram * np.where(np.asarray(constant_write, dtype=bool), 0.0, 1.0)
    return uc, util_m * dram


def params_from_work(spec: GpuSpec, flops, nbytes, maths, categories, keys, times_s, core_mhz=None,
                     mem_mhz=None, solve_clock: bool = False, iterations: int = 6,
                     working_set_bytes=None, constant_write=None, sm_fraction=None,
                     dot_product=None, occupancy=None, strided=None) -> KernelParams:
    """Model parameters from each kernel's work and its measured time.

    Args:
        spec: the card (needs ``work_activity`` for activity from work; else the category priors' activity).
        flops, nbytes, categories, keys: per kernel.
        maths: per kernel, where its arithmetic runs (``kdvfs.work.math_class``); picks the peak rate.
        times_s: duration of one invocation at the capture clocks.
        core_mhz: the core clock each time was measured at. ``None`` or ``AUTO`` (the driver's own choice): the
            boost clock — kernels captured inside a training step ran near it (the H200 steps measured in
            validation/h200/steps: SM clock medians 1875–1980 MHz), whatever they would do alone.
        solve_clock: with ``core_mhz`` unknown, instead solve the capture clock together with the activity as the
            clock the cap allows the kernel alone (fixed-point rounds): right for kernels captured alone.
        mem_mhz: memory clock at capture (default the highest).
        working_set_bytes: per kernel, the bytes one launch touches (for L2 residency; default ``nbytes``).
        constant_write: per kernel, whether it only writes a repeated value (``activity_from_work``; default none).
        sm_fraction: per kernel, the share of the SMs its launch grid keeps busy (``kdvfs.occupancy.sm_fractions``;
            ``activity_from_work``; default none: all busy).
        dot_product: per kernel, whether its SIMT FLOPs are dot-product multiply-adds (``activity_from_work``).
        occupancy: per kernel, the share of resident-thread slots its launch fills (``activity_from_work``).
        strided: per kernel, whether it copies between layouts (``kdvfs.access.strided_copy``; ``activity_from_work``).
    """
    n = len(keys)
    flops = np.asarray(flops, dtype=float)
    nbytes = np.asarray(nbytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    pri = np.array([CATEGORY_PRIORS[c] for c in categories]).reshape(n, 4)
    peak = np.array([spec.peak_flops(m) for m in maths])
    tcore = flops / peak
    tmem = nbytes / (spec.mem_bandwidth_gbs[-1] * 1e9)
    big = np.maximum(tcore, tmem)
    has = big > 0
    core_share = np.where(has, tcore / np.where(has, big, 1.0), pri[:, 0])
    mem_share = np.where(has, tmem / np.where(has, big, 1.0), pri[:, 1])
    t0 = np.full(n, 0.02)
    cm = np.full(n, spec.max_mem_mhz if mem_mhz in (None, AUTO) else mem_mhz, dtype=float)
    unknown = core_mhz is None or np.all(np.asarray(core_mhz) == AUTO)
    auto = unknown and solve_clock
    fc = np.full(n, float(spec.boost_core_mhz)) if unknown else np.asarray(core_mhz, dtype=float) * np.ones(n)
    ki = np.arange(n)
    use_work = bool(spec.work_activity)
    uc, um = pri[:, 2].copy(), pri[:, 3].copy()
    params = KernelParams(tuple(keys), t0, core_share, mem_share, uc, um, "model")
    for _ in range(iterations if auto else 1):
        unit = KernelParams(tuple(keys), t0, core_share, mem_share, uc, um, "model")
        ev = evaluate(spec, unit, fc, cm, kernel_index=ki, cap_w=np.inf)  # time at exactly the capture clock
        scale = times / ev.time_s  # time is homogeneous in (t0, tc, tm)
        tc_s, tm_s, t0_s = core_share * scale, mem_share * scale, t0 * scale
        if use_work:
            uw, util_m = activity_from_work(spec, flops, nbytes, maths, times, fc, categories, working_set_bytes,
                                            constant_write, sm_fraction, dot_product, occupancy, strided)
            uc = np.where(has, uw, pri[:, 2])
            t_here = _time(spec, t0_s, tc_s, tm_s, fc, cm)
            share = np.where(tm_s > 0, tm_s * (spec.mem_bandwidth_gbs[-1] / spec.bandwidth_gbs(cm)) / t_here, 1.0)
            um = np.where(has, util_m / np.maximum(share, 1e-9), pri[:, 3])
        params = KernelParams(tuple(keys), t0_s, tc_s, tm_s, uc, um, "model")
        if auto:
            fc = evaluate(spec, params, np.zeros(n), cm, kernel_index=ki).core_mhz
    return params
