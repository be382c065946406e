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
from kdvfs.prediction import Prediction, SwitchPlan
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
        predicted: what the model predicts for it (:class:`~kdvfs.prediction.Prediction`); None when unknown.
        auto: time_s and energy_j at auto clocks.
        bound_energy_j: a proven lower bound on the optimum energy (when the solver proves one).
        gap_pct: (energy − bound) / bound.
        switch_plan: the switch model and mechanism it was planned for (switch-aware solvers), else None; the file
            keeps it as ``switch_model``.
        trace_sha: content hash of the trace's kernels (``kdvfs.identity``), when known.
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
    predicted: Prediction | None = None
    auto: dict = field(default_factory=dict)
    bound_energy_j: float | None = None
    gap_pct: float | None = None
    switch_plan: SwitchPlan | None = None
    trace_sha: str = ""
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
        from kdvfs.identity import check_binding

        fix = f"make a schedule for this trace with `kdvfs optimize --trace {trace.name} … -o S.json`"
        check_binding("schedule", self.trace, self.trace_sha, trace, fix)
        n = len(trace.instances())
        if self.n_instances != n:
            raise FormatError(f"schedule has {self.n_instances} kernel instances, but trace {trace.name!r} has {n}; {fix}")
        if spec is not None:
            if self.gpu and self.gpu != spec.name:
                raise FormatError(f"schedule was made for GPU {self.gpu!r}, not {spec.name!r}; optimise for {spec.name}")
            for c, m in self.setting_pairs()[0]:  # each distinct setting once, in sorted order
                spec.check_setting(c, m)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "trace": self.trace, "trace_sha": self.trace_sha, "gpu": self.gpu, "instances": self.n_instances,
            "objective": self.objective, "slack_pct": self.slack_pct, "granularity": self.granularity,
            "scope": self.scope, "solver": self.solver, "bound_energy_j": self.bound_energy_j, "gap_pct": self.gap_pct,
            "predicted": self.predicted.to_dict() if self.predicted is not None else {}, "auto": self.auto,
            "switch_model": self.switch_plan.to_dict() if self.switch_plan is not None else {},
            "switches": self.switches,
            "runs": [[fmt_clock(c), fmt_clock(m), n] for c, m, n in runs_of(self.core_mhz, self.mem_mhz)],
        }


def _field(doc: dict, key: str, kind, where: str, default=None):
    v = doc.get(key, default)
    if v is None or (isinstance(v, kind) and not isinstance(v, bool)):
        return v
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise FormatError(f"{where}: field {key!r} must be {names}, got {type(v).__name__} {v!r}; "
                      "see docs/schedule-format.md or make the schedule again with `kdvfs optimize … -o S.json`")


def schedule_from_dict(doc: dict, where: str = "schedule") -> Schedule:
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != FORMAT:
        raise FormatError(f"{where}: not a kdvfs schedule (format {fmt!r}, expected {FORMAT!r})")
    runs = _field(doc, "runs", list, where)
    if runs is None:
        raise FormatError(f"{where}: missing 'runs' (a list of [core, mem, count]); see docs/schedule-format.md")
    num = (int, float)
    total = 0
    for run in runs:
        if not isinstance(run, list) or len(run) != 3:
            raise FormatError(f"{where}: 'runs' must be a list of [core, mem, count], got {run!r}")
        n = run[2]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise FormatError(f"{where}: run length {n!r} must be a positive integer")
        total += n
        if total > 10_000_000:
            raise FormatError(f"{where}: runs cover more than 10 000 000 kernel instances; no trace has that many — "
                              "is it the right file?")
    core, mem = [], []
    for c, m, n in runs:
        core += [parse_clock(c, "core_mhz")] * n
        mem += [parse_clock(m, "mem_mhz")] * n
    inst = _field(doc, "instances", int, where)
    if inst not in (None, len(core)):
        raise FormatError(f"{where}: runs cover {len(core)} instances but 'instances' says {inst}")
    for key in ("predicted", "auto", "switch_model"):
        _field(doc, key, dict, where)
    slack = _field(doc, "slack_pct", num, where)
    return Schedule(
        trace=str(_field(doc, "trace", str, where, "")), gpu=str(_field(doc, "gpu", str, where, "")),
        core_mhz=np.array(core, dtype=np.int64), mem_mhz=np.array(mem, dtype=np.int64),
        objective=str(doc.get("objective", "")), slack_pct=float(slack or 0.0),
        granularity=str(doc.get("granularity", "")), scope=str(doc.get("scope", "")), solver=str(doc.get("solver", "")),
        predicted=Prediction.from_dict(doc.get("predicted") or {}, where), auto=dict(doc.get("auto") or {}),
        bound_energy_j=_field(doc, "bound_energy_j", num, where), gap_pct=_field(doc, "gap_pct", num, where),
        switch_plan=SwitchPlan.from_dict(doc.get("switch_model") or {}, where), trace_sha=str(_field(doc, "trace_sha", str, where, "")),
    )


def save_schedule(s: Schedule, path: str | Path) -> Path:
    path = Path(path)
    from kdvfs.console import to_jsonable
    from kdvfs.fileio import write_atomic

    return write_atomic(path, (json.dumps(to_jsonable(s.to_dict()), indent=1) + "\n").encode(), "schedule output")


def load_schedule(path: str | Path) -> Schedule:
    return schedule_from_dict(read_json_document(Path(path), "schedule"), where=f"schedule file {str(path)!r}")
