"""Timelines as Chrome trace JSON (opens in Perfetto or chrome://tracing)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_timeline"]


def write_timeline(events: list, path: str | Path, settings: list[tuple[int, int]] | None = None) -> Path:
    """``events``: (name, gpu, lane, start_s, dur_s, args) tuples from the engine; lane 0 kernels, 1 switching/idle."""
    out = []
    for name, gpu, lane, start, dur, args in events:
        a = dict(args)
        if settings is not None and "setting" in a:
            c, m = settings[a.pop("setting")]
            a["core_mhz"], a["mem_mhz"] = c or "auto", m or "auto"
        out.append({"name": name, "ph": "X", "pid": int(gpu), "tid": int(lane), "ts": start * 1e6, "dur": dur * 1e6,
                    "args": a})
    meta = [{"name": "thread_name", "ph": "M", "pid": g, "tid": t, "args": {"name": nm}}
            for g in sorted({e[1] for e in events}) for t, nm in ((0, "kernels"), (1, "switching / idle"))]
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": meta + out, "displayTimeUnit": "ms"}))
    return path
