"""The card's temperature: the power of an idle (clocked) GPU as it warms, and the temperature a workload holds.

Static (leakage) power grows with the die's temperature, so the power of the GPU idle between kernels — a training
step's host gaps, the idle share of a duty or launch-bound zoo entry — depends on how warm the card is. Two card-level
relations, each fitted to the observe-only zoo (``kdvfs characterize``), never to a training step:

- ``gap_power_w(T) = gap_ref_w + gap_w_per_c · (T − ref_c)``: a line through the zoo's ``gap`` entries (a tiny kernel
  every 100 µs or 1 ms, or nothing launched) at the temperatures they were read at (NVML's die temperature at the end
  of each window); ``fit_gap_line``.
- the operating point ``T = ambient_c + c_per_w · P``: the temperature a workload holds at average power ``P``, one
  thermal resistance through the zoo's (power, temperature) pairs; ``fit_operating_point``. A prediction for a
  workload whose temperature was not measured takes its temperature from its own predicted average power
  (``ThermalModel.solve_gap``), not from a reading.

The kernels' own static power is in their fitted activity (the zoo's kernels ran at 37–66 °C); only the idle share
moves with the temperature here.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kdvfs.errors import InputError

__all__ = ["THERMAL_KEYS", "ThermalModel", "fit_gap_line", "fit_operating_point", "thermal_for", "thermal_from_params"]

log = logging.getLogger(__name__)

THERMAL_KEYS = ("gap_ref_w", "ref_c", "gap_w_per_c", "ambient_c", "c_per_w")
MIN_SPREAD_C = 5.0
"""The least temperature span (°C) of the gap entries for a slope: below it the line is not fitted (slope 0)."""


@dataclass(frozen=True, slots=True)
class ThermalModel:
    """The idle card's power against its temperature, and the temperature a workload holds.

    Attributes:
        gap_ref_w: power of the GPU idle but clocked at ``ref_c``, watts.
        ref_c: the temperature ``gap_ref_w`` holds at, °C (the gap entries' mean).
        gap_w_per_c: how much that power grows per degree, W/°C (static power).
        ambient_c: the operating point's intercept: the temperature at zero power, °C.
        c_per_w: the operating point's thermal resistance, °C/W.
    """

    gap_ref_w: float
    ref_c: float
    gap_w_per_c: float
    ambient_c: float
    c_per_w: float

    def __post_init__(self) -> None:
        for k in THERMAL_KEYS:
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
                raise InputError(f"thermal model: {k} must be a finite number, got {v!r}; rewrite the fit with "
                                 "`kdvfs calibrate-h200`")
        if self.gap_ref_w <= 0 or self.c_per_w < 0 or self.gap_w_per_c < 0:
            raise InputError(f"thermal model: gap_ref_w must be > 0 and gap_w_per_c, c_per_w ≥ 0, got "
                             f"{self.gap_ref_w!r}, {self.gap_w_per_c!r}, {self.c_per_w!r}; rewrite the fit with "
                             "`kdvfs calibrate-h200`")

    def gap_power_w(self, temperature_c) -> Any:
        """The idle (clocked) card's power at ``temperature_c`` (scalar or array), watts."""
        return self.gap_ref_w + self.gap_w_per_c * (np.asarray(temperature_c, dtype=float) - self.ref_c)

    def operating_c(self, power_w) -> Any:
        """The temperature a workload holds at average power ``power_w``, °C."""
        return self.ambient_c + self.c_per_w * np.asarray(power_w, dtype=float)

    def solve_gap(self, kernel_energy_j: float, kernel_time_s: float, gap_s: float) -> tuple[float, float]:
        """(temperature °C, gap power W) of a repeated step whose kernels take ``kernel_time_s`` and
        ``kernel_energy_j`` and whose GPU idles ``gap_s`` between them: the operating point of the step's average
        power, with the gaps at the gap power of that temperature (linear in T: solved in closed form)."""
        span = kernel_time_s + gap_s
        if span <= 0:
            raise InputError(f"thermal model: a step's kernel time plus gap must be > 0 s, got {span!r}")
        # T = a + R·(E + g·(P0 + k·(T − Tr)))/span  →  T·(1 − R·g·k/span) = a + R·(E + g·(P0 − k·Tr))/span
        r, k, g = self.c_per_w, self.gap_w_per_c, gap_s
        den = 1.0 - r * g * k / span
        if den <= 0:
            raise InputError(f"thermal model: no stable temperature (c_per_w · gap_w_per_c = {r * k:.3g} ≥ 1); "
                             "rewrite the fit with `kdvfs calibrate-h200`")
        t = (self.ambient_c + r * (kernel_energy_j + g * (self.gap_ref_w - k * self.ref_c)) / span) / den
        return float(t), float(self.gap_power_w(t))

    def to_dict(self) -> dict:
        return {k: float(getattr(self, k)) for k in THERMAL_KEYS}


def thermal_from_params(params: Any, where: str = "the fit") -> ThermalModel | None:
    """The ``thermal`` object of a ``kdvfs-h200-fit/1`` document's params as a ``ThermalModel``; None where absent
    (fits before session 9)."""
    th = params.get("thermal") if isinstance(params, dict) else None
    if th is None:
        return None
    if not isinstance(th, dict) or any(k not in th for k in THERMAL_KEYS):
        raise InputError(f"{where}: params['thermal'] must be an object with {', '.join(THERMAL_KEYS)}, got "
                         f"{th!r:.80}; rewrite the fit with `kdvfs calibrate-h200`")
    return ThermalModel(**{k: th[k] for k in THERMAL_KEYS})


def thermal_for(spec) -> ThermalModel | None:
    """The bundled card fit's thermal gap model (``traces/NAME.fit.json``, ``kdvfs calibrate-h200 --gap-model
    thermal``), or None where the fit has none."""
    import json

    from kdvfs.bundled import bundled_dir

    card = bundled_dir() / f"{spec.name}.fit.json"
    if not card.exists():
        return None
    return thermal_from_params(json.loads(card.read_text()).get("params"), str(card))


def _pairs(rows: list[dict], what: str) -> tuple[np.ndarray, np.ndarray]:
    ok = [r for r in rows if isinstance(r.get("temperature_c"), (int, float)) and r.get("power_w")]
    if len(ok) < 2:
        raise InputError(f"thermal fit: {len(ok)} {what} with a recorded temperature_c, at least 2 needed; give "
                         "characterisation files measured by `kdvfs characterize --backend nvml` (they record it)")
    return (np.array([float(r["power_w"]) for r in ok]), np.array([float(r["temperature_c"]) for r in ok]))


def fit_gap_line(gap_rows: list[dict]) -> tuple[float, float, float]:
    """(gap power at the mean temperature W, that temperature °C, slope W/°C) of the zoo's ``gap`` entries: least
    squares of power on temperature. With less than ``MIN_SPREAD_C`` of spread the slope is 0 and the power is the
    median (the session-5 gap power)."""
    p, t = _pairs(gap_rows, "gap entries")
    if float(np.ptp(t)) < MIN_SPREAD_C:
        return float(np.median(p)), float(np.mean(t)), 0.0
    k, _ = np.polyfit(t, p, 1)
    ref = float(np.mean(t))
    return float(np.mean(p)), ref, max(float(k), 0.0)


def fit_operating_point(rows: list[dict]) -> tuple[float, float]:
    """(ambient °C, thermal resistance °C/W): least squares of the zoo entries' temperature on their average power."""
    p, t = _pairs(rows, "zoo entries")
    r, a = np.polyfit(p, t, 1)
    return float(a), max(float(r), 0.0)
