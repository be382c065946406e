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

import gzip
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import GpuSpec
from kdvfs.limiter import ControllerState, LimiterModel

__all__ = ["LimiterFit", "Plant", "anchored_plants", "check_limiter", "fit_limiter", "load_json", "load_step_responses", "prepare_responses", "probe_time_share",
           "simulate_ceiling"]

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
        cap_fit_w: the cap fitted with the dynamics, on the scale of the plants' power field.
        probe_time_share: α, the share of the probe's duration that does not scale with the clock (None: the probe
            clocks were used as they are).
        cap_zoo_w: the cap as held from the zoo's energy counter (the model's ``cap_w`` when given).
        median_abs_mhz: per response, the median of |ceiling − probe clock| (the RMS is dominated by the few probe
            clocks the limiter does not explain).
    """

    model: LimiterModel
    plants: dict
    rms_mhz: dict
    samples: dict
    files: tuple[str, ...]
    cap_fit_w: float = float("nan")
    probe_time_share: float | None = None
    cap_zoo_w: float | None = None
    median_abs_mhz: dict | None = None

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(),
                "plants": {k: {"a_w": p.a_w, "b_w": p.b_w, "samples": p.samples} for k, p in self.plants.items()},
                "rms_mhz": self.rms_mhz, "samples": self.samples, "files": list(self.files), "cap_fit_w": self.cap_fit_w,
                "probe_time_share": self.probe_time_share, "cap_zoo_w": self.cap_zoo_w,
                "median_abs_mhz": self.median_abs_mhz}


def load_json(path) -> dict:
    """A JSON file, plain or gzipped, with a clear error."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"file {str(p)!r} does not exist; check the path")
    try:
        raw = p.read_bytes()
        return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, EOFError, gzip.BadGzipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"{str(p)!r} is not a readable JSON file ({e})") from None


def load_step_responses(paths) -> tuple[list[dict], dict]:
    """Every step response of the given files (characterisation JSON with ``step_responses``, plain or gzipped) and
    any plants given in them; each response carries its file's zoo ``kernels`` (for the cap as held)."""
    out, plants = [], {}
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"step-response file {str(p)!r} does not exist; give the characterisation JSON")
        try:
            raw = p.read_bytes()
            doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        except (OSError, EOFError, gzip.BadGzipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
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
            out.append(dict(sr, file=str(p), zoo=doc.get("kernels") or []))
        for k, v in (doc.get("plants") or {}).items():
            plants[k] = Plant(float(v["a_w"]), float(v["b_w"]))
    return out, plants


def _phase_at(phases: list[dict], t: float) -> dict | None:
    for ph in phases:
        if ph["start_s"] <= t < ph["end_s"]:
            return ph
    return None


def probe_time_share(responses: list[dict], top_mhz: float, min_phase_s: float = 1.0) -> float | None:
    """The share α of the probe's duration that does not scale with the clock, from long heavy phases where both the
    probe clock (``f_p = top · t_ref / t``) and NVML's SM clock hold: ``t/t_ref = α + (1 − α)·top/f_nvml``.

    On the H200 a bf16 4096³ GEMM held back to back runs 1.17× its top-clock duration while NVML reads 1545 MHz (not
    the 1700 MHz that a duration ∝ 1/f would mean): part of the probe's time does not scale with the SM clock.
    """
    al = []
    for sr in responses:
        c = np.array(sr["clock"], dtype=float).reshape(-1, 2)
        n = np.array(sr.get("nvml_clock") or [], dtype=float).reshape(-1, 2)
        for ph in sr["phases"]:
            if ph["load"] != "heavy" or ph["end_s"] - ph["start_s"] < min_phase_s or not len(n):
                continue
            a, b = ph["start_s"] + 0.5 * (ph["end_s"] - ph["start_s"]), ph["end_s"]
            fp = np.median(c[(c[:, 0] >= a) & (c[:, 0] < b), 1])
            fn = np.median(n[(n[:, 0] >= a) & (n[:, 0] < b), 1])
            if fn < top_mhz - 30 and fp > fn:
                al.append((top_mhz / fp - top_mhz / fn) / (1 - top_mhz / fn))
    return float(np.median(al)) if al else None


def prepare_responses(responses: list[dict], spec: GpuSpec, alpha: float | None, bin_s: float = 0.005,
                      exclude=("idle", "probe-only")) -> list[dict]:
    """Probe clocks cleaned for the fit: outside the card's clock range dropped (a probe queued behind other work),
    converted to NVML's clock with the probe's time share α (None: kept as they are), median per ``bin_s``, and
    dropped in phases of the excluded loads (the clock there follows the GPU going idle between sparse probes, not
    the limiter); power from NVML's instantaneous field where recorded."""
    top, lo = float(spec.boost_core_mhz), float(spec.core_clocks_mhz[0])
    out = []
    for sr in responses:
        c = np.array(sr["clock"], dtype=float).reshape(-1, 2)
        c = c[(c[:, 1] >= lo) & (c[:, 1] <= top * 1.03)]
        f = np.minimum(c[:, 1], top)
        if alpha is not None:
            f = np.clip(top * (1 - alpha) / (top / f - alpha), lo, top)
        k = np.floor(c[:, 0] / bin_s).astype(np.int64)
        keep = []
        for b in np.unique(k):
            m = k == b
            t = float((b + 0.5) * bin_s)
            ph = _phase_at(sr["phases"], t)
            if ph is None or ph["load"] in exclude:
                continue
            keep.append([t, float(np.median(f[m]))])
        power = sr.get("power_instant") or sr.get("power") or []
        out.append(dict(sr, clock=keep, power=power, clock_raw_samples=len(c),
                        power_field="power_instant" if sr.get("power_instant") else "power"))
    return out


def anchored_plants(responses: list[dict], spec: GpuSpec, settle_s: float = 0.1, onset_s: float = 0.15) -> dict:
    """Each load's power against the clock, from the power samples of its phases.

    NVML's power fields update about every 100 ms and lag the load, so a least-squares fit of power on clock inside a
    phase mostly sees one value; instead the ``heavy`` load (the one the limiter throttles) gets a curve on the card's
    voltage shape through two anchors: its held state (median clock and power over the second half of phases ≥ 1 s)
    and its unthrottled start (the highest power read in the first ``onset_s`` of heavy phases that follow another
    load, at the top clock). Every other load gets a flat plant at its median power after ``settle_s``.
    """
    top = float(spec.boost_core_mhz)
    per_load: dict[str, list[float]] = {}
    held_f, held_p, onset = [], [], []
    for sr in responses:
        ct = np.array([c[0] for c in sr["clock"]])
        cf = np.array([c[1] for c in sr["clock"]])
        pw = np.array(sr.get("power") or [], dtype=float).reshape(-1, 2)
        for j, ph in enumerate(sr["phases"]):
            a, b = ph["start_s"], ph["end_s"]
            inph = pw[(pw[:, 0] >= a + settle_s) & (pw[:, 0] < b)]
            per_load.setdefault(ph["load"], []).extend(inph[:, 1].tolist())
            if ph["load"] != "heavy":
                continue
            if b - a >= 1.0 and len(ct):
                h = (pw[:, 0] >= 0.5 * (a + b)) & (pw[:, 0] < b)
                m = (ct >= 0.5 * (a + b)) & (ct < b)
                if h.any() and m.any():
                    held_f.append(float(np.median(cf[m])))
                    held_p.append(float(np.median(pw[h, 1])))
            if j > 0 and sr["phases"][j - 1]["load"] != "heavy":
                o = pw[(pw[:, 0] >= a) & (pw[:, 0] < a + onset_s), 1]
                if len(o):
                    onset.append(float(o.max()))
    plants = {k: Plant(float(np.median(v)), 0.0, len(v)) for k, v in per_load.items() if v}
    if held_f and onset:
        f_h, p_h, p_t = float(np.median(held_f)), float(np.median(held_p)), float(np.median(onset))
        sh = float(spec.core_power_shape(np.array(f_h)))
        b = max((p_t - p_h) / (1.0 - sh), 0.0) if sh < 1 else 0.0
        plants["heavy"] = Plant(p_t - b, b, len(held_p) + len(onset))
        log.info("heavy plant: held %.0f W at %.0f MHz, %.0f W at %.0f MHz", p_h, f_h, p_t, top)
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


def cap_as_held(kernels: list[dict], top_mhz: float) -> float | None:
    """The power the limiter holds, from the energy counter: the median power of the zoo kernels that the limiter
    throttled when each ran alone (NVML's SM clock at the 90th percentile below the top clock)."""
    held = [float(k["power_w"]) for k in kernels
            if k.get("power_w") and k.get("sm_mhz_p90") is not None and k["sm_mhz_p90"] < top_mhz - 15]
    return float(np.median(held)) if held else None


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
                files: tuple[str, ...] = (), cap: str = "preset") -> LimiterFit:
    """Fit window, gain, slew and the cap as held to the probe clocks of the step responses.

    ``cap``: what the model holds: ``preset`` (None: the card's ``cap_w``, so one kernel held alone throttles exactly
    as isolated throttling says), ``zoo`` (the energy counter's cap from the zoo, ``cap_as_held``) or ``fit`` (the cap
    fitted with the dynamics, on the plants' power scale)."""
    if cap not in ("preset", "zoo", "fit"):
        raise InputError(f"cap {cap!r} is not one of preset, zoo, fit")
    from scipy.optimize import least_squares

    if not responses:
        raise InputError("no step responses to fit the limiter to")
    top = float(spec.boost_core_mhz)
    alpha = probe_time_share(responses, top)
    responses = prepare_responses(responses, spec, alpha)
    for sr in responses:
        if not sr["clock"]:
            raise InputError(f"step response {sr['name']!r} has no usable probe clock outside idle phases")
    plants = dict(plants or {})
    fitted = anchored_plants(responses, spec)
    for k, v in fitted.items():
        plants.setdefault(k, v)
    missing = sorted({ph["load"] for sr in responses for ph in sr["phases"]} - set(plants))
    if missing:
        raise InputError(f"no power samples (and no given plant) for load(s) {', '.join(missing)}; the step responses "
                         "need \"power\" samples in those phases, or give plants in the file")
    best = None
    # a robust loss: probe clocks jump for reasons the limiter does not explain (other events, a probe queued behind
    # the light kernels); residuals beyond ~30 MHz count linearly. Residuals are per response / sqrt(its samples).
    scale = 30.0 / math.sqrt(float(np.median([len(sr["clock"]) for sr in responses])))
    lo = [math.log(1e-3), math.log(1e-1), math.log(1e2), 300.0]
    hi = [math.log(2.0), math.log(1e4), math.log(1e6), 2000.0]
    for w0 in (0.01, 0.1):
        for g0 in (10.0, 100.0):
            x0 = [math.log(w0), math.log(g0), math.log(5e3), spec.cap_w]
            r = least_squares(_residuals, x0, bounds=(lo, hi), args=(responses, plants, spec, period_s),
                              diff_step=1e-3, max_nfev=200, loss="soft_l1", f_scale=scale)
            if best is None or r.cost < best.cost:
                best = r
    assert best is not None  # the loop above ran at least once
    x = best.x
    # the simulator's kernel power is on the energy counter's scale, the fitted cap on that of the power field the
    # plants came from: by default the model holds the preset's cap (itself fitted to the zoo's energy counter)
    zoo_cap = cap_as_held([k for sr in responses for k in sr.get("zoo", [])], top)
    if cap == "zoo" and zoo_cap is None:
        raise InputError("--cap zoo needs the characterisation's zoo kernels in the file")
    held = {"preset": None, "zoo": zoo_cap, "fit": float(x[3])}[cap]
    model = LimiterModel(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]), period_s, held,
                         source="fitted by `kdvfs limiter fit` to " + ", ".join(files or ("step responses",))
                         + " (" + ", ".join(sr["name"] for sr in responses) + ")")
    rms, n, mad = {}, {}, {}
    for sr in responses:
        r = _residuals(x, [sr], plants, spec, period_s) * math.sqrt(len(sr["clock"]))
        rms[sr["name"]] = float(np.sqrt(np.mean(r ** 2)))
        mad[sr["name"]] = float(np.median(np.abs(r)))
        n[sr["name"]] = len(sr["clock"])
    return LimiterFit(model, plants, rms, n, tuple(files), float(x[3]), alpha, zoo_cap, mad)


def check_limiter(responses: list[dict], spec: GpuSpec, fit_doc: dict) -> dict:
    """A stored fit (``LimiterFit.to_dict``) against step responses it may not have seen: per response, RMS and
    median |ceiling − probe clock| in MHz, with the fit's own probe time share, plants and cap."""
    m = fit_doc["model"]
    plants = {k: Plant(float(v["a_w"]), float(v["b_w"])) for k, v in fit_doc["plants"].items()}
    prepared = prepare_responses(responses, spec, fit_doc.get("probe_time_share"))
    x = [math.log(m["window_s"]), math.log(m["gain_mhz_per_ws"]), math.log(m["slew_mhz_per_s"]),
         float(fit_doc.get("cap_fit_w") or m["cap_w"])]
    out = {}
    for sr in prepared:
        missing = {ph["load"] for ph in sr["phases"]} - set(plants)
        if missing or not sr["clock"]:
            raise InputError(f"step response {sr['name']!r}: the fit has no plant for {', '.join(sorted(missing))}"
                             if missing else f"step response {sr['name']!r} has no usable probe clock")
        r = _residuals(x, [sr], plants, spec, float(m["period_s"])) * math.sqrt(len(sr["clock"]))
        out[sr["name"]] = {"rms_mhz": float(np.sqrt(np.mean(r ** 2))), "median_abs_mhz": float(np.median(np.abs(r))),
                           "samples": len(sr["clock"])}
    return out
