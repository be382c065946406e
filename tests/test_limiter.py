"""The power limiter: the controller, the steady state, and the simulator's engine and fast path under it."""

import dataclasses

import numpy as np
import pytest

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, SwitchModel, get_gpu
from kdvfs.limiter import CeilingTables, ControllerState, LimiterModel, controller_step, limiter_for, steady_state
from kdvfs.model import KernelParams, evaluate
from kdvfs.profile import build_profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Kernel, Segment, Trace
from simulator import SimConfig, simulate

H = get_gpu("h200")
# a card with a steep voltage curve and a GEMM far over the cap alone, for tests whose point needs one (the H200
# preset's curve and cap are whatever its fit to the zoo says)
STEEP = dataclasses.replace(H, name="steep", v_min=0.7, v_max=1.0, vf_knee_mhz=1200.0, core_power_w=760.0,
                            idle_power_w=122.0, cap_w=698.0)
LIM = LimiterModel(window_s=0.02, gain_mhz_per_ws=80.0, slew_mhz_per_s=8000.0, period_s=1e-3)


def gemm_and_copy(uc_gemm=1.2):
    """A compute-bound kernel that exceeds the cap alone at the top clock and a memory-bound one far under it."""
    return KernelParams(("s.0", "s.1"), np.array([1e-6, 1e-6]), np.array([1e-3, 5e-5]), np.array([2e-4, 1e-3]),
                        np.array([uc_gemm, 0.3]), np.array([0.6, 1.0]))


def test_model_checks_its_numbers():
    with pytest.raises(InputError, match="window_s must be a positive finite number, got -1"):
        LimiterModel(window_s=-1, gain_mhz_per_ws=1, slew_mhz_per_s=1)
    with pytest.raises(InputError, match="cap_w"):
        LimiterModel(0.02, 1, 1, cap_w=0.0)
    assert LimiterModel.from_dict(LIM.to_dict()) == LIM


def test_only_cards_with_a_fitted_limiter_have_one():
    assert limiter_for(get_gpu("rtx3080ti")) is None
    assert limiter_for(get_gpu("a100")) is None


def test_steady_state_of_one_kernel_is_its_isolated_throttled_clock():
    # isolated-and-summed is the special case of one kernel type: f* is where the kernel alone meets the cap
    p = gemm_and_copy()
    tab = CeilingTables.from_params(H, p, [(AUTO, AUTO)])
    ss = steady_state(tab, np.array([[10.0], [0.0]]), H.cap_w)
    alone = evaluate(H, p, np.array([AUTO]), np.array([AUTO]))
    assert ss.limited and alone.throttled[0, 0]
    assert ss.ceiling_mhz == pytest.approx(alone.core_mhz[0, 0], abs=1.0)  # within the dither of one 15 MHz bin
    assert ss.power_w == pytest.approx(H.cap_w, rel=1e-6)


def test_a_mix_lets_the_gemm_run_faster_than_alone():
    p = gemm_and_copy()
    tab = CeilingTables.from_params(H, p, [(AUTO, AUTO)])
    alone = steady_state(tab, np.array([[1.0], [0.0]]), H.cap_w).ceiling_mhz
    mixed = steady_state(tab, np.array([[1.0], [1.0]]), H.cap_w)
    assert mixed.ceiling_mhz > alone + 50
    # a kernel asking for less than the ceiling keeps its clock: a step all at 1200 MHz is not limited
    tab2 = CeilingTables.from_params(H, p, [(1200, 3201)])
    low = steady_state(tab2, np.array([[1.0], [1.0]]), H.cap_w)
    assert not low.limited and tab2.effective_mhz(low.ceiling_mhz)[0] == 1200


def test_dither_between_bins_is_linear_in_rate_and_power():
    tab = CeilingTables.from_params(H, gemm_and_copy(), [(AUTO, AUTO)])
    t_lo, p_lo = tab.at(1800.0)
    t_hi, p_hi = tab.at(1815.0)
    t_mid, p_mid = tab.at(1805.0)
    assert 1 / t_mid == pytest.approx(2 / 3 / t_lo + 1 / 3 / t_hi, rel=1e-12)
    assert p_mid == pytest.approx(2 / 3 * p_lo + 1 / 3 * p_hi, rel=1e-12)


def test_controller_settles_at_the_steady_state_under_a_constant_load():
    p = gemm_and_copy()
    tab = CeilingTables.from_params(H, p, [(AUTO, AUTO)])
    f_star = steady_state(tab, np.array([[1.0], [0.0]]), H.cap_w).ceiling_mhz
    st = ControllerState(tab.hi_mhz, 300.0)
    for _ in range(3000):  # 3 s of ticks of a GEMM held alone
        t, pw = tab.at(st.ceiling_mhz)
        st = controller_step(LIM, H.cap_w, tab.lo_mhz, tab.hi_mhz, st, float(pw[0, 0]) * LIM.period_s)
    assert st.ceiling_mhz == pytest.approx(f_star, abs=2.0)
    assert st.avg_power_w == pytest.approx(H.cap_w, abs=0.5)


def test_slew_bounds_each_move():
    st = controller_step(LIM, 698.0, 345.0, 1980.0, ControllerState(1980.0, 698.0), 5.0)  # 5000 W for 1 ms
    assert 1980.0 - st.ceiling_mhz == pytest.approx(LIM.slew_mhz_per_s * LIM.period_s)


def random_case(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 7))
    ks = tuple(Kernel(f"k{i}", "other", 1e-3) for i in range(K))
    tr = Trace("r", (Segment("a", ks[: K // 2 + 1], int(rng.integers(2, 6)), "forward"),
                     Segment("b", ks[K // 2 + 1:] or ks[:1], 3, "backward")))
    n = len(tr.kernels)
    params = KernelParams(tr.kernel_keys, rng.uniform(0, 2e-5, n), rng.uniform(1e-5, 3e-3, n), rng.uniform(1e-5, 2e-3, n),
                          rng.uniform(0.2, 1.4, n), rng.uniform(0.3, 1.0, n))
    settings = ((AUTO, AUTO), (1980, 3201), (1500, 3201), (1200, 2201), (1800, AUTO))
    prof = build_profile(tr, H, params, settings)
    pick = rng.integers(0, len(settings), len(tr.instances()))
    st = np.array(settings)[pick]
    sched = Schedule("r", "h200", st[:, 0], st[:, 1])
    lim = LimiterModel(float(rng.uniform(2e-3, 5e-2)), float(rng.uniform(5, 200)), float(rng.uniform(500, 2e4)),
                       float(rng.uniform(2e-4, 2e-3)), float(rng.uniform(400, 700)))
    return rng, tr, prof, sched, params, lim


@pytest.mark.parametrize("seed", range(8))
def test_engine_and_fast_path_agree_under_the_limiter(seed):
    rng, tr, prof, sched, params, lim = random_case(seed)
    for mech in ("sync", "callback", "predictive"):
        sw = SwitchModel(float(rng.uniform(0, 1e-3)), float(rng.uniform(0, 3e-3)), stall_while_relocking=bool(seed % 3 == 2))
        cfg = SimConfig(mech, sw, SwitchCosts(idle_power_w=float(rng.uniform(80, 150))))
        a = simulate(tr, prof, sched, H, cfg, path="engine", limiter=lim, params=params, warmup=int(seed % 2))
        b = simulate(tr, prof, sched, H, cfg, path="fast", limiter=lim, params=params, warmup=int(seed % 2))
        assert (a.path, b.path) == ("engine", "fast")
        assert a.time_s == pytest.approx(b.time_s, rel=1e-9)
        assert a.energy_j == pytest.approx(b.energy_j, rel=1e-9)
        assert a.switches == b.switches
        assert a.switch_time_s == pytest.approx(b.switch_time_s, rel=1e-9, abs=1e-15)
        for k in a.segments:
            assert a.segments[k].energy_j == pytest.approx(b.segments[k].energy_j, rel=1e-9)
            assert a.segments[k].time_s == pytest.approx(b.segments[k].time_s, rel=1e-9)
        for q in ("median_core_mhz", "mean_core_mhz", "end_ceiling_mhz"):
            assert getattr(a.limiter, q) == pytest.approx(getattr(b.limiter, q), rel=1e-9)


def test_without_switching_the_limited_run_matches_the_steady_state_when_the_window_is_long():
    # a window far longer than the step: the ceiling hardly moves inside it, so the step costs what f* says
    rng, tr, prof, sched, params, _ = random_case(3)
    lim = LimiterModel(window_s=50.0, gain_mhz_per_ws=1.0, slew_mhz_per_s=1.0, period_s=1e-3, cap_w=500.0)
    auto = Schedule("r", "h200", np.zeros(len(tr.instances()), int), np.zeros(len(tr.instances()), int))
    r = simulate(tr, prof, auto, H, SimConfig("sync", SwitchModel(0, 0)), limiter=lim, params=params)
    tab = CeilingTables.from_params(H, params, [(AUTO, AUTO)])
    counts = np.bincount(tr.instances(), minlength=len(tr.kernels)).astype(float)[:, None]
    ss = steady_state(tab, counts, 500.0)
    assert r.limiter is not None and r.limiter.steady_ceiling_mhz == ss.ceiling_mhz
    assert r.energy_j == pytest.approx(ss.energy_j, rel=1e-3)
    assert r.time_s == pytest.approx(ss.time_s, rel=1e-3)


def test_limiter_refuses_what_it_cannot_do():
    rng, tr, prof, sched, params, lim = random_case(1)
    cfg = SimConfig("sync", SwitchModel(1e-4, 1e-4))
    with pytest.raises(InputError, match="the limiter needs at least two to interpolate"):
        simulate(tr, prof, sched, H, cfg, limiter=lim)  # no params: the profile's rows, too few of them here
    with pytest.raises(InputError, match="one set of kernel model parameters per kernel"):
        simulate(tr, prof, sched, H, cfg, limiter=lim, params=params.take(np.array([0])))
    with pytest.raises(InputError, match="fast path needs zero latency spread"):
        simulate(tr, prof, sched, H, SimConfig("sync", SwitchModel(1e-4, 1e-4, spread=0.2)), path="fast", limiter=lim,
                 params=params)
    # the engine takes a spread, seeded: the same seed gives the same bits
    cfg2 = SimConfig("sync", SwitchModel(1e-4, 1e-4, spread=0.2), seed=4)
    a = simulate(tr, prof, sched, H, cfg2, limiter=lim, params=params)
    b = simulate(tr, prof, sched, H, cfg2, limiter=lim, params=params)
    assert a.path == "engine" and a.energy_j == b.energy_j and a.time_s == b.time_s


def test_optimiser_under_the_limiter_meets_the_bound_and_beats_the_isolated_choice():
    from kdvfs.optimize import Problem, allocate
    from kdvfs.optimize.limited import optimize_limited, steady_of_allocation

    # a GEMM-heavy step with memory-bound kernels beside it: under the limiter, slowing the memory-bound kernels
    # buys clock for the GEMMs, which isolated pricing cannot see (on a card where a lower clock saves power)
    H = STEEP  # noqa: N806
    ks = (Kernel("gemm", "gemm", 1e-3), Kernel("copy", "copy", 1e-3))
    tr = Trace("mix", (Segment("s", ks, 20, "forward"),))
    params = gemm_and_copy(uc_gemm=1.4)
    settings = tuple([(AUTO, AUTO)] + [(c, m) for m in (2201, 3201) for c in range(1200, 1981, 60)])
    pb = Problem(tr, build_profile(tr, H, params, settings))
    for slack in (0.0, 2.0):
        plan = optimize_limited(pb, H, params, LIM, slack)
        assert plan.steady.time_s <= plan.auto.time_s * (1 + slack / 100) * (1 + 1e-9)
        iso = steady_of_allocation(CeilingTables.from_params(H, params, settings), allocate(pb, "waste", slack), H.cap_w)
        if iso.time_s <= plan.auto.time_s * (1 + slack / 100):  # the isolated choice can break the bound here
            assert plan.steady.energy_j <= iso.energy_j * (1 + 1e-12)
        assert plan.schedule.predicted.energy_change_pct < -1.0
        assert plan.schedule.predicted.ceiling_mhz > plan.auto.ceiling_mhz


def _synthetic_response(lim, cap, plants, name="sq"):
    from kdvfs.limiter_fit import simulate_ceiling

    phases, t = [], 0.0
    for load, d in (("light", 0.3), ("heavy", 0.25), ("light", 0.15), ("heavy", 0.3)):
        phases.append({"start_s": t, "end_s": t + d, "load": load})
        t += d
    tt, ceil = simulate_ceiling(lim, cap, H, phases, plants, t)
    ts = [p["start_s"] + dt for p in phases if p["load"] == "heavy" for dt in np.arange(0.002, 0.25, 0.004)]
    return {"name": name, "phases": phases, "clock": [[float(x), float(np.interp(x, tt, ceil))] for x in ts]}


def test_simulate_ceiling_is_the_controller_tick_by_tick():
    from kdvfs.limiter_fit import Plant, simulate_ceiling

    plants = {"heavy": Plant(122.0, 830.0), "light": Plant(400.0, 0.0)}
    phases = [{"start_s": 0.0, "end_s": 0.05, "load": "light"}, {"start_s": 0.05, "end_s": 0.2, "load": "heavy"}]
    tt, ceil = simulate_ceiling(LIM, 690.0, H, phases, plants, 0.2)
    st = ControllerState(1980.0, 400.0)
    for k in range(200):
        pl = plants["light" if (k + 0.5) * 1e-3 < 0.05 else "heavy"]
        st = controller_step(LIM, 690.0, 345.0, 1980.0, st, pl.power_w(H, st.ceiling_mhz) * 1e-3)
        assert ceil[k + 1] == pytest.approx(st.ceiling_mhz, rel=1e-12)


def test_fit_recovers_a_known_limiter_from_its_own_step_responses():
    from kdvfs.limiter_fit import Plant, fit_limiter

    true = LimiterModel(window_s=0.025, gain_mhz_per_ws=40.0, slew_mhz_per_s=6000.0)
    plants = {"heavy": Plant(122.0, 830.0), "light": Plant(400.0, 0.0)}
    sr = _synthetic_response(true, 690.0, plants)
    fit = fit_limiter([sr], H, plants, cap="fit")
    m = fit.model
    assert m.cap_w == pytest.approx(690.0, abs=1.0)
    assert m.window_s == pytest.approx(0.025, rel=0.1)
    assert m.gain_mhz_per_ws == pytest.approx(40.0, rel=0.15)
    assert fit.rms_mhz["sq"] < 5.0  # 5 ms medians against the 1 ms ticks


def test_fit_refuses_responses_it_cannot_use(tmp_path):
    import json

    from kdvfs.errors import FormatError
    from kdvfs.limiter_fit import fit_limiter, load_step_responses

    p = tmp_path / "c.json"
    p.write_text(json.dumps({"kernels": []}))
    with pytest.raises(FormatError, match="has no \"step_responses\""):
        load_step_responses([p])
    with pytest.raises(InputError, match="does not exist"):
        load_step_responses([tmp_path / "missing.json"])
    sr = {"name": "x", "phases": [{"start_s": 0.0, "end_s": 1.0, "load": "heavy"}], "clock": [[0.5, 1700.0]]}
    with pytest.raises(InputError, match="no power samples \\(and no given plant\\) for load\\(s\\) heavy"):
        fit_limiter([sr], H)


def test_step_check_reports_both_predictions_against_the_measurement(tmp_path, capsys):
    import json
    import shutil
    from pathlib import Path

    from conftest import run_cli

    from simulator.stepcheck import check_one, check_steps

    src = Path(__file__).parent / "data" / "foreign-transformer.kineto.json.gz"
    shutil.copy(src, tmp_path / "toy.kineto.json.gz")
    pred = check_one(tmp_path / "toy.kineto.json.gz", "toy", H, LIM)
    e = pred["limiter"]["energy_j"]
    steps = [{"model": "toy", "trace": "toy.kineto.json.gz", "step_time_s": pred["limiter"]["time_s"],
              "step_energy_j": e * 1.10, "sm_mhz_median": pred["limiter"]["median_core_mhz"] * 1.01},
             {"model": "broken", "error": "RuntimeError: CUDA out of memory"}]
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "steps": steps}))
    doc = check_steps(tmp_path, H, LIM)
    ok, bad = doc["steps"]
    assert ok["error"]["limiter"]["energy_pct"] == pytest.approx(100 * (1 / 1.10 - 1))
    assert ok["error"]["limiter"]["median_clock_pct"] == pytest.approx(100 * (1 / 1.01 - 1))
    assert not ok["energy_target_met"] and ok["clock_target_met"]
    assert "not measured" in bad["skipped"] and doc["met"] == {"energy": 0, "clock": 1, "of": 1}
    assert ok["predicted"]["isolated"]["energy_j"] > 0
    with pytest.raises(InputError, match="steps.json' does not exist"):
        check_steps(tmp_path / "nowhere", H, LIM)
    code, _, err = run_cli(["validate-steps", str(tmp_path), "--gpu", "rtx3080ti"], capsys)
    assert code == 2 and "rtx3080ti has no fitted limiter model" in err


def test_tables_from_a_profiles_own_rows_match_the_model_where_nothing_throttles():
    p = gemm_and_copy(uc_gemm=0.3)  # never over the cap: the profile's rows are the unthrottled model
    ks = (Kernel("gemm", "gemm", 1e-3), Kernel("copy", "copy", 1e-3))
    tr = Trace("mix", (Segment("s", ks, 1, "forward"),))
    settings = tuple((c, 3201) for c in range(345, 1981, 15))
    prof = build_profile(tr, H, p, settings)
    a = CeilingTables.from_profile(H, prof, [(AUTO, 3201), (1500, 3201)])
    b = CeilingTables.from_params(H, p, [(AUTO, 3201), (1500, 3201)])
    np.testing.assert_allclose(a.inv_time, b.inv_time, rtol=1e-9)
    np.testing.assert_allclose(a.power_w, b.power_w, rtol=1e-9)
    with pytest.raises(InputError, match="has 0 core clock\\(s\\) at memory 2201 MHz; the limiter needs at least two"):
        CeilingTables.from_profile(H, prof, [(AUTO, 2201)])


def test_recorded_durations_are_anchored_at_the_limiters_clock():
    from kdvfs.limiter import anchor_to_limiter

    H = STEEP  # noqa: N806
    p = gemm_and_copy(uc_gemm=1.4)
    times = np.array([1e-3, 2e-3])
    reps = np.array([3, 5])
    q, f = anchor_to_limiter(H, p, times, reps, LIM)
    tab = CeilingTables.from_params(H, q, [(AUTO, AUTO)])
    ss = steady_state(tab, reps[:, None].astype(float), H.cap_w)
    assert ss.ceiling_mhz == pytest.approx(f, abs=1e-3) and ss.limited  # a fixed point, to ~1e-9 per round
    np.testing.assert_allclose(tab.at(f)[0][:, 0], times, rtol=1e-6)
    # the GEMM throttles further alone than in the mix: anchored at the mix's (higher) clock it does more work per
    # second of recorded time than anchored at its isolated clock
    alone = evaluate(H, p, np.array([AUTO]), np.array([AUTO])).core_mhz[0, 0]
    assert f > alone
    np.testing.assert_allclose(q.tc_s / q.tm_s, p.tc_s / p.tm_s)  # one factor per kernel: power unchanged
    # with host gaps at idle power in the window, the ceiling is higher still
    _, f_gap = anchor_to_limiter(H, p, times, reps, LIM, gap=(5e-3, 120.0))
    assert f_gap > f
