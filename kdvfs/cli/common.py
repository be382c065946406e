"""Helpers shared by the command-line verbs: loading traces and profiles, the switch model, CSV output, progress."""

from __future__ import annotations

import csv
from pathlib import Path

from kdvfs.console import make_console
from kdvfs.errors import InputError

__all__ = ["SETTINGS_HELP", "load_profile_ref", "load_trace", "out", "problem", "progress", "switch_model", "write_csv"]


def out(args=None):
    return make_console()


def load_trace(ref: str):
    from kdvfs.bundled import load_trace_by_name

    return load_trace_by_name(ref)


def load_profile_ref(ref: str):
    from kdvfs.bundled import resolve_profile_path
    from kdvfs.profile import load_profile

    return load_profile(resolve_profile_path(ref))


def write_csv(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return path


def problem(a):
    from kdvfs.optimize import Problem
    from kdvfs.passweep import restrict_settings

    t = load_trace(a.trace)
    prof = load_profile_ref(a.profile) if a.profile else load_profile_ref(t.name)
    return Problem(t, restrict_settings(prof.for_trace(t), getattr(a, "settings", None) or "all"))


SETTINGS_HELP = ("clock settings to choose from: all (the profile's, the card's full grid) or study (the 66 of "
                 "Spaan et al. 2026, to compare with the paper on its own grid)")


def switch_model(a, gpu_name: str | None):
    from kdvfs.gpus import SwitchModel, get_gpu

    if getattr(a, "switch_latency", None) is not None:
        return SwitchModel.from_latency(a.switch_latency)
    name = getattr(a, "switch_model", None) or gpu_name
    if not name:
        raise InputError("give --gpu, --switch-model PRESET or --switch-latency SECONDS")
    return get_gpu(name).switch


def progress(console, total: int, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                    transient=True, disable=not console.is_terminal)
