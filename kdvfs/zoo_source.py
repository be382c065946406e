"""The H200 fit's one door to the hardware layer: the characterisation zoo's definitions, its file reader and the
block's stage repeats, read from ``hw_backend`` and handed on as plain data.

``kdvfs`` imports ``hw_backend`` only from the command line's verbs (DESIGN.md, "Packages"); the H200 fit
(``kdvfs.calibrate_h200`` with ``kdvfs.h200_rows`` and ``kdvfs.h200_fit``) needs three things that live beside the
measurements instead: what each zoo entry is (its role, graph length and work by today's estimates,
``hw_backend.zoo``), how a characterisation file is read (``hw_backend.characterize.load_characterization``) and how
often each stage of the measured block repeats (``hw_backend.workloads.STAGE_REPEATS``). This module is the only
place outside ``kdvfs/cli/`` that reaches for them (``tests/test_layers.py`` names it), always inside a function, so
``import kdvfs`` and ``import kdvfs.calibrate_h200`` load no ``hw_backend``. What it returns is plain data
(``ZooSource``): the row builders and the fit take it as an argument, and a caller may hand in its own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = ["ZooEntry", "ZooSource", "read_characterization", "stage_repeats", "zoo_source"]


@dataclass(frozen=True, slots=True)
class ZooEntry:
    """One zoo entry's definition, as the fit needs it.

    Attributes:
        name: the entry's unique name (``gemm_bf16_8192``).
        op: what runs (``gemm``, ``add``, ``idle``, …; ``hw_backend.zoo.ZooKernel.op``).
        role: ``kernel``, ``gap``, ``launch`` or ``duty`` (``ZooKernel.role``).
        graph: launches per CUDA-graph replay (0: not a graph).
        flops: the work's FLOPs by today's estimates (``ZooKernel.work``); None for an ``idle`` entry.
        bytes: the work's bytes likewise; None for an ``idle`` entry.
        tensor: whether the work runs on tensor cores (``kdvfs.work.Work.tensor``); None for an ``idle`` entry.
    """

    name: str
    op: str
    role: str
    graph: int
    flops: float | None
    bytes: float | None
    tensor: bool | None = None


@dataclass(frozen=True, slots=True)
class ZooSource:
    """The zoo's definitions as plain data.

    Attributes:
        entries: every zoo entry by name (read-only): ``full_zoo``'s, then those of the sets outside it (``thermal``,
            ``warm-cool``, ``conv``), so a measured file of any set takes its work from today's estimates.
        probe: the probe GEMM (``hw_backend.zoo.PROBE``), whose bursts' onsets the step responses record.
    """

    entries: Mapping[str, ZooEntry]
    probe: ZooEntry


def _entry(k) -> ZooEntry:
    w = k.work if k.op != "idle" else None  # an idle entry has no work (and the fit never asks for it)
    return ZooEntry(name=k.name, op=k.op, role=k.role, graph=k.graph,
                    flops=w.flops if w is not None else None, bytes=w.bytes if w is not None else None,
                    tensor=w.tensor if w is not None else None)


@functools.cache
def zoo_source() -> ZooSource:
    """The zoo's definitions from ``hw_backend.zoo`` (read once: they are code, not files)."""
    from hw_backend.zoo import PROBE, ZOO_SETS, full_zoo

    defs = {k.name: k for k in full_zoo()}
    for make in ZOO_SETS.values():
        for k in make():
            defs.setdefault(k.name, k)
    return ZooSource(entries=MappingProxyType({n: _entry(k) for n, k in defs.items()}), probe=_entry(PROBE))


def read_characterization(path: str | Path) -> dict:
    """A characterisation file (``kdvfs-characterization/1``) as a document, checked by its reader
    (``hw_backend.characterize.load_characterization``, which raises ``InputError`` naming the file)."""
    from hw_backend.characterize import load_characterization

    return load_characterization(path)


def stage_repeats() -> dict[str, int]:
    """How often each stage of the measured GPT-3 XL block repeats in a step (``hw_backend.workloads.STAGE_REPEATS``),
    for importing the block's shape-recorded profiler trace."""
    from hw_backend.workloads import STAGE_REPEATS

    return dict(STAGE_REPEATS)
