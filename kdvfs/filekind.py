"""What kind of file is already at a path a command is about to write: a kdvfs document (profile, trace, schedule,
sweep, characterisation, fit, …), a PyTorch profiler trace, a Chrome trace, a figure, or unknown. One look at the
first few kilobytes (gzip or not), never a full parse: a 300 MB profiler trace costs nothing.

``refuse_other_kind`` is the one check every output of the command line goes through (``kdvfs.cli.paths``): a
command's result replaces only an earlier result of its own kind, or a file of no kind it knows; ``--force`` lets it
replace the rest. `frontier -o my.profile.csv.gz`, `whatif -o my.trace.json`, `simulate --timeline step.json.gz` (a
profiler trace) all replaced the user's file with the result, exit 0.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from kdvfs.errors import InputError

__all__ = ["CHROME", "FIGURE", "PROFILER", "describe", "head_bytes", "kind_of", "refuse_other_kind"]

PROFILER = "profiler-trace"
"""A PyTorch profiler (Kineto) trace: ``schemaVersion``/``deviceProperties`` beside ``traceEvents``."""
CHROME = "chrome-trace"
"""A Chrome trace without the profiler's words (``simulate --timeline`` writes these)."""
FIGURE = "figure"
"""An image or document matplotlib writes (PNG, PDF, JPEG, TIFF, WebP, PostScript, SVG)."""

_HEAD_BYTES = 8192
_FORMAT_WORD = re.compile(r"\bkdvfs-[a-z0-9-]+/\d+\b")
_JSON_FORMAT = re.compile(r'"format"\s*:\s*"(kdvfs-[a-z0-9-]+/\d+)"')
_NAMES = {"kdvfs-profile/1": "a kdvfs profile", "kdvfs-trace/1": "a kdvfs trace", "kdvfs-trace/2": "a kdvfs trace",
          "kdvfs-schedule/1": "a kdvfs schedule",
          "kdvfs-sweep/1": "a kdvfs sweep", "kdvfs-characterization/1": "a characterisation (measurements)",
          "kdvfs-steps/1": "a steps file (measured steps)", "kdvfs-h200-fit/1": "an H200 fit",
          "kdvfs-card-anchor/1": "a card-anchor report", "kdvfs-ranks/1": "a multi-rank trace",
          PROFILER: "a PyTorch profiler trace", CHROME: "a Chrome trace", FIGURE: "a figure"}
_IMAGE_MAGIC = (b"\x89PNG", b"%PDF", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"%!PS")


def head_bytes(path: Path, size: int = _HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of the file's content, gunzipped where it is gzip; empty for a gzip cut short or
    damaged in those bytes (``OSError`` where the file cannot be opened)."""
    with path.open("rb") as f:
        raw = f.read(size)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as z:
                return z.read(size)
        except (OSError, EOFError):
            return b""
    return raw


def kind_of(path: str | Path) -> str | None:
    """The kind of the file at ``path``: a kdvfs format (``kdvfs-profile/1``, …), ``PROFILER``, ``CHROME``, ``FIGURE``;
    None for a missing, empty or unreadable file, or one of no kind this knows (a results CSV or JSON, markdown)."""
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size == 0:
            return None
        head = head_bytes(p)
    except OSError:
        return None
    if head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return FIGURE
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith("#"):  # a kdvfs CSV: its format is a word of the first line
        m = _FORMAT_WORD.search(stripped.splitlines()[0])
        return m.group(0) if m else None
    if stripped.startswith("<svg") or (stripped.startswith("<?xml") and "<svg" in stripped):
        return FIGURE
    if stripped.startswith(("{", "[")):
        m = _JSON_FORMAT.search(text)
        if m:
            return m.group(1)
        if re.search(r'"(schemaVersion|deviceProperties|distributedInfo)"', text):
            return PROFILER
        if '"traceEvents"' in text:
            return CHROME
    return None


def describe(kind: str) -> str:
    """``kind`` in words: "a kdvfs profile", "a PyTorch profiler trace", "a kdvfs-h200-fit-check/1 document"."""
    return _NAMES.get(kind, f"a {kind} document")


def refuse_other_kind(path: str | Path, option: str, writes: str, own: frozenset[str] | set[str] = frozenset(),
                      force: bool = False) -> None:
    """Refuse to replace the file at ``path`` (given as ``option``) with the command's result (``writes``, in words)
    when it is of a kind the command does not write (``own``: the kinds it may replace, its own); a file of no known
    kind is replaced. ``force``: replace it anyway."""
    if force:
        return
    kind = kind_of(path)
    if kind is None or kind in own:
        return
    raise InputError(f"{option} {str(path)!r} is {describe(kind)}, not {writes} (what this command writes there); it "
                     "is left as it is: give a new file name, or add --force to replace it")
