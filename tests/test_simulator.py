import dataclasses
import json

import numpy as np
import pytest
from conftest import run_cli

from kdvfs.errors import FormatError, InputError, UnsupportedClockError
from kdvfs.gpus import AUTO, SwitchModel, get_gpu
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Kernel, Segment, Trace
from simulator import ParallelConfig, SimConfig, ring_allreduce_s, simulate, write_timeline

G = get_gpu("rtx3080ti")
B = (1050, 9501)


def tiny(kernels=("a", "b"), settings_of=(AUTO, B)):
    ks = tuple(Kernel(n, "other", 1.0) for n in kernels)
    tr = Trace("tiny", (Segment("s", ks, 1, "forward"),))
    T = np.array([[1.0, 2.0], [1.0, 0.5], [1.0, 1.0]])[: len(ks)]
    P = np.array([[100.0, 50.0], [200.0, 300.0], [100.0, 60.0]])[: len(ks)]
    prof = Profile(tr.kernel_keys, ((AUTO, AUTO), B), T, P, np.full(T.shape, "model", dtype=object), "rtx3080ti", "tiny")
    c = np.array([0 if s == AUTO else s[0] for s in settings_of])
    m = np.array([0 if s == AUTO else s[1] for s in settings_of])
    return tr, prof, Schedule("tiny", "rtx3080ti", c, m)


COSTS = SwitchCosts(sync_overhead_s=0.01, callback_overhead_s=0.005, idle_power_w=10.0)
SW = SwitchModel(host_call_s=0.1, transition_s=0.2)


@pytest.mark.parametrize("path", ["engine", "fast"])
def test_sync_two_kernels_one_switch(path):
    tr, prof, s = tiny()
    r = simulate(tr, prof, s, G, SimConfig("sync", SW, COSTS), path=path)
    # a: 1 s at 100 W; stall 0.11 s at 10 W; b: 0.2 s at the old setting (work 0.2, 200 W), then 0.8 of its work
    # at the new setting (0.4 s, 300 W)
    assert r.time_s == pytest.approx(1.0 + 0.11 + 0.2 + 0.4, rel=1e-12)
    assert r.energy_j == pytest.approx(100 + 1.1 + 40 + 120, rel=1e-12)
    assert r.switches == 1 and r.switch_time_s == pytest.approx(0.21, rel=1e-9)


@pytest.mark.parametrize("path", ["engine", "fast"])
def test_callback_two_kernels(path):
    tr, prof, s = tiny()
    r = simulate(tr, prof, s, G, SimConfig("callback", SW, COSTS), path=path)
    assert r.time_s == pytest.approx(1.0 + 0.105 + 0.2 + 0.4, rel=1e-12)
    assert r.energy_j == pytest.approx(100 + 1.05 + 40 + 120, rel=1e-12)


@pytest.mark.parametrize("path", ["engine", "fast"])
def test_predictive_on_time_and_late(path):
    tr, prof, s = tiny()
    r = simulate(tr, prof, s, G, SimConfig("predictive", SW, COSTS), path=path)
    assert r.time_s == pytest.approx(1.5) and r.energy_j == pytest.approx(250.0)
    # a, b, c with b short: the switch back lands 0.8 - 0.5 = 0.3 s late, c's head runs at b's setting
    tr3, prof3, s3 = tiny(("a", "b", "c"), (AUTO, B, AUTO))
    slow = SwitchModel(host_call_s=0.2, transition_s=0.6)
    r = simulate(tr3, prof3, s3, G, SimConfig("predictive", slow, COSTS), path=path)
    # c at B for 0.3 s: work 0.3 (T=1 at B), 60 W; the rest 0.7 at auto, 100 W
    assert r.time_s == pytest.approx(1.0 + 0.5 + 0.3 + 0.7)
    assert r.energy_j == pytest.approx(100 + 150 + 0.3 * 60 + 70)


def test_stall_while_relocking():
    tr, prof, s = tiny()
    sw = SwitchModel(0.1, 0.2, stall_while_relocking=True)
    for path in ("engine", "fast"):
        r = simulate(tr, prof, s, G, SimConfig("sync", sw, COSTS), path=path)
        assert r.time_s == pytest.approx(1.0 + 0.11 + 0.2 + 0.5)
        assert r.energy_j == pytest.approx(100 + 0.31 * 10 + 150)


@pytest.mark.parametrize("seed", range(6))
def test_engine_and_fast_path_agree_on_random_cases(seed):
    rng = np.random.default_rng(seed)
    K, S, n_rep = rng.integers(2, 8), 4, rng.integers(1, 6)
    ks = tuple(Kernel(f"k{i}", "other", 1e-3) for i in range(K))
    tr = Trace("r", (Segment("a", ks[: K // 2 + 1], int(n_rep), "forward"), Segment("b", ks[K // 2 + 1:] or ks[:1], 2, "backward")))
    settings = ((AUTO, AUTO), (1050, 9501), (1500, 5001), (840, 9251))
    T = rng.uniform(1e-4, 5e-3, (len(tr.kernels), S))
    P = rng.uniform(80, 340, (len(tr.kernels), S))
    prof = Profile(tr.kernel_keys, settings, T, P, np.full(T.shape, "model", dtype=object), "rtx3080ti", "r")
    n = len(tr.instances())
    pick = rng.integers(0, S, n)
    st = np.array(settings)[pick]
    sched = Schedule("r", "rtx3080ti", st[:, 0], st[:, 1])
    for mech in ("sync", "callback", "predictive"):
        sw = SwitchModel(float(rng.uniform(0, 2e-3)), float(rng.uniform(0, 6e-3)))
        cfg = SimConfig(mech, sw, SwitchCosts(idle_power_w=float(rng.uniform(50, 120))))
        a = simulate(tr, prof, sched, G, cfg, path="engine")
        b = simulate(tr, prof, sched, G, cfg, path="fast")
        assert a.time_s == pytest.approx(b.time_s, rel=1e-9)
        assert a.energy_j == pytest.approx(b.energy_j, rel=1e-9)
        assert a.switches == b.switches
        for k in a.segments:
            assert a.segments[k]["energy_j"] == pytest.approx(b.segments[k]["energy_j"], rel=1e-9)
            assert a.segments[k]["time_s"] == pytest.approx(b.segments[k]["time_s"], rel=1e-9)


def test_determinism_same_seed_same_bytes(tmp_path, spaan_problem):
    from kdvfs.optimize import optimize

    s = optimize(spaan_problem)
    sw = dataclasses.replace(get_gpu("h200").switch, spread=0.3)
    outs = []
    for i in range(2):
        r = simulate(spaan_problem.trace, spaan_problem.profile, s, G, SimConfig("predictive", sw, seed=7, timeline=True))
        p = write_timeline(r.timeline, tmp_path / f"t{i}.json", list(spaan_problem.profile.settings))
        outs.append((r.time_s, r.energy_j, p.read_bytes()))
    assert outs[0] == outs[1]
    r3 = simulate(spaan_problem.trace, spaan_problem.profile, s, G, SimConfig("predictive", sw, seed=8))
    assert r3.time_s != outs[0][0]
    doc = json.loads(outs[0][2])
    assert any(e.get("ph") == "X" for e in doc["traceEvents"])


def test_multi_gpu_dp_tp(spaan_problem):
    from kdvfs.optimize import allocate_schedule

    pb = spaan_problem
    s, auto = allocate_schedule(pb, "kernel"), allocate_schedule(pb, "kernel", auto=True)
    cfg = SimConfig(switch=get_gpu("ivr").switch)
    one = simulate(pb.trace, pb.profile, s, G, cfg)
    dp = simulate(pb.trace, pb.profile, s, G, cfg, ParallelConfig(gpus=4, mode="dp"))
    dpo = simulate(pb.trace, pb.profile, s, G, cfg, ParallelConfig(gpus=4, mode="dp", overlap=True))
    tp = simulate(pb.trace, pb.profile, s, G, cfg, ParallelConfig(gpus=4, mode="tp"))
    ar = ring_allreduce_s(2.6e9, 4, 450, 5e-6)
    assert dp.time_s >= one.time_s + ar * 0.99  # the all-reduce waits for everyone, then takes the ring time
    assert dpo.time_s < dp.time_s  # overlapping buckets hides most of it
    assert tp.time_s < one.time_s / 2  # work is split four ways, collectives added
    assert dp.energy_j > 4 * one.energy_j * 0.99
    a_dp = simulate(pb.trace, pb.profile, auto, G, cfg, ParallelConfig(gpus=4, mode="dp"))
    assert -20 < 100 * (dp.energy_j / a_dp.energy_j - 1) < -10


def test_bad_input(spaan_problem, tmp_path, capsys):
    tr, prof, s = tiny()
    other = Schedule("other", "rtx3080ti", np.zeros(5, int), np.zeros(5, int))
    with pytest.raises(FormatError, match="schedule was made for trace 'other', not 'tiny'"):
        simulate(tr, prof, other, G)
    bad = Schedule("tiny", "rtx3080ti", np.array([0, 1055]), np.array([0, 9501]))
    with pytest.raises(UnsupportedClockError, match="1055 MHz is not supported"):
        simulate(tr, prof, bad, G)
    with pytest.raises(InputError, match="switch latency must be a positive number"):
        SwitchModel.from_latency(0.0)
    with pytest.raises(InputError, match="number of GPUs must be an integer ≥ 1"):
        ParallelConfig(gpus=0)
    from kdvfs.optimize import optimize
    from kdvfs.schedule import save_schedule

    sp = save_schedule(optimize(spaan_problem), tmp_path / "s.json")
    for extra, needle in ((["--switch-latency", "-1"], "positive number of seconds"), (["--gpus", "0"], "≥ 1")):
        code, _, err = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(sp), "--gpu", "rtx3080ti"] + extra, capsys)
        assert code == 2 and needle in err
    code, _, err = run_cli(["simulate", "--trace", "gpt3xl-torch-h200-bf16", "--schedule", str(sp), "--gpu", "h200"], capsys)
    assert code == 2 and "schedule was made for trace 'gpt3xl-llmc-rtx3080ti' with kernels" in err


def test_simulate_cli_json_and_timeline(tmp_path, capsys, spaan_problem):
    from kdvfs.optimize import optimize
    from kdvfs.schedule import save_schedule

    sp = save_schedule(optimize(spaan_problem), tmp_path / "s.json")
    tl = tmp_path / "tl.json"
    code, out, _ = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(sp), "--gpu", "rtx3080ti",
                            "--switch-model", "h200", "--mechanism", "predictive", "--timeline", str(tl), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["path"] == "engine" and d["switches"] > 100 and tl.exists()
    assert d["switch_latency_s"] == pytest.approx(6e-3)


def test_scaling_report_cli(tmp_path, capsys, spaan_problem):
    from kdvfs.optimize import optimize
    from kdvfs.schedule import save_schedule

    sp = save_schedule(optimize(spaan_problem), tmp_path / "s.json")
    png = tmp_path / "scal.png"
    code, out, _ = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(sp), "--gpu", "rtx3080ti",
                            "--switch-model", "ivr", "--mechanism", "predictive", "--scaling", "1,4", "--scaling-png",
                            str(png), "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and png.exists() and [(r["parallel"], r["gpus"]) for r in rows] == [("dp", 1), ("dp", 4), ("tp", 1), ("tp", 4)]
    assert all(-20 < r["energy_change_pct"] < -12 for r in rows)
    code, _, err = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(sp), "--gpu", "rtx3080ti",
                            "--scaling", "1,x"], capsys)
    assert code == 2 and "--scaling '1,x' must be GPU counts" in err


def test_governor_reaction_lag_runs_the_head_unthrottled():
    tr, prof, s = tiny()
    Tu, Pu = prof.time_s / 1.2, prof.power_w * 1.5  # without the cap: faster and hungrier
    sw = SwitchModel(0.1, 0.0)
    r = simulate(tr, prof, s, G, SimConfig("sync", sw, COSTS, governor_lag_s=0.1), path="engine", unthrottled=(Tu, Pu))
    # a at auto (its setting landed long ago: throttled); stall 0.11 s; b: 0.1 s unthrottled (work 0.1 / (0.5/1.2)),
    # the remaining 0.76 of its work throttled (0.38 s at 300 W)
    assert r.time_s == pytest.approx(1.0 + 0.11 + 0.1 + 0.38, rel=1e-12)
    assert r.energy_j == pytest.approx(100 + 1.1 + 0.1 * 450 + 0.38 * 300, rel=1e-12)
    with pytest.raises(InputError, match="governor reaction lag needs the unthrottled"):
        simulate(tr, prof, s, G, SimConfig("sync", sw, COSTS, governor_lag_s=0.1))


def test_governor_lag_cli(tmp_path, capsys, spaan_problem):
    from kdvfs.optimize import optimize
    from kdvfs.schedule import save_schedule

    sp = save_schedule(optimize(spaan_problem), tmp_path / "s.json")
    base = ["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(sp), "--gpu", "rtx3080ti",
            "--switch-model", "b200", "--path", "engine", "--json"]
    _, out0, _ = run_cli(base, capsys)
    code, out1, _ = run_cli(base + ["--governor-lag", "0.005"], capsys)
    a, b = json.loads(out0), json.loads(out1)
    assert code == 0
    assert b["energy_j"] > a["energy_j"]  # settings that land over the cap burn more before the governor acts
