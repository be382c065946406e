"""The RTX 3080 Ti model calibrated jointly on the study's per-kernel table and pass-level sweep (issue 11)."""

import csv
import json

import numpy as np
import pytest
from conftest import DATA, run_cli, write_csv_rows

from kdvfs.bundled import bundled_dir
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import KernelParams, evaluate
from kdvfs.passweep import main_region, pass_errors, pass_index, read_pass_sweep, restrict_settings, study_settings

SWEEP = bundled_dir() / "spaan2026_fig3_fig4_pass_level.csv"


def test_other_presets_model_outputs_unchanged():
    """The new card fields default to values that leave every other preset's model output as it was (values computed
    before issue 11's model changes; the H200's recomputed with its session-7 refit, whose constants changed)."""
    ref = json.loads((DATA / "model_outputs_other_presets.json").read_text())
    p = KernelParams(("a", "b", "c"), np.array([1e-5, 2e-5, 1e-4]), np.array([1e-3, 1e-4, 5e-3]),
                     np.array([2e-4, 1e-3, 1e-3]), np.array([1.0, 0.5, 0.9]), np.array([0.8, 1.0, 0.5]))
    for name, d in ref.items():
        st = d["settings"]
        ev = evaluate(get_gpu(name), p, np.array([s[0] for s in st]), np.array([s[1] for s in st]))
        assert np.allclose(ev.time_s, d["time_s"], rtol=1e-9, atol=0), name
        assert np.allclose(ev.power_w, d["power_w"], rtol=1e-9, atol=0), name


def test_405_quirk_runs_as_405_420(spaan_trace):
    """The study measured (405, core > 420 or auto) exactly as (405, 420)."""
    g = get_gpu("rtx3080ti")
    from kdvfs.bundled import model_params

    p = model_params(spaan_trace, g)
    ev = evaluate(g, p, np.array([420, 630, 2100, AUTO]), np.array([405, 405, 405, 405]))
    assert np.allclose(ev.time_s[:, 1:], ev.time_s[:, :1]) and np.allclose(ev.power_w[:, 1:], ev.power_w[:, :1])
    assert np.all(ev.mem_mhz == 405)


def test_bundled_profile_has_every_study_setting_and_its_pass_level_errors(spaan_trace, spaan_profile):
    """The bundled profile (table method) against the study's pass-level sweep, as the calibration stored it. The
    issue's targets (median ≤ 1.5, worst ≤ 5 points) are not met: this pins what the fit reaches (validation README)."""
    prof = restrict_settings(spaan_profile.for_trace(spaan_trace), "study")
    assert len(prof.settings) == 66
    sw = read_pass_sweep(SWEEP, get_gpu("rtx3080ti"))
    r = pass_errors(prof.time_s, prof.energy_j, spaan_trace.repeats, pass_index(spaan_trace, "backward"), sw)
    stored = json.loads((bundled_dir() / "gpt3xl-llmc-rtx3080ti.calibration.json").read_text())["pass_level"]
    for k in ("median_abs_time_err", "median_abs_energy_err", "worst_main_time_err", "worst_main_energy_err"):
        assert r[k] == pytest.approx(stored[k], abs=0.01)  # the profile file keeps 7 digits
    assert r["median_abs_time_err"] <= 6.95 and r["median_abs_energy_err"] <= 10.3
    assert r["worst_main_time_err"] <= 11.95 and r["worst_main_energy_err"] <= 20.1
    assert main_region(sw.settings).sum() == 36


def test_calibration_json_matches_preset_and_profile(spaan_trace, spaan_profile):
    """The bundled profile, its calibration JSON and the catalog preset are one fit."""
    from kdvfs.bundled import model_params
    from kdvfs.calibrate_joint import card_from_vector
    from kdvfs.calibrate_spaan2026 import _preset_matches

    doc = json.loads((bundled_dir() / "gpt3xl-llmc-rtx3080ti.calibration.json").read_text())
    spec = card_from_vector(get_gpu("rtx3080ti"), np.array(list(doc["card_vector"].values())))
    assert _preset_matches(spec)
    g = get_gpu("rtx3080ti")
    p = model_params(spaan_trace, g)
    st = study_settings()
    ev = evaluate(g, p, np.array([s[0] for s in st]), np.array([s[1] for s in st]))
    prof = spaan_profile.restrict(st)
    assert np.allclose(prof.time_s, ev.time_s, rtol=1e-5) and np.allclose(prof.power_w, ev.power_w, rtol=1e-5)


def _sweep_rows():
    with SWEEP.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows[:-1], r"misses 1 of the 132 rows, e\.g\. backward at core auto / memory auto MHz"),
    (lambda rows: [dict(rows[0], energy_change_pct="nan")] + rows[1:], r"line 2: time/energy change .* must be finite"),
    (lambda rows: [dict(rows[0], core_mhz="2205")] + rows[1:], r"line 2: core clock 2205 MHz is not one rtx3080ti has"),
    (lambda rows: [dict(rows[0], mem_mhz="7000")] + rows[1:], r"line 2: memory clock 7000 MHz is not one rtx3080ti has"),
    (lambda rows: rows + [rows[0]], r"forward at 210/405 MHz appears twice"),
    (lambda rows: [dict(rows[0], core_mhz="225")] + rows[1:], r"setting 225/405 MHz is not one of the study's 66"),
])
def test_bad_pass_sweeps_are_refused(tmp_path, edit, message):
    p = write_csv_rows(tmp_path / "s.csv", edit(_sweep_rows()))
    with pytest.raises(InputError, match=message):
        read_pass_sweep(p, get_gpu("rtx3080ti"))


def test_calibrate_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = write_csv_rows(tmp_path / "s.csv", _sweep_rows()[:-3])
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--sweep", str(bad), "--check"], capsys)
    assert code == 2 and "misses 3 of the 132 rows" in err and "Traceback" not in err
    with (bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows[3]["energy_auto_j"] = "nan"
    t = write_csv_rows(tmp_path / "t.csv", rows)
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--table", str(t), "--check"], capsys)
    assert code == 2 and "kernel 3 (Permute) has e_auto = nan" in err
    rows[3]["energy_auto_j"] = "0.4436"
    rows[5]["best_core_mhz"] = "2205"
    code, _, err = run_cli(["profile", "calibrate", "spaan2026", "--table", str(write_csv_rows(tmp_path / "t.csv", rows)),
                            "--check"], capsys)
    assert code == 2 and "best setting 2205/9501 MHz is not a clock pair rtx3080ti has" in err
    code, _, err = run_cli(["profile", "calibrate", "nope2030"], capsys)
    assert code == 2 and "unknown study 'nope2030'" in err


def test_calibration_writes_the_same_bytes_twice(tmp_path, spaan_trace):
    """A short fit (a few iterations) run twice from scratch gives byte-identical profile and calibration JSON (the
    full fit's two runs are compared in validation/rtx3080ti-calibration/README.md)."""
    from kdvfs.calibrate import read_table
    from kdvfs.calibrate_joint import JointOptions, calibrate_joint
    from kdvfs.calibrate_spaan2026 import joint_report, write_outputs

    rows = read_table(bundled_dir() / "spaan2026_gpt3xl_rtx3080ti_kernels.csv")
    sw = read_pass_sweep(SWEEP, get_gpu("rtx3080ti"))
    opts = JointOptions(max_nfev=3, prefit_nfev=2, polish_starts=0)
    out = []
    for i in range(2):
        res = calibrate_joint(rows, sw, spaan_trace, options=opts)
        files = write_outputs(res, joint_report(res, rows, sw, spaan_trace), spaan_trace, tmp_path / str(i))
        out.append([f.read_bytes() for f in files])
    assert out[0] == out[1]


def test_settings_study_on_the_verbs(capsys, tmp_path):
    from kdvfs.schedule import load_schedule

    code, _, _ = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "--settings", "study", "-o",
                          str(tmp_path / "s.json")], capsys)
    assert code == 0
    s = load_schedule(tmp_path / "s.json")
    assert set(zip(s.core_mhz.tolist(), s.mem_mhz.tolist())) <= set(study_settings())
    code, _, _ = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "-o", str(tmp_path / "a.json")], capsys)
    a = load_schedule(tmp_path / "a.json")
    assert not set(zip(a.core_mhz.tolist(), a.mem_mhz.tolist())) <= set(study_settings())  # default: the full grid
    code, o, _ = run_cli(["frontier", "--trace", "gpt3xl-llmc-rtx3080ti", "--settings", "study", "--slack-max", "2",
                          "--json"], capsys)
    assert code == 0 and len(json.loads(o)) == 3
    code, _, err = run_cli(["optimize", "--trace", "gpt3xl-torch-h200-bf16", "--settings", "study"], capsys)
    assert code == 2 and "lacks" in err and "RTX 3080 Ti clocks" in err and "Traceback" not in err


def test_calibration_builds_its_profile_once(tmp_path, monkeypatch):
    """``calibrate_spaan2026`` reproduces Table 2 on the fitted profile and writes that same profile: one build (it
    built the 66-setting profile twice), and the file written is the profile Table 2 was computed on."""
    import kdvfs.profile as profile_mod
    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.calibrate_spaan2026 import calibrate_spaan2026
    from kdvfs.reproduce import reproduce_spaan2026

    built = []
    real = profile_mod.build_profile

    def counting(*a, **kw):
        built.append(real(*a, **kw))
        return built[-1]

    monkeypatch.setattr(profile_mod, "build_profile", counting)
    rep = calibrate_spaan2026(out_dir=tmp_path, options=JointOptions(method="joint", max_nfev=3, prefit_nfev=2,
                                                                     polish_starts=0))
    assert len(built) == 1
    written = profile_mod.load_profile(next(p for p in rep["written"] if p.endswith(".profile.csv.gz")))
    assert reproduce_spaan2026(written) == rep["table2"]
