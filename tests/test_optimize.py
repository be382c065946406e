import itertools
import json

import numpy as np
import pytest
from conftest import run_cli

from kdvfs.errors import FormatError, InfeasibleError, UnsupportedClockError
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize import allocate, evaluate_with_switching, optimize, switch_aware
from kdvfs.optimize.knapsack import lower_hull, pareto_front, solve_fast, solve_milp
from kdvfs.schedule import load_schedule, save_schedule


def _brute(T, E, r, budget):
    best = np.inf
    K, S = T.shape
    # every way to split each kernel's r instances over S settings (small instances only)
    per_kernel = []
    for k in range(K):
        opts = []
        for combo in itertools.combinations_with_replacement(range(S), int(r[k])):
            opts.append((sum(T[k, s] for s in combo), sum(E[k, s] for s in combo)))
        per_kernel.append(opts)
    for choice in itertools.product(*per_kernel):
        t = sum(c[0] for c in choice)
        if t <= budget * (1 + 1e-12):
            best = min(best, sum(c[1] for c in choice))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_fast_and_milp_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    K, S = rng.integers(2, 4), rng.integers(2, 5)
    T = rng.uniform(1, 3, (K, S))
    E = rng.uniform(1, 3, (K, S))
    r = rng.integers(1, 3, K)
    lo, hi = float(r @ T.min(1)), float(r @ T.max(1))
    budget = lo + rng.uniform(0.1, 0.9) * (hi - lo)
    opt = _brute(T, E, r, budget)
    m = solve_milp(T, E, r, budget)
    f = solve_fast(T, E, r, budget)
    for a in (m, f):
        t = sum(n * T[k, s] for k, c in enumerate(a.counts) for s, n in c.items())
        e = sum(n * E[k, s] for k, c in enumerate(a.counts) for s, n in c.items())
        assert t <= budget * (1 + 1e-9)
        assert all(sum(a.counts[k].values()) == r[k] for k in range(K))
        assert e >= opt - 1e-9
    em = sum(n * E[k, s] for k, c in enumerate(m.counts) for s, n in c.items())
    assert em == pytest.approx(opt, rel=1e-9)
    assert f.bound_energy_j <= opt + 1e-9  # the Lagrangian bound is a true lower bound


def test_hull_is_convex_and_on_the_pareto_front():
    rng = np.random.default_rng(1)
    t, e = rng.uniform(1, 2, 40), rng.uniform(1, 2, 40)
    pf, h = pareto_front(t, e), lower_hull(t, e)
    assert set(h) <= set(pf)
    slopes = np.diff(e[h]) / np.diff(t[h])
    assert np.all(np.diff(slopes) >= -1e-12)


def test_global_never_worse_than_local_and_fast_near_milp(spaan_problem):
    pb = spaan_problem
    for slack in (0.0, 2.0, 5.0):
        g = optimize(pb, "waste", slack, "kernel", "global")
        loc = optimize(pb, "waste", slack, "kernel", "local")
        m = optimize(pb, "waste", slack, "kernel", "global", solver="milp")
        assert g.predicted.energy_j <= loc.predicted.energy_j + 1e-9
        assert g.predicted.time_s <= pb.auto_time_s * (1 + slack / 100) * (1 + 1e-12)
        assert g.predicted.energy_j <= m.predicted.energy_j * (1 + 1e-4)
        assert g.gap_pct is not None and g.gap_pct < 0.01


def test_switch_aware_never_worse_than_naive(spaan_problem):
    pb = spaan_problem
    ideal = optimize(pb, "waste", 1.0)
    for lat in (1e-6, 1e-3, 6e-3):
        sw = SwitchModel.from_latency(lat)
        for mech in ("sync", "predictive"):
            naive = evaluate_with_switching(pb, ideal, sw, mech)
            sa = switch_aware(pb, sw, mech, slack_pct=1.0)
            budget = pb.auto_time_s * 1.01
            assert sa.predicted.time_s <= budget * (1 + 1e-9)
            if naive["time_s"] <= budget:
                assert sa.predicted.energy_j <= naive["energy_j"] + 1e-9
            # and never worse than staying at auto
            assert sa.predicted.energy_j <= pb.auto_energy_j + 1e-9


def test_infeasible_slack_names_the_range(spaan_problem):
    with pytest.raises(InfeasibleError, match=r"below the fastest possible .* use --slack ≥ -\d"):
        optimize(spaan_problem, "waste", -20.0)


def test_schedule_roundtrip_and_checks(tmp_path, spaan_problem, spaan_trace):
    s = optimize(spaan_problem)
    p = save_schedule(s, tmp_path / "s.json")
    back = load_schedule(p)
    assert np.array_equal(back.core_mhz, s.core_mhz) and np.array_equal(back.mem_mhz, s.mem_mhz)
    back.check_for(spaan_trace, get_gpu("rtx3080ti"))
    with pytest.raises(FormatError, match="was made for GPU 'rtx3080ti', not 'h200'"):
        back.check_for(spaan_trace, get_gpu("h200"))
    doc = json.loads(p.read_text())
    doc["runs"][0][0] = "2205"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(UnsupportedClockError, match="2205 MHz is not supported by rtx3080ti"):
        load_schedule(tmp_path / "bad.json").check_for(spaan_trace, get_gpu("rtx3080ti"))


def test_granularities_and_objectives(spaan_problem):
    pb = spaan_problem
    for gran in ("static", "pass", "kernel"):
        for obj in ("waste", "edp", "ed2p", "energy"):
            for scope in ("local", "global"):
                a = allocate(pb, obj, 0.0, gran, scope)
                t, e = pb.evaluate(a)
                assert e <= pb.auto_energy_j * 1.0000001 or obj != "waste"
    e_min = pb.evaluate(allocate(pb, "energy"))[1]
    assert e_min <= pb.evaluate(allocate(pb, "edp"))[1]


def test_reproduce_cli_json_fields(capsys):
    code, out, _ = run_cli(["reproduce", "spaan2026", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and len(rows) == 8
    need = {"granularity", "scope", "objective", "time_change_pct", "energy_change_pct", "paper_time_change_pct",
            "paper_energy_change_pct"}
    assert all(need <= set(r) for r in rows)
    kg = next(r for r in rows if (r["granularity"], r["scope"], r["objective"]) == ("kernel", "global", "strict waste"))
    assert kg["time_change_pct"] <= 0.05
    from kdvfs.reproduce import table2_targets_met

    met = table2_targets_met(rows)  # each row says whether it meets the target, as the judge says
    assert all(r["target_met"] is met[f"{r['granularity']}/{r['scope']}/{r['objective']}"] for r in rows)


def test_reproduce_writes_pass_level_figure_and_table2_with_targets(tmp_path, capsys):
    import csv

    code, _, _ = run_cli(["reproduce", "spaan2026", "-o", str(tmp_path)], capsys)
    assert code == 0
    assert (tmp_path / "pass_level.png").stat().st_size > 10_000
    with (tmp_path / "table2.csv").open() as f:
        t2 = list(csv.DictReader(f))
    assert len(t2) == 8 and all(r["target"].startswith("ΔE ") for r in t2)
    assert next(r for r in t2 if r["granularity"] == "kernel" and r["scope"] == "global"
                and r["objective"] == "strict waste")["target"] == "ΔE -15.64 ± 1, Δt ≤ +0.05 %"
    with (tmp_path / "pass_level.csv").open() as f:
        pl = list(csv.DictReader(f))
    assert len(pl) == 132 and {"model_time_change_pct", "study_energy_change_pct"} <= set(pl[0])
    auto = [r for r in pl if r["core_mhz"] == "auto" and r["mem_mhz"] == "auto"]
    assert all(abs(float(r["model_time_change_pct"])) < 1e-9 for r in auto)


def _row(rows, gran, scope, obj):
    return next(r for r in rows if (r["granularity"], r["scope"], r["objective"]) == (gran, scope, obj))


def test_measured_reproduction_without_noise_is_the_model():
    from kdvfs.reproduce import MeasurementNoise, reproduce_spaan2026, reproduce_spaan2026_measured

    exact = reproduce_spaan2026()
    rows = reproduce_spaan2026_measured(noise=MeasurementNoise(0.0, 0.0), seeds=2)
    for a, b in zip(exact, rows):
        # kernel-global strict waste: the MILP against the fast solver (within 0.01 % of the optimum)
        assert abs(a["energy_change_pct"] - b["energy_change_pct"]) < 0.02
        assert b["energy_change_pct"] == pytest.approx(b["true_energy_change_pct"], abs=1e-9)
        assert b["energy_change_sd_pct"] == pytest.approx(0.0, abs=1e-9)
        assert b["target_met"] == a["target_met"] and b["target_met_share"] in (0.0, 1.0)


def test_measured_reproduction_is_seeded_and_shows_the_winners_curse():
    from kdvfs.reproduce import MeasurementNoise, reproduce_spaan2026_measured

    noise = MeasurementNoise(1.0, 1.0)
    a = reproduce_spaan2026_measured(noise=noise, seeds=3, seed=7)
    assert a == reproduce_spaan2026_measured(noise=noise, seeds=3, seed=7)
    assert a != reproduce_spaan2026_measured(noise=noise, seeds=3, seed=8)
    # choosing the best of noisy measurements favours lucky ones: re-measured, the choice is slower and saves less
    kg = _row(a, "kernel", "global", "strict waste")
    assert kg["time_change_pct"] <= 1e-9 < 0.2 < kg["true_time_change_pct"]
    assert kg["energy_change_pct"] < kg["true_energy_change_pct"]
    assert kg["energy_change_sd_pct"] > 0 and 0.0 <= kg["target_met_share"] <= 1.0


def test_measurement_noise_defaults_are_the_measured_scatter():
    """The defaults are the RMS over stages of the per-window coefficients of variation measured on the H200."""
    from pathlib import Path

    from kdvfs.reproduce import MeasurementNoise

    doc = json.loads((Path(__file__).resolve().parent.parent / "validation/h200/measurement_noise.json").read_text())
    cv = {k: [s[k] for s in doc["summary"].values()] for k in ("time_cv_pct", "energy_cv_pct")}
    rms = {k: float(np.sqrt(np.mean(np.square(v)))) for k, v in cv.items()}
    assert round(rms["time_cv_pct"], 2) == MeasurementNoise().time_pct
    assert round(rms["energy_cv_pct"], 2) == MeasurementNoise().energy_pct


def test_reproduce_noise_cli(capsys):
    code, out, _ = run_cli(["reproduce", "spaan2026", "--noise", "--seeds", "2", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and len(rows) == 8
    assert all({"true_energy_change_pct", "energy_change_sd_pct", "target_met_share", "seeds"} <= set(r) for r in rows)
    code, _, err = run_cli(["reproduce", "spaan2026", "--seeds", "2"], capsys)
    assert code == 2 and "--seeds only applies with --noise" in err
    code, _, err = run_cli(["reproduce", "spaan2026", "--noise", "--noise-energy-pct", "-1"], capsys)
    assert code == 2 and "energy_pct must be a percentage in [0, 50], got -1.0" in err


def test_milp_keeps_stdout_clean(capfd):
    """HiGHS prints a debugging line to file descriptor 1 on some instances (profiles of the retired calibration
    variants, seen with scipy 1.1x); the MILP solver must not let it into --json output."""
    from kdvfs.reproduce import study_problem

    pb = study_problem()
    for slack in (0.0, 1.0, 5.0):
        a = allocate(pb, "waste", slack, "kernel", "global", solver="milp")
        assert a.solver.startswith("milp") and pb.evaluate(a)[0] <= pb.budget(slack) * (1 + 1e-9)
    print("after")  # Python's own output still arrives
    assert capfd.readouterr().out == "after\n"


def test_optimize_cli_writes_schedule(tmp_path, capsys):
    out = tmp_path / "s.json"
    code, o, _ = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "--objective", "waste", "--slack", "0",
                          "--granularity", "kernel", "--scope", "global", "-o", str(out), "--json"], capsys)
    d = json.loads(o)
    assert code == 0 and out.exists() and d["predicted"]["time_change_pct"] <= 1e-6


def test_frontier_cli(tmp_path, capsys):
    out = tmp_path / "c.csv"
    code, _, _ = run_cli(["frontier", "--trace", "gpt3xl-llmc-rtx3080ti", "--scope", "global", "--slack-min", "0",
                          "--slack-max", "4", "--slack-step", "2", "-o", str(out)], capsys)
    lines = out.read_text().splitlines()
    assert code == 0 and lines[0] == "slack_pct,time_change_pct,energy_change_pct" and len(lines) == 4
    assert out.with_suffix(".png").exists()


def test_hopper_switch_aware_keeps_80_percent_of_the_ideal(spaan_problem):
    """Issue 5's target: under the Hopper preset (~6 ms), predictive switching, the switch-aware schedule keeps ≥ 80 %
    of the ideal kernel-level saving at ≤ +1 % time; checked by the simpy engine, not only by the planner."""
    import dataclasses

    from kdvfs.switching import SwitchCosts
    from simulator import SimConfig, simulate

    pb = spaan_problem
    ideal = optimize(pb).predicted
    sw = dataclasses.replace(get_gpu("h200").switch, spread=0.0)
    sa = switch_aware(pb, sw, "predictive", 0.0)
    r = simulate(pb.trace, pb.profile, sa, get_gpu("rtx3080ti"), SimConfig("predictive", sw, SwitchCosts()), path="engine")
    kept = (r.energy_j / pb.auto_energy_j - 1) / (ideal.energy_j / pb.auto_energy_j - 1)
    assert kept >= 0.8
    assert r.time_s <= pb.auto_time_s * 1.01
    naive = evaluate_with_switching(pb, optimize(pb), sw, "predictive")
    assert naive["time_s"] > pb.auto_time_s * 1.05  # the naive schedule, paying every switch, is much slower


def test_local_counts_times_within_a_ppm_as_equal():
    from kdvfs.optimize.knapsack import TIME_TIE_REL, solve_local

    T = np.array([[1.0, 1.0 + 0.5 * TIME_TIE_REL, 1.0 + 10 * TIME_TIE_REL]])
    E = np.array([[3.0, 1.0, 0.5]])
    # a second kernel that runs faster than its bound pays for the band: the ppm-slower setting is "no slower", the
    # 10 ppm one is slower
    T2 = np.vstack([T, [[1.0, 0.9, 2.0]]])
    E2 = np.vstack([E, [[3.0, 2.0, 3.0]]])
    a = solve_local(T2, E2, np.array([4, 1]), T2[:, 0])
    assert a.counts == ({1: 4}, {1: 1})
    # alone, the band would cost time beyond the slack (issue 13: strict means ≤ +0 %): it is given back
    a = solve_local(T, E, np.array([4]), T[:, 0])
    assert a.counts == ({0: 4},)
