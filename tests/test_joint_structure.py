"""Structural terms of the joint RTX 3080 Ti calibration (issue 11, session 7): memory traffic power per memory clock,
the cap a kernel meets inside a pass, the per-kernel targets as bands, and the diagnostic pass_drop."""

from dataclasses import replace

import numpy as np
import pytest
from conftest import run_cli

from kdvfs.bundled import bundled_dir
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import KernelParams, evaluate
from kdvfs.passweep import pass_errors, pass_index, read_pass_sweep

SWEEP = bundled_dir() / "spaan2026_fig3_fig4_pass_level.csv"


def _one_kernel(uc=0.0):
    return KernelParams(("k",), np.array([1e-6]), np.array([1e-4]), np.array([1e-3]), np.array([uc]), np.array([1.0]))


def test_mem_traffic_scale_scales_only_the_traffic_term():
    """Empty (every preset): the same output to the bit as a scale of ones; set: traffic power × the factor of the
    memory clock, nothing else moves."""
    g = replace(get_gpu("rtx3080ti"), cap_w=float("inf"))
    p = _one_kernel()
    c, m = np.array([1050, 1050, 1050, AUTO]), np.array([5001, 9251, 9501, AUTO])
    plain = evaluate(g, p, c, m)
    ones = evaluate(replace(g, mem_traffic_scale=(1.0,) * 5), p, c, m)
    assert np.array_equal(plain.power_w, ones.power_w) and np.array_equal(plain.time_s, ones.time_s)
    scale = (0.2, 0.2, 0.5, 0.9, 1.0)
    half = evaluate(replace(g, mem_traffic_scale=scale), p, c, m)
    traffic = g.mem_traffic_power_w * p.um[0] * p.tm_s[0] / plain.time_s[0]
    assert np.array_equal(half.time_s, plain.time_s)
    assert np.allclose(plain.power_w[0] - half.power_w[0], traffic * (1 - np.array([0.5, 0.9, 1.0, 1.0])))


def test_bad_structure_options_are_refused(capsys):
    from kdvfs.joint_structure import band_residual, parse_drop, parse_structure, structure_params

    assert parse_structure("passcap, memtraffic,passcap") == ("passcap", "memtraffic")
    assert [p[0] for p in structure_params(("passcap", "memtraffic"))] == [
        "traffic_share_9251", "traffic_share_5001", "traffic_share_low", "pass_cap_w"]
    with pytest.raises(InputError, match="'gaps' is not one of memtraffic, passcap, passboost"):
        parse_structure("gaps")
    assert parse_drop("auto/9501, 1890/9251") == ((AUTO, 9501), (1890, 9251))
    with pytest.raises(InputError, match="'1900/9501' is not one of the study's settings"):
        parse_drop("1900/9501")
    for opt, msg in (("structure=vf", "'vf' is not one of memtraffic, passcap, passboost"),
                     ("kernel_loss=l1", "kernel_loss='l1' is not one of hinge, band"),
                     ("pass_drop=auto", "'auto' is not one of the study's settings")):
        code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--method", "joint", "--check", "--fit-option",
                                opt], capsys)
        assert code == 2 and msg in err and "Traceback" not in err
    # the table method has its own loss: a library caller's pass_drop would be ignored there, so it is refused
    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.calibrate_spaan2026 import calibrate_spaan2026

    with pytest.raises(InputError, match="pass_drop need --method joint"):
        calibrate_spaan2026(options=JointOptions(method="table", pass_drop="auto/9501"))
    # the band: nothing inside 90 % of the tolerance, BAND_SLOPE per tolerance beyond it
    e = np.array([-1.5, -0.89, 0.0, 0.5, 0.9, 1.9])
    assert np.allclose(band_residual(e, 1.0), [-2.4, 0.0, 0.0, 0.0, 0.0, 4.0])


def test_structure_terms_in_the_problem_report_and_jacobian(spaan_trace):
    """Both structural terms at one parameter vector: the card carries the traffic scale (falling with the memory
    clock), the report's pass errors are those of the kernels run against the pass cap, and the Jacobian's kernel
    blocks (pass sums with one kernel's row replaced) agree with the residuals differenced directly."""
    from kdvfs.calibrate import read_table
    from kdvfs.calibrate_joint import _NC, _NK, JointOptions, JointResult, _Problem
    from kdvfs.calibrate_spaan2026 import joint_report

    rows = read_table(bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sw = read_pass_sweep(SWEEP, get_gpu("rtx3080ti"))
    opts = JointOptions(structure="memtraffic,passcap", kernel_loss="band", pass_drop="auto/9501")
    pb = _Problem(rows, sw, spaan_trace, get_gpu("rtx3080ti"), opts)
    n = len(rows)
    x = np.concatenate([np.full(_NC, 0.5), np.log(np.tile([1e-5, 5e-3, 2e-3, 1.0, 0.5], n)), np.full(4, 0.4)])
    xc, xk = pb.unpack(x)
    pb.model(xc, xk)
    st = pb.structure_of(x)
    assert set(st) == {"traffic_share_9251", "traffic_share_5001", "traffic_share_low", "pass_cap_w"}
    sc = pb.spec.mem_traffic_scale
    assert len(sc) == 5 and sc[-1] == 1.0 and all(a <= b for a, b in zip(sc, sc[1:]))
    res = JointResult(pb.spec, pb.params(xk), tuple(xc), 0.0, 0, 0.0, structure=tuple(st.items()))
    rep = joint_report(res, rows, sw, spaan_trace)
    assert rep["pass_level"]["structure"] == st
    s = list(sw.settings)
    c, m = np.array([q[0] for q in s]), np.array([q[1] for q in s])
    ev = evaluate(res.spec, res.params, c, m, cap_w=st["pass_cap_w"])
    r = pass_errors(ev.time_s, ev.energy_j, spaan_trace.repeats, pass_index(spaan_trace, "backward"), sw)
    assert rep["pass_level"]["median_abs_energy_err"] == r["median_abs_energy_err"]
    alone = evaluate(res.spec, res.params, c, m)
    assert not np.allclose(alone.time_s, ev.time_s)  # the pass cap lets some kernels run faster inside a pass

    J = pb.jac(x)
    f0 = pb.fun(x)
    for j in (_NC + 1, _NC + _NK * 10 + 3, len(x) - 1):  # a kernel's tc, another's uc, the pass cap
        x1 = x.copy()
        x1[j] += 1e-6
        assert np.allclose(J[:, j], (pb.fun(x1) - f0) / 1e-6, rtol=1e-6, atol=1e-6)
    assert np.all(pb.keep[[i for i, q in enumerate(s) if q == (AUTO, 9501)]] == 0) and pb.keep.sum() == len(s) - 1


def test_pass_boost_caps_the_core_requests_of_a_pass():
    from kdvfs.joint_structure import pass_requests

    c = np.array([AUTO, 2100, 1890, 1050])
    assert pass_requests(c, {}, 1900.0) is c
    assert pass_requests(c, {"pass_cap_w": 380.0}, 1900.0) is c
    assert np.allclose(pass_requests(c, {"pass_boost_share": 0.95}, 2000.0), [1900.0, 1900.0, 1890.0, 1050.0])


def test_best_setting_diagnosis_on_the_bundled_fit(spaan_trace):
    """The diagnosis agrees with the calibration report (39 of 46 best settings held by the table fit), and its
    model-free part gives the README's numbers: at (auto, 9501) the rest of the backward pass must run slower and save
    more than any kernel measured there."""
    from kdvfs.calibrate import read_table
    from kdvfs.diagnosis import diagnose, locked_memory_requirement

    rows = read_table(bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    d = diagnose(bundled_dir() / "gpt3xl-llmc-rtx3080ti.calibration.json", rows, spaan_trace)
    assert d["best_missed"] == 7 and sum(g["kernels"] for g in d["groups"].values()) == 46
    assert d["groups"]["core auto, memory 5001"]["kernels"] == 9
    lm = {(x["pass"], x["counted"]): x for x in locked_memory_requirement(rows, spaan_trace)}
    b = lm[("backward", "with_9251")]
    assert len(b["kernels"]) == 9 and round(b["time_share_pct"], 1) == 35.1
    assert round(b["rest_time_change_pct"], 2) == 1.36 and round(b["rest_energy_change_pct"], 2) == -14.08
    assert b["their_time_change_pct"]["max"] < 0 and b["their_energy_change_pct"]["min"] > b["rest_energy_change_pct"]
