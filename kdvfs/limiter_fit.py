"""Fitting the power limiter's dynamics (window, gain, slew, cap as held) to step responses.

A step response (written by ``kdvfs characterize``; schema ``docs/limiter.md``) is a sequence of phases, each running
one load (``idle``, ``heavy``, ``light``, ``probe-only``, …), with the SM clock read from the durations of a
compute-bound probe GEMM (``clock``: [[t_s, MHz], …]) and NVML power samples (``power``: [[t_s, W], …]).

1. *Plants*: each load's power as a function of the clock, ``P = a_w + b_w · V(f)²f / (V(F)²F)`` on the card's voltage
   curve, fitted by least squares to the power samples of that load's phases (the first ``settle_s`` of a phase is
   skipped: NVML power lags). A load whose clock hardly moves (spread < 30 MHz) gets a flat plant (b = 0). Plants may
   also be given (the interim fit to hardware_facts.md does that).
2. *Controller*: the discrete-time controller of ``kdvfs.limiter`` is run tick by tick through the phases (starting at
   the top clock with the first load's power as the average), and its ceiling is compared with every probe clock;
   ``scipy.optimize.least_squares`` fits log window, log gain, log slew and the cap from a fixed grid of starts (each
   response weighs the same). Deterministic: no random starts.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import GpuSpec
from kdvfs.limiter import ControllerState, LimiterModel

__all__ = ["LimiterFit", "Plant", "fit_limiter", "fit_plants", "load_step_responses", "simulate_ceiling"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Plant:
    """A load's power against the clock.

    Attributes:
        a_w: power independent of the core clock (idle, memory), watts.
        b_w: core power at the boost clock on the voltage curve, watts.
        samples: power samples it was fitted to (0 when given).
    """

    a_w: float
    b_w: float
    samples: int = 0

    def power_w(self, spec: GpuSpec, core_mhz: float) -> float:
        return self.a_w + self.b_w * float(spec.core_power_shape(np.array(core_mhz)))


@dataclass(frozen=True, slots=True)
class LimiterFit:
    """Attributes:
        model: the fitted ``LimiterModel``.
        plants: load → ``Plant``.
        rms_mhz: per response, root mean square of ceiling − probe clock at the fit.
        samples: probe clocks used per response.
        files: the step-response files.
    """

    model: LimiterModel
    plants: dict
    rms_mhz: dict
    samples: dict
    files: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(),
                "plants": {k: {"a_w": p.a_w, "b_w": p.b_w, "samples": p.samples} for k, p in self.plants.items()},
                "rms_mhz": self.rms_mhz, "samples": self.samples, "files": list(self.files)}


def load_step_responses(paths) -> tuple[list[dict], dict]:
    """Every step response of the given files (characterisation JSON with ``step_responses``) and any given plants."""
    out, plants = [], {}
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"step-response file {str(p)!r} does not exist; give the characterisation JSON")
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise FormatError(f"step-response file {str(p)!r} is not JSON ({e})") from None
        srs = doc.get("step_responses") if isinstance(doc, dict) else None
        if not srs:
            raise FormatError(f"{str(p)!r} has no \"step_responses\"; run `kdvfs characterize` with step responses")
        for sr in srs:
            for key in ("name", "phases", "clock"):
                if key not in sr:
                    raise FormatError(f"{str(p)!r}: step response {sr.get('name', '?')!r} lacks {key!r}")
            if not sr["clock"]:
                raise FormatError(f"{str(p)!r}: step response {sr['name']!r} has no probe clocks")
            out.append(dict(sr, file=str(p)))
        for k, v in (doc.get("plants") or {}).items():
            plants[k] = Plant(float(v["a_w"]), float(v["b_w"]))
    return out, plants


def _phase_at(phases: list[dict], t: float) -> dict | None:
    for ph in phases:
        if ph["start_s"] <= t < ph["end_s"]:
            return ph
    return None


def fit_plants(responses: list[dict], spec: GpuSpec, settle_s: float = 0.1) -> dict:
    """Per load, ``P = a + b·shape(f)`` from the power samples of its phases (clock from the probe, else NVML)."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for sr in responses:
        ct = np.array([c[0] for c in sr["clock"]])
        cf = np.array([c[1] for c in sr["clock"]])
        nv = sr.get("nvml_clock") or []
        for t, pw in sr.get("power") or []:
            ph = _phase_at(sr["phases"], t)
            if ph is None or t - ph["start_s"] < settle_s:
                continue
            near = np.abs(ct - t) < 0.02
            if near.any():
                f = float(np.interp(t, ct, cf))
            elif nv:
                f = float(min(nv, key=lambda s: abs(s[0] - t))[1])
            else:
                continue
            pairs.setdefault(ph["load"], []).append((f, float(pw)))
    plants = {}
    for load, pr in pairs.items():
        f = np.array([x[0] for x in pr])
        p = np.array([x[1] for x in pr])
        if np.ptp(f) < 30.0:
            plants[load] = Plant(float(np.median(p)), 0.0, len(p))
            continue
        A = np.stack([np.ones_like(f), spec.core_power_shape(f)], axis=1)  # noqa: N806
        (a, b), *_ = np.linalg.lstsq(A, p, rcond=None)
        if b < 0:
            a, b = float(np.median(p)), 0.0
        plants[load] = Plant(float(a), float(b), len(p))
    return plants


def simulate_ceiling(lim: LimiterModel, cap_w: float, spec: GpuSpec, phases: list[dict], plants: dict,
                     t_end: float) -> tuple[np.ndarray, np.ndarray]:
    """Tick times and the ceiling in effect after each tick, the controller driven by the phases' plants."""
    lo, hi = float(spec.core_clocks_mhz[0]), float(spec.boost_core_mhz)
    h = lim.period_s
    n = int(math.ceil(t_end / h))
    st = ControllerState(hi, plants[phases[0]["load"]].power_w(spec, hi))
    # controller_step and core_power_shape inlined on plain floats: the fit runs this loop ~10⁵ times per response
    # (tests check it against controller_step tick by tick)
    alpha = -math.expm1(-h / lim.window_s)
    gain, slew = lim.gain_mhz_per_ws * h, lim.slew_mhz_per_s * h
    vmin, dv, knee = spec.v_min, spec.v_max - spec.v_min, spec.vf_knee_mhz
    span = max(spec.max_core_mhz - knee, 1.0)
    ref = float(spec.voltage(np.array(spec.boost_core_mhz))) ** 2 * spec.boost_core_mhz
    f, avg = st.ceiling_mhz, st.avg_power_w
    out = [f]
    bounds = [(ph["end_s"], plants[ph["load"]].a_w, plants[ph["load"]].b_w) for ph in phases]
    i = 0
    end, a, b = bounds[0]
    for k in range(n):
        mid = (k + 0.5) * h
        while mid >= end and i < len(bounds) - 1:
            i += 1
            end, a, b = bounds[i]
        v = vmin + dv * max((f - knee) / span, 0.0)
        p = a + b * v * v * f / ref
        avg = avg + alpha * (p - avg)
        step = min(max(-gain * (avg - cap_w), -slew), slew)
        f = min(max(f + step, lo), hi)
        out.append(f)
    return np.arange(n + 1) * h, np.array(out)


def _residuals(x, responses, plants, spec, period_s):
    lim = LimiterModel(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]), period_s)
    res = []
    for sr in responses:
        t = np.array([c[0] for c in sr["clock"]])
        f = np.array([c[1] for c in sr["clock"]])
        tt, ceil = simulate_ceiling(lim, float(x[3]), spec, sr["phases"], plants, float(t.max()) + period_s)
        pred = np.minimum(np.interp(t, tt, ceil), spec.boost_core_mhz)
        res.append((pred - f) / math.sqrt(len(t)))
    return np.concatenate(res)


def fit_limiter(responses: list[dict], spec: GpuSpec, plants: dict | None = None, period_s: float = 1e-3,
                files: tuple[str, ...] = ()) -> LimiterFit:
    """Fit window, gain, slew and the cap as held to the probe clocks of the step responses."""
    from scipy.optimize import least_squares

    if not responses:
        raise InputError("no step responses to fit the limiter to")
    plants = dict(plants or {})
    fitted = fit_plants(responses, spec)
    for k, v in fitted.items():
        plants.setdefault(k, v)
    missing = sorted({ph["load"] for sr in responses for ph in sr["phases"]} - set(plants))
    if missing:
        raise InputError(f"no power samples (and no given plant) for load(s) {', '.join(missing)}; the step responses "
                         "need \"power\" samples in those phases, or give plants in the file")
    best = None
    lo = [math.log(1e-3), math.log(1e-1), math.log(1e2), 300.0]
    hi = [math.log(2.0), math.log(1e4), math.log(1e6), 2000.0]
    for w0 in (0.01, 0.1):
        for g0 in (10.0, 100.0):
            x0 = [math.log(w0), math.log(g0), math.log(5e3), spec.cap_w]
            r = least_squares(_residuals, x0, bounds=(lo, hi), args=(responses, plants, spec, period_s),
                              diff_step=1e-3, max_nfev=200)
            if best is None or r.cost < best.cost:
                best = r
    x = best.x
    model = LimiterModel(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]), period_s, float(x[3]),
                         source="fitted by `kdvfs limiter fit` to " + ", ".join(files or ("step responses",)))
    rms, n = {}, {}
    for sr in responses:
        r = _residuals(x, [sr], plants, spec, period_s)
        rms[sr["name"]] = float(np.sqrt(np.mean((r * math.sqrt(len(r))) ** 2)))
        n[sr["name"]] = len(sr["clock"])
    return LimiterFit(model, plants, rms, n, tuple(files))
