"""Which trace a profile, schedule or sweep belongs to: the trace's name plus a content hash of its kernels.

Kernel keys alone (``forward.0`` …) do not identify a trace — every foreign import uses the same ones — so files made
for a trace carry ``trace_sha``, the first 16 hex digits of SHA-256 over the trace's segments (names, passes, repeats
and every kernel field, as written to the trace file). Files written before the hash existed still load: their trace
name is compared when they name one, and the hash check is skipped (``docs/reliability.md``).
"""

from __future__ import annotations

import hashlib
import json

from kdvfs.errors import FormatError
from kdvfs.trace import Trace, trace_to_dict

__all__ = ["check_binding", "check_card", "check_sweep_card", "file_header", "trace_sha"]


def trace_sha(trace: Trace) -> str:
    """Content hash of the trace's kernels (16 hex digits; cached on the trace)."""
    got = trace._cache.get("sha")
    if got is None:
        text = json.dumps(trace_to_dict(trace)["segments"], sort_keys=True, separators=(",", ":"))
        got = hashlib.sha256(text.encode()).hexdigest()[:16]
        trace._cache["sha"] = got
    return got


def check_binding(what: str, bound_name: str, bound_sha: str, trace: Trace, fix: str) -> None:
    """Refuse a ``what`` (profile, schedule, sweep) made for another trace: by hash where it has one, else by name."""
    sha = trace_sha(trace)
    if bound_sha and bound_sha != sha:
        raise FormatError(
            f"{what} was made for trace {bound_name or '(unnamed)'!r} with kernels {bound_sha}, but trace "
            f"{trace.name!r} has kernels {sha}: it belongs to another trace (kernel keys alone do not tell); {fix}")
    if not bound_sha and bound_name and trace.name and bound_name != trace.name:
        raise FormatError(f"{what} was made for trace {bound_name!r}, not {trace.name!r}; {fix}")


def file_header(path) -> dict[str, str]:
    """The ``key=value`` words of a CSV's leading ``#`` line (plain or gzipped); empty when it has none."""
    import gzip
    from pathlib import Path

    try:
        with Path(path).open("rb") as fb:
            raw = fb.read(2)
        if raw == b"\x1f\x8b":
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fz:
                first = fz.readline(4096)
        else:
            with open(path, encoding="utf-8", errors="replace") as ft:
                first = ft.readline(4096)
    except (OSError, EOFError):
        return {}  # the reader proper reports what is wrong with the file
    if not first.startswith("#"):
        return {}
    meta = {}
    for w in first[1:].split():
        k, _, v = w.partition("=")
        meta[k] = "" if v == "-" else v
    return meta


def check_sweep_card(path, sweep, spec) -> None:
    """Refuse fitting ``spec`` to a sweep of another card: by the sweep's ``gpu=`` header, else by its clocks."""
    from kdvfs.errors import InputError

    got = file_header(path).get("gpu", "")
    if got and got != spec.name:
        raise InputError(f"sweep {str(path)!r} was measured on {got!r}, not {spec.name!r}; fit it with --gpu {got}")
    from kdvfs.gpus import AUTO

    # clocks only, not the card's pairing quirks: a sweep may have asked for a pair the driver remapped
    cores, mems = set(spec.core_clocks_mhz) | {AUTO}, set(spec.mem_clocks_mhz) | {AUTO}
    for k, pts in sweep.points.items():
        for p in pts:
            if p.core_mhz not in cores or p.mem_mhz not in mems:
                raise InputError(
                    f"sweep {str(path)!r}, kernel {k!r}: clocks {p.core_mhz}/{p.mem_mhz} MHz are not clocks of "
                    f"{spec.name} ({spec.describe_clocks()}); is it a sweep of another card? give that card with --gpu")


def check_card(profile_gpu: str, card: str, what: str = "profile") -> None:
    """Refuse using a profile (or schedule) made for one card with another card's constants."""
    from kdvfs.errors import InputError

    if profile_gpu and card and profile_gpu != card:
        raise InputError(f"{what} was made for GPU {profile_gpu!r}, but --gpu is {card!r}: its times and powers are "
                         f"{profile_gpu}'s; give --gpu {profile_gpu}, or a profile of {card} "
                         f"(`kdvfs profile build --trace TRACE --gpu {card} -o P.csv`)")
