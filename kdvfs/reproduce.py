"""``kdvfs reproduce spaan2026``: the study's Table 2 on the calibrated RTX 3080 Ti profile, beside the paper."""

from __future__ import annotations

from kdvfs.bundled import resolve_profile_path, resolve_trace_path
from kdvfs.calibrate import study_settings
from kdvfs.gpus import get_gpu
from kdvfs.optimize.granularity import allocate
from kdvfs.optimize.problem import Problem
from kdvfs.profile import Profile, load_profile
from kdvfs.trace import load_trace

__all__ = ["PAPER_TABLE2", "reproduce_spaan2026", "study_problem", "table2_targets_met"]

# Spaan et al. 2026, Table 2: (granularity, scope) → (EDP Δt, EDP ΔE, strict waste Δt, strict waste ΔE), percent
PAPER_TABLE2 = {
    ("pass", "local"): (10.21, -25.42, -0.20, -1.98),
    ("pass", "global"): (10.21, -25.42, -0.10, -2.07),
    ("kernel", "local"): (10.03, -27.34, -1.78, -11.54),
    ("kernel", "global"): (10.28, -27.52, 0.00, -15.64),
}


def study_problem(profile: Profile | None = None) -> Problem:
    """The bundled trace and calibrated profile (or ``profile``, e.g. a calibration variant's) over the study's 66
    settings (405 MHz memory above 420 MHz core is what the driver runs at 810 MHz, so those settings are the 810 ones
    already in the set)."""
    spec = get_gpu("rtx3080ti")
    trace = load_trace(resolve_trace_path("gpt3xl-llmc-rtx3080ti"))
    prof = profile if profile is not None else load_profile(resolve_profile_path("gpt3xl-llmc-rtx3080ti"))
    quirks = dict(spec.mem_max_core_mhz)
    st = [s for s in study_settings() if not (s[1] in quirks and (s[0] == 0 or s[0] > quirks[s[1]]))]
    return Problem(trace, prof.restrict(st))


def reproduce_spaan2026(profile: Profile | None = None) -> list[dict]:
    """Table 2 rows on the bundled calibrated profile (or on ``profile``), each with ``target_met`` (the issue's
    target for that row, ``table2_targets_met``)."""
    pb = study_problem(profile)
    rows = []
    for (gran, scope), paper in PAPER_TABLE2.items():
        for obj, (pt, pe) in (("edp", paper[:2]), ("waste", paper[2:])):
            a = allocate(pb, obj, 0.0, gran, scope, solver="milp" if (gran, scope, obj) == ("kernel", "global", "waste") else "fast")
            t, e = pb.evaluate(a)
            rows.append({"granularity": gran, "scope": scope, "objective": "strict waste" if obj == "waste" else "EDP",
                         "time_change_pct": 100 * (t / pb.auto_time_s - 1),
                         "energy_change_pct": 100 * (e / pb.auto_energy_j - 1),
                         "paper_time_change_pct": pt, "paper_energy_change_pct": pe, "solver": a.solver})
    met = table2_targets_met(rows)
    for r in rows:
        r["target_met"] = met[_row_key(r)]
    return rows


def _row_key(r: dict) -> str:
    return f"{r['granularity']}/{r['scope']}/{r['objective']}"


def table2_targets_met(rows: list[dict]) -> dict[str, bool]:
    """The issue's targets for each Table 2 row: kernel-level global strict waste −15.6 ± 1 points at ≤ +0.05 % time,
    kernel-level local −11.5 ± 1.5, pass-level −2.0 ± 1, EDP rows within 3 points of the paper's energy change."""
    out = {}
    for r in rows:
        de = r["energy_change_pct"]
        if r["objective"] == "EDP":
            ok = abs(de - r["paper_energy_change_pct"]) <= 3.0
        elif r["granularity"] == "kernel" and r["scope"] == "global":
            ok = abs(de - (-15.6)) <= 1.0 and r["time_change_pct"] <= 0.05
        elif r["granularity"] == "kernel":
            ok = abs(de - (-11.5)) <= 1.5
        else:
            ok = abs(de - (-2.0)) <= 1.0
        out[_row_key(r)] = bool(ok)
    return out
