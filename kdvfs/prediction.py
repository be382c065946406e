"""Typed values a schedule carries: what the model predicts for it (:class:`Prediction`) and the switch model and
mechanism a switch-aware solver planned it with (:class:`SwitchPlan`).

Both used to be dicts whose keys depended on which solver made them; now every maker fills the same fields and the
optional ones say who fills them. ``to_dict`` writes exactly the keys (and order) of the ``kdvfs-schedule/1`` format
(docs/schedule-format.md), so schedule files are unchanged; ``from_dict`` reads them back and refuses unknown keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kdvfs.errors import FormatError
from kdvfs.gpus import SwitchModel
from kdvfs.modes import Mechanism

__all__ = ["Prediction", "SwitchPlan"]

_FIX = "see docs/schedule-format.md or make the schedule again with `kdvfs optimize … -o S.json`"


@dataclass(frozen=True, slots=True)
class Prediction:
    """What the model predicts for a schedule (from the profile; free switching unless the solver paid for switches).

    Attributes:
        time_s, energy_j: one iteration.
        time_change_pct, energy_change_pct: against auto clocks.
        switches: setting changes between consecutive instances.
        ideal_time_s, ideal_energy_j: the same schedule with free switching (switch-aware and boundary schedules,
            whose time_s and energy_j pay for the switches); None otherwise.
        ceiling_mhz, power_w: the steady-state clock ceiling and power under the card's power limiter (schedules
            chosen under the limiter, whose time_s and energy_j are the steady state); None otherwise.
        limiter: True for schedules chosen under the limiter; None otherwise.
    """

    time_s: float
    energy_j: float
    time_change_pct: float
    energy_change_pct: float
    switches: int
    ideal_time_s: float | None = None
    ideal_energy_j: float | None = None
    ceiling_mhz: float | None = None
    power_w: float | None = None
    limiter: bool | None = None

    @classmethod
    def against(cls, time_s: float, energy_j: float, auto_time_s: float, auto_energy_j: float, switches: int,
                **extra: Any) -> Prediction:
        """The prediction of a schedule that takes ``time_s`` and ``energy_j`` where auto takes the ``auto_`` ones."""
        return cls(time_s, energy_j, 100 * (time_s / auto_time_s - 1), 100 * (energy_j / auto_energy_j - 1),
                   int(switches), **extra)

    def to_dict(self) -> dict[str, Any]:
        """The schedule file's ``predicted`` object: the five always-present keys, then the optional ones set."""
        d: dict[str, Any] = {"time_s": self.time_s, "energy_j": self.energy_j, "time_change_pct": self.time_change_pct,
                             "energy_change_pct": self.energy_change_pct, "switches": self.switches}
        for k in _OPTIONAL:
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return d

    @classmethod
    def from_dict(cls, doc: dict, where: str = "schedule") -> Prediction | None:
        """Read a schedule file's ``predicted`` object (None for an empty one)."""
        if not doc:
            return None
        unknown = sorted(set(doc) - set(_REQUIRED) - set(_OPTIONAL))
        if unknown:
            raise FormatError(f"{where}: 'predicted' has unknown key(s) {', '.join(map(repr, unknown))}; it holds "
                              f"{', '.join(_REQUIRED + _OPTIONAL)}; {_FIX}")
        missing = [k for k in _REQUIRED if k not in doc]
        if missing:
            raise FormatError(f"{where}: 'predicted' lacks {', '.join(map(repr, missing))}; {_FIX}")
        vals: dict[str, Any] = {}
        for k, v in doc.items():
            if k == "limiter":
                if not isinstance(v, bool):
                    raise FormatError(f"{where}: predicted 'limiter' must be true or false, got {v!r}; {_FIX}")
            elif k == "switches":
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise FormatError(f"{where}: predicted 'switches' must be an integer ≥ 0, got {v!r}; {_FIX}")
            elif not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise FormatError(f"{where}: predicted {k!r} must be a finite number, got {v!r}; {_FIX}")
            vals[k] = v
        return cls(**vals)


_REQUIRED = ("time_s", "energy_j", "time_change_pct", "energy_change_pct", "switches")
_OPTIONAL = ("ideal_time_s", "ideal_energy_j", "ceiling_mhz", "power_w", "limiter")


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    """The switch model and mechanism a switch-aware schedule was planned for.

    Attributes:
        switch: the switch model (its host call and transition times are what the schedule file keeps).
        mechanism: how each switch is issued.
    """

    switch: SwitchModel
    mechanism: Mechanism

    def __post_init__(self) -> None:
        object.__setattr__(self, "mechanism", Mechanism.parse(self.mechanism))  # construction only: str → enum

    def to_dict(self) -> dict[str, Any]:
        """The schedule file's ``switch_model`` object."""
        return {"host_call_s": self.switch.host_call_s, "transition_s": self.switch.transition_s,
                "mechanism": self.mechanism.value}

    @classmethod
    def from_dict(cls, doc: dict, where: str = "schedule") -> SwitchPlan | None:
        """Read a schedule file's ``switch_model`` object (None for an empty one)."""
        if not doc:
            return None
        keys = ("host_call_s", "transition_s", "mechanism")
        if set(doc) != set(keys):
            raise FormatError(f"{where}: 'switch_model' must hold exactly {', '.join(keys)}, got "
                              f"{', '.join(sorted(doc))}; {_FIX}")
        for k in keys[:2]:
            v = doc[k]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise FormatError(f"{where}: switch_model {k!r} must be a number ≥ 0 (seconds), got {v!r}; {_FIX}")
        if doc["mechanism"] not in Mechanism.values():
            raise FormatError(f"{where}: switch_model 'mechanism' {doc['mechanism']!r} is not one of "
                              f"{', '.join(Mechanism.values())}; {_FIX}")
        return cls(SwitchModel(float(doc["host_call_s"]), float(doc["transition_s"])), Mechanism(doc["mechanism"]))
