import numpy as np
import pytest
from conftest import run_cli

from kdvfs.errors import FormatError, InputError
from kdvfs.fit import crossval, fit_profile, read_sweep
from kdvfs.gpus import get_gpu
from kdvfs.synthetic import synthetic_sweep, write_sweep


@pytest.mark.parametrize("seed", [0, 1])
def test_crossval_three_points_meets_five_percent(tmp_path, seed):
    """Older-GPU-like sweeps: ~10 core clocks, memory fixed, 1 % time and 2 % power noise, throttling at the top;
    the hidden card is not in the catalog and the fit is not told anything about it."""
    p = write_sweep(synthetic_sweep(n_kernels=10, seed=seed), tmp_path / "s.csv")
    r = crossval(read_sweep(p), 3)
    assert r["card"] == "generic"
    assert r["time_mape_pct"] <= 5.0
    assert r["power_mape_pct"] <= 5.0


def test_fit_profile_completes_the_grid_of_a_known_card(tmp_path):
    g = get_gpu("rtx3080ti")
    rows = []
    rng = np.random.default_rng(0)
    from kdvfs.model import KernelParams, evaluate

    params = KernelParams(("a", "b"), np.array([1e-5, 2e-5]), np.array([9e-3, 1e-4]), np.array([1e-3, 9e-4]),
                          np.array([1.1, 0.5]), np.array([1.0, 1.0]))
    settings = [(0, 0), (1050, 9501), (1500, 5001), (1890, 9501), (630, 9501), (1890, 5001)]
    for k in range(2):
        ev = evaluate(g, params, np.array([s[0] for s in settings]), np.array([s[1] for s in settings]),
                      kernel_index=np.full(len(settings), k))
        for (c, m), t, pw in zip(settings, ev.time_s, ev.power_w):
            rows.append({"kernel": "ab"[k], "core_mhz": c or "auto", "mem_mhz": m or "auto",
                         "time_s": t * rng.lognormal(0, 0.005), "power_w": pw * rng.lognormal(0, 0.01)})
    p = write_sweep(rows, tmp_path / "s.csv")
    prof = fit_profile(read_sweep(p), g)
    assert prof.time_s.shape == (2, 655)
    truth = evaluate(g, params, np.array([s[0] for s in prof.settings]), np.array([s[1] for s in prof.settings]))
    assert np.median(np.abs(prof.time_s / truth.time_s - 1)) < 0.05
    assert np.median(np.abs(prof.power_w / truth.power_w - 1)) < 0.05


def test_bad_sweeps(tmp_path, capsys):
    one = write_sweep([{"kernel": "a", "core_mhz": 1000, "mem_mhz": 877, "time_s": 1e-3, "power_w": 100}], tmp_path / "1.csv")
    with pytest.raises(FormatError, match="has 1 measured setting.*at least 2"):
        read_sweep(one)
    nan = write_sweep([{"kernel": "a", "core_mhz": 1000, "mem_mhz": 877, "time_s": "nan", "power_w": 100},
                       {"kernel": "a", "core_mhz": 900, "mem_mhz": 877, "time_s": 1e-3, "power_w": 90}], tmp_path / "n.csv")
    with pytest.raises(FormatError, match="line 2: time_s is nan"):
        read_sweep(nan)
    neg = write_sweep([{"kernel": "a", "core_mhz": 1000, "mem_mhz": 877, "time_s": 1e-3, "power_w": -5},
                       {"kernel": "a", "core_mhz": 900, "mem_mhz": 877, "time_s": 1e-3, "power_w": 90}], tmp_path / "g.csv")
    code, _, err = run_cli(["profile", "crossval", str(neg)], capsys)
    assert code == 2 and "power_w is -5.0" in err
    cols = write_sweep([{"kernel": "a", "clock": 1}], tmp_path / "c.csv")
    with pytest.raises(FormatError, match="needs columns kernel, core_mhz, mem_mhz, time_s and power_w or energy_j"):
        read_sweep(cols)
    p = write_sweep(synthetic_sweep(n_kernels=2, n_clocks=3), tmp_path / "few.csv")
    with pytest.raises(InputError, match="needs more than --train-points"):
        crossval(read_sweep(p), 3)


def test_crossval_cli_json(tmp_path, capsys):
    """``--json`` carries every point's signed error, training points marked; the MAPEs are over the other points."""
    import json

    p = write_sweep(synthetic_sweep(n_kernels=4, seed=3), tmp_path / "s.csv")
    code, out, _ = run_cli(["profile", "crossval", str(p), "--train-points", "3", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and {"time_mape_pct", "power_mape_pct", "energy_mape_pct"} <= set(d) and len(d["kernels"]) == 4
    assert d["layout"] == "rotated" and d["noise_rel"] == [0.01, 0.02]
    errs = []
    for k in d["kernels"]:
        pts = k["points"]
        assert len(pts) == 10 and sum(q["train"] for q in pts) == 3 and k["test"] == 7
        assert max(pts, key=lambda q: q["core_mhz"])["train"]  # the top clock is always trained on
        test = [q for q in pts if not q["train"]]
        assert k["time_mape_pct"] == pytest.approx(np.mean([abs(q["time_err_pct"]) for q in test]))
        assert any(q["time_err_pct"] < 0 for q in pts) and any(q["time_err_pct"] > 0 for q in pts)  # signed
        errs += [abs(q["power_err_pct"]) for q in test]
    assert d["power_mape_pct"] == pytest.approx(np.mean(errs))


def test_training_points_span_each_kernel_and_rotate_across_kernels():
    from kdvfs.fit import train_indices

    layouts = [train_indices(11, 3, i) for i in range(20)]
    assert len({tuple(x) for x in layouts}) >= 8
    for lo, mid, top in layouts:
        assert top == 10 and lo in (0, 1) and 3 <= mid <= 7  # low end in the lowest 10 %, interior in the middle half
    assert {x[0] for x in layouts} == {0, 1}  # the lowest clock does not train every kernel
    assert {x[1] for x in layouts} == {3, 4, 5, 6, 7}  # together the kernels' interior points cover the middle
    assert layouts == [train_indices(11, 3, i) for i in range(20)]  # deterministic
    assert train_indices(11, 3, 5, rotate=False) == [0, 5, 10] and train_indices(11, 2, 3) in ([0, 10], [1, 10])
    for lo, a, b, top in (train_indices(11, 4, i) for i in range(20)):
        assert lo < a < b < top == 10 and b - a >= 2
    assert train_indices(4, 3, 0) == sorted(set(train_indices(4, 3, 0))) and len(train_indices(4, 3, 0)) == 3
    assert train_indices(3, 5, 0) == [0, 1, 2]


@pytest.mark.parametrize("seed,knee_mhz,slow_at_min", [(1, 800.0, 0.9), (2, 800.0, 0.9), (3, 650.0, 0.9),
                                                         (4, 950.0, 1.2)])
def test_crossval_survives_low_clock_slowdown(tmp_path, seed, knee_mhz, slow_at_min):
    """A sweep shaped like real older-datacentre-card sweeps: time grows faster than 1/f below ``knee_mhz`` (a
    compute-bound kernel ~6× slower at 405 than at 1380 MHz, a clock ratio of 3.41), by a form the model does not
    share. Three training points per kernel; the issue's target: ≤ 5 % time and power MAPE on the other points. Four
    draws: two seeds, an earlier and a later onset of the slowdown, a stronger one."""
    from kdvfs.synthetic import slowdown_sweep

    rows = slowdown_sweep(n_kernels=8, seed=seed, knee_mhz=knee_mhz, slow_at_min=slow_at_min)
    by = {}
    for r in rows:
        by.setdefault(r["kernel"], {})[r["core_mhz"]] = float(r["time_s"])
    compute_bound = max(by.values(), key=lambda v: v[405] / v[1380])
    assert compute_bound[405] / compute_bound[1380] > 4.5  # the slowdown is there: 1/f alone gives 3.41
    r = crossval(read_sweep(write_sweep(rows, tmp_path / "slow.csv")), 3)
    assert r["slow_core_mhz"] > 0 and r["slow_exponent"] >= 1  # the card built from the sweep learnt a slowdown
    assert r["time_mape_pct"] <= 5.0 and r["power_mape_pct"] <= 5.0
    k0 = r["kernels"][0]
    assert len(k0["points"]) == 11 and sum(p["train"] for p in k0["points"]) == 3


def test_noise_scale_comes_from_repeats(tmp_path):
    from kdvfs.fit import noise

    one = read_sweep(write_sweep(synthetic_sweep(n_kernels=3, seed=0), tmp_path / "one.csv"))
    assert noise(one) == (0.01, 0.02)  # no repeats: the default
    rep = read_sweep(write_sweep(synthetic_sweep(n_kernels=6, seed=0, repeats=4, time_noise=0.02, power_noise=0.04),
                                 tmp_path / "rep.csv"))
    t, p = noise(rep)  # the noise of a mean of 4 repeats: σ/2
    assert t == pytest.approx(0.01, rel=0.25) and p == pytest.approx(0.02, rel=0.25)
    assert rep.points["k0"][0].repeats == 4 and rep.points["k0"][0].log_time_var > 0


def test_crossval_is_deterministic_and_the_sparse_solver_agrees(tmp_path, monkeypatch):
    """Same sweep, same numbers; above ``_EXACT_MAX_PARAMS`` parameters (many kernels) the trust-region step uses the
    sparse solver, which must reach the same fit within noise."""
    import kdvfs.fit as fit
    from kdvfs.synthetic import slowdown_sweep

    sw = read_sweep(write_sweep(slowdown_sweep(n_kernels=6, seed=1), tmp_path / "s.csv"))
    a = crossval(sw, 3)
    assert crossval(sw, 3) == a
    monkeypatch.setattr(fit, "_EXACT_MAX_PARAMS", 0)
    b = crossval(sw, 3)
    assert b["time_mape_pct"] == pytest.approx(a["time_mape_pct"], abs=0.5)
    assert b["power_mape_pct"] == pytest.approx(a["power_mape_pct"], abs=0.5)
