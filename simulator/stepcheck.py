"""The step-target check: real training steps measured on a card against the model and the simulator under its limiter.

For every step in ``DIR/steps.json`` (written by the observe-only step measurement: per model the Kineto trace file,
the measured step time and energy from the NVML energy counter, the median SM clock) this does what a new user would:
import the trace (``kdvfs trace import``), build the model profile (``kdvfs profile build --gpu``), then simulate the
all-auto step (the card's own clocks) twice — with isolated per-kernel throttling, as before, and under the card's power
limiter — and compares step energy and median SM clock with the measurement. Nothing is fitted to these steps.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, InputError, KdvfsError
from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.limiter import LimiterModel, limiter_for
from kdvfs.optimize.granularity import allocate_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.profile import build_profile
from simulator.api import simulate
from simulator.engine import SimConfig

__all__ = ["ENERGY_TARGET_PCT", "CLOCK_TARGET_PCT", "check_steps"]

log = logging.getLogger(__name__)

ENERGY_TARGET_PCT = 3.0
CLOCK_TARGET_PCT = 2.0


def _params_as_profile_build(trace, spec):
    """The kernel parameters ``kdvfs profile build`` uses (kept in one place so the check follows that command)."""
    from kdvfs.model import default_params

    return default_params(trace, spec)


def check_one(kineto: Path, model: str, spec: GpuSpec, lim: LimiterModel, params_fn=_params_as_profile_build) -> dict:
    from kdvfs.importers import import_kineto

    imp = import_kineto(kineto, name=model)
    trace = imp.trace
    params = params_fn(trace, spec)
    # only the auto setting is simulated; its rows equal those of the full `profile build` grid
    prof = build_profile(trace, spec, params, settings=[(AUTO, AUTO)])
    pb = Problem(trace, prof)
    auto = allocate_schedule(pb, "static", auto=True)
    cfg = SimConfig(switch=SwitchModel(0.0, 0.0))  # the auto step never switches
    iso = simulate(trace, prof, auto, spec, cfg, path="fast")
    lim_r = simulate(trace, prof, auto, spec, cfg, path="fast", limiter=lim, params=params)
    busy = float(pb.auto_time_s)
    iso_clock = _iso_clocks(spec, params)  # each kernel's isolated throttled clock at auto
    w = trace.repeats * prof.time_s[:, 0]
    o = np.argsort(iso_clock, kind="stable")
    iso_median = float(iso_clock[o][int(np.searchsorted(np.cumsum(w[o]), 0.5 * w.sum()))])
    return {"trace_kernels": len(trace.kernels), "trace_instances": int(len(trace.instances())),
            "trace_busy_s": busy, "isolated": {"time_s": iso.time_s, "energy_j": iso.energy_j,
                                              "median_core_mhz": iso_median},
            "limiter": {"time_s": lim_r.time_s, "energy_j": lim_r.energy_j, **lim_r.limiter}}


def _iso_clocks(spec, params):
    from kdvfs.model import evaluate

    ev = evaluate(spec, params, np.array([AUTO]), np.array([AUTO]))
    return ev.core_mhz[:, 0]


def check_steps(steps_dir: str | Path, spec: GpuSpec, lim: LimiterModel | None = None, params_fn=None) -> dict:
    """The report: per step the measurement, both predictions, their errors and whether the targets are met."""
    d = Path(steps_dir)
    path = d / "steps.json"
    if not path.exists():
        raise InputError(f"{str(path)!r} does not exist; give the folder the step measurement wrote (steps.json and "
                         "the Kineto traces)")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise FormatError(f"{str(path)!r} is not JSON ({e})") from None
    lim = lim or limiter_for(spec)
    if lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit` first")
    rows = []
    for st in doc.get("steps", []):
        model = st.get("model", "?")
        if "error" in st:
            rows.append({"model": model, "skipped": f"not measured: {st['error']}"})
            continue
        try:
            kin = d / st.get("trace", f"{model}.kineto.json.gz")
            pred = check_one(kin, model, spec, lim, params_fn or _params_as_profile_build)
        except KdvfsError as e:
            rows.append({"model": model, "skipped": str(e)})
            continue
        meas = {"time_s": st["step_time_s"], "energy_j": st["step_energy_j"], "median_core_mhz": st["sm_mhz_median"],
                "p10_core_mhz": st.get("sm_mhz_p10"), "p90_core_mhz": st.get("sm_mhz_p90"), "power_w": st.get("power_w")}
        err = {}
        for which in ("isolated", "limiter"):
            p = pred[which]
            err[which] = {"time_pct": 100 * (p["time_s"] / meas["time_s"] - 1),
                          "energy_pct": 100 * (p["energy_j"] / meas["energy_j"] - 1),
                          "median_clock_pct": 100 * (p["median_core_mhz"] / meas["median_core_mhz"] - 1)}
        e = err["limiter"]
        rows.append({"model": model, "measured": meas, "predicted": pred, "error": err,
                     "energy_target_met": abs(e["energy_pct"]) <= ENERGY_TARGET_PCT,
                     "clock_target_met": abs(e["median_clock_pct"]) <= CLOCK_TARGET_PCT})
    done = [r for r in rows if "measured" in r]
    return {"gpu": spec.name, "steps_file": str(path), "limiter": lim.to_dict(),
            "targets": {"energy_pct": ENERGY_TARGET_PCT, "median_clock_pct": CLOCK_TARGET_PCT},
            "steps": rows, "met": {"energy": sum(r["energy_target_met"] for r in done),
                                   "clock": sum(r["clock_target_met"] for r in done), "of": len(done)}}
