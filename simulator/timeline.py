"""Timelines: the engine's events (:class:`TimelineEvent`) and their Chrome trace JSON (opens in Perfetto or
chrome://tracing)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["KERNEL_LANE", "SWITCH_LANE", "TimelineEvent", "write_timeline"]

KERNEL_LANE = 0
"""The lane of kernel executions."""
SWITCH_LANE = 1
"""The lane of switch stalls, late switch landings and idle gaps."""


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One span on a GPU's timeline.

    Attributes:
        name: the kernel's name for a kernel event; ``switch stall``, ``switch lands late`` or the gap's label
            otherwise.
        gpu: the simulated GPU.
        lane: ``KERNEL_LANE`` or ``SWITCH_LANE``.
        start_s, dur_s: when it starts and how long it lasts (simulated seconds).
        setting: index into the profile's settings (kernel events: the setting in effect; a late landing: the
            setting that lands); None for others.
        segment: the trace segment a kernel event belongs to; None for others.
        kernel: the kernel's index in the trace; None for others.
    """

    name: str
    gpu: int
    lane: int
    start_s: float
    dur_s: float
    setting: int | None = None
    segment: str | None = None
    kernel: int | None = None

    def args(self, settings: list[tuple[int, int]] | None = None) -> dict[str, Any]:
        """The Chrome trace event's ``args``: the segment and kernel, and the setting as its clocks when
        ``settings`` is given (else as its index)."""
        a: dict[str, Any] = {}
        if self.setting is not None and settings is None:
            a["setting"] = self.setting
        if self.segment is not None:
            a["segment"] = self.segment
        if self.kernel is not None:
            a["kernel"] = self.kernel
        if self.setting is not None and settings is not None:
            c, m = settings[self.setting]
            a["core_mhz"], a["mem_mhz"] = c or "auto", m or "auto"
        return a


def write_timeline(events: Iterable[TimelineEvent], path: str | Path,
                   settings: list[tuple[int, int]] | None = None) -> Path:
    """Write ``events`` (``SimResult.timeline``) as Chrome trace JSON, one process per GPU with a kernel lane and a
    switching/idle lane."""
    events = list(events)
    out = [{"name": e.name, "ph": "X", "pid": int(e.gpu), "tid": int(e.lane), "ts": e.start_s * 1e6,
            "dur": e.dur_s * 1e6, "args": e.args(settings)} for e in events]
    meta = [{"name": "thread_name", "ph": "M", "pid": g, "tid": t, "args": {"name": nm}}
            for g in sorted({e.gpu for e in events}) for t, nm in ((KERNEL_LANE, "kernels"),
                                                                  (SWITCH_LANE, "switching / idle"))]
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": meta + out, "displayTimeUnit": "ms"}))
    return path
