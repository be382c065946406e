"""The observe-only session's measurements (``hw_backend.observe``, once ``scripts/h200_observe.py``) driven with the
fake device and a simulated workload: stages alone, boundaries counted, the per-boundary cost of a switch issuer."""

import functools

import pytest

from hw_backend.fake import FakeNvml
from hw_backend.nvml import NvmlBackend
from hw_backend.observe import batch_for, boundaries_per_step, live_noop_cost, measure_units
from hw_backend.sim_workload import SimulatedWorkload
from kdvfs.gpus import get_gpu
from kdvfs.model import default_params

G = get_gpu("rtx3080ti")


@pytest.fixture
def rig(spaan_trace):
    fake = FakeNvml(G, default_params(spaan_trace, G), seed=0)
    return fake, NvmlBackend(fake, observe_only=True), SimulatedWorkload(spaan_trace, fake)


def test_boundaries_are_counted_on_a_step(rig, spaan_trace):
    _, _, wl = rig
    assert boundaries_per_step(wl.run_step) == len(spaan_trace.instances()) == 897


def test_a_stall_at_every_boundary_costs_its_length_per_boundary(rig):
    fake, be, wl = rig
    rows = live_noop_cost(wl.run_step, wl.sync, be, {"none": lambda: None, "stall": lambda: fake.idle(1e-4)},
                          window_s=2.0, warmup_s=0.0, clock=wl.clock)
    assert rows["none"]["boundaries_per_step"] == rows["stall"]["boundaries_per_step"] == 897
    per_boundary = (rows["stall"]["time_per_iter_s"] - rows["none"]["time_per_iter_s"]) / 897
    assert per_boundary == pytest.approx(1e-4, rel=1e-6)


def test_an_issuer_that_cannot_run_is_reported_not_raised(rig):
    _, be, wl = rig

    def missing() -> None:
        raise ModuleNotFoundError("No module named 'cupy'")

    rows = live_noop_cost(wl.run_step, wl.sync, be, {"callback": missing}, window_s=1.0, warmup_s=0.0, clock=wl.clock)
    assert "cupy" in rows["callback"]["error"]


def test_units_alone_measure_their_kernels_time(rig):
    fake, be, wl = rig
    units = wl.units()[:3]
    expected = {u.name: fake.run_kernel(wl._idx[u.keys[0]], 1) for u in units}

    def broken() -> None:
        raise RuntimeError("stage failed")

    calls = {u.name: functools.partial(wl.run_unit, u) for u in units} | {"broken": broken}
    seen = []
    rows = measure_units(calls, wl.sync, be, window_s=0.5, warmup_s=0.0, clock=wl.clock,
                         on_result=lambda name, row: seen.append(name))
    assert seen == list(calls)
    assert "stage failed" in rows["broken"]["error"]
    for u in units:
        assert rows[u.name]["time_per_iter_s"] == pytest.approx(expected[u.name], rel=1e-9)
        assert rows[u.name]["batch"] == batch_for(calls[u.name], wl.sync, clock=wl.clock)
