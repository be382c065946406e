"""The passes as mixed steps under the card's power limiter (issue 11, session 10; ``kdvfs.limiter_pass``)."""

from dataclasses import replace

import numpy as np
import pytest

from kdvfs.bundled import bundled_dir
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, RTX3080TI
from kdvfs.limiter import CeilingTables, steady_state
from kdvfs.limiter_pass import at_ceilings, replaced_sums, solve_passes
from kdvfs.model import KernelParams, evaluate
from kdvfs.passweep import pass_index, study_settings

SETTINGS = study_settings()
C = np.array([s[0] for s in SETTINGS])
M = np.array([s[1] for s in SETTINGS])


@pytest.fixture(scope="module")
def bundled(spaan_trace):
    """The bundled (table-method) kernels of the study's trace and the forward/backward invocation weights."""
    from kdvfs.bundled import model_params

    pi = pass_index(spaan_trace)
    w = np.stack([spaan_trace.repeats * (pi == k) for k in range(2)]).astype(float)
    return model_params(spaan_trace, RTX3080TI), w


def test_steady_state_agrees_with_the_limiters_own_on_clock_bins(bundled):
    """Continuous f* against ``kdvfs.limiter.steady_state`` on the card's bins: the same ceiling to the bins' dithering
    (0.1 MHz) and pass sums to 1e-4; the cap binds only at the top core requests, and there the pass runs faster than
    its kernels alone summed (the memory-bound kernels' unused power buys clock)."""
    p, w = bundled
    lim = solve_passes(RTX3080TI, p, C, M, w)
    bind = np.flatnonzero(lim.limited.any(0))
    assert len(bind) >= 4 and all(C[s] in (1890, 2100, AUTO) for s in bind)
    alone = evaluate(RTX3080TI, p, C, M)
    for s in bind:
        tab = CeilingTables.from_params(RTX3080TI, p, [SETTINGS[s]])
        for k in range(2):
            ss = steady_state(tab, w[k][:, None], RTX3080TI.cap_w)
            assert abs(ss.ceiling_mhz - lim.ceiling_mhz[k, s]) < 0.1
            assert ss.time_s == pytest.approx(w[k] @ lim.time_s[:, s], rel=1e-4)
            assert ss.energy_j == pytest.approx(w[k] @ lim.energy_j[:, s], rel=1e-4)
            # the pass's average power is the cap; it runs faster than its kernels alone
            assert (w[k] @ lim.energy_j[:, s]) / (w[k] @ lim.time_s[:, s]) == pytest.approx(RTX3080TI.cap_w, rel=1e-9)
            assert w[k] @ lim.time_s[:, s] < w[k] @ alone.time_s[:, s]
    # unlimited settings: every kernel exactly as alone without a cap, at its requested clock
    free = ~lim.limited.any(0)
    ev = evaluate(RTX3080TI, p, C[free], M[free], cap_w=float("inf"))
    assert np.array_equal(lim.time_s[:, free], ev.time_s) and np.array_equal(lim.energy_j[:, free], ev.energy_j)


def test_one_kernel_type_is_isolated_throttling():
    """A pass of one kernel type is the isolated case: f* is the clock ``evaluate`` throttles that kernel to alone."""
    p = KernelParams(("g",), np.array([1e-6]), np.array([5e-3]), np.array([1e-3]), np.array([1.3]), np.array([0.5]))
    c, m = np.array([AUTO, 2100, 1260]), np.array([AUTO, 9501, 9501])
    lim = solve_passes(RTX3080TI, p, c, m, np.array([[3.0], [0.0]]))
    alone = evaluate(RTX3080TI, p, c, m)
    assert lim.limited[0].tolist() == alone.throttled[0].tolist() == [True, True, False]
    assert np.allclose(lim.ceiling_mhz[0, :2], alone.core_mhz[0, :2], rtol=0, atol=1e-6)
    assert np.allclose(lim.time_s, alone.time_s, rtol=1e-9) and np.allclose(lim.energy_j, alone.energy_j, rtol=1e-9)
    # a higher cap held on average: less throttling, never above the request
    hi = solve_passes(RTX3080TI, p, c, m, np.array([[3.0], [0.0]]), cap_w=RTX3080TI.cap_w + 20)
    assert np.all(hi.ceiling_mhz[0, :2] > lim.ceiling_mhz[0, :2]) and np.all(hi.ceiling_mhz[0, :2] <= RTX3080TI.boost_core_mhz)


def test_locked_request_below_the_ceiling_keeps_its_clock():
    """With locked clocks the limiter can only lower the core clock: a pass whose request is under f* runs it."""
    p = KernelParams(("g", "e"), np.array([1e-6, 1e-6]), np.array([5e-3, 1e-5]), np.array([1e-3, 2e-3]),
                     np.array([1.3, 0.4]), np.array([0.5, 1.0]))
    w = np.array([[1.0, 0.5], [0.0, 0.0]])
    c, m = np.array([AUTO, 1050]), np.array([AUTO, AUTO])
    lim = solve_passes(RTX3080TI, p, c, m, w)
    assert lim.limited[0].tolist() == [True, False] and lim.ceiling_mhz[0, 1] == 1050
    alone = evaluate(RTX3080TI, p, c, m)
    assert alone.core_mhz[0, 0] < lim.ceiling_mhz[0, 0] < RTX3080TI.boost_core_mhz  # the GEMM: faster in the mix
    ev = evaluate(RTX3080TI, p, c[1:], m[1:], cap_w=float("inf"))
    assert np.array_equal(lim.time_s[:, 1], ev.time_s[:, 0])


def test_replaced_sums_are_the_first_order_answer_of_the_ceiling(bundled):
    """One kernel's row moved at the held ceiling, the ceiling answering to first order: against solving the pass
    again with only that kernel moved, the sums agree to second order in the step."""
    p, w = bundled
    lim = solve_passes(RTX3080TI, p, C, M, w)
    for i in (10, 27):  # a forward GEMM, a backward GEMM
        uc = p.uc.copy()
        uc[i] *= 1 + 1e-5
        p1 = replace(p, uc=uc)
        tf, ef = at_ceilings(RTX3080TI, p1, C, M, w, lim)
        assert np.array_equal(np.delete(tf, i, 0), np.delete(lim.time_s, i, 0))  # the others at the held ceiling
        rt, re = replaced_sums(lim, w, tf - lim.time_s, ef - lim.energy_j)
        again = solve_passes(RTX3080TI, p1, C, M, w)
        pt, pe = w @ again.time_s, w @ again.energy_j
        assert np.allclose(rt[i], pt, rtol=1e-9) and np.allclose(re[i], pe, rtol=1e-9)
        assert not np.allclose(rt[i], w @ tf, rtol=1e-12)  # … and the ceiling did answer


def test_limiter_structure_in_the_joint_problem(spaan_trace):
    """The joint fit's Jacobian under the limiter (kernel blocks through ``replaced_sums``, the held cap's column)
    agrees with its residuals differenced directly; the report evaluates the passes the same way."""
    from kdvfs.calibrate import read_table
    from kdvfs.calibrate_joint import _NC, _NK, JointOptions, JointResult, _Problem
    from kdvfs.calibrate_spaan2026 import joint_report
    from kdvfs.passweep import read_pass_sweep

    rows = read_table(bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sw = read_pass_sweep(bundled_dir() / "spaan2026_fig3_fig4_pass_level.csv", RTX3080TI)
    pb = _Problem(rows, sw, spaan_trace, RTX3080TI, JointOptions(structure="limitcap", kernel_loss="band"))
    n = len(rows)
    x = np.concatenate([np.full(_NC, 0.5), np.log(np.tile([1e-5, 5e-3, 2e-3, 1.0, 0.5], n)), [0.7]])
    J = pb.jac(x)
    f0 = pb.fun(x)
    assert pb.plim is not None and pb.plim.limited.any()
    for j in (_NC + 1, _NC + _NK * 10 + 1, _NC + _NK * 27 + 3, len(x) - 1, 0):
        x1 = x.copy()
        x1[j] += 1e-6
        assert np.allclose(J[:, j], (pb.fun(x1) - f0) / 1e-6, rtol=1e-4, atol=1e-4)
    st = pb.structure_of(x)
    assert st["pass_limiter"] == 1.0 and 300 <= st["limit_cap_w"] <= 350
    xc, xk = pb.unpack(x)
    pb.model(xc, xk)
    res = JointResult(pb.spec, pb.params(xk), tuple(xc), 0.0, 0, 0.0, structure=tuple(st.items()))
    rep = joint_report(res, rows, sw, spaan_trace)
    lim = solve_passes(pb.spec, res.params, C, M, pb.W, st["limit_cap_w"])
    assert rep["pass_level"]["pass_limiter"]["cap_w"] == st["limit_cap_w"]
    assert len(rep["pass_level"]["pass_limiter"]["ceilings_mhz"]) == int(lim.limited.sum())
    ia = SETTINGS.index((AUTO, AUTO))
    pt = pb.W @ lim.time_s
    assert rep["passes"][0]["model_time_change_pct"] == pytest.approx(100 * (pt[0, 0] / pt[0, ia] - 1), rel=1e-12)


def test_bad_limiter_options_are_refused():
    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.calibrate_spaan2026 import calibrate_spaan2026
    from kdvfs.joint_structure import parse_structure

    assert parse_structure("memtraffic,limiter") == ("memtraffic", "limiter")
    with pytest.raises(InputError, match="passcap and the limiter are two models"):
        parse_structure("limiter,passcap")
    with pytest.raises(InputError, match="limitcap and limitcapwide fit the same held cap"):
        parse_structure("limitcap,limitcapwide")
    with pytest.raises(InputError, match="limitcap acts on the pass-level sweep.*limiter \\(limiter changes only the check\\)"):
        calibrate_spaan2026(options=JointOptions(method="table", structure="limitcap"))
    with pytest.raises(InputError, match="weights must have shape"):
        solve_passes(RTX3080TI, KernelParams(("a",), *(np.ones(1),) * 5), C, M, np.ones((2, 1)))


def test_pass_table2_picks_the_best_pass_settings_under_the_limiter(spaan_trace):
    """Table 2's pass rows from the passes under the limiter: strict waste never slower than auto, and no pair of
    settings beats the global picks (brute force over the sums ``solve_passes`` gives)."""
    from kdvfs.bundled import model_params
    from kdvfs.limiter_pass import pass_table2

    p = model_params(spaan_trace, RTX3080TI)
    rows = pass_table2(RTX3080TI, p, spaan_trace, SETTINGS)
    assert [(r["scope"], r["objective"]) for r in rows] == [("local", "EDP"), ("local", "strict waste"),
                                                              ("global", "EDP"), ("global", "strict waste")]
    names = [spaan_trace.segments[i].pass_name for i in spaan_trace.kernel_segment]
    w = np.stack([spaan_trace.repeats * np.array([n == q for n in names]) for q in ("forward", "backward")]).astype(float)
    lim = solve_passes(RTX3080TI, p, C, M, w)
    gt, ge = w @ lim.time_s, w @ lim.energy_j
    ia = SETTINGS.index((AUTO, AUTO))
    t = 100 * ((gt[0][:, None] + gt[1][None, :]) / gt[:, ia].sum() - 1)
    e = 100 * ((ge[0][:, None] + ge[1][None, :]) / ge[:, ia].sum() - 1)
    waste = rows[3]
    assert waste["time_change_pct"] <= 1e-9 and waste["energy_change_pct"] == pytest.approx(e[t <= 1e-12].min(), abs=1e-9)
    edp = (1 + t / 100) * (1 + e / 100)
    assert (1 + rows[2]["time_change_pct"] / 100) * (1 + rows[2]["energy_change_pct"] / 100) == pytest.approx(edp.min())
    assert rows[1]["time_change_pct"] <= 1e-9 and rows[1]["energy_change_pct"] >= waste["energy_change_pct"] - 1e-9
