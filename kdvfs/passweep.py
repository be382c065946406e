"""The study's pass-level sweep (Spaan et al. 2026, Figures 3 and 4) and the model's prediction of it.

The sweep gives, for the whole forward and the whole backward pass of the GPT-3 XL iteration with every kernel locked to
one of the 66 settings, the change of time and energy against auto clocks. The model predicts it by summing its
per-kernel values over the kernels of each pass (each kernel × its repeats) at that setting.

Which side the loss kernels fall on is not stated by the study; ``loss_pass`` chooses (``backward``: the natural llm.c
split, forward = embedding + forward layers).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.profile import parse_clock

__all__ = ["PASSES", "SETTINGS_CHOICES", "STUDY_CORES", "STUDY_MEMS", "PassSweep", "main_region", "pass_errors",
           "pass_index", "pass_rows", "predict_passes", "read_pass_sweep", "restrict_settings", "study_settings"]

PASSES = ("forward", "backward")
STUDY_CORES = (210, 420, 630, 840, 1050, 1260, 1470, 1680, 1890, 2100, AUTO)
STUDY_MEMS = (405, 810, 5001, 9251, 9501, AUTO)


def study_settings() -> list[tuple[int, int]]:
    """The study's 66 measured settings (core × memory, ``AUTO`` included), memory-major."""
    return [(c, m) for m in STUDY_MEMS for c in STUDY_CORES]


def _fmt(c: int) -> str:
    return "auto" if c == AUTO else str(c)


@dataclass(frozen=True, slots=True)
class PassSweep:
    """Attributes:
        settings: the 66 (core_mhz, mem_mhz) pairs, in ``study_settings()`` order.
        time_change_pct: shape (2, 66): forward and backward time change against auto, percent.
        energy_change_pct: shape (2, 66): the same for energy.
        path: where it was read from.
    """

    settings: tuple[tuple[int, int], ...]
    time_change_pct: np.ndarray
    energy_change_pct: np.ndarray
    path: str = ""


def _parse_clock(v: str, what: str, where: str) -> int:
    """``profile.parse_clock`` (one rule for a clock in any file), its message placed at the row."""
    try:
        return parse_clock(v, what)
    except FormatError as e:
        raise InputError(f"{where}: {e}; fix that cell") from None


def read_pass_sweep(path: str | Path, spec: GpuSpec | None = None) -> PassSweep:
    """Read and check the pass-level sweep: every pass at every one of the 66 settings exactly once, finite numbers,
    clocks the card (``spec``) has. Any violation is one ``InputError`` naming the row and the fix."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"pass-level sweep {str(path)!r} cannot be read ({e.strerror or e}); give the path of "
                         "spaan2026_fig3_fig4_pass_level.csv") from None
    need = ("pass", "mem_mhz", "core_mhz", "time_change_pct", "energy_change_pct")
    if not rows or any(c not in rows[0] for c in need):
        raise InputError(f"pass-level sweep {str(path)!r} needs columns {', '.join(need)}; "
                         f"it has {', '.join(rows[0]) if rows else 'no rows'}")
    st = study_settings()
    idx = {s: i for i, s in enumerate(st)}
    dt = np.full((2, len(st)), np.nan)
    de = np.full((2, len(st)), np.nan)
    for n, r in enumerate(rows, start=2):
        where = f"pass-level sweep {str(path)!r} line {n}"
        p = (r["pass"] or "").strip()
        if p not in PASSES:
            raise InputError(f"{where}: pass {p!r} is not forward or backward")
        c = _parse_clock(r["core_mhz"], "core_mhz", where)
        m = _parse_clock(r["mem_mhz"], "mem_mhz", where)
        if spec is not None:
            if c != AUTO and c not in spec.core_clocks_mhz:
                raise InputError(f"{where}: core clock {c} MHz is not one {spec.name} has ({spec.describe_clocks()}); "
                                 "fix the clock: the sweep must be the RTX 3080 Ti's (the study's card)")
            if m != AUTO and m not in spec.mem_clocks_mhz:
                raise InputError(f"{where}: memory clock {m} MHz is not one {spec.name} has ({spec.describe_clocks()}); "
                                 "fix the clock: the sweep must be the RTX 3080 Ti's (the study's card)")
        if (c, m) not in idx:
            raise InputError(f"{where}: setting {_fmt(c)}/{_fmt(m)} MHz is not one of the study's 66 settings "
                             f"(core {', '.join(map(_fmt, STUDY_CORES))} × memory {', '.join(map(_fmt, STUDY_MEMS))})")
        try:
            t_pct, e_pct = float(r["time_change_pct"]), float(r["energy_change_pct"])
        except (TypeError, ValueError):
            t_pct = e_pct = float("nan")
        if not (math.isfinite(t_pct) and math.isfinite(e_pct)) or t_pct <= -100 or e_pct <= -100:
            raise InputError(f"{where}: time/energy change {r['time_change_pct']!r}/{r['energy_change_pct']!r} must be "
                             "finite percentages above -100; fix or restore that row")
        k, i = PASSES.index(p), idx[(c, m)]
        if not np.isnan(dt[k, i]):
            raise InputError(f"{where}: {p} at {_fmt(c)}/{_fmt(m)} MHz appears twice; keep one row per pass and setting")
        dt[k, i], de[k, i] = t_pct, e_pct
    miss = np.argwhere(np.isnan(dt))
    if len(miss):
        k, i = miss[0]
        raise InputError(f"pass-level sweep {str(path)!r} misses {len(miss)} of the {2 * len(st)} rows, e.g. "
                         f"{PASSES[k]} at core {_fmt(st[i][0])} / memory {_fmt(st[i][1])} MHz; every pass needs all 66 "
                         "settings")
    dt.setflags(write=False)
    de.setflags(write=False)
    return PassSweep(tuple(st), dt, de, str(path))


def pass_index(trace, loss_pass: str = "backward") -> np.ndarray:
    """0 (forward) or 1 (backward) per kernel of the trace; the ``loss`` segment goes to ``loss_pass``."""
    if loss_pass not in PASSES:
        raise InputError(f"loss pass {loss_pass!r} is not forward or backward")
    out = []
    for si in trace.kernel_segment:
        seg = trace.segments[si]
        if seg.name == "loss":
            out.append(PASSES.index(loss_pass))
        else:
            out.append(0 if seg.pass_name == "forward" else 1)
    return np.array(out)


def main_region(settings) -> np.ndarray:
    """The settings the issue's worst-case target covers: core ≥ 630 MHz (or auto) and memory ≥ 5001 MHz or auto."""
    return np.array([(c == AUTO or c >= 630) and (m == AUTO or m >= 5001) for c, m in settings])


def predict_passes(T: np.ndarray, E: np.ndarray, repeats: np.ndarray, passes: np.ndarray, auto: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Pass-level time and energy change (percent, shape (2, settings)) from per-kernel tables (kernels × settings)."""
    w = np.stack([repeats * (passes == k) for k in range(2)])
    pt, pe = w @ T, w @ E
    return 100 * (pt / pt[:, auto:auto + 1] - 1), 100 * (pe / pe[:, auto:auto + 1] - 1)


def pass_errors(T, E, repeats, passes, sweep: PassSweep, context=None, spec: GpuSpec | None = None) -> dict:
    """Model minus study, in points, and the issue's summary numbers; with a ``kdvfs.passcontext.PassContext`` (and
    the card ``spec`` it acts on) the kernel sums pass through its terms first."""
    auto = sweep.settings.index((AUTO, AUTO))
    if context is None or context.neutral:
        mt, me = predict_passes(T, E, repeats, passes, auto)
    else:
        from kdvfs.passcontext import apply_context

        if spec is None:
            raise InputError("pass_errors: a pass context needs the card (spec) it acts on")
        w = np.stack([repeats * (passes == k) for k in range(2)])
        pt, pe_ = apply_context(context, spec, sweep.settings, w @ T, w @ E)
        mt, me = 100 * (pt / pt[:, auto:auto + 1] - 1), 100 * (pe_ / pe_[:, auto:auto + 1] - 1)
    et, ee = mt - sweep.time_change_pct, me - sweep.energy_change_pct
    reg = main_region(sweep.settings)
    return {
        "model_time_change_pct": mt, "model_energy_change_pct": me, "time_err": et, "energy_err": ee,
        "median_abs_time_err": float(np.median(np.abs(et))), "median_abs_energy_err": float(np.median(np.abs(ee))),
        "worst_main_time_err": float(np.abs(et[:, reg]).max()), "worst_main_energy_err": float(np.abs(ee[:, reg]).max()),
    }


SETTINGS_CHOICES = ("all", "study")


def restrict_settings(profile, which: str = "all"):
    """The profile over a named set of settings: ``all`` (as it is: the card's full grid) or ``study`` (the study's
    66 settings, Spaan et al. 2026, so that results compare with the paper on its own grid)."""
    if which not in SETTINGS_CHOICES:
        raise InputError(f"--settings {which!r} is not one of {', '.join(SETTINGS_CHOICES)}")
    if which == "all":
        return profile
    have = set(profile.settings)
    rows_of = {s: r for s in study_settings() if s not in have and (r := _runs_as(profile.gpu, s)) in have}
    missing = [s for s in study_settings() if s not in have and s not in rows_of]
    if missing:
        c, m = missing[0]
        raise InputError(
            f"--settings study: profile {profile.trace or ''} ({profile.gpu or 'unknown card'}) lacks {len(missing)} of "
            f"the study's 66 settings, e.g. core {_fmt(c)} / memory {_fmt(m)} MHz; they are RTX 3080 Ti clocks — use "
            "a profile built for that card with them (the bundled gpt3xl-llmc-rtx3080ti has all 66) or --settings all")
    return profile.restrict(study_settings(), rows_of)


def _runs_as(gpu: str, setting: tuple[int, int]) -> tuple[int, int] | None:
    """The setting a catalog card runs a clamped request as (the 3080 Ti runs (core > 420 or auto, 405 MHz) as
    (420, 405)): a profile built from the model leaves such requests out of the card's grid. None otherwise."""
    from kdvfs.gpus import PRESETS, get_gpu

    if not gpu or gpu.lower() not in PRESETS:
        return None
    c, m = setting
    clamp = dict(get_gpu(gpu).quirk_core_clamp_mhz).get(m)
    if clamp is None or (c != AUTO and c <= clamp):
        return None
    return clamp, m


def pass_rows(profile, trace, sweep: PassSweep, loss_pass: str = "backward") -> list[dict]:
    """Model and study side by side for every pass and setting: the profile's values summed over each pass."""
    prof = restrict_settings(profile.for_trace(trace), "study")
    pe = pass_errors(prof.time_s, prof.energy_j, trace.repeats, pass_index(trace, loss_pass), sweep)
    out = []
    for k, p in enumerate(PASSES):
        for i, (c, m) in enumerate(sweep.settings):
            out.append({"pass": p, "mem_mhz": _fmt(m), "core_mhz": _fmt(c),
                        "model_time_change_pct": float(pe["model_time_change_pct"][k, i]),
                        "study_time_change_pct": float(sweep.time_change_pct[k, i]),
                        "model_energy_change_pct": float(pe["model_energy_change_pct"][k, i]),
                        "study_energy_change_pct": float(sweep.energy_change_pct[k, i])})
    return out
