"""Output for people: a rich console that tests can capture, tables, and JSON for ``--json``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # rich is imported where output is made: `--json` and verbs that print no table never pay for it
    from rich.console import Console
    from rich.table import Table

__all__ = ["make_console", "print_json", "table", "to_jsonable"]


def make_console(file=None) -> Console:
    from rich.console import Console

    return Console(file=file or sys.stdout, width=120, highlight=False, soft_wrap=False)


def to_jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    return x


def print_json(doc: Any, file=None) -> None:
    (file or sys.stdout).write(json.dumps(to_jsonable(doc), indent=1) + "\n")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*[v if isinstance(v, str) else f"{v:.4g}" if isinstance(v, float) else str(v) for v in r])
    return t
