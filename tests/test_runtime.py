"""The training-loop runtime on the fake device: a fake module tree fires hooks as a model would."""

import logging

import numpy as np
import pytest

from hw_backend.fake import FakeNvml
from hw_backend.nvml import NvmlBackend
from hw_backend.runtime import ClockRuntime, NoopWriter
from kdvfs.errors import InputError
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.model import default_params
from kdvfs.optimize import Problem, optimize
from kdvfs.profile import build_profile
from kdvfs.runtime_plan import RuntimePlan, boundary_schedule, plan_for, regions_of
from kdvfs.schedule import Schedule
from kdvfs.trace import Kernel, Segment, Trace

G = get_gpu("h200")


def _k(name, cat, t):
    return Kernel(name=name, category=cat, time_s=t)


def fake_trace(layers=3):
    """What the importer makes of a small model: embedding, a repeated block, the loss, the backward, AdamW."""
    blk = (_k("ln", "norm", 2e-5), _k("gemm_qkv", "gemm", 3e-4), _k("attn", "attention", 2e-4),
           _k("gemm_mlp", "gemm", 6e-4), _k("gelu", "elementwise", 5e-5))
    bwd = tuple(_k(f"b_{k.name}", k.category, 2 * k.time_s) for k in blk)
    segs = (
        Segment("forward.Embedding", (_k("gather", "copy", 1e-5),), 1, "forward"),
        Segment("forward.Block", blk, layers, "forward"),
        Segment("forward", (_k("lm_head", "gemm", 4e-4), _k("softmax", "reduction", 1e-4)), 1, "forward"),
        Segment("backward", (_k("b_lm_head", "gemm", 8e-4),), 1, "backward"),
        Segment("backward.Block", bwd, layers, "backward"),
        Segment("optimizer.repeat", (_k("multi_tensor_adam", "optimizer", 5e-5),), 8, "optimizer"),
        Segment("optimizer", (_k("adam_tail", "optimizer", 1e-5),), 1, "optimizer"),
    )
    return Trace(name="fake-model", segments=segs, gpu="NVIDIA H200")


class FakeModel:
    """Fires the events a hooked model would: module pre/post in the forward, backward pre/post, optimizer."""

    def __init__(self, runtime, layers=3, skip=None):
        self.rt, self.layers, self.skip = runtime, layers, skip or set()

    def fire(self, kind):
        if kind not in self.skip:
            self.rt.event(kind)

    def step(self):
        self.fire("forward.Embedding")
        self.fire("forward.Embedding/post")
        for _ in range(self.layers):
            self.fire("forward.Block")
            self.fire("forward.Block/post")
        for _ in range(self.layers):
            self.fire("backward.Block")
            self.fire("backward.Block/post")
        self.fire("optimizer")


def test_regions_follow_the_module_events():
    regs = regions_of(fake_trace())
    ev = [(e, o) for e, o, _, _ in regs]
    assert ev == [("forward.Embedding", 0), ("forward.Block", 0), ("forward.Block", 1), ("forward.Block", 2),
                  ("forward.Block/post", 2), ("backward.Block", 0), ("backward.Block", 1), ("backward.Block", 2),
                  ("optimizer", 0)]
    # the loss and the start of the backward (no module) share the region after the last block's post event
    assert regs[4][2:] == (16, 19)
    assert regs[-1][3] == len(fake_trace().instances())


@pytest.fixture
def problem():
    t = fake_trace()
    return Problem(t, build_profile(t, G, default_params(t, G)))


def test_boundary_schedule_switches_only_at_regions(problem):
    s = boundary_schedule(problem, SwitchModel.from_latency(1e-6), "predictive", 2.0)
    plan = plan_for(problem.trace, s)
    assert plan.switches == s.switches >= 1
    assert s.predicted.time_change_pct <= 2.0 + 1e-9


def test_kernel_level_schedule_is_refused_with_the_fix(problem):
    s = optimize(problem, slack_pct=2.0)
    assert s.switches > 0
    with pytest.raises(InputError, match="inside region .* boundary-level schedule"):
        plan_for(problem.trace, s)


def _plan(problem, latency=1e-6):
    s = boundary_schedule(problem, SwitchModel.from_latency(latency), "predictive", 2.0)
    return plan_for(problem.trace, s)


def test_runtime_on_the_fake_device_applies_the_plan_and_restores(problem):
    plan = _plan(problem)
    fake = FakeNvml(G)
    be = NvmlBackend(fake, observe_only=False)
    with ClockRuntime(plan, be) as rt:
        model = FakeModel(rt)
        for _ in range(3):
            rt.begin_step()
            model.step()
            rt.end_step()
    first, *rest = rt.records
    assert all(r.in_order and r.boundaries_hit == len(plan.regions) for r in rt.records)
    wrap = (plan.regions[0].core_mhz, plan.regions[0].mem_mhz) != (plan.regions[-1].core_mhz, plan.regions[-1].mem_mhz)
    assert all(r.n_switches == plan.switches + wrap for r in rest)
    assert first.n_switches == plan.switches + 1  # the first region's clocks are set once at the start
    sets = [c for c in fake.calls if c[0] == "nvmlDeviceSetGpuLockedClocks"]
    assert len(sets) >= sum(r.n_switches for r in rt.records) - 3  # AUTO regions reset instead of locking
    assert fake.at_default_clocks  # restored on exit


def test_runtime_writes_through_the_guard_so_a_kill_leaves_a_marker(problem):
    """The writer thread locks clocks through ``ClockGuard.set``: the backend's clock marker is written before the
    first lock (a SIGKILL then leaves it for the next command to report) and removed with the restore. It used to set
    ``guard.changed`` by hand and write past the guard, so a killed training run left its clocks locked silently."""

    class Marker:
        def __init__(self):
            self.calls = []

        def write(self):
            self.calls.append("write")

        def clear(self):
            self.calls.append("clear")

    plan = _plan(problem)
    fake = FakeNvml(G)
    be = NvmlBackend(fake, observe_only=False)
    be.marker = m = Marker()
    with ClockRuntime(plan, be) as rt:
        model = FakeModel(rt)
        rt.begin_step()
        model.step()
        rt.end_step()
    assert m.calls[0] == "write" and m.calls.count("write") == 1 and m.calls[-1] == "clear" and fake.at_default_clocks


def test_missing_boundaries_are_warned_and_counted(problem, caplog):
    plan = _plan(problem)
    with caplog.at_level(logging.WARNING), ClockRuntime(plan, noop=True) as rt:
        rt.begin_step()
        FakeModel(rt, skip={"optimizer"}).step()
        rec = rt.end_step()
    assert rec.missing == ("optimizer#0",) and not rec.in_order
    assert "does not match the trace" in caplog.text


def test_out_of_order_boundaries(problem):
    plan = _plan(problem)
    with ClockRuntime(plan, noop=True) as rt:
        rt.begin_step()
        rt.event("optimizer")
        FakeModel(rt, skip={"optimizer"}).step()
        rec = rt.end_step()
    assert rec.out_of_order and not rec.in_order


def test_noop_mode_records_and_never_writes(problem):
    plan = _plan(problem)
    fake = FakeNvml(G)
    be = NvmlBackend(fake)  # observe-only: a write would raise
    with ClockRuntime(plan, be, noop=True) as rt:
        rt.begin_step()
        FakeModel(rt).step()
        rec = rt.end_step()
    assert isinstance(rt.writer, NoopWriter)
    assert sum(1 for c in rt.writer.calls if c[0] == "set") == rec.n_switches
    assert rt.writer.calls[-1] == ("reset",)
    assert not any(c[0].startswith("nvmlDeviceSet") for c in fake.calls)


def test_clocks_restored_when_the_loop_raises(problem):
    plan = _plan(problem)
    fake = FakeNvml(G)
    with pytest.raises(RuntimeError, match="boom"), ClockRuntime(plan, NvmlBackend(fake, observe_only=False)) as rt:
        rt.begin_step()
        FakeModel(rt).step()
        rt.end_step()
        raise RuntimeError("boom")
    assert fake.at_default_clocks


class SlowWriter(NoopWriter):
    """Each write takes 5 ms of a fake clock: later boundaries (1 ms apart) arrive before it returns."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def set_clocks_mhz(self, core_mhz, mem_mhz, verify=False):
        super().set_clocks_mhz(core_mhz, mem_mhz)
        self.clock.t += 5e-3


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_late_switches_are_counted():
    segs = tuple(Segment(f"forward.B{i}", (_k(f"k{i}", "gemm", 1e-3),), 1, "forward") for i in range(4))
    t = Trace(name="alt", segments=segs)
    core = np.array([1980, 900, 1980, 900])
    s = Schedule(trace="alt", gpu="h200", core_mhz=core, mem_mhz=np.full(4, 3201), granularity="boundary")
    plan = plan_for(t, s)
    assert isinstance(plan, RuntimePlan) and plan.switches == 3
    clock = FakeClock()
    gate = []

    def wait(_token):  # the writer starts only after the training thread has fired every boundary
        while not gate:
            pass

    rt = ClockRuntime(plan, noop=True, clock=clock, wait=wait, mark=lambda: object())
    rt.writer = SlowWriter(clock)
    rt.guard.backend = rt.writer
    with rt:
        rt.begin_step()
        for i in range(4):
            rt.event(f"forward.B{i}")
            clock.t += 1e-3
        gate.append(True)
        rec = rt.end_step()
    assert rec.n_switches == 4 and rec.late == 3  # every write but the last returned after the next region opened


class _Mod:
    """A module tree node the way torch names them (``named_modules``), without torch."""

    def __init__(self, **children):
        self.children = children

    def named_modules(self, prefix=""):
        yield prefix, self
        for n, c in self.children.items():
            yield from c.named_modules(f"{prefix}.{n}" if prefix else n)


def _cls(name):
    return type(name, (_Mod,), {})


def test_unit_modules_found_at_the_call_depth_with_a_warning_on_mismatch(problem, caplog):
    from hw_backend.torch_runtime import call_depths, unit_modules

    Emb, Block, ModuleList, Model, Head, LN = (_cls(n) for n in ("Embedding", "Block", "ModuleList", "Model", "Head",
                                                                "LayerNorm"))
    model = Head(model=Model(emb=Emb(), h=ModuleList(**{str(i): Block(ln=LN()) for i in range(3)})))
    d = call_depths(model)
    assert d["model.h.0"] == 2 and d["model.emb"] == 2 and d["model.h.0.ln"] == 3  # the ModuleList is never called
    plan = _plan(problem)
    chosen, depth = unit_modules(model, plan)
    assert depth == 2 and sorted(n for n, _ in chosen) == ["model.emb", "model.h.0", "model.h.1", "model.h.2"]
    small = Head(model=Model(emb=Emb(), h=ModuleList(**{str(i): Block() for i in range(2)})))
    with caplog.at_level(logging.WARNING):
        unit_modules(small, plan)
    assert "does not match the trace: 2 Block module(s)" in caplog.text
