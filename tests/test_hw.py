import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli

from hw_backend import ClockGuard, FakeNvml, NvmlBackend, SimulatedWorkload
from hw_backend.sweep import done_rows, run_sweep
from hw_backend.validate import validate
from kdvfs.errors import (
    HardwareError,
    InputError,
    NoGpuError,
    ObserveOnlyError,
    PermissionDeniedError,
    UnsupportedClockError,
)
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import default_params

G = get_gpu("rtx3080ti")


@pytest.fixture
def fake(spaan_trace):
    return FakeNvml(G, default_params(spaan_trace, G), seed=1, time_noise=0.01, power_noise=0.02)


def test_observe_only_refuses_every_write(fake):
    be = NvmlBackend(fake)  # observe-only is the default
    assert be.capabilities().observe_only and not be.capabilities().can_set_clocks
    for call in (lambda: be.set_clocks_mhz(1050, 9501), be.reset_clocks):
        with pytest.raises(ObserveOnlyError, match="observe-only; pass --allow-clock-control"):
            call()
    assert not any(c[0].startswith("nvmlDeviceSet") or c[0].startswith("nvmlDeviceReset") for c in fake.calls)
    assert be.energy_mj() >= 0 and be.clocks_mhz()[1] == 9501


def test_errors_are_translated_with_the_fix(spaan_trace):
    be = NvmlBackend(FakeNvml(G, permission=False), observe_only=False)
    with pytest.raises(PermissionDeniedError, match="needs root or CAP_SYS_ADMIN"):
        be.set_clocks_mhz(1050, 9501)
    be = NvmlBackend(FakeNvml(G, supported=False), observe_only=False)
    with pytest.raises(HardwareError, match="not supported"):
        be.set_clocks_mhz(1050, 9501)
    be = NvmlBackend(FakeNvml(G), observe_only=False)
    with pytest.raises(UnsupportedClockError, match="core clock 1055 MHz is not supported"):
        be.set_clocks_mhz(1055, 9501)
    with pytest.raises(UnsupportedClockError, match="memory clock 7000 MHz is not supported"):
        be.set_clocks_mhz(1050, 7000)
    mig = NvmlBackend(FakeNvml(G, mig=True), observe_only=False)
    assert mig.capabilities().mig and "MIG is on" in mig.capabilities().reason
    with pytest.raises(HardwareError, match="MIG"):
        mig.set_clocks_mhz(1050, 9501)


def test_set_clocks_lands_after_latency_and_reads_back(fake):
    be = NvmlBackend(fake, observe_only=False)
    t0 = fake.now_s
    be.set_clocks_mhz(1050, 5001)
    assert fake.now_s - t0 >= G.switch.total_s * 0.99  # read-back waited for the switch
    assert be.clocks_mhz() == (1050, 5001)
    be.reset_clocks()
    assert fake.at_default_clocks


def test_energy_counter_steps_and_power_average(fake):
    fake.nvmlInit()
    e0 = fake.nvmlDeviceGetTotalEnergyConsumption(None)
    fake.run_kernel(2, 3)  # ~43 ms: less than a counter step
    assert fake.nvmlDeviceGetTotalEnergyConsumption(None) == e0
    fake.run_kernel(2, 200)
    e1 = fake.nvmlDeviceGetTotalEnergyConsumption(None)
    assert (e1 - e0) % 1 == 0 and e1 > e0
    p = fake.nvmlDeviceGetPowerUsage(None) / 1000
    assert 300 < p < 360


def test_clock_guard_restores_on_exception(fake):
    be = NvmlBackend(fake, observe_only=False)
    with pytest.raises(RuntimeError), ClockGuard(be) as g:
        g.set(1050, 9501)
        raise RuntimeError("boom")
    assert fake.at_default_clocks


def _rows(p):
    with open(p, newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


def test_interrupted_sweep_resumes_without_loss_or_doubles(tmp_path, spaan_trace, fake):
    be = NvmlBackend(fake, observe_only=False)
    wl = SimulatedWorkload(spaan_trace, fake)
    settings = [(AUTO, AUTO), (1050, 9501), (1890, 5001)]
    out = tmp_path / "sweep.csv"
    kw = dict(window_s=0.3, warmup_s=0.05, min_steps=3, allow_clock_control=True)

    def stop_after(n, total):
        if n == 60:
            raise KeyboardInterrupt  # what SIGINT delivers

    with pytest.raises(KeyboardInterrupt):
        run_sweep(be, wl, G, settings, out, progress=stop_after, **kw)
    assert fake.at_default_clocks  # restored on the way out
    assert len(_rows(out)) == 60
    with open(out, "ab") as f:  # a half-written line, as from a kill during a write
        f.write(b"forward_layer.3,1050,95")
    run_sweep(be, wl, G, settings, out, **kw)
    rows = _rows(out)
    keys = [(r["kernel"], r["core_mhz"], r["mem_mhz"], r["repeat"]) for r in rows]
    assert len(keys) == len(set(keys)) == 46 * 3
    assert fake.at_default_clocks
    assert len(done_rows(out)) == 138


@pytest.mark.slow
def test_sigterm_during_cli_sweep_restores_clocks_and_resumes(tmp_path):
    out, state = tmp_path / "s.csv", tmp_path / "state.json"
    cmd = [sys.executable, "-m", "kdvfs.cli", "sweep", "--backend", "fake", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu",
           "rtx3080ti", "--settings", "auto:auto,1050:9501,1890:5001,630:9501", "--allow-clock-control", "--window", "2",
           "--warmup", "0.1", "--min-steps", "3", "-o", str(out), "--fake-state", str(state)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 70):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    st = json.loads(state.read_text())
    assert st["at_default_clocks"] and st["calls"][-2:] == ["nvmlDeviceResetGpuLockedClocks", "nvmlDeviceResetMemoryLockedClocks"]
    n_before = len(_rows(out))
    assert 0 < n_before < 46 * 4
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
    keys = [(r["kernel"], r["core_mhz"], r["mem_mhz"]) for r in _rows(out)]
    assert len(keys) == len(set(keys)) == 46 * 4


@pytest.mark.slow
def test_end_to_end_on_the_fake_sweep_fit_optimize_validate(tmp_path, spaan_trace):
    from kdvfs.fit import fit_profile, read_sweep
    from kdvfs.optimize import Problem, optimize

    truth = default_params(spaan_trace, G)
    fake = FakeNvml(G, truth, seed=3, time_noise=0.005, power_noise=0.01)
    be = NvmlBackend(fake, observe_only=False)
    wl = SimulatedWorkload(spaan_trace, fake)
    settings = [(AUTO, AUTO), (630, 9501), (1050, 9501), (1500, 9501), (1890, 5001), (1260, 5001)]
    out = run_sweep(be, wl, G, settings, tmp_path / "s.csv", window_s=0.5, warmup_s=0.05, min_steps=3,
                    allow_clock_control=True)
    prof = fit_profile(read_sweep(out), G, spaan_trace.name)
    pb = Problem(spaan_trace, prof.restrict(settings))  # choose among the settings that were measured
    sched = optimize(pb, "waste", 0.0)
    assert sched.predicted.energy_change_pct < -3
    res = validate(be, wl, spaan_trace, pb.profile, sched, G, mode="isolated", repeats=2, window_s=0.4, warmup_s=0.05,
                   min_steps=3, allow_clock_control=True)
    assert fake.at_default_clocks
    assert res["measured_energy_change_pct"] < -2
    assert abs(res["measured_energy_change_pct"] - res["simulated_energy_change_pct"]) < 2
    live = validate(be, wl, spaan_trace, pb.profile, sched, G, mode="live", repeats=2, window_s=3.0, warmup_s=0.1,
                    min_steps=3, allow_clock_control=True)
    assert fake.at_default_clocks
    # the live mode pays for switches; the simulator with the same switch model predicts it
    assert live["schedule"]["time_s"] > res["schedule"]["time_s"]
    assert live["measured_time_change_pct"] == pytest.approx(live["simulated_time_change_pct"], abs=3)


def test_validate_refuses_clock_changes_without_permission(tmp_path, spaan_problem, fake):
    from kdvfs.optimize import optimize

    be = NvmlBackend(fake)
    wl = SimulatedWorkload(spaan_problem.trace, fake)
    with pytest.raises(InputError, match="--allow-clock-control"):
        validate(be, wl, spaan_problem.trace, spaan_problem.profile, optimize(spaan_problem), G)
    assert fake.at_default_clocks


def test_torch_workload_cannot_replay_foreign_kernels(spaan_trace):
    from hw_backend.sim_workload import TorchWorkload

    with pytest.raises(InputError, match="was not recorded by `kdvfs record`"):
        TorchWorkload(spaan_trace)


def test_nvml_backend_without_gpu_is_a_clear_error(capsys, tmp_path):
    code, _, err = run_cli(["record", "-o", str(tmp_path / "x.json")], capsys)
    assert code == 2 and ("PyTorch" in err or "CUDA" in err) and "Traceback" not in err
    try:
        NvmlBackend()
    except NoGpuError as e:
        assert "nvidia-smi" in str(e) or "driver" in str(e)
    else:  # pragma: no cover - only on a machine with a GPU
        pass
