"""Applying a kdvfs schedule inside your own PyTorch training loop (torch is imported only here, lazily).

    from hw_backend.torch_runtime import KdvfsRuntime
    plan = plan_for(load_trace("my.trace.json"), load_schedule("schedule-boundary.json"))
    with KdvfsRuntime(model, optimizer, plan, backend=NvmlBackend(observe_only=False)) as rt:
        for batch in loader:
            with rt.step():
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    print(rt.records[-1])

The glue is thin: it finds the modules that open the plan's regions — those of the plan's classes at the *unit depth*
(the call depth where the trace's repeated module sits: ``GPT2Block`` under ``GPT2Model`` under ``GPT2LMHeadModel``),
registers forward pre/post hooks and full backward pre/post hooks on them and a step pre-hook on the optimizer, and
hands each firing to ``hw_backend.runtime.ClockRuntime`` as an event. On a CUDA device every boundary records a CUDA
event, and the writer thread waits for it before writing, so a clock lands when the GPU reaches the boundary rather
than when the CPU, running ahead, launches it. ``noop=True`` records the writes and sends none.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from hw_backend.base import GpuBackend
from hw_backend.runtime import ClockRuntime, StepRecord
from kdvfs.runtime_plan import RuntimePlan

__all__ = ["KdvfsRuntime", "call_depths", "measure_overhead"]

log = logging.getLogger(__name__)

_CONTAINERS = ("ModuleList", "ModuleDict", "ParameterList", "ParameterDict")


def call_depths(model: Any) -> dict[str, int]:
    """Module qualified name → call depth: the ancestors whose ``forward`` runs around it (containers such as
    ``ModuleList`` are never called, so they do not count) — the depth of the profiler's module chain."""
    mods = dict(model.named_modules())
    out = {}
    for name in mods:
        if not name:
            out[name] = 0
            continue
        parts = name.split(".")
        d = 0
        for k in range(len(parts)):
            anc = mods.get(".".join(parts[:k])) if k else model
            if anc is not None and type(anc).__name__ not in _CONTAINERS:
                d += 1
        out[name] = d
    return out


def unit_modules(model: Any, plan: RuntimePlan) -> tuple[list[tuple[str, Any]], int]:
    """The modules whose hooks open regions, and the unit depth; warns when their count differs from the trace's."""
    classes = plan.unit_classes
    if not classes:
        return [], -1
    depths = call_depths(model)
    mods = dict(model.named_modules())
    top = max(classes, key=lambda c: classes[c])
    cand = [depths[n] for n, m in mods.items() if type(m).__name__ == top]
    if not cand:
        log.warning("the model does not match the trace: it has no %s module (the trace repeats %s %d times); "
                    "no boundary of those regions will come", top, top, classes[top])
        return [], -1
    depth = Counter(cand).most_common(1)[0][0]
    chosen = [(n, m) for n, m in mods.items() if depths[n] == depth and type(m).__name__ in classes]
    have = Counter(type(m).__name__ for _, m in chosen)
    for c, k in classes.items():
        if have.get(c, 0) != k:
            log.warning("the model does not match the trace: %d %s module(s) at call depth %d, the trace has %d",
                        have.get(c, 0), c, depth, k)
    return chosen, depth


class KdvfsRuntime:
    """The runtime around a user's model and optimizer (see the module docstring).

    Args:
        model: the ``torch.nn.Module`` trained.
        optimizer: its optimizer (a step pre-hook opens the ``optimizer`` region), or None.
        plan: ``kdvfs.runtime_plan.plan_for(trace, schedule)``.
        backend: where writes go: ``NvmlBackend(observe_only=False)`` on a card you may change, or
            ``NvmlBackend(FakeNvml(...))``; ignored for writes with ``noop=True``.
        noop: record the writes, send none (observe-only validation).
        gpu_sync: wait for the GPU to reach a boundary before writing (CUDA events); default: when CUDA is in use.
    """

    def __init__(self, model: Any, optimizer: Any, plan: RuntimePlan, backend: GpuBackend | None = None, *,
                 noop: bool = False, gpu_sync: bool | None = None) -> None:
        import torch

        self.torch = torch
        self.model, self.optimizer, self.plan = model, optimizer, plan
        use_cuda = torch.cuda.is_available() and any(p.is_cuda for p in model.parameters())
        gpu_sync = use_cuda if gpu_sync is None else gpu_sync
        mark = wait = reached = None
        if gpu_sync:
            def mark():
                ev = torch.cuda.Event()
                ev.record()
                return ev

            def wait(ev):
                ev.synchronize()

            def reached(ev):
                return ev.query()
        self.core = ClockRuntime(plan, backend, noop=noop, mark=mark, wait=wait, reached=reached)
        self._handles: list[Any] = []

    @property
    def records(self) -> list[StepRecord]:
        return self.core.records

    @property
    def writer(self) -> Any:
        return self.core.writer

    def _hook(self, kind: str) -> Callable[..., None]:
        core = self.core

        def fire(*_args: Any, **_kw: Any) -> None:
            core.event(kind)

        return fire

    def __enter__(self) -> KdvfsRuntime:
        chosen, _ = unit_modules(self.model, self.plan)
        kinds = set(self.plan.events)
        for _, m in chosen:
            c = type(m).__name__
            if f"forward.{c}" in kinds:
                self._handles.append(m.register_forward_pre_hook(self._hook(f"forward.{c}")))
            if f"forward.{c}/post" in kinds:
                self._handles.append(m.register_forward_hook(self._hook(f"forward.{c}/post")))
            if f"backward.{c}" in kinds:
                self._handles.append(m.register_full_backward_pre_hook(self._hook(f"backward.{c}")))
            if f"backward.{c}/post" in kinds:
                self._handles.append(m.register_full_backward_hook(self._hook(f"backward.{c}/post")))
        if self.optimizer is not None and "optimizer" in kinds:
            self._handles.append(self.optimizer.register_step_pre_hook(self._hook("optimizer")))
        try:
            self.core.__enter__()
        except BaseException:
            self._remove()
            raise
        return self

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __exit__(self, *exc: Any) -> None:
        try:
            self.core.__exit__(*exc)
        finally:
            self._remove()

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """One training iteration under the plan; the record is appended to ``records`` at the end."""
        self.core.begin_step()
        try:
            yield
        finally:
            self.core.end_step()


def measure_overhead(model: Any, optimizer: Any, plan: RuntimePlan, step_fn: Callable[[], None],
                     sync: Callable[[], None], steps: int = 20, rounds: int = 3) -> dict:
    """Step time without and with the runtime (no-op writes), interleaved in rounds so drift affects both alike."""
    base: list[float] = []
    live: list[float] = []
    recs: list[StepRecord] = []
    writes = 0
    for _ in range(rounds):
        for _ in range(steps):
            sync()
            t0 = time.perf_counter()
            step_fn()
            sync()
            base.append(time.perf_counter() - t0)
        with KdvfsRuntime(model, optimizer, plan, noop=True) as rt:
            for _ in range(steps):
                sync()
                t0 = time.perf_counter()
                with rt.step():
                    step_fn()
                sync()
                live.append(time.perf_counter() - t0)
            recs += rt.records
            writes += sum(1 for c in rt.writer.calls if c[0] == "set")
    mb, ml = statistics.median(base), statistics.median(live)
    return {
        "steps_per_mode": len(base), "baseline_step_s_median": mb, "runtime_step_s_median": ml,
        "overhead_pct": 100 * (ml / mb - 1), "baseline_step_s": base, "runtime_step_s": live,
        "boundaries_expected_per_step": len(plan.regions),
        "all_boundaries_hit_in_order": all(r.in_order and r.boundaries_hit == r.boundaries_expected for r in recs),
        "switches_per_step": sorted({r.n_switches for r in recs[1:]}) if len(recs) > 1 else [r.n_switches for r in recs],
        "plan_switches_per_step": plan.switches,
        "late_per_step": [r.late for r in recs], "writes_recorded": writes,
        "records": [{"step": r.step, "hit": r.boundaries_hit, "in_order": r.in_order, "switches": r.n_switches,
                     "late": r.late, "time_s": r.time_s,
                     "write_delay_s": [s.done_s - s.requested_s for s in r.switches]} for r in recs],
    }
