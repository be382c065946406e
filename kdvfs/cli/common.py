"""Helpers shared by the command-line verbs: loading traces and profiles, the switch model, CSV output, progress."""

from __future__ import annotations

import csv
from pathlib import Path

from kdvfs.console import make_console
from kdvfs.errors import InputError

__all__ = ["add_limiter_arg", "limiter_of", "load_profile_ref", "load_trace", "out", "problem", "progress", "switch_model",
           "write_csv"]


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

    t = load_trace(a.trace)
    prof = load_profile_ref(a.profile) if a.profile else load_profile_ref(t.name)
    return Problem(t, prof)


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


def add_limiter_arg(sp) -> None:
    sp.add_argument("--limiter", choices=["auto", "on", "off"], default="auto",
                    help="the card's windowed power limiter (auto: on for cards whose preset has a fitted limiter, "
                         "e.g. h200; off: each kernel throttled on its own, as before)")


def limiter_of(a, spec, can: bool = True, why: str = "the power limiter is simulated for one GPU without a governor lag"):
    """The limiter model to simulate with, or None: ``--limiter auto`` uses the preset's where it has one and the
    run allows it (``can``: one GPU, no governor lag); ``on`` insists."""
    from kdvfs.limiter import limiter_for

    mode = getattr(a, "limiter", "off")
    if mode == "off":
        return None
    lim = limiter_for(spec)
    if mode == "on" and lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit --bundle`, or "
                         "use --limiter off")
    if mode == "on" and not can:
        raise InputError(f"{why}; use --limiter off")
    return lim if can else None
