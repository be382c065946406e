"""What a whole pass contains beyond its kernels measured alone: card-level pass-context terms, and the data checks
that say which of them the study's two tables allow (issue 11).

The study's per-kernel table measures each kernel alone (5 s loops, Spaan et al. 2026); its pass-level sweep (Figures
3/4) measures whole passes. ``kdvfs.passweep.predict_passes`` sums the kernels. The terms here sit between the kernel
sums and the pass, each acting on every setting, none on a single one:

- **gap** (``gap_share``, ``gap_core_w``; ``gapfwd`` adds ``gap_share_forward``): time between kernels (launches, host, synchronisation) that does not scale
  with the clocks, ``G = gap_share · Σ kernel time at auto`` per pass, drawing the card's idle power at the setting
  (idle base + the memory clock's power + the driver's auto-memory cost where memory is on auto) plus a core part
  ``gap_core_w · V(f)²f / (V(F)²F)`` (clock tree and leakage at the setting's core clock).
- **automem** (``auto_mem_pass_w``): what the driver's auto memory costs in a pass over what it costs each kernel alone,
  in W over the pass's time, where the memory is on auto, on the card's auto-memory core ramp
  (``GpuSpec.auto_mem_ramp``).
- **autocore** (``auto_core_time``, ``auto_core_power``): a pass with the core on auto runs slower by a fraction and
  draws more power by a fraction than its kernels alone (GPU Boost under a mixed load).
- **corepower** (``core_pass_w``): core power a pass draws beyond its kernels alone, scaled by V(f)²f, over the pass's
  time (what the joint fits ask of the gap term's core part, without the gap's time).

``sweep_bounds`` are the model-free checks: what the two tables allow each term to do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec

__all__ = ["PASS_TERMS", "PassContext", "apply_context", "context_params", "fit_context", "parse_terms", "sweep_bounds"]

# term → its parameters: (name, lower bound, upper bound, start), in PassContext's units
PASS_TERMS: dict[str, tuple[tuple[str, float, float, float], ...]] = {
    "gap": (("gap_share", 0.0, 0.3, 0.01), ("gap_core_w", 0.0, 300.0, 30.0)),
    "gapfwd": (("gap_share_forward", 0.0, 0.3, 0.01),),
    "automem": (("auto_mem_pass_w", 0.0, 150.0, 10.0),),
    "autocore": (("auto_core_time", -0.1, 0.1, 0.0), ("auto_core_power", -0.2, 0.2, 0.0)),
    "corepower": (("core_pass_w", -100.0, 200.0, 0.0),),
}


@dataclass(frozen=True, slots=True)
class PassContext:
    """Card-level terms between the kernels summed and the pass measured (all zero: the plain sum).

    Attributes:
        gap_share: gap time per pass as a share of the pass's kernel time at auto (constant over settings).
        gap_core_w: the gaps' core power at the boost clock, W, scaled by V(f)²f at the setting's core clock.
        gap_share_forward: more gap share in the forward pass only (the first of the passes axis), on top of
            ``gap_share``: the forward pass's slowest setting is 25 % faster than its kernels' slowest times summed,
            the backward's 1.6 % (``sweep_bounds``).
        auto_mem_pass_w: extra power of the driver's auto memory in a pass, W over the pass's time, on the card's
            auto-memory core ramp.
        auto_core_time: fraction by which a pass with the core on auto runs slower than its kernels' sum.
        auto_core_power: fraction by which it draws more power.
        core_pass_w: core power a pass draws beyond its kernels alone, W at the boost clock, scaled by V(f)²f at the
            setting's core clock, over the pass's time (a hotter card's leakage and clock tree in a sustained pass).
    """

    gap_share: float = 0.0
    gap_core_w: float = 0.0
    gap_share_forward: float = 0.0
    auto_mem_pass_w: float = 0.0
    auto_core_time: float = 0.0
    auto_core_power: float = 0.0
    core_pass_w: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not np.isfinite(v):
                raise InputError(f"pass context: {f.name} = {v!r} must be a finite number")
        if min(self.gap_share, self.gap_share_forward) < 0.0 or self.gap_share + self.gap_share_forward >= 1.0:
            raise InputError(f"pass context: gap_share = {self.gap_share!r} and gap_share_forward = "
                             f"{self.gap_share_forward!r} must be ≥ 0 with a sum below 1 (shares of pass time)")
        if self.auto_core_time <= -1.0 or self.auto_core_power <= -1.0:
            raise InputError("pass context: auto_core_time and auto_core_power must be above -1 (fractions)")

    @property
    def neutral(self) -> bool:
        return all(getattr(self, f.name) == 0.0 for f in fields(self))


def parse_terms(text: str) -> tuple[str, ...]:
    """``gap,automem`` → ("gap", "automem"); "" or "none" → (); an unknown name is an ``InputError``."""
    names = tuple(t.strip() for t in (text or "").split(",") if t.strip() and t.strip() != "none")
    for t in names:
        if t not in PASS_TERMS:
            raise InputError(f"pass term {t!r} is not one of {', '.join(PASS_TERMS)}; give a comma list of them "
                             "(or none)")
    return tuple(dict.fromkeys(names))


def context_params(terms: tuple[str, ...]) -> tuple[tuple[str, float, float, float], ...]:
    """The free parameters of the chosen terms, in ``PASS_TERMS`` order."""
    return tuple(p for t in PASS_TERMS if t in terms for p in PASS_TERMS[t])


def apply_context(ctx: PassContext, spec: GpuSpec, settings, kt: np.ndarray, ke: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Pass time and energy from the kernel sums ``kt``, ``ke`` (shape (..., passes, settings), seconds and joules)
    at ``settings`` (core_mhz, mem_mhz) pairs, which include (auto, auto): the reference of the gap time."""
    if ctx.neutral:
        return kt, ke
    settings = list(settings)
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    ia = settings.index((AUTO, AUTO))
    fc, fm = spec.effective_request(c, m)
    auto_mem = (m == AUTO).astype(float)
    auto_core = (c == AUTO).astype(float)
    pt, pe = kt, ke
    if ctx.gap_share or ctx.gap_share_forward:
        share = np.array([ctx.gap_share + ctx.gap_share_forward, ctx.gap_share])[:kt.shape[-2], None]
        gap_s = share / (1.0 - share) * kt[..., ia:ia + 1]   # a share of the pass time at auto
        idle = (spec.idle_power_w - spec.mem_power_w[-1] + np.interp(fm, spec.mem_clocks_mhz, spec.mem_power_w)
                + auto_mem * spec.auto_mem_extra_w * spec.auto_mem_ramp(fc) + ctx.gap_core_w * spec.core_power_shape(fc))
        pt = pt + gap_s
        pe = pe + gap_s * idle
    if ctx.auto_mem_pass_w:
        pe = pe + ctx.auto_mem_pass_w * auto_mem * spec.auto_mem_ramp(fc) * pt
    if ctx.core_pass_w:
        pe = pe + ctx.core_pass_w * spec.core_power_shape(fc) * pt
    if ctx.auto_core_time or ctx.auto_core_power:
        ft = 1.0 + ctx.auto_core_time * auto_core
        pt = pt * ft
        pe = pe * ft * (1.0 + ctx.auto_core_power * auto_core)
    return pt, pe


def sweep_bounds(rows: list[dict], time_change_pct: np.ndarray, energy_change_pct: np.ndarray, passes: np.ndarray
                 ) -> list[dict]:
    """Model-free checks of the per-kernel table (``kdvfs.calibrate.read_table`` rows, trace order) against the
    pass-level sweep (shape (2, settings), percent), per pass (``passes``: 0 forward, 1 backward per kernel).

    A kernel's time does not fall as its clocks fall, so under "pass = kernels summed" the pass's slowest setting is
    every kernel's slowest: ``Σ t_max`` equals the pass's largest time change; likewise the pass's cheapest setting
    cannot beat ``Σ e_min``. With constant gaps (share g of the pass time at auto) the pass's time changes are the
    kernels' times (1 − g), so ``g ≤ 1 − max pass change / Σ t_max change``; the gaps' energy share at auto
    γ = g · P_gap / P_pass then has to make up the energy the kernels cannot: ``P_gap ≥ P_pass · (Σe_min − e_pass)
    / (g · Σe_min)`` even with gap power falling to 0 at the cheapest setting. A pass baseline more expensive than its
    kernels' (an auto-clock overhead X) needs only ``X ≥ Σe_min / e_pass − 1``.
    """
    rep = np.array([r["repeat"] for r in rows], dtype=float)
    out = []
    for k, name in enumerate(("forward", "backward")):
        w = rep * (np.asarray(passes) == k)
        ta = w @ np.array([r["t_auto"] for r in rows])
        ea = w @ np.array([r["e_auto"] for r in rows])
        tmax = w @ np.array([r["t_max"] for r in rows]) / ta - 1
        emin = w @ np.array([r["e_min"] for r in rows]) / ea
        pass_tmax = float(np.max(time_change_pct[k])) / 100
        pass_emin = 1 + float(np.min(energy_change_pct[k])) / 100
        g_max = max(1 - pass_tmax / tmax, 0.0)
        p_pass = ea / ta
        deficit = emin - pass_emin  # > 0: the pass is cheaper than its kernels' minima allow
        out.append({
            "pass": name, "kernel_time_max_sum_pct": 100 * tmax, "pass_time_max_pct": 100 * pass_tmax,
            "kernel_energy_min_sum_pct": 100 * (emin - 1), "pass_energy_min_pct": 100 * (pass_emin - 1),
            "time_max_ratio": (1 + pass_tmax) / (1 + tmax),
            "gap_share_max": g_max, "pass_power_auto_w": p_pass,
            "gap_power_needed_w": (p_pass * deficit / (g_max * emin) if deficit > 0 and g_max > 0
                                   else (float("inf") if deficit > 0 else 0.0)),
            "baseline_overhead_needed": max(emin / pass_emin - 1, 0.0),
        })
    return out


def fit_context(spec: GpuSpec, settings, kt: np.ndarray, ke: np.ndarray, time_change_pct: np.ndarray,
                energy_change_pct: np.ndarray, terms: tuple[str, ...], rel_sigma: float = 0.01,
                mask: np.ndarray | None = None) -> PassContext:
    """The chosen terms' parameters that best turn the kernel sums ``kt``, ``ke`` (shape (passes, settings)) into the
    measured pass-level changes, with the kernels held: residuals in points over ``1 + rel_sigma · |measured|``, as in
    the joint fit's pass-level part, over the settings ``mask`` selects (default all). Deterministic (fixed start,
    trust-region least squares)."""
    from scipy.optimize import least_squares

    pp = context_params(terms)
    if not pp:
        return PassContext()
    settings = list(settings)
    ia = settings.index((AUTO, AUTO))
    lo = np.array([p[1] for p in pp])
    hi = np.array([p[2] for p in pp])
    sig_t = 1 + rel_sigma * np.abs(time_change_pct)
    sig_e = 1 + rel_sigma * np.abs(energy_change_pct)
    use = np.ones(len(settings), bool) if mask is None else np.asarray(mask, bool)

    def ctx_of(z):
        return PassContext(**{p[0]: float(v) for p, v in zip(pp, lo + np.clip(z, 0, 1) * (hi - lo))})

    def resid(z):
        pt, pe = apply_context(ctx_of(z), spec, settings, kt, ke)
        mt, me = 100 * (pt / pt[:, ia:ia + 1] - 1), 100 * (pe / pe[:, ia:ia + 1] - 1)
        return np.concatenate([((mt - time_change_pct) / sig_t)[:, use].ravel(),
                               ((me - energy_change_pct) / sig_e)[:, use].ravel()])

    z0 = np.array([(p[3] - p[1]) / (p[2] - p[1]) for p in pp])
    r = least_squares(resid, z0, bounds=(0.0, 1.0), x_scale="jac", ftol=1e-12, xtol=1e-12, gtol=1e-12)
    return ctx_of(r.x)
