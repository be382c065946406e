"""The thermal gap model (kdvfs.thermal): the idle card's power against its temperature, and the operating point."""

from __future__ import annotations

import pytest

from kdvfs.errors import InputError
from kdvfs.thermal import ThermalModel, fit_gap_line, fit_operating_point, thermal_from_params


def _th(**kw) -> ThermalModel:
    base = dict(gap_ref_w=120.0, ref_c=40.0, gap_w_per_c=1.0, ambient_c=30.0, c_per_w=0.03)
    return ThermalModel(**(base | kw))


def test_gap_power_is_a_line_in_temperature():
    th = _th()
    assert th.gap_power_w(40.0) == pytest.approx(120.0)
    assert th.gap_power_w(50.0) == pytest.approx(130.0)
    assert th.operating_c(600.0) == pytest.approx(48.0)


def test_solve_gap_is_the_fixed_point_of_the_operating_point():
    th = _th()
    e_j, t_s, g_s = 6.0, 0.01, 0.02  # kernels at 600 W for 10 ms, then 20 ms idle
    temp_c, gap_w = th.solve_gap(e_j, t_s, g_s)
    # the step's average power with the gaps at that power gives back the same temperature
    avg_w = (e_j + g_s * gap_w) / (t_s + g_s)
    assert th.operating_c(avg_w) == pytest.approx(temp_c, rel=1e-12)
    assert gap_w == pytest.approx(th.gap_power_w(temp_c), rel=1e-12)
    # no gap: the kernels' power alone sets the temperature
    assert th.solve_gap(e_j, t_s, 0.0)[0] == pytest.approx(th.operating_c(600.0))


def test_a_flat_gap_line_is_the_old_gap_power():
    # slope 0: every temperature gives the reference power (the session-5 median)
    th = _th(gap_w_per_c=0.0)
    assert th.solve_gap(6.0, 0.01, 0.05)[1] == pytest.approx(120.0)


def test_fit_gap_line_recovers_a_line_and_refuses_a_flat_spread():
    rows = [{"power_w": 100.0 + 0.8 * (t - 30.0), "temperature_c": t} for t in (30.0, 35.0, 42.0, 50.0)]
    g0, ref, k = fit_gap_line(rows)
    assert k == pytest.approx(0.8)
    assert g0 == pytest.approx(100.0 + 0.8 * (ref - 30.0))
    cold = [{"power_w": p, "temperature_c": 33.0} for p in (116.0, 117.0, 118.0)]
    assert fit_gap_line(cold) == pytest.approx((117.0, 33.0, 0.0))


def test_fit_operating_point():
    rows = [{"power_w": p, "temperature_c": 30.0 + 0.03 * p} for p in (120.0, 300.0, 690.0)]
    amb, r = fit_operating_point(rows)
    assert amb == pytest.approx(30.0) and r == pytest.approx(0.03)


def test_bad_input_names_the_thing_and_the_fix():
    with pytest.raises(InputError, match="temperature_c.*kdvfs characterize"):
        fit_gap_line([{"power_w": 117.0}])
    with pytest.raises(InputError, match="gap_w_per_c.*calibrate-h200"):
        _th(gap_w_per_c=-1.0)
    with pytest.raises(InputError, match="c_per_w must be a finite number"):
        _th(c_per_w=float("nan"))
    with pytest.raises(InputError, match=r"params\['thermal'\].*calibrate-h200"):
        thermal_from_params({"thermal": {"gap_ref_w": 1.0}}, "fit.json")
    assert thermal_from_params({"gap_power_w": 117.0}) is None
    with pytest.raises(InputError, match="no stable temperature"):
        _th(c_per_w=2.0, gap_w_per_c=1.0).solve_gap(0.1, 0.001, 1.0)


def test_step_check_prices_gaps_at_the_operating_temperature(tmp_path):
    """A flat gap line is the old check to the last digit; a slope adds the gaps' warm share and reports the
    temperature the step's own predicted power holds."""
    import json
    import shutil
    from pathlib import Path

    from kdvfs.gpus import get_gpu
    from simulator.stepcheck import check_steps

    root = Path(__file__).resolve().parents[1] / "validation/h200/steps"
    st = [s for s in json.loads((root / "steps.json").read_text())["steps"] if s["model"] == "block-bf16"]
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "gpu": "NVIDIA H200", "steps": st}))
    shutil.copy(root / st[0]["trace"], tmp_path / st[0]["trace"])
    spec = get_gpu("h200")
    old = check_steps(tmp_path, spec, gap_power_w=120.0)["steps"][0]
    flat = check_steps(tmp_path, spec, gap_power_w=1.0, thermal=_th(gap_w_per_c=0.0))["steps"][0]
    assert flat["predicted"]["limiter_with_gaps"]["energy_j"] == pytest.approx(
        old["predicted"]["limiter_with_gaps"]["energy_j"], rel=1e-12)
    th = _th(gap_w_per_c=1.0)
    warm = check_steps(tmp_path, spec, gap_power_w=1.0, thermal=th)
    r = warm["steps"][0]["predicted"]
    temp_c, gap_w = r["thermal"]["operating_c"], r["thermal"]["gap_power_w"]
    assert gap_w == pytest.approx(th.gap_power_w(temp_c)) and gap_w > 120.0
    avg_w = r["limiter_with_gaps"]["energy_j"] / r["limiter_with_gaps"]["time_s"]
    assert th.operating_c(avg_w) == pytest.approx(temp_c, abs=0.1)
    assert warm["thermal"] == th.to_dict() and warm["judged_on"] == "limiter_with_gaps"


def test_zoo_rows_take_the_gap_power_of_their_temperature():
    """--gap-model thermal: each zoo entry carries the gap line's power at its recorded temperature; with the session-5
    gap entries alone (one temperature) the line is flat and every row takes the old median."""
    from pathlib import Path

    from kdvfs.calibrate_h200 import DEFAULT_DATA, gap_power, gap_thermal, load_rows, prepared_rows

    root = Path(__file__).resolve().parents[1]
    data = [root / p for p in DEFAULT_DATA]
    rows, warm_w, _, _ = prepared_rows(data, "thermal")
    k_rows, gaps, _, _ = load_rows(data)
    th = gap_thermal(k_rows, gaps)
    assert 0.3 < th.gap_w_per_c < 1.5 and 110 < th.gap_ref_w < 125  # two leases' gap entries, 32–38 °C
    hot = next(r for r in rows if r["name"] == "duty_gelu_bf16_32MiB_x20_gap50us")
    assert hot["gap_power_w"] == pytest.approx(th.gap_power_w(hot["temperature_c"]))
    assert warm_w > th.gap_ref_w  # the zoo's kernels ran warmer than its gap entries
    old = [root / p for p in DEFAULT_DATA if "characterization11" not in p]
    rows8, gap8, _, _ = prepared_rows(old, "thermal")
    assert gap8 == pytest.approx(gap_power(load_rows(old)[1]))
    assert all(r.get("gap_power_w", gap8) == pytest.approx(gap8) for r in rows8)


def test_gap_model_is_checked_and_the_bundled_fit_has_its_thermal_line():
    import json
    from pathlib import Path

    from kdvfs.calibrate_h200 import DEFAULT_GAP_MODEL, run_h200_fit
    from kdvfs.gpus import get_gpu
    from kdvfs.thermal import thermal_for

    with pytest.raises(InputError, match="gap model 'warm' is not one of median, thermal"):
        run_h200_fit([], gap_model="warm")
    fit = json.loads((Path(__file__).resolve().parents[1] / "traces/h200.fit.json").read_text())
    assert fit["gap_model"] == DEFAULT_GAP_MODEL == "thermal"
    th = thermal_for(get_gpu("h200"))
    assert th is not None and th.to_dict() == pytest.approx(fit["params"]["thermal"])
    # the one number for uses without an operating point: the line at the zoo kernels' median temperature
    assert fit["params"]["gap_power_w"] == pytest.approx(th.gap_power_w(52.0))
