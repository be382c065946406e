"""Schedules: the requested (core, memory) clocks of every kernel instance of a trace, and the ``kdvfs-schedule/1``
JSON format (documented in docs/schedule-format.md). The per-instance sequence is stored run-length encoded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.arrays import frozen_array, unique_pairs
from kdvfs.errors import FormatError
from kdvfs.gpus import GpuSpec
from kdvfs.profile import fmt_clock, parse_clock
from kdvfs.trace import Trace, read_json_document

__all__ = ["Schedule", "load_schedule", "save_schedule", "runs_of"]

FORMAT = "kdvfs-schedule/1"


def runs_of(core: np.ndarray, mem: np.ndarray) -> list[tuple[int, int, int]]:
    """Run-length encoding: [(core, mem, length), …]."""
    out: list[tuple[int, int, int]] = []
    for c, m in zip(core.tolist(), mem.tolist()):
        if out and out[-1][0] == c and out[-1][1] == m:
            out[-1] = (c, m, out[-1][2] + 1)
        else:
            out.append((c, m, 1))
    return out


@dataclass(frozen=True, slots=True)
class Schedule:
    """Requested clocks per kernel instance, and how they were chosen.

    Attributes:
        trace: name of the trace.
        gpu: the card.
        core_mhz, mem_mhz: requested clocks per instance (``AUTO`` = 0), in execution order.
        objective: ``waste``, ``edp``, ``ed2p`` or ``energy``.
        slack_pct: tolerated slowdown against auto (waste objective).
        granularity: ``static``, ``pass``, ``kernel``.
        scope: ``local`` or ``global``.
        solver: the solver that made it.
        predicted: predicted time_s, energy_j and their changes vs auto, switches (from the profile, free switching
            unless the solver says otherwise).
        auto: time_s and energy_j at auto clocks.
        bound_energy_j: a proven lower bound on the optimum energy (when the solver proves one).
        gap_pct: (energy − bound) / bound.
        switch_model: the switch model the schedule was planned with (switch-aware solvers), else empty.
    """

    trace: str
    gpu: str
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    objective: str = "waste"
    slack_pct: float = 0.0
    granularity: str = "kernel"
    scope: str = "global"
    solver: str = ""
    predicted: dict = field(default_factory=dict)
    auto: dict = field(default_factory=dict)
    bound_energy_j: float | None = None
    gap_pct: float | None = None
    switch_model: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # during construction only: the frozen value keeps read-only copies of the arrays it was given
        object.__setattr__(self, "core_mhz", frozen_array(self.core_mhz, np.int64))
        object.__setattr__(self, "mem_mhz", frozen_array(self.mem_mhz, np.int64))

    def setting_pairs(self) -> tuple[list[tuple[int, int]], np.ndarray]:
        """The distinct (core, memory) settings in sorted order and each instance's index into them (memoised: the
        clocks are read-only)."""
        if "pairs" not in self._cache:
            self._cache["pairs"] = unique_pairs(self.core_mhz, self.mem_mhz)
        return self._cache["pairs"]

    @property
    def n_instances(self) -> int:
        return len(self.core_mhz)

    @property
    def switches(self) -> int:
        """Setting changes between consecutive instances."""
        ch = (np.diff(self.core_mhz) != 0) | (np.diff(self.mem_mhz) != 0)
        return int(ch.sum())

    def check_for(self, trace: Trace, spec: GpuSpec | None = None) -> None:
        """Raise a clear error unless the schedule fits this trace (and card)."""
        n = len(trace.instances())
        if self.n_instances != n or (self.trace and self.trace != trace.name):
            raise FormatError(
                f"schedule is for trace {self.trace!r} with {self.n_instances} instances, but trace {trace.name!r} "
                f"has {n}; make a schedule for this trace with `kdvfs optimize --trace {trace.name} …`"
            )
        if spec is not None:
            if self.gpu and self.gpu != spec.name:
                raise FormatError(f"schedule was made for GPU {self.gpu!r}, not {spec.name!r}; optimise for {spec.name}")
            for c, m in self.setting_pairs()[0]:  # each distinct setting once, in sorted order
                spec.check_setting(c, m)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "trace": self.trace, "gpu": self.gpu, "instances": self.n_instances,
            "objective": self.objective, "slack_pct": self.slack_pct, "granularity": self.granularity,
            "scope": self.scope, "solver": self.solver, "bound_energy_j": self.bound_energy_j, "gap_pct": self.gap_pct,
            "predicted": self.predicted, "auto": self.auto, "switch_model": self.switch_model,
            "switches": self.switches,
            "runs": [[fmt_clock(c), fmt_clock(m), n] for c, m, n in runs_of(self.core_mhz, self.mem_mhz)],
        }


def schedule_from_dict(doc: dict, where: str = "schedule") -> Schedule:
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != FORMAT:
        raise FormatError(f"{where}: not a kdvfs schedule (format {fmt!r}, expected {FORMAT!r})")
    core, mem = [], []
    try:
        for c, m, n in doc["runs"]:
            if not isinstance(n, int) or n < 1:
                raise FormatError(f"{where}: run length {n!r} must be a positive integer")
            core += [parse_clock(c, "core_mhz")] * n
            mem += [parse_clock(m, "mem_mhz")] * n
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{where}: 'runs' must be a list of [core, mem, count] ({e})") from None
    if doc.get("instances") not in (None, len(core)):
        raise FormatError(f"{where}: runs cover {len(core)} instances but 'instances' says {doc.get('instances')}")
    return Schedule(
        trace=str(doc.get("trace", "")), gpu=str(doc.get("gpu", "")), core_mhz=np.array(core, dtype=np.int64),
        mem_mhz=np.array(mem, dtype=np.int64), objective=str(doc.get("objective", "")),
        slack_pct=float(doc.get("slack_pct") or 0.0), granularity=str(doc.get("granularity", "")),
        scope=str(doc.get("scope", "")), solver=str(doc.get("solver", "")), predicted=dict(doc.get("predicted") or {}),
        auto=dict(doc.get("auto") or {}), bound_energy_j=doc.get("bound_energy_j"), gap_pct=doc.get("gap_pct"),
        switch_model=dict(doc.get("switch_model") or {}),
    )


def save_schedule(s: Schedule, path: str | Path) -> Path:
    path = Path(path)
    from kdvfs.console import to_jsonable

    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(to_jsonable(s.to_dict()), indent=1) + "\n")
    tmp.replace(path)
    return path


def load_schedule(path: str | Path) -> Schedule:
    return schedule_from_dict(read_json_document(Path(path), "schedule"), where=f"schedule file {str(path)!r}")
