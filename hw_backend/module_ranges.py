"""Module ranges in a recorded step: each module of a model that holds others marked while its forward runs.

``kdvfs measure-steps`` records its steps without ``with_stack=True`` (the Python stacks would multiply a trace's size
and the recorded step's host time), so its traces had no module frames and ``analyze`` could switch clocks only at
the step and the optimizer. ``module_ranges`` opens a ``record_function`` range ``kdvfs.module:<Class>_<n>`` in a
forward pre-hook and closes it in the forward hook; the importer reads those ranges as the module frames that
``with_stack=True`` would give (``kdvfs.kineto.MODULE_PREFIX``), and backward kernels find their forward module
through autograd's sequence numbers as before. Leaf modules (``Linear``, norms, activations) are not marked: the
repeated layers hold them, and a range per leaf call costs host time in launch-bound steps. Instances are numbered per
class in ``model.modules()`` order, as the profiler numbers its ``nn.Module`` frames. torch is not imported here: the
caller passes its ``record_function``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kdvfs.kineto import MODULE_PREFIX

__all__ = ["marked_modules", "module_ranges"]

log = logging.getLogger(__name__)


def marked_modules(model: Any) -> list[tuple[Any, str]]:
    """(module, range name) of ``model`` and every module under it that holds other modules, each once, in
    ``model.modules()`` order; the name is ``kdvfs.module:<Class>_<n>`` with ``n`` counted per class."""
    seen: dict[str, int] = {}
    out = []
    for m in model.modules():
        if m is not model and next(iter(m.children()), None) is None:
            continue
        cls = type(m).__name__
        n = seen.get(cls, 0)
        seen[cls] = n + 1
        out.append((m, f"{MODULE_PREFIX}{cls}_{n}"))
    return out


@contextmanager
def module_ranges(model: Any | None, record_function: Callable[[str], Any]) -> Iterator[int]:
    """Within the block, each of ``marked_modules(model)`` runs its forward inside ``record_function(name)``; yields
    how many modules are marked (0 and no hooks where ``model`` is None: a step that is not one ``nn.Module``).
    The hooks are removed on leaving, and ranges a failed forward left open are closed."""
    if model is None:
        yield 0
        return
    open_ranges: list[Any] = []  # forwards nest, so their ranges close in the reverse order they opened

    def pre(name: str):
        def hook(_m, _args):
            r = record_function(name)
            r.__enter__()
            open_ranges.append(r)
        return hook

    def post(_m, _args, _out):
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    handles = []
    marked = marked_modules(model)
    try:
        for m, name in marked:
            handles.append(m.register_forward_pre_hook(pre(name)))
            handles.append(m.register_forward_hook(post))
        log.debug("marking %d modules of %s with record_function ranges", len(marked), type(model).__name__)
        yield len(marked)
    finally:
        for h in handles:
            h.remove()
        while open_ranges:
            open_ranges.pop().__exit__(None, None, None)
