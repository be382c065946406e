"""What the session-7 hostile tester found in the new H200 commands (``characterize --set``, ``calibrate-h200
--check``), each fixed and kept fixed. The commands that found them are in ``validation/user-findings7b/README.md``.

Every bad input gives one line (``kdvfs: error: ...``) and exit 2, never a traceback; nothing measured or fitted is
written over by surprise."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import ROOT, run_cli

CHAR = ROOT / "validation/h200/characterization"
FIT = CHAR / "fit.json"
DATA7 = CHAR / "characterization7.json.gz"
FAST = ["--backend", "fake", "--window", "0.05", "--warmup", "0", "--no-steps"]


def _fit_with(tmp_path, **params):
    doc = json.loads(FIT.read_text())
    doc["params"].update(params)
    p = tmp_path / "fit.json"
    p.write_text(json.dumps(doc))
    return p


# ------------------------------------------------------------------------------------- calibrate-h200 --check -o
@pytest.mark.parametrize("target", ["fit", "data", "bundled"])
def test_check_never_writes_over_a_fit_or_a_measurement(tmp_path, capsys, monkeypatch, target):
    """``--check FIT -o FIT`` replaced the fit with the check's report; ``-o traces/h200.fit.json`` replaced the
    bundled fit, after which every command (``import kdvfs``) died with KeyError 'params'."""
    fit = tmp_path / "fit.json"
    shutil.copy(FIT, fit)
    data = tmp_path / "c7.json.gz"
    shutil.copy(DATA7, data)
    bundled = tmp_path / "bundled" / "h200.fit.json"
    bundled.parent.mkdir()
    shutil.copy(FIT, bundled)
    out = {"fit": fit, "data": data, "bundled": bundled}[target]
    before = out.read_bytes()
    code, _, err = run_cli(["calibrate-h200", "--check", str(fit), "--data", str(data), "-o", str(out)], capsys)
    assert code == 2 and "exists and is not a check report" in err and "new file name" in err
    assert out.read_bytes() == before
    ok = tmp_path / "report.json"  # a new file, then the same report again: both fine
    for _ in range(2):
        code, _, err = run_cli(["calibrate-h200", "--check", str(fit), "--data", str(data), "-o", str(ok)], capsys)
        assert code == 0, err
    assert json.loads(ok.read_text())["format"] == "kdvfs-h200-fit-check/1"


def test_check_writes_the_default_fit_path_only_to_refuse_it(tmp_path, capsys, monkeypatch):
    """``-o validation/h200/characterization/fit.json`` given explicitly was silently not written (it equalled the
    default); now the path is checked like any other: refused, the fit untouched."""
    monkeypatch.chdir(ROOT)
    before = FIT.read_bytes()
    code, _, err = run_cli(["calibrate-h200", "--check", str(FIT), "--data", str(DATA7), "-o",
                            "validation/h200/characterization/fit.json"], capsys)
    assert code == 2 and "is not a check report" in err
    assert FIT.read_bytes() == before


def test_fit_never_writes_over_a_characterisation_file(tmp_path, capsys):
    data = tmp_path / "c7.json.gz"
    shutil.copy(DATA7, data)
    before = data.read_bytes()
    code, _, err = run_cli(["calibrate-h200", "--data", str(data), "-o", str(data), "--no-bundle"], capsys)
    assert code == 2 and "is not a fit" in err and "kdvfs-characterization/1" in err
    assert data.read_bytes() == before


# ------------------------------------------------------------------------------------------ a fit that is not one
@pytest.mark.parametrize("change,needle", [
    ({"core_power_w": float("nan")}, "params['core_power_w'] must be a positive finite number, got nan"),
    ({"v_min": -0.5}, "params['v_min'] must be a positive finite number, got -0.5"),
    ({"cap_w": "700"}, "params['cap_w'] must be a positive finite number, got '700'"),
    ({"gap_power_w": -1}, "params['gap_power_w']"),
    ({"work_activity": {"base": float("inf")}}, "params['work_activity']['base']"),
    ({"peak_tflops_dtype": {"tensor16": 0}}, "params['peak_tflops_dtype']['tensor16']"),
])
def test_check_refuses_a_fit_with_bad_constants(tmp_path, capsys, change, needle):
    """A NaN constant gave NaN powers and exit 0; a negative one 140 W for a 690 W GEMM; a string or a missing
    constant a traceback."""
    code, out, err = run_cli(["calibrate-h200", "--check", str(_fit_with(tmp_path, **change)), "--data", str(DATA7)],
                             capsys)
    assert code == 2 and needle in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("doc,needle", [
    ({"format": "kdvfs-h200-fit/1"}, "'params' must be an object"),
    ({"format": "kdvfs-h200-fit/1", "params": [1, 2]}, "'params' must be an object"),
    ({"format": "kdvfs-characterization/1", "kernels": []}, "a characterisation file: give it with --data"),
    ({"format": "kdvfs-h200-fit-check/1"}, "the report of a check, not a fit"),
])
def test_check_names_what_was_given_as_the_fit(tmp_path, capsys, doc, needle):
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    code, _, err = run_cli(["calibrate-h200", "--check", str(p), "--data", str(DATA7)], capsys)
    assert code == 2 and needle in err and str(p) in err


def test_a_broken_bundled_fit_does_not_break_import(tmp_path, monkeypatch):
    """A bad ``traces/h200.fit.json`` made ``import kdvfs`` raise: no command ran, not even for other cards. Now the
    h200 preset refuses with the fix and the other presets work."""
    import kdvfs.bundled
    from kdvfs import gpus
    from kdvfs.errors import FormatError

    (tmp_path / gpus.H200_FIT_FILE).write_text(json.dumps({"format": "kdvfs-h200-fit-check/1"}))
    monkeypatch.setattr(kdvfs.bundled, "bundled_dir", lambda: tmp_path)
    monkeypatch.setattr(gpus, "_H200_FIT_PROBLEM", None)
    assert gpus._h200_fitted(gpus.H200_UNFITTED) is gpus.H200_UNFITTED
    with pytest.raises(FormatError, match="bundled fit .* is not usable .*git checkout traces/h200.fit.json"):
        gpus.get_gpu("h200")
    assert gpus.get_gpu("rtx3080ti").name == "rtx3080ti"


# ----------------------------------------------------------------------------------------------- characterize
@pytest.mark.parametrize("zoo_set", ["top-clock", "attention", "held-duty", "thermal", "warm-cool", "conv", "anchor", "tiny-grid"])
def test_fake_backend_runs_each_new_set(tmp_path, capsys, zoo_set):
    from hw_backend.characterize import ZOO_SETS

    out = tmp_path / "c.json"
    code, _, err = run_cli(["characterize", *FAST, "--set", zoo_set, "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in ZOO_SETS[zoo_set]()]


def test_resume_refuses_another_card_or_window(tmp_path, capsys):
    """A fake run given a real H200 file as -o 'resumed' it: the fake's entries were appended to the measurement and
    its idle reading replaced, exit 0."""
    real = tmp_path / "c7.json.gz"
    shutil.copy(DATA7, real)
    before = real.read_bytes()
    code, _, err = run_cli(["characterize", *FAST, "--set", "top-clock", "-o", str(real)], capsys)
    assert code == 2 and "holds a campaign with gpu 'NVIDIA H200'" in err and "new -o file" in err
    assert real.read_bytes() == before
    mine = tmp_path / "m.json"
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(mine)], capsys)[0] == 0
    code, _, err = run_cli(["characterize", *FAST[:2], "--window", "0.1", "--warmup", "0", "--no-steps", "--set",
                            "top-clock", "-o", str(mine)], capsys)
    assert code == 2 and "window_s 0.05" in err


def test_resume_with_nothing_new_leaves_the_file_alone(tmp_path, capsys):
    """Rerunning a finished campaign rewrote its ``idle_after`` with the new session's reading."""
    out = tmp_path / "c.json"
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(out)], capsys)[0] == 0
    doc = json.loads(out.read_text())
    doc["idle_after"] = {"power_w": 600.0, "clocks_mhz": [1875, 3201]}  # as a real campaign ends
    out.write_text(json.dumps(doc))
    before = out.read_bytes()
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(out)], capsys)[0] == 0
    assert out.read_bytes() == before


def test_gz_output_is_gzip(tmp_path, capsys):
    """``-o x.json.gz`` wrote plain JSON under a .gz name (``gzip -d`` refused it)."""
    out = tmp_path / "c.json.gz"
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(out)], capsys)[0] == 0
    assert json.loads(gzip.decompress(out.read_bytes()))["format"] == "kdvfs-characterization/1"


@pytest.mark.parametrize("args,needle", [
    (["--step-scale", "0"], "--step-scale 0.0 must be a positive number"),  # was: ValueError min() of empty
    (["--step-scale", "nan"], "--step-scale nan"),
    (["--only", ","], "--only ',' names no kernel"),  # was: nothing measured, the old file's table, exit 0
])
def test_characterize_bad_options(tmp_path, capsys, args, needle):
    code, _, err = run_cli(["characterize", "--backend", "fake", "--window", "0.05", "--warmup", "0", "--set",
                            "held-duty", "-o", str(tmp_path / "c.json"), *args], capsys)
    assert code == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()


def test_characterize_checks_its_output_before_measuring(tmp_path, capsys):
    """A directory as -o was reported as 'cannot read characterisation file'; a missing folder failed only after
    the first kernel's window (its measurement lost). Now: refused at once, or the folder made."""
    code, _, err = run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(tmp_path)], capsys)
    assert code == 2 and "characterisation output" in err and "is a directory" in err
    out = tmp_path / "new" / "c.json"
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(out)], capsys)[0] == 0
    assert out.is_file()


# --------------------------------------------------------------------------------------------- validate-steps
@pytest.mark.parametrize("opt,target", [("-o", "steps.json"), ("-o", "m.kineto.json.gz"), ("--plot", "steps.json")])
def test_validate_steps_never_writes_over_its_inputs(tmp_path, capsys, opt, target):
    """Now that validate-steps takes the steps.json path, ``validate-steps DIR/steps.json -o DIR/steps.json``
    replaced the measurement with the report (exit 0); ``-o`` on a recorded trace replaced the trace."""
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "gpu": "NVIDIA H200", "steps": [
        {"model": "m", "trace": "m.kineto.json.gz", "step_time_s": 0.1, "step_energy_j": 50.0}]}))
    (tmp_path / "m.kineto.json.gz").write_bytes(b"recorded")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, _, err = run_cli(["validate-steps", str(tmp_path / "steps.json"), "--gpu", "h200", opt,
                            str(tmp_path / target)], capsys)
    assert code == 2 and "is one of the measurements validate-steps reads" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_check_of_a_fake_duty_campaign_says_why_nothing_can_be_predicted(tmp_path, capsys):
    """A fake campaign of a duty set ('characterize --backend fake --set held-duty') was refused by --check with
    'holds no measured zoo kernel; run `kdvfs characterize` first', though it had just been run."""
    out = tmp_path / "c.json"
    assert run_cli(["characterize", *FAST, "--set", "held-duty", "-o", str(out)], capsys)[0] == 0
    code, _, err = run_cli(["calibrate-h200", "--check", str(FIT), "--data", str(out)], capsys)
    assert code == 2 and "8 duty entries" in err and "'burst_time_s'" in err


# ------------------------------------------------------------------------------------------------ work estimates
def test_negative_sizes_are_no_work():
    """A Kineto trace whose 'Input Dims' or launch grid held negative sizes (corrupt, hand-edited) imported with exit 0
    and 155 of 454 kernels at negative FLOPs or bytes (the Gemma step with its dims negated). A negative size is now
    no shape: the op falls back to the name, a negative grid to unknown work."""
    from kdvfs.work import op_work, work_from_name

    for op, dims in (("aten::softmax", [[-3, 5], [1]]), ("aten::_foreach_sqrt", [[-1]]), ("aten::mm", [[-4, 8], [8, 4]])):
        w = op_work(op, dims, ["float", "float"])
        assert w is None or (w.flops >= 0 and w.bytes >= 0), (op, w)
    name = "void at::native::elementwise_kernel<128, 2, foo>"
    assert work_from_name(name, "elementwise", [-1, 1, 1], [128, 1, 1], 1e-5) is None
    assert work_from_name(name, "elementwise", [4, 1, 1], [-5, 1, 1], 1e-5) is None
    assert work_from_name(name, "elementwise", [4, 1, 1], [128, 1, 1], 1e-5).bytes > 0
