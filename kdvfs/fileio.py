"""Writing result files safely: the output path checked before any work, then written whole or not at all.

``check_output_path`` refuses a directory, a missing parent folder or one that cannot be written, with the fix, so a
command can check before it computes. ``write_atomic`` writes a temporary file in the same folder and renames it over
the target, so a failure (disk full, read-only folder, a kill) leaves the old file untouched and no ``.part`` behind.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kdvfs.errors import InputError

__all__ = ["check_output_path", "state_dir", "write_atomic"]


def state_dir() -> Path:
    """Where kdvfs keeps its own state between runs (clock markers, an interrupted what-if's finished scenarios):
    ``$KDVFS_STATE_DIR`` or ``~/.cache/kdvfs``."""
    env = os.environ.get("KDVFS_STATE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kdvfs"


def check_output_path(path: str | Path, what: str = "output", make_parents: bool = False) -> Path:
    """``path`` as a ``Path`` if a file can be written there, else an ``InputError`` naming the fix."""
    path = Path(path)
    if str(path) == "" or path.is_dir():
        raise InputError(f"{what} {str(path)!r} is a directory; give a file path (e.g. {str(path / 'out')!r})")
    parent = path.parent
    if not parent.exists() and make_parents:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{what} folder {str(parent)!r} cannot be created ({e.strerror or e}); "
                             "give another path") from None
    if not parent.is_dir():
        raise InputError(f"{what} folder {str(parent)!r} does not exist; create it first or give another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{what} {str(path)!r} cannot be written (no permission in {str(parent)!r}); "
                         "give a path you may write")
    return path


def write_atomic(path: str | Path, data: bytes, what: str = "output", make_parents: bool = False) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename (the target is replaced whole or not at all)."""
    path = check_output_path(path, what, make_parents)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InputError(f"{what} {str(path)!r} could not be written ({e.strerror or e}); the old file, if any, is "
                         "unchanged — free space or give another path") from None
    return path
