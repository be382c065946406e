"""The voltage/frequency and static-power shape and the low-clock time form (issue 11, session 8): the card fields are
off on every preset, each does what it says when set, the calibrations can fit them, and the model-free check of where
the energy minima lie reads the two tables as the README says."""

from dataclasses import replace

import numpy as np
import pytest
from conftest import run_cli

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, PRESETS, get_gpu
from kdvfs.model import KernelParams, evaluate


def _kernel(uc=1.0, tm=1e-4):
    return KernelParams(("k",), np.array([1e-7]), np.array([1e-3]), np.array([tm]), np.array([uc]), np.array([0.5]))


def test_shape_fields_are_off_on_every_preset():
    for g in PRESETS.values():
        assert g.leak_w == 0.0 and g.vf_low_drop == 0.0 and g.slow_core_mhz == 0.0, g.name
        d = g.to_dict()
        assert "leak_w" not in d and "vf_low_drop" not in d


def test_leak_follows_the_core_voltage_and_vflow_lowers_it_below_the_knee():
    g = replace(get_gpu("rtx3080ti"), cap_w=float("inf"))
    p = _kernel()
    c = np.array([210, 630, 1050, int(g.vf_knee_mhz), 1890])
    m = np.full(len(c), 9501)
    plain = evaluate(g, p, c, m)
    leaky = replace(g, leak_w=40.0, leak_exponent=2.0)
    ev = evaluate(leaky, p, c, m)
    vf = g.voltage(np.array(g.boost_core_mhz))
    want = 40.0 * ((g.voltage(plain.core_mhz) / vf) ** 2 - 1)
    assert np.allclose(ev.power_w - plain.power_w, want) and np.array_equal(ev.time_s, plain.time_s)
    assert np.all(want[:-1] < 0)  # below the boost clock's voltage the card draws less
    at_boost = evaluate(leaky, p, np.array([AUTO]), np.array([AUTO]))
    assert np.isclose(at_boost.power_w[0], evaluate(g, p, np.array([AUTO]), np.array([AUTO])).power_w[0])
    low = replace(g, vf_low_drop=0.2)
    v = low.voltage(np.array([210.0, 0.5 * (210 + g.vf_knee_mhz), g.vf_knee_mhz, 1890.0]))
    assert np.allclose(v[:3], g.v_min * np.array([0.8, 0.9, 1.0])) and v[3] == g.voltage(np.array(1890.0))
    assert np.all(np.diff(low.voltage(np.arange(210, 2101, 15))) >= 0)
    # dynamic power falls faster than the clock below the knee: the energy of a compute-bound kernel falls with it
    e = evaluate(replace(low, leak_w=0.0), _kernel(tm=1e-6), np.array([630, 1050]), np.array([9501, 9501]))
    e0 = evaluate(g, _kernel(tm=1e-6), np.array([630, 1050]), np.array([9501, 9501]))
    assert e.energy_j[0, 0] / e.energy_j[0, 1] < e0.energy_j[0, 0] / e0.energy_j[0, 1]


def test_shape_terms_parse_apply_and_slowcore_grows_faster_than_one_over_f():
    from kdvfs.joint_structure import CARD_SHAPE_TERMS, apply_structure, parse_structure, structure_params

    assert parse_structure("leak,vflow,slowcore") == ("leak", "vflow", "slowcore")
    names = [q[0] for q in structure_params(("slowcore", "leak", "leakexp", "vflow"))]
    assert names == ["leak_w", "leak_exponent", "vf_low_drop", "slow_core_mhz", "slow_exponent"]
    assert set(CARD_SHAPE_TERMS) == {"leak", "leakexp", "vflow", "slowcore"}
    g = apply_structure(get_gpu("rtx3080ti"), {"leak_w": 20.0, "vf_low_drop": 0.1, "slow_core_mhz": 300.0,
                                                "slow_exponent": 3.0})
    assert (g.leak_w, g.vf_low_drop, g.slow_core_mhz, g.slow_exponent) == (20.0, 0.1, 300.0, 3.0)
    g = replace(g, cap_w=float("inf"))
    t = evaluate(g, _kernel(tm=1e-7), np.array([420, 1680]), np.array([9501, 9501])).time_s[0]
    assert t[0] / t[1] * 420 / 1680 > 1.2  # (1 + (300/420)^3) / (1 + (300/1680)^3) = 1.36


def test_table_method_fits_shape_terms_as_card_constants():
    from kdvfs.calibrate import _CARD_LO, FitOptions
    from kdvfs.joint_structure import structure_params

    sh = structure_params(("leak", "vflow"))
    lo, hi, x0 = FitOptions(shape=sh).card_bounds()
    assert len(lo) == len(_CARD_LO) + 2 and lo[-2:].tolist() == [0.0, 0.0] and hi[-2:].tolist() == [150.0, 0.6]
    assert np.all((lo <= x0) & (x0 <= hi))
    assert len(FitOptions().card_bounds()[0]) == len(_CARD_LO)


def test_calibrate_cli_shape_options(capsys):
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--check", "--fit-option", "structure=memtraffic"],
                           capsys)
    assert code == 2 and "memtraffic acts on the pass-level sweep" in err and "Traceback" not in err
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--fit-option", "structure=leak"], capsys)
    assert code == 2 and "is a variant, not the bundled fit; give --out DIR or --check" in err
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--check", "--fit-option", "structure=leak",
                            "--fit-option", "kernel_loss=band"], capsys)
    assert code == 2 and "the table method has none" in err
    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.calibrate_spaan2026 import calibrate_spaan2026

    with pytest.raises(InputError, match="passcap acts on the pass-level sweep"):
        calibrate_spaan2026(options=JointOptions(method="table", structure="leak,passcap"))


def test_vf_shape_check_reads_the_two_tables():
    """The model-free numbers of the README's session-8 section: the passes' power leaves its straight line at
    1470–1680 MHz, their time grows slower than 1/f at low clocks, the memory-bound kernels' minima sit at their best
    settings; the bundled table fit puts its GEMM-heavy passes' minima at its knee (1680 MHz)."""
    from kdvfs.bundled import bundled_dir
    from kdvfs.calibrate import read_table
    from kdvfs.passweep import pass_index, read_pass_sweep
    from kdvfs.trace import load_trace
    from kdvfs.vfshape import data_part, fit_part

    b = bundled_dir()
    rows = read_table(b / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sweep = read_pass_sweep(b / "spaan2026_fig3_fig4_pass_level.csv")
    trace = load_trace(b / "gpt3xl-llmc-rtx3080ti.trace.json")
    passes, rep = pass_index(trace), trace.repeats.astype(float)
    d = data_part(rows, sweep, passes, rep)
    assert d["pass_power"]["forward mem 9501"]["knee_mhz"] == "≤ 1470"
    assert d["pass_power"]["backward mem 9501"]["knee_mhz"] == "≤ 1680"
    for key, row in d["pass_power"].items():
        if "time_times_clock_vs_1680" in row:
            assert max(row["time_times_clock_vs_1680"].values()) < 1.0, key
    assert d["pass_minimum"]["backward mem 5001"] == {"core_mhz": "1260", "energy_pct": -37.42, "time_pct": 47.13}
    mb = d["memory_bound"]
    assert len(mb["kernels"]) == 15 and mb["minimum_at_best_within_1_5_points"] == 15
    f = fit_part(b / "gpt3xl-llmc-rtx3080ti.calibration.json", rows, sweep, trace, passes, rep)
    assert f["pass_minimum"]["forward mem auto"]["core_mhz"] == "1680"
    assert f["every_kernel_at_min"]["energy_pct"] == pytest.approx(-35.05, abs=0.01)
