"""Helpers shared by the command-line verbs: loading traces and profiles, the switch model, CSV output, progress."""

from __future__ import annotations

import csv
from pathlib import Path

from kdvfs.console import make_console
from kdvfs.errors import InputError

__all__ = ["check_profile_clocks", "load_profile_ref", "load_trace", "out", "problem", "progress", "switch_model", "write_csv"]


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
    """Rows as CSV, written atomically (``kdvfs.fileio``); missing parent folders are created."""
    import io

    from kdvfs.fileio import write_atomic

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return write_atomic(path, buf.getvalue().encode(), "CSV output", make_parents=True)


def problem(a):
    from kdvfs.optimize import Problem

    t = load_trace(a.trace)
    if a.profile:
        prof = load_profile_ref(a.profile)
    else:
        from kdvfs.bundled import default_profile_path
        from kdvfs.profile import load_profile

        prof = load_profile(default_profile_path(t))
    check_profile_clocks(prof)
    return Problem(t, prof)


def check_profile_clocks(prof) -> None:
    """A profile of a catalog card may only hold settings the card supports: a schedule built from any other would
    be written and then refused by the card (or the validator) only later."""
    from kdvfs.gpus import PRESETS, get_gpu

    if not prof.gpu or prof.gpu.lower() not in PRESETS:
        return
    spec = get_gpu(prof.gpu)
    for c, m in prof.settings:
        try:
            spec.check_setting(c, m)
        except InputError as e:
            raise InputError(f"profile for {prof.gpu} holds a setting the card lacks: {e}; rebuild the profile with "
                             f"`kdvfs profile build --gpu {prof.gpu}` or drop those rows") from None


def switch_model(a, gpu_name: str | None):
    from kdvfs.gpus import SwitchModel, get_gpu

    if getattr(a, "switch_latency", None) is not None:
        return SwitchModel.from_latency(a.switch_latency)
    preset = getattr(a, "switch_model", None)
    name = preset or gpu_name
    if not name:
        raise InputError("give --gpu, --switch-model PRESET or --switch-latency SECONDS")
    if preset:
        from kdvfs.gpus import PRESETS

        try:
            get_gpu(preset)
        except InputError:
            raise InputError(f"--switch-model {preset!r} is not a preset whose switch model can be borrowed; known: "
                             f"{', '.join(PRESETS)} (or give --switch-latency SECONDS)") from None
    return get_gpu(name).switch


def progress(console, total: int, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                    transient=True, disable=not console.is_terminal)
