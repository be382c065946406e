"""``kdvfs reproduce spaan2026``: the study's Table 2 on the calibrated RTX 3080 Ti profile, beside the paper."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kdvfs.bundled import bundled_dir, resolve_profile_path, resolve_trace_path
from kdvfs.errors import InputError
from kdvfs.gpus import get_gpu
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem
from kdvfs.passweep import restrict_settings
from kdvfs.profile import Profile, load_profile
from kdvfs.trace import load_trace

__all__ = ["MeasurementNoise", "PAPER_TABLE2", "reproduce_spaan2026", "reproduce_spaan2026_measured",
           "spaan2026_pass_rows", "study_problem", "table2_targets_met", "target_text", "write_reproduction"]

# Spaan et al. 2026, Table 2: (granularity, scope) → (EDP Δt, EDP ΔE, strict waste Δt, strict waste ΔE), percent
PAPER_TABLE2 = {
    ("pass", "local"): (10.21, -25.42, -0.20, -1.98),
    ("pass", "global"): (10.21, -25.42, -0.10, -2.07),
    ("kernel", "local"): (10.03, -27.34, -1.78, -11.54),
    ("kernel", "global"): (10.28, -27.52, 0.00, -15.64),
}


def study_problem(profile: Profile | None = None) -> Problem:
    """The bundled trace and calibrated profile (or ``profile``) over the study's 66 settings (405 MHz memory with a
    core above 420 MHz runs as (420, 405) on the card, and the profile has those rows so)."""
    trace = load_trace(resolve_trace_path("gpt3xl-llmc-rtx3080ti"))
    prof = profile if profile is not None else load_profile(resolve_profile_path("gpt3xl-llmc-rtx3080ti"))
    return Problem(trace, restrict_settings(prof.for_trace(trace), "study"))


def _table2_rows(pb: Problem, truth: Problem | None = None, exact: bool = True) -> list[dict]:
    """The eight Table 2 rows optimised on ``pb`` (kernel-level global strict waste by the MILP when ``exact``, else
    by the fast solver, within 0.01 % of it); with ``truth``, each allocation also evaluated on it
    (``true_time_change_pct``, ``true_energy_change_pct``: what re-measuring the chosen clocks would show)."""
    rows = []
    for (gran, scope), paper in PAPER_TABLE2.items():
        for obj, (pt, pe) in (("edp", paper[:2]), ("waste", paper[2:])):
            milp = exact and (gran, scope, obj) == ("kernel", "global", "waste")
            a = allocate(pb, obj, 0.0, gran, scope, solver="milp" if milp else "fast")
            t, e = pb.evaluate(a)
            r = {"granularity": gran, "scope": scope, "objective": "strict waste" if obj == "waste" else "EDP",
                 "time_change_pct": 100 * (t / pb.auto_time_s - 1), "energy_change_pct": 100 * (e / pb.auto_energy_j - 1),
                 "paper_time_change_pct": pt, "paper_energy_change_pct": pe, "solver": a.solver}
            if truth is not None:
                tt, et = truth.evaluate(a)
                r["true_time_change_pct"] = 100 * (tt / truth.auto_time_s - 1)
                r["true_energy_change_pct"] = 100 * (et / truth.auto_energy_j - 1)
            rows.append(r)
    return rows


def _mark_targets(rows: list[dict]) -> list[dict]:
    met = table2_targets_met(rows)
    for r in rows:
        r["target_met"] = met[_row_key(r)]
    return rows


def reproduce_spaan2026(profile: Profile | None = None) -> list[dict]:
    """Table 2 rows on the bundled calibrated profile (or on ``profile``), each with ``target_met`` (the issue's
    target for that row, ``table2_targets_met``)."""
    return _mark_targets(_table2_rows(study_problem(profile)))


@dataclass(frozen=True, slots=True)
class MeasurementNoise:
    """Scatter of one measurement of one kernel at one setting, as the study took them (one 5 s window: time from
    CUDA events, energy from the NVML energy counter), as log-normal relative standard deviations.

    The defaults were measured, not chosen: five stages of the recorded GPT-3 XL block (two GEMMs at the power cap,
    three memory-bound ops), six interleaved 5 s windows each, on an H200 at its own clocks
    (``scripts/h200_measurement_noise.py``, ``validation/h200/measurement_noise.json``): the root mean square over the
    stages of the coefficient of variation of time (0.01–0.82 %) and of energy (0.20–0.61 %) per window. The study's
    card (an RTX 3080 Ti over a 3-day sweep) may scatter more; ``--noise-time-pct`` / ``--noise-energy-pct`` set it.

    Attributes:
        time_pct: relative standard deviation of a measured time, percent.
        energy_pct: relative standard deviation of a measured energy, percent (drawn independently of time).
    """

    time_pct: float = 0.38
    energy_pct: float = 0.36

    def __post_init__(self) -> None:
        for nm in ("time_pct", "energy_pct"):
            v = getattr(self, nm)
            if not (math.isfinite(v) and 0 <= v <= 50):
                raise InputError(f"measurement noise: {nm} must be a percentage in [0, 50], got {v!r}")

    def draw(self, profile: Profile, rng: np.random.Generator) -> Profile:
        """One simulated sweep: every (kernel, setting) of ``profile`` measured once."""
        t = profile.time_s * np.exp(self.time_pct / 100 * rng.standard_normal(profile.time_s.shape))
        e = profile.energy_j * np.exp(self.energy_pct / 100 * rng.standard_normal(profile.time_s.shape))
        return Profile(profile.keys, profile.settings, t, e / t, profile.source, profile.gpu, profile.trace,
                       profile.trace_sha)


def reproduce_spaan2026_measured(profile: Profile | None = None, noise: MeasurementNoise = MeasurementNoise(),
                                 seeds: int = 20, seed: int = 0, progress=None) -> list[dict]:
    """Table 2 as the study obtained it: from one noisy measurement per kernel and setting, not from the model's
    values. For each of ``seeds`` simulated sweeps (``noise.draw`` of the calibrated profile), the eight rows are
    optimised on the measured values and reported against the measured auto, as the study did (``time_change_pct``,
    ``energy_change_pct``: means over the sweeps, with ``*_sd``); the same clock choices evaluated on the model's
    values give ``true_*``, what re-measuring them many times would show (the study re-measured its kernel-level
    global choice: −14.6 % energy at +0.6 % time against −15.64 % at +0.00 % in Table 2). ``target_met`` judges the
    mean; ``target_met_share`` is the share of sweeps whose own row met the target. ``progress(done, total)`` is
    called after each sweep. All rows use the fast solvers, for speed (kernel-level global strict waste is within
    0.01 % of the MILP's optimum)."""
    if not (isinstance(seeds, int) and seeds >= 1):
        raise InputError(f"reproduce: seeds must be a whole number ≥ 1, got {seeds!r}")
    truth = study_problem(profile)
    per_seed = []
    for i in range(seeds):
        rng = np.random.default_rng([seed, i])
        rows = _mark_targets(_table2_rows(Problem(truth.trace, noise.draw(truth.profile, rng)), truth, exact=False))
        per_seed.append(rows)
        if progress is not None:
            progress(i + 1, seeds)
    out = []
    for j, r0 in enumerate(per_seed[0]):
        r = {k: r0[k] for k in ("granularity", "scope", "objective", "paper_time_change_pct", "paper_energy_change_pct",
                                "solver")}
        for k in ("time_change_pct", "energy_change_pct", "true_time_change_pct", "true_energy_change_pct"):
            v = np.array([rows[j][k] for rows in per_seed])
            r[k] = float(v.mean())
            r[k.replace("_pct", "_sd_pct")] = float(v.std(ddof=1)) if seeds > 1 else 0.0
        r["target_met_share"] = float(np.mean([rows[j]["target_met"] for rows in per_seed]))
        out.append(r)
    _mark_targets(out)
    for r in out:
        r.update(noise_time_pct=noise.time_pct, noise_energy_pct=noise.energy_pct, seeds=seeds, seed=seed)
    return out


def _row_key(r: dict) -> str:
    return f"{r['granularity']}/{r['scope']}/{r['objective']}"


# The target for each Table 2 row: (energy centre, energy tolerance, time tolerance or None, time ceiling)
def _target(r: dict) -> tuple[float, float, float | None, float | None]:
    if r["objective"] == "EDP":
        return r["paper_energy_change_pct"], 3.0, 2.0, None
    if r["granularity"] == "kernel" and r["scope"] == "global":
        return -15.64, 1.0, None, 0.05
    if r["granularity"] == "kernel":
        return -11.54, 1.5, None, None
    return -2.0, 1.0, None, None


def target_text(r: dict) -> str:
    """The row's target in words, e.g. ``ΔE −15.64 ± 1, Δt ≤ +0.05 %``."""
    e, etol, ttol, tmax = _target(r)
    s = f"ΔE {e:+.2f} ± {etol:g}"
    if ttol is not None:
        s += f", Δt {r['paper_time_change_pct']:+.2f} ± {ttol:g}"
    if tmax is not None:
        s += f", Δt ≤ {tmax:+.2f} %"
    return s


def table2_targets_met(rows: list[dict]) -> dict[str, bool]:
    """The issue's targets for each Table 2 row: kernel-level global strict waste −15.64 ± 1 points at ≤ +0.05 % time,
    kernel-level local −11.54 ± 1.5, pass-level −2.0 ± 1, EDP rows within 3 points of the paper's energy change and
    2 points of its time change."""
    out = {}
    for r in rows:
        e, etol, ttol, tmax = _target(r)
        ok = abs(r["energy_change_pct"] - e) <= etol
        if ttol is not None:
            ok = ok and abs(r["time_change_pct"] - r["paper_time_change_pct"]) <= ttol
        if tmax is not None:
            ok = ok and r["time_change_pct"] <= tmax
        out[_row_key(r)] = bool(ok)
    return out


def write_reproduction(out_dir: str | Path, table2: list[dict], passes: list[dict]) -> list[Path]:
    """``table2.csv`` (each row with its target), ``pass_level.csv`` and ``pass_level.png`` (the study's Figures 3/4
    layout, model beside study) in ``out_dir``."""
    import csv

    from kdvfs.plots import plot_pass_level

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in (("table2.csv", [dict(r, target=target_text(r)) for r in table2]), ("pass_level.csv", passes)):
        p = out / name
        with p.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
        paths.append(p)
    paths.append(plot_pass_level(passes, out / "pass_level.png",
                                 "GPT-3 XL on RTX 3080 Ti, pass-level sweep: study (solid) and calibrated model (dashed)"))
    return paths


def spaan2026_pass_rows(profile: Profile | None = None) -> list[dict]:
    """The pass-level sweep of the study beside the bundled (or given) profile's, per pass and setting."""
    from kdvfs.passweep import pass_rows, read_pass_sweep

    pb = study_problem(profile)
    sweep = read_pass_sweep(bundled_dir() / "spaan2026_fig3_fig4_pass_level.csv", get_gpu("rtx3080ti"))
    return pass_rows(pb.profile, pb.trace, sweep)
