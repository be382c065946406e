"""Command-line verbs of the hardware backend: ``sweep``, ``validate``, ``reset-clocks`` (hw_backend imported lazily)."""

from __future__ import annotations

__all__ = ["add_hw_commands"]


def add_hw_commands(sub, j) -> None:
    return None
