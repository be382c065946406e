"""The observe-only session's measurements (``hw_backend.observe``, once ``scripts/h200_observe.py``) driven with the
fake device and a simulated workload: stages alone, boundaries counted, the per-boundary cost of a switch issuer."""

import functools

import pytest

from hw_backend.fake import FakeNvml
from hw_backend.nvml import NvmlBackend
from hw_backend.observe import (
    batch_for,
    boundaries_per_step,
    carryover,
    live_noop_cost,
    measure_units,
    measurement_noise,
    noise_summary,
)
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


def _stages(fake, wl, n=3):
    """The first ``n`` kernels of the trace as named stages of the fake GPU."""
    names = [u.name for u in wl.units()[:n]]
    return names, (lambda name: wl.run_unit(wl.units()[names.index(name)]))


def test_carryover_finds_none_on_a_device_without_it(spaan_trace):
    """The fake GPU's kernels cost the same whatever ran before: the light stage's share of the pair is the light
    stage alone (up to where the windows meet the energy counter's steps, 1 ms here)."""
    fake = FakeNvml(G, default_params(spaan_trace, G), seed=0, energy_step_s=0.001)
    be, wl = NvmlBackend(fake, observe_only=True), SimulatedWorkload(spaan_trace, fake)
    (heavy, *lights), run_stage = _stages(fake, wl)
    saved = []
    res = carryover(run_stage, lambda: run_stage(heavy), wl.sync, be, heavy=heavy, lights=tuple(lights), window_s=0.5,
                    warmup_s=0.0, clock=wl.clock, on_progress=lambda d: saved.append(list(d["pairs"])))
    assert saved == [lights[:1], lights]
    for light in lights:
        p = res["pairs"][light]
        assert p["light_energy_in_pair_j"] == p["after_heavy"]["energy_per_iter_j"] - res["heavy_alone"]["energy_per_iter_j"]
        assert p["energy_ratio_in_pair_vs_alone"] == pytest.approx(1.0, rel=0.01)
    assert res["step_after"]["energy_per_iter_j"] == pytest.approx(res["step_before"]["energy_per_iter_j"], rel=0.01)


def test_measurement_noise_rotates_the_stages_and_summarises_the_scatter(spaan_trace):
    fake = FakeNvml(G, default_params(spaan_trace, G), seed=2, time_noise=0.02, power_noise=0.02)
    be, wl = NvmlBackend(fake, observe_only=True), SimulatedWorkload(spaan_trace, fake)
    names, run_stage = _stages(fake, wl)
    order = []
    res = measurement_noise(lambda s: (order.append(s), run_stage(s))[1], wl.sync, be, stages=names, rounds=3,
                            window_s=0.3, warmup_s=0.0, clock=wl.clock)
    assert all(len(res["windows"][s]) == 3 and [w["round"] for w in res["windows"][s]] == [0, 1, 2] for s in names)
    for s in names:
        sm = res["summary"][s]
        assert sm["windows"] == 3 and 0 < sm["time_cv_pct"] < 10 and 0 < sm["energy_cv_pct"] < 10
        assert -1 <= sm["log_time_energy_corr"] <= 1
    assert res["summary"] == noise_summary(res["windows"])
    # each round starts one stage later, so that a stage's windows follow different stages
    firsts = [order[i] for i in range(1, len(order)) if order[i] != order[i - 1]]
    assert names[1] in firsts and names[2] in firsts


def test_hf_step_times_each_step_between_synchronisations(rig):
    """``hw_backend.hf_step`` (once scripts/hf_gpt2_step.py) imports without torch; its step timer, on the fake's
    clock, gives each step's simulated time."""
    from hw_backend.hf_step import TINY, timed

    fake, _, wl = rig
    syncs = []
    ts = timed(lambda: fake.run_kernel(0, 3), lambda: syncs.append(1), 4, clock=wl.clock)
    one = fake.run_kernel(0, 3)
    assert ts == pytest.approx([one] * 4, rel=1e-12) and len(syncs) == 8
    assert (TINY.layers, TINY.hidden, TINY.batch, TINY.seq) == (2, 128, 1, 64)
