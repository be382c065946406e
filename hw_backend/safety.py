"""What keeps a sweep's data and a card's clocks safe across processes: an exclusive lock on an output file, and a
marker for clocks that may have been left locked.

- ``OutputLock`` holds an ``fcntl`` exclusive lock on a sweep's output file for as long as the sweep writes it, so a
  second writer is refused at once instead of interleaving rows (re-entrant within one process: a sparse sweep's
  rounds share one lock).
- ``ClockMarker`` is a small JSON file under ``$KDVFS_STATE_DIR`` (default ``~/.cache/kdvfs/``), one per card, written
  before the first clock lock and removed once the clocks are restored. A process killed with SIGKILL (or a crash of
  the machine) cannot restore clocks; its marker stays behind, and the next command that opens the card names the
  ``kdvfs reset-clocks`` command to run.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from kdvfs.errors import InputError
from kdvfs.fileio import state_dir  # per-card state lives where every kdvfs state does

__all__ = ["ClockMarker", "OutputLock", "state_dir"]

log = logging.getLogger(__name__)

_HELD: dict[str, list] = {}  # resolved path -> [open file, depth]


class OutputLock:
    """Exclusive, non-blocking ``fcntl`` lock on ``path`` (created if missing; never truncated).

    Raises ``InputError`` naming the file when another process holds it. Re-entrant within a process.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.key = str(self.path.resolve())

    def __enter__(self) -> OutputLock:
        import fcntl

        held = _HELD.get(self.key)
        if held is not None:
            held[1] += 1
            return self
        self._created = not self.path.exists()
        try:
            f = self.path.open("a")
        except OSError as e:
            raise InputError(f"output {str(self.path)!r} cannot be opened for writing ({e.strerror or e}); "
                             "give a writable file path with -o") from None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise InputError(f"output {str(self.path)!r} is being written by another kdvfs sweep (it holds the file's "
                             "lock); wait for it to finish, or write to another file with -o") from None
        _HELD[self.key] = [f, 1]
        return self

    def __exit__(self, *exc) -> None:
        held = _HELD[self.key]
        held[1] -= 1
        if held[1] == 0:
            del _HELD[self.key]
            # a file this lock created and nobody wrote to is removed: a refused or failed sweep leaves nothing behind
            if self._created and self.path.exists() and self.path.stat().st_size == 0:
                self.path.unlink()
            held[0].close()  # closing the descriptor releases the lock


def _safe(card_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", card_id)[:120] or "card"


class ClockMarker:
    """The marker for one card (identified by UUID or PCI bus id, or the fake's id).

    Args:
        card_id: stable identity of the card.
        card_name: for messages.
        device_arg: what to pass to ``kdvfs reset-clocks --device`` to reach this card.
        directory: where markers live (default ``state_dir()``).
    """

    def __init__(self, card_id: str, card_name: str = "", device_arg: str = "", directory: Path | None = None) -> None:
        self.card_id, self.card_name = card_id, card_name
        self.device_arg = device_arg or card_id
        self.path = (directory or state_dir()) / f"clocks-locked-{_safe(card_id)}.json"

    def write(self) -> None:
        """Record, before the first lock, that this process is about to lock the card's clocks."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + f".{os.getpid()}.part")
            tmp.write_text(json.dumps({"card_id": self.card_id, "card": self.card_name, "pid": os.getpid()}) + "\n")
            tmp.replace(self.path)
        except OSError as e:  # the marker is a safety net; a read-only home must not stop the work
            log.warning("could not write the clock marker %s (%s)", self.path, e)

    def clear(self) -> None:
        """The clocks are back at the driver's defaults."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not remove the clock marker %s (%s)", self.path, e)

    def stale(self) -> str | None:
        """A message when a marker of a process that no longer runs is present, else None."""
        try:
            doc = json.loads(self.path.read_text())
            pid = int(doc.get("pid", 0))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AttributeError, TypeError):
            pid = 0
        if pid == os.getpid() or (pid and _alive(pid)):
            return None  # a live run (this one or another) holds the clocks: its guard will restore them
        return (f"the clocks of {self.card_name or self.card_id} may still be locked: a kdvfs run (pid {pid or '?'}) "
                f"locked them and did not restore them (killed?); run `kdvfs reset-clocks --device {self.device_arg}`")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
