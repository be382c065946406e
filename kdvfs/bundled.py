"""Finding bundled traces and profiles by name, after any kind of install, from any working directory."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kdvfs.errors import InputError

__all__ = ["bundled_dir", "bundled_trace_names", "default_profile_path", "model_params", "resolve_trace_path",
           "resolve_profile_path"]

DEFAULT_TRACE = "gpt3xl-llmc-rtx3080ti"


def bundled_dir() -> Path:
    """The folder holding bundled traces (``traces/`` in a checkout, ``kdvfs_traces`` when installed)."""
    # the package's folder from its import spec (what importlib.resources.files gives, without importing
    # importlib.resources: ~20 ms of every command's start)
    spec = importlib.util.find_spec("kdvfs_traces")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        p = Path(loc)
        if p.is_dir():
            return p
    return Path(__file__).resolve().parent.parent / "traces"


def bundled_trace_names() -> list[str]:
    d = bundled_dir()
    names = {p.name.split(".trace.json")[0] for p in d.glob("*.trace.json*")}
    return sorted(names)


def _by_suffix(name_or_path: str, suffixes: tuple[str, ...], what: str, names: list[str]) -> Path:
    p = Path(name_or_path)
    if p.exists():
        return p
    for suf in suffixes:
        q = bundled_dir() / f"{name_or_path}{suf}"
        if q.exists():
            return q
    raise InputError(
        f"{what} {name_or_path!r} is neither a file nor a bundled name; bundled: {', '.join(names) or 'none'} "
        "(see `kdvfs trace show --list`), or give a path"
    )


def resolve_trace_path(name_or_path: str) -> Path:
    return _by_suffix(name_or_path, (".trace.json", ".trace.json.gz"), "trace", bundled_trace_names())


def resolve_profile_path(name_or_path: str) -> Path:
    names = sorted({p.name.split(".profile.csv")[0] for p in bundled_dir().glob("*.profile.csv*")})
    if Path(name_or_path).exists() or name_or_path in names:
        return _by_suffix(name_or_path, (".profile.csv", ".profile.csv.gz"), "profile", names)
    raise InputError(
        f"profile {name_or_path!r} is neither a file nor a bundled profile (bundled: {', '.join(names) or 'none'}); "
        f"build one from the model with `kdvfs profile build --trace TRACE --gpu GPU -o P.csv` and pass --profile P.csv")


def default_profile_path(trace) -> Path:
    """The bundled profile of a bundled trace; for any other trace an error naming how to build one. The trace's name
    comes from its file, so it is only ever matched against the bundled names, never used as a path."""
    names = sorted({p.name.split(".profile.csv")[0] for p in bundled_dir().glob("*.profile.csv*")})
    if trace.name in names:
        return _by_suffix(trace.name, (".profile.csv", ".profile.csv.gz"), "profile", names)
    raise InputError(
        f"trace {trace.name!r} has no bundled profile; build one from the model with `kdvfs profile build --trace "
        f"TRACE --gpu GPU -o P.csv` (or fit one from a sweep with `kdvfs profile fit`) and pass --profile P.csv")


def load_trace_by_name(name_or_path: str):
    from kdvfs.trace import load_trace

    return load_trace(resolve_trace_path(name_or_path))


def model_params(trace, spec):
    """Kernel model parameters for a trace on a card: the calibrated ones when the trace is bundled with a calibration
    for this card (the RTX 3080 Ti and its IVR variant), the category model otherwise."""
    from kdvfs.calibrate import load_params
    from kdvfs.model import default_params

    # the name comes from the trace file: only a bundled trace's name may pick a bundled file, never a path
    if trace.name not in bundled_trace_names():
        return default_params(trace, spec)
    cal = bundled_dir() / f"{trace.name}.calibration.json"
    if cal.exists() and spec.name in ("rtx3080ti", "ivr"):
        p = load_params(cal)
        if p.keys == trace.kernel_keys:
            return p
    return default_params(trace, spec)
