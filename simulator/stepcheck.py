"""The step-target check: real training steps measured on a card against the model and the simulator under its limiter.

For every step in ``DIR/steps.json`` (written by the observe-only step measurement: per model the Kineto trace file,
the measured step time and energy from the NVML energy counter, the median SM clock) this does what a new user would:
import the trace (``kdvfs trace import``), build the model profile (``kdvfs profile build --gpu``), then simulate the
all-auto step (the card's own clocks) twice — with isolated per-kernel throttling, as before, and under the card's power
limiter — and compares step energy and median SM clock with the measurement. Under the limiter the recorded durations
are taken at the clock the limiter allowed the recorded step (``kdvfs.limiter.anchor_to_limiter``), not at each
kernel's isolated clock. Nothing is fitted to these steps.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, InputError, KdvfsError
from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.limiter import LimiterModel, anchor_to_limiter, limiter_for
from kdvfs.optimize.granularity import allocate_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.profile import build_profile
from simulator.engine import SimConfig

__all__ = ["ENERGY_TARGET_PCT", "CLOCK_TARGET_PCT", "check_steps"]

log = logging.getLogger(__name__)

ENERGY_TARGET_PCT = 3.0
CLOCK_TARGET_PCT = 2.0


def _params_as_profile_build(trace, spec):
    """The kernel parameters ``kdvfs profile build`` uses (kept in one place so the check follows that command)."""
    from kdvfs.model import default_params

    return default_params(trace, spec)


MAX_BUSY_SHARE = 1.2
"""The GPU runs a recorded step's kernels (overlapping ones counted once) for at most 0.99 of the measured step on
every stored step (77); over 1.2 × it, the trace is another step's. The kernels summed reach 1.20 × (wav2vec 2.0:
they overlap on 17 streams), so the sum is no test."""


def check_one(kineto: Path, model: str, spec: GpuSpec, lim: LimiterModel, params_fn=_params_as_profile_build,
              measured_time_s: float | None = None, gap_power_w: float | None = None,
              imported: dict | None = None, thermal=None) -> dict:
    """Predictions for one recorded step: kernels only, and (given the measured step time) with the host time between
    steps as GPU idle at ``gap_power_w``, isolated-and-summed and under the limiter. With ``thermal``
    (``kdvfs.thermal.ThermalModel``) the gaps draw the gap power of the temperature the step holds at its own
    predicted average power (kernels under the limiter, gaps), not ``gap_power_w``."""
    from kdvfs.importers import import_kineto
    from simulator.api import build_run
    from simulator.limiter import run_limited

    key = (str(kineto), model)  # ``imported``: traces already read in this check (the gap-power reruns reuse them)
    if imported is not None and key in imported:
        trace, union_s, overlap = imported[key]
    else:
        imp = import_kineto(kineto, name=model)
        trace, union_s, overlap = imp.trace, imp.busy_union_s, imp.overlap_share
        if imported is not None:
            imported[key] = (trace, union_s, overlap)
    params = params_fn(trace, spec)
    # only the auto setting is simulated; its rows equal those of the full `profile build` grid
    prof = build_profile(trace, spec, params, settings=[(AUTO, AUTO)])
    pb = Problem(trace, prof)
    auto = allocate_schedule(pb, "static", auto=True)
    cfg = SimConfig(switch=SwitchModel(0.0, 0.0))  # the auto step never switches
    run = build_run(trace, prof, auto, spec)
    iso_clock = _iso_clocks(spec, params)  # each kernel's isolated throttled clock at auto
    w = trace.repeats * prof.time_s[:, 0]
    o = np.argsort(iso_clock, kind="stable")
    iso_median = float(iso_clock[o][int(np.searchsorted(np.cumsum(w[o]), 0.5 * w.sum()))])

    def limited(gap=None):
        # the recorded durations are at the clock the limiter allowed the recorded step: anchor them there
        p, f = anchor_to_limiter(spec, params, trace.times_s, trace.repeats, lim, gap)
        r = run_limited(run, prof.settings, spec, p, lim, cfg, "fast", 1, gap=gap)
        return {"time_s": r["time_s"], "energy_j": r["energy_j"], "anchored_at_mhz": f, **r["limiter"]}

    busy = float(trace.repeats @ trace.times_s)  # the recorded kernels' durations, summed
    if measured_time_s is not None and union_s > MAX_BUSY_SHARE * measured_time_s:
        # another step's trace (steps.json's 'trace' naming another model's file) was checked, and its gaps clipped
        # to 0 without a word: wav2vec 2.0's row with Qwen3's trace read +268 %
        raise InputError(f"{kineto.name}: the GPU ran its kernels for {union_s:.4g} s, {union_s / measured_time_s:.2f} "
                         f"× the measured step of {model!r} ({measured_time_s:.4g} s); a step's kernels fit in its "
                         "time, so the trace is not this step's: check the 'trace' that steps.json names for it")
    out = {"trace_kernels": len(trace.kernels), "trace_instances": int(len(trace.instances())), "trace_busy_s": busy,
           "trace_busy_union_s": union_s, "trace_overlap_pct": 100 * overlap,
           "isolated": {"time_s": pb.auto_time_s, "energy_j": pb.auto_energy_j, "median_core_mhz": iso_median},
           "limiter": limited()}
    if measured_time_s is not None and (gap_power_w is not None or thermal is not None):
        g = max(measured_time_s - busy, 0.0)  # host time: the measured step less the recorded kernels
        if thermal is not None and g > 0:
            # the temperature of the step's own predicted average power: first from the kernels alone, then from
            # the kernels as the limiter runs them beside the gaps (a gap lowers the window's average, so they run
            # faster and draw more); two rounds move the temperature by < 0.1 °C more
            lk = out["limiter"]
            temp_c, gap_power_w = thermal.solve_gap(lk["energy_j"], lk["time_s"], g)
            r1 = limited((g, gap_power_w))
            temp_c, gap_power_w = thermal.solve_gap(r1["energy_j"] - g * gap_power_w, r1["time_s"] - g, g)
            out["thermal"] = {"operating_c": temp_c, "gap_power_w": gap_power_w}
        elif gap_power_w is None:  # no gap: its power does not enter the step
            gap_power_w = thermal.gap_ref_w
        out["isolated_with_gaps"] = {"time_s": pb.auto_time_s + g, "gap_s": g,
                                     "energy_j": pb.auto_energy_j + g * gap_power_w,
                                     # in the gaps the clock stays where the step left it
                                     "median_core_mhz": iso_median if g < pb.auto_time_s else float(spec.boost_core_mhz)}
        r = limited((g, gap_power_w)) if g > 0 else dict(out["limiter"])
        out["limiter_with_gaps"] = dict(r, gap_s=g)
    return out


def _iso_clocks(spec, params):
    from kdvfs.model import evaluate

    ev = evaluate(spec, params, np.array([AUTO]), np.array([AUTO]))
    return ev.core_mhz[:, 0]


STEPS_FORMAT = "kdvfs-steps/1"
_MEASURED = ("step_time_s", "step_energy_j", "sm_mhz_median")


def _checked_steps(doc, path: Path) -> list[dict]:
    """The rows of a ``kdvfs-steps/1`` document, checked before anything is simulated (``InputError`` naming the
    row, the field and the fix): a list of objects, each with a ``model`` name and either an ``error`` (not measured)
    or its trace file in the folder (``trace``; without one, ``MODEL.kineto.json.gz`` as the measurement names it)
    and the measured step time, energy and median SM clock as positive numbers."""
    fix = "give the folder `kdvfs measure-steps -o` wrote, or repair the file"
    if not isinstance(doc, dict) or doc.get("format", STEPS_FORMAT) != STEPS_FORMAT:
        what = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise FormatError(f"{str(path)!r} is not a {STEPS_FORMAT} file (its format is {what!r}); {fix}")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InputError(f"{str(path)!r}: 'steps' must be a non-empty list of measured steps, got {steps!r:.60}; {fix}")
    out = []
    seen: dict[str, int] = {}
    for i, st in enumerate(steps):
        if not isinstance(st, dict):
            raise InputError(f"{str(path)!r}: step {i} must be an object with 'model', 'trace' and the measurement, "
                             f"got {st!r:.60}; {fix}")
        model = st.get("model")
        if not isinstance(model, str) or not model.strip():
            raise InputError(f"{str(path)!r}: step {i} has no model name ('model': {model!r}); name the model it "
                             "measured")
        if model in seen:
            # two steps.json merged by hand: the same measured step counted twice in "N of M within the targets"
            raise InputError(f"{str(path)!r}: step {i} repeats the model {model!r} of step {seen[model]}; each step "
                             "is judged once: keep one of them, or, for a second measurement on purpose, give it a "
                             f"name of its own (e.g. \"{model}-run2\")")
        seen[model] = i
        if "error" in st:
            out.append(st)
            continue
        trace = st.get("trace", f"{model}.kineto.json.gz")
        if not isinstance(trace, str) or not trace.strip():
            raise InputError(f"{str(path)!r}: step {i} ({model!r}) names no trace file ('trace': {trace!r}); give the "
                             f"Kineto trace's file name in the folder, e.g. \"{model}.kineto.json.gz\"")
        if not (path.parent / trace).is_file():
            raise InputError(f"{str(path)!r}: step {i} ({model!r}): its trace {trace!r} is not a file in "
                             f"{str(path.parent)!r}; copy the recorded trace there (measure-steps writes it beside "
                             "steps.json) or mark the step with an \"error\"")
        for key in _MEASURED:
            v = st.get(key)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if not ok:
                raise InputError(f"{str(path)!r}: step {i} ({model!r}): {key!r} must be a positive number (the "
                                 f"measurement), got {v!r}; {fix}")
        out.append(dict(st, trace=trace))
    return out


def check_steps(steps_dir: str | Path, spec: GpuSpec, lim: LimiterModel | None = None, params_fn=None,
                gap_power_w: float | None = None, alt_gap_powers: dict | None = None,
                _imported: dict | None = None, thermal=None, progress=None) -> dict:
    """The report: per step the measurement, the predictions, their errors and whether the targets are met.

    The model predicts the GPU's kernels; the host time between steps (the measured step time minus the predicted busy
    time) is no prediction of it. With ``gap_power_w`` that time is added as GPU idle at that power (``*_with_gaps``),
    and the targets are judged on ``limiter_with_gaps``; without it, on ``limiter`` (kernels only).
    ``alt_gap_powers``: name → watts, the same check with other gap powers (how much the answer leans on it).
    ``thermal``: each step's gaps at the gap power of its own operating temperature (``check_one``).
    ``progress(what, fraction)`` before each step is checked."""
    d = Path(steps_dir)
    path = d / "steps.json"
    if d.is_file():  # the steps.json itself (its folder holds the traces)
        d, path = d.parent, d
    if not path.exists():
        raise InputError(f"{str(path)!r} does not exist; give the folder the step measurement wrote (steps.json and "
                         "the Kineto traces)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:  # ValueError: not JSON, or not UTF-8 text
        raise FormatError(f"{str(path)!r} is not JSON ({e})") from None
    measured_on = doc.get("gpu") if isinstance(doc, dict) else None
    if isinstance(measured_on, str) and measured_on and spec.name not in re.sub(r"[\s_-]", "", measured_on.lower()):
        # a measurement of another card judged by this card's model says nothing about either (checked before the
        # limiter: H200 steps with --gpu h100 said "h100 has no fitted limiter model", not the mismatch)
        raise InputError(f"{str(path)!r} was measured on {measured_on!r}, not on {spec.name} ({spec.full_name}); "
                         f"give the --gpu it was measured on, or steps measured on {spec.name}")
    lim = lim or limiter_for(spec)
    if lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit` first")
    steps = _checked_steps(doc, path)
    imported = {} if _imported is None else _imported
    rows = []
    for i, st in enumerate(steps):
        model = st["model"]
        if progress is not None:  # the other gap powers' checks reuse the imports: a few per cent of the time
            progress(f"{model} ({i + 1}/{len(steps)})", i / len(steps))
        if "error" in st:
            rows.append({"model": model, "skipped": f"not measured: {st['error']}"})
            continue
        try:
            kin = d / st["trace"]
            pred = check_one(kin, model, spec, lim, params_fn or _params_as_profile_build, float(st["step_time_s"]),
                             gap_power_w, imported, thermal)
        except KdvfsError as e:
            rows.append({"model": model, "skipped": str(e)})
            continue
        meas = {"time_s": st["step_time_s"], "energy_j": st["step_energy_j"], "median_core_mhz": st["sm_mhz_median"],
                "p10_core_mhz": st.get("sm_mhz_p10"), "p90_core_mhz": st.get("sm_mhz_p90"), "power_w": st.get("power_w")}
        err = {}
        for which in [k for k in ("isolated", "limiter", "isolated_with_gaps", "limiter_with_gaps") if k in pred]:
            p = pred[which]
            err[which] = {"time_pct": 100 * (p["time_s"] / meas["time_s"] - 1),
                          "energy_pct": 100 * (p["energy_j"] / meas["energy_j"] - 1),
                          "median_clock_pct": 100 * (p["median_core_mhz"] / meas["median_core_mhz"] - 1)}
        best = err["limiter_with_gaps" if "limiter_with_gaps" in err else "limiter"]
        rows.append({"model": model, "measured": meas, "predicted": pred, "error": err,
                     "energy_target_met": abs(best["energy_pct"]) <= ENERGY_TARGET_PCT,
                     "clock_target_met": abs(best["median_clock_pct"]) <= CLOCK_TARGET_PCT})
    done = [r for r in rows if "measured" in r]
    alt = {}
    for name, w in (alt_gap_powers or {}).items():
        d2 = check_steps(steps_dir, spec, lim, params_fn, w, _imported=imported)
        alt[name] = {"gap_power_w": w, "met": d2["met"],
                     "error": {r["model"]: r["error"] for r in d2["steps"] if "error" in r}}
    return {"gap_power_sensitivity": alt,"gpu": spec.name, "steps_file": str(path), "limiter": lim.to_dict(), "gap_power_w": gap_power_w,
            **({"thermal": thermal.to_dict()} if thermal is not None else {}),
            "judged_on": "limiter_with_gaps" if gap_power_w is not None or thermal is not None else "limiter",
            "targets": {"energy_pct": ENERGY_TARGET_PCT, "median_clock_pct": CLOCK_TARGET_PCT},
            "steps": rows, "met": {"energy": sum(r["energy_target_met"] for r in done),
                                   "clock": sum(r["clock_target_met"] for r in done), "of": len(done)}}
