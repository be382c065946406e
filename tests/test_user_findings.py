"""What a new user and a hostile tester found in session 5, each pinned so it stays fixed."""

import csv
import dataclasses

import numpy as np
import pytest
from conftest import run_cli, write_csv_rows

from kdvfs.bundled import bundled_dir
from kdvfs.gpus import get_gpu


@pytest.mark.parametrize("opt, rule", [
    ("emin_tol_pct=0", "emin_tol_pct must be a finite number > 0"),
    ("hull_weight=inf", "hull_weight must be a finite number ≥ 0"),
    ("pass_weight=nan", "pass_weight must be a finite number ≥ 0"),
    ("pass_weight=-1", "pass_weight must be a finite number ≥ 0"),
    ("max_nfev=0", "max_nfev must be a finite number ≥ 1"),
    ("polish_starts=-3", "polish_starts must be a finite number ≥ 0"),
])
def test_fit_options_are_checked_before_the_fit(capsys, opt, rule):
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--method", "joint", "--check", "--fit-option", opt],
                           capsys)
    assert code == 2 and rule in err and "Traceback" not in err


def test_calibrate_refuses_options_the_table_method_lacks_and_a_file_as_out(capsys, tmp_path):
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--fit-option", "pass_weight=1"], capsys)
    assert code == 2 and "the table method has none" in err
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--out", str(f)], capsys)
    assert code == 2 and "is a file; give a folder" in err
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--method", "joint", "--check", "--fit-option",
                            f"start={tmp_path / 'nope.json'}"], capsys)
    assert code == 2 and "cannot use it as a start" in err


def test_calibrate_refuses_a_table_whose_rows_are_not_the_traces_kernels(capsys, tmp_path):
    with (bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows[2]["name"], rows[2]["repeat"] = "Softmax", "1"  # not the trace's kernel 2 (a GEMM, 24 repeats)
    t = write_csv_rows(tmp_path / "t.csv", rows)
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--table", str(t), "--check"], capsys)
    assert code == 2 and "row 2 is kernel 2 (Softmax, repeat 1) but the trace's kernel 2 is GEMM (repeat 24)" in err
    rows[2]["name"], rows[2]["repeat"] = "GEMM", "24"
    rows[1]["time_min_s"] = "0.02"  # above its own maximum
    write_csv_rows(t, rows)
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--table", str(t), "--check"], capsys)
    assert code == 2 and "the extremes must bracket the auto value" in err


def test_optimize_refuses_a_gpu_the_profile_is_not_for(capsys):
    code, _, err = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "h200"], capsys)
    assert code == 2 and "profile was made for GPU 'rtx3080ti', but --gpu is 'h200'" in err


def test_whatif_on_a_trace_without_a_bundled_profile(capsys, tmp_path):
    code, _, err = run_cli(["trace", "import", "validation/h200/steps/gpt2-medium.kineto.json.gz", "-o",
                            str(tmp_path / "t.json")], capsys)
    assert code == 0, err
    args = ["whatif", "--trace", str(tmp_path / "t.json"), "--preset-latency-only", "--policy", "auto",
            "--mechanism", "sync", "--json"]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "has no bundled profile: give --gpu NAME" in err
    code, out, err = run_cli(args + ["--gpu", "h200"], capsys)
    assert code == 0, err


def test_switch_latency_equal_to_the_cards_gives_the_cards_numbers(capsys):
    import json

    total = get_gpu("rtx3080ti").switch.total_s
    code, a, _ = run_cli(["compare", "--trace", "gpt3xl-llmc-rtx3080ti", "--json"], capsys)
    code2, b, _ = run_cli(["compare", "--trace", "gpt3xl-llmc-rtx3080ti", "--switch-latency", repr(total), "--json"],
                          capsys)
    assert code == code2 == 0
    rows = lambda d: d if isinstance(d, list) else d["rows"]  # noqa: E731
    assert [r["energy_change_pct"] for r in rows(json.loads(a))] == \
        pytest.approx([r["energy_change_pct"] for r in rows(json.loads(b))], abs=1e-9)


def test_switch_aware_is_never_worse_than_pass_level_under_the_same_switch_model(spaan_problem):
    from kdvfs.optimize.policies import policy_schedule
    from kdvfs.optimize.switchaware import _evaluate_sidx
    from kdvfs.switching import SwitchCosts

    pb = spaan_problem
    sw = dataclasses.replace(get_gpu("rtx3080ti").switch, spread=0.0)
    costs = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    for slack in (0.0, 1.0):
        p = policy_schedule(pb, "pass", slack, sw, "sync", costs)
        s = policy_schedule(pb, "switch-aware", slack, sw, "sync", costs)
        ep = _evaluate_sidx(pb, pb.instance_setting_index(p), sw, "sync", costs)
        es = _evaluate_sidx(pb, pb.instance_setting_index(s), sw, "sync", costs)
        assert es["time_s"] <= pb.budget(slack) * (1 + 1e-12)
        assert es["energy_j"] <= ep["energy_j"] * (1 + 1e-12)


def test_settings_study_on_a_model_built_rtx_profile(capsys, tmp_path):
    p = tmp_path / "p.csv"
    code, _, _ = run_cli(["profile", "build", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "rtx3080ti", "-o", str(p)],
                         capsys)
    assert code == 0
    from kdvfs.passweep import restrict_settings, study_settings
    from kdvfs.profile import load_profile

    prof = load_profile(p)
    assert (630, 405) not in prof.settings
    r = restrict_settings(prof, "study")
    assert len(r.settings) == 66 and set(r.settings) == set(study_settings())
    i, j = r.setting_index(630, 405), r.setting_index(420, 405)
    assert np.array_equal(r.time_s[:, i], r.time_s[:, j])  # the card runs (630, 405) as (420, 405)


def test_validate_steps_refuses_a_gap_power_that_is_not_watts(capsys):
    for v in ("nan", "-5"):
        code, _, err = run_cli(["validate-steps", "validation/h200/steps", "--gpu", "h200", "--gap-power", v], capsys)
        assert code == 2 and "--gap-power" in err and "positive number of watts" in err


def test_crossval_refuses_a_card_without_the_sweeps_memory_clocks(capsys):
    code, _, err = run_cli(["profile", "crossval", "validation/synthetic/sweep-seed0.csv", "--gpu", "rtx3080ti"], capsys)
    assert code == 2 and "memory clock(s) 877 MHz that rtx3080ti lacks" in err


def test_no_fitting_message_before_an_input_error(capsys, tmp_path):
    bad = tmp_path / "s.csv"
    bad.write_text((bundled_dir() / "spaan2026_fig3_fig4_pass_level.csv").read_text().splitlines()[0] + "\n")
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--sweep", str(bad), "--check"], capsys)
    assert code == 2 and "calibrating" not in err


@pytest.mark.parametrize("arg", [["--window", "nan"], ["--window", "0"], ["--warmup", "-1"]])
def test_characterize_refuses_windows_that_are_not_seconds(capsys, tmp_path, arg):
    code, _, err = run_cli(["characterize", "--backend", "fake", "-o", str(tmp_path / "c.json"), *arg], capsys)
    assert code == 2 and arg[0] in err and "number of seconds" in err
