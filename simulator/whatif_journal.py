"""A what-if grid's finished tasks, kept beside its CSV while it runs, so that an interrupted grid resumes.

`kdvfs whatif -o w.csv` stopped by Ctrl-C (or a lost machine) after an hour started over from nothing. Each task's
rows are now appended to ``w.csv.partial.jsonl`` as the task finishes; the same command run again takes the rows
of the tasks done and computes only the rest, and the CSV is the one an uninterrupted run writes (the rows round-trip
JSON exactly). The journal names the grid it belongs to (a hash of the trace and profile files' contents, the card,
the scenarios and the options): one of another grid is started over, with a word. It is removed once the CSV is
written. Without ``-o`` the same journal lives under kdvfs's state folder (``kdvfs.fileio.state_dir()``:
``$KDVFS_STATE_DIR`` or ``~/.cache/kdvfs``), named by the grid's key (``grid_journal_path``), so an interrupted
`kdvfs whatif` without ``-o`` also keeps what it finished, and the same command (with or without ``-o``) resumes.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
from pathlib import Path

__all__ = ["JOURNAL_FORMAT", "Journal", "grid_journal_path", "grid_key", "journal_path"]

JOURNAL_FORMAT = "kdvfs-whatif-partial/1"
log = logging.getLogger(__name__)


def journal_path(output: str | Path) -> Path:
    """Where the grid writing ``output`` keeps its finished tasks."""
    p = Path(output)
    return p.with_name(p.name + ".partial.jsonl")


def grid_journal_path(key: str) -> Path:
    """Where a grid run without an output file keeps its finished tasks: the state folder, by the grid's key."""
    from kdvfs.fileio import state_dir

    return state_dir() / "whatif" / f"{key}.partial.jsonl"


def _content_sha(path: str | Path) -> str:
    """The sha256 of a file's content, gunzipped where it is gzipped (a gzip header holds its write time: the same
    profile built twice differs there)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else Path(path).open("rb")) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def grid_key(trace_path: str | Path, profile_path: str | Path, card: str, scenarios: list, limiter: bool, size,
             settings: str) -> str:
    """What makes two grids the same: the trace's and profile's contents, the card, the scenarios in order, the
    options and kdvfs's version."""
    import dataclasses

    from kdvfs import __version__

    doc = {"trace": _content_sha(trace_path), "profile": _content_sha(profile_path), "card": card,
           "scenarios": [dataclasses.astuple(s) for s in scenarios], "limiter": bool(limiter),
           "size": list(size) if size is not None else None, "settings": settings, "kdvfs": __version__}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def _plain(v):
    """A row's value as JSON keeps it: numpy scalars as Python's (float64 round-trips exactly)."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return v.item()
    return v


class Journal:
    """The finished tasks of one grid (``key``) in the file ``path``: ``load`` the rows done, ``record`` each task as
    it finishes, ``remove`` once the results are written.

    Attributes: path (the journal file), key (``grid_key``), stale (a journal of another grid was there and is
    replaced)."""

    __slots__ = ("key", "path", "stale")

    def __init__(self, path: str | Path, key: str) -> None:
        self.path = Path(path)
        self.key = key
        self.stale = False

    def load(self) -> dict[int, dict]:
        """Rows by scenario index from an earlier run of this grid; {} when there is none (or one of another grid,
        ``stale``). A last line cut short by the interruption is dropped: its task runs again."""
        done: dict[int, dict] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return done
        try:
            head = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            head = {}
        if not isinstance(head, dict) or head.get("format") != JOURNAL_FORMAT or head.get("key") != self.key:
            self.stale = bool(lines)
            return done
        for ln in lines[1:]:
            try:
                t = json.loads(ln)
                idx, rows = t["task"], t["rows"]
                if len(idx) != len(rows) or not all(isinstance(i, int) and isinstance(r, dict)
                                                    for i, r in zip(idx, rows)):
                    raise ValueError(ln)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                log.debug("journal %s: a damaged line dropped", self.path)
                continue
            done.update(zip(idx, rows))
        return done

    def start(self, keep: bool) -> None:
        """Begin the file (``keep``: append to the tasks already there, of this grid)."""
        if keep:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"format": JOURNAL_FORMAT, "key": self.key}) + "\n", encoding="utf-8")

    def record(self, idx: list[int], rows: list[dict]) -> None:
        """One finished task's rows, flushed to disk before the next task is taken."""
        line = json.dumps({"task": list(idx), "rows": [{k: _plain(v) for k, v in r.items()} for r in rows]})
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # never written (an unwritable state folder)
            self.path.unlink()
