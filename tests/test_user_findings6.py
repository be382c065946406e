"""What a new user and a hostile tester found in session 6 (the H200 work of issue 12), each fixed and kept fixed.

Every bad input must give one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).parent / "data" / "foreign-transformer.kineto.json.gz"
CHAR4 = ROOT / "validation/h200/characterization/characterization4.json.gz"


_one_error_line = one_error_line


# ----------------------------------------------------------------------------------------------- validate-steps
def _steps_dir(tmp_path, **change):
    """A steps folder with the toy trace and one measured row, ``change`` applied (a value None removes the key)."""
    shutil.copy(TOY, tmp_path / "toy.kineto.json.gz")
    row = {"model": "toy", "trace": "toy.kineto.json.gz", "step_time_s": 0.05, "step_energy_j": 20.0,
           "sm_mhz_median": 1980.0}
    for k, v in change.items():
        if v is None:
            row.pop(k)
        else:
            row[k] = v
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "steps": [row]}))
    return tmp_path


@pytest.mark.parametrize("change, needles", [
    ({"trace": "gone.kineto.json.gz"}, ["'gone.kineto.json.gz' is not a file", "step 0 ('toy')"]),
    ({"trace": "gone.kineto.json.gz", "model": "other"}, ["'gone.kineto.json.gz' is not a file"]),
    ({"trace": None, "model": "nameless"}, ["'nameless.kineto.json.gz' is not a file"]),  # the default name
    ({"trace": ""}, ["names no trace file"]),
    ({"model": None}, ["step 0 has no model name"]),
    ({"step_energy_j": None}, ["'step_energy_j' must be a positive number", "got None"]),
    ({"step_energy_j": "x"}, ["'step_energy_j' must be a positive number"]),
    ({"step_time_s": 0}, ["'step_time_s' must be a positive number", "got 0"]),
    ({"sm_mhz_median": float("nan")}, ["'sm_mhz_median' must be a positive number"]),
])
def test_validate_steps_refuses_a_bad_row_in_one_line(tmp_path, capsys, change, needles):
    d = _steps_dir(tmp_path, **change)
    _one_error_line(*run_cli(["validate-steps", str(d), "--gpu", "h200"], capsys), *needles)


@pytest.mark.parametrize("doc, needle", [
    ({"format": "kdvfs-steps/1", "steps": []}, "'steps' must be a non-empty list"),
    ({"format": "kdvfs-steps/1", "steps": {"a": 1}}, "'steps' must be a non-empty list"),
    ({"format": "kdvfs-steps/1", "steps": ["x"]}, "step 0 must be an object"),
    ({"format": "kdvfs-characterization/1", "kernels": []}, "is not a kdvfs-steps/1 file"),
    ([1, 2], "is not a kdvfs-steps/1 file"),
])
def test_validate_steps_refuses_a_bad_file_in_one_line(tmp_path, capsys, doc, needle):
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    _one_error_line(*run_cli(["validate-steps", str(tmp_path), "--gpu", "h200"], capsys), needle)


def test_validate_steps_without_steps_json_or_with_binary_junk(tmp_path, capsys):
    _one_error_line(*run_cli(["validate-steps", str(tmp_path), "--gpu", "h200"], capsys), "does not exist")
    (tmp_path / "steps.json").write_bytes(b"\xff\xfe\x00junk")
    _one_error_line(*run_cli(["validate-steps", str(tmp_path), "--gpu", "h200"], capsys), "is not JSON")


def test_validate_steps_with_every_step_skipped_exits_2_and_says_why(tmp_path, capsys):
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1",
                                                     "steps": [{"model": "big", "error": "CUDA out of memory"}]}))
    code, out, err = run_cli(["validate-steps", str(tmp_path), "--gpu", "h200"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "skipped big: not measured: CUDA out of memory" in out and "no step in" in err


# ----------------------------------------------------------------------------------------------- calibrate-h200
def _char(tmp_path, name, edit):
    """characterization4 (six duty entries, three kernels) with ``edit(doc)`` applied, written as plain JSON."""
    doc = json.loads(gzip.decompress(CHAR4.read_bytes()))
    edit(doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def _calibrate(tmp_path, capsys, *files):
    args = ["calibrate-h200", "--no-bundle", "-o", str(tmp_path / "fit.json")]
    for f in files:
        args += ["--data", str(f)]
    return run_cli(args, capsys)


def _pop_all(key):
    def edit(doc):
        for k in doc["kernels"]:
            k.pop(key, None)
    return edit


def _set_first(key, value):
    def edit(doc):
        doc["kernels"][0][key] = value
    return edit


@pytest.mark.parametrize("edit, needle", [
    (_pop_all("time_mean_s"), "has no 'time_mean_s'"),  # the busy share would silently use the median wait
    (_set_first("power_w", float("nan")), "'power_w' must be a positive number, got nan"),
    (_set_first("time_s", "fast"), "'time_s' must be a positive number, got 'fast'"),
    (_set_first("time_mean_s", -1), "'time_mean_s' must be a positive number, got -1"),
    (lambda d: d.update(kernels={"a": 1}), "'kernels' must be a list"),
    (lambda d: d.update(kernels=["x"]), "kernel 0 must be an object"),
])
def test_calibrate_h200_refuses_bad_entries_in_one_line(tmp_path, capsys, edit, needle):
    ok = ROOT / "validation/h200/characterization/characterization3.json.gz"  # enough kernels beside the bad file
    bad = _char(tmp_path, "bad.json", edit)
    _one_error_line(*_calibrate(tmp_path, capsys, ok, bad), needle)
    assert not (tmp_path / "fit.json").exists()


def test_calibrate_h200_refuses_unreadable_or_foreign_files(tmp_path, capsys):
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(CHAR4.read_bytes())[:40])  # a truncated gzip stream
    _one_error_line(*_calibrate(tmp_path, capsys, gz), "cannot read characterisation file")
    _one_error_line(*_calibrate(tmp_path, capsys, tmp_path / "none.json"), "No such file")
    steps = ROOT / "validation/h200/steps/steps.json"
    _one_error_line(*_calibrate(tmp_path, capsys, steps), "is not a kdvfs-characterization/1 file", "kdvfs-steps/1")


def test_calibrate_h200_refuses_too_few_kernels_and_warns_without_duty_entries(tmp_path, capsys, caplog):
    _one_error_line(*_calibrate(tmp_path, capsys, CHAR4), "9 measured kernel(s)", "fewer than the 12 constants")
    code, _, err = _calibrate(tmp_path, capsys, ROOT / "validation/h200/characterization/characterization3.json.gz")
    assert code == 0 and "Traceback" not in err
    assert any("no duty entry" in r.getMessage() for r in caplog.records)


def test_calibrate_h200_default_data_outside_a_checkout_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _one_error_line(*run_cli(["calibrate-h200", "--no-bundle", "-o", "fit.json"], capsys), "run from the repository root")
    assert not (tmp_path / "fit.json").exists()


# ----------------------------------------------------------------------------------------------- measure-steps
@pytest.mark.parametrize("models, needle", [
    ("", "names no model"),
    (" , ", "names no model"),
    ("gpt2-medium,,bert-large", "empty name between commas"),
    ("gpt2-medium,", "empty name between commas"),
    ("gpt2-medium,gpt2-medium", "the same model twice"),
    ("llama-0.5b-b2,llama-0.5b-b02", "the same model twice"),
    ("gpt2-medium-b0", "at least 1, got 0"),
    ("gpt2-medium-bx", "is not one of"),
    ("nosuch-b2", "is not one of"),
])
def test_measure_steps_refuses_bad_model_lists_before_touching_a_gpu(tmp_path, capsys, models, needle):
    line = _one_error_line(*run_cli(["measure-steps", "--models", models, "-o", str(tmp_path / "o")], capsys),
                           "--models", needle)
    assert "NVML" not in line and not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------------- compare --limiter
def test_limited_rows_flag_exactly_the_rows_that_fell_back_to_auto(tmp_path, capsys):
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import limiter_for, limiter_params
    from kdvfs.model import default_params
    from kdvfs.optimize.problem import Problem
    from kdvfs.profile import build_profile
    from kdvfs.trace import load_trace
    from simulator.limited_whatif import limited_rows

    t = tmp_path / "toy.trace.json"
    assert run_cli(["trace", "import", str(TOY), "-o", str(t)], capsys)[0] == 0
    trace, spec = load_trace(t), get_gpu("h200")
    lim = limiter_for(spec)
    pb = Problem(trace, build_profile(trace, spec, default_params(trace, spec)))
    rows = {r["policy"]: r for r in limited_rows(pb, spec, limiter_params(trace, spec, lim), lim, spec.switch, "sync",
                                                 0.0, policies=("auto", "pass", "ideal", "switch-aware"))}
    for name, r in rows.items():  # the flag says exactly: no switch, auto's time and energy, not auto itself
        same = r["switches"] == 0 and abs(r["time_change_pct"]) < 1e-9 and abs(r["energy_change_pct"]) < 1e-9
        assert r["fell_back_to_auto"] == (same and name != "auto"), name
    assert rows["pass"]["fell_back_to_auto"]  # at 0 % slack nothing coarse keeps auto's time under the limiter here
    assert not rows["ideal"]["fell_back_to_auto"]


def test_compare_under_the_limiter_labels_ideal_rows_and_fallbacks_and_says_what_the_rows_are(capsys, monkeypatch):
    import simulator.limited_whatif as lw

    def canned(*_a, **_k):
        return [{"policy": p, "time_change_pct": t, "energy_change_pct": e, "switches": n, "fell_back_to_auto": f}
                for p, t, e, n, f in (("auto", 0, 0, 0, False), ("pass", 0, 0, 0, True), ("ideal", 8, -25, 9, False),
                                      ("limiter-aware ideal", 0.4, -22, 9, False))]

    monkeypatch.setattr(lw, "limited_rows", canned)
    code, out, _ = run_cli(["compare", "--trace", "gpt3xl-torch-h200-bf16", "--slack", "1"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "ideal (free switching)" in text and "limiter-aware ideal (free switching)" in text
    assert "pass → auto" in text and "chosen as if each kernel were throttled alone" in text


# ----------------------------------------------------------------------------------------------- analyze on the H200
def test_analyze_on_a_card_with_a_limiter_reports_its_boundary_schedules_under_it(tmp_path, capsys):
    """analyze plans each kernel throttled alone; on the H200 the default `simulate` runs the fitted limiter, under
    which those schedules ran +3 … +6.6 % at 1 % slack on five foreign steps, and analyze said nothing of it."""
    t = str(tmp_path / "toy.trace.json")
    assert run_cli(["trace", "import", str(TOY), "-o", t], capsys)[0] == 0
    o = tmp_path / "an"
    code, out, _ = run_cli(["analyze", t, "--gpu", "h200", "--slack", "1", "--no-kernel-switch-aware", "-o", str(o),
                            "--json"], capsys)
    assert code == 0
    (row,) = json.loads(out)["limiter_check"]
    assert row["slack_pct"] == 1.0 and row["schedule"] == "schedule-boundary-slack1.json"
    code, sim, _ = run_cli(["simulate", "--trace", t, "--gpu", "h200", "--schedule", str(o / row["schedule"]),
                            "--mechanism", "predictive", "--json"], capsys)  # the limiter is on by default
    s = json.loads(sim)
    assert abs(s["time_change_pct"] - row["time_change_pct"]) < 1e-6
    assert abs(s["energy_change_pct"] - row["energy_change_pct"]) < 1e-6
    report = (o / "report.md").read_text()
    assert "windowed power limiter" in report and f"{row['time_change_pct']:+.2f} % time" in report
    code, out, _ = run_cli(["analyze", t, "--gpu", "rtx3080ti", "--slack", "1", "--no-kernel-switch-aware", "-o",
                            str(tmp_path / "an2"), "--json"], capsys)
    assert code == 0 and "limiter_check" not in json.loads(out)  # no fitted limiter there: nothing added


def test_optimize_without_the_limiter_on_a_card_that_has_one_says_so(capsys):
    code, out, err = run_cli(["optimize", "--trace", "gpt3xl-torch-h200-bf16", "--slack", "1"], capsys)
    assert code == 0 and "ideal (free switching)" in " ".join(out.split())  # the console wraps long lines
    assert "h200 has a fitted power limiter" in " ".join(err.split())
    code, out, err = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "--slack", "1"], capsys)
    assert code == 0 and "power limiter" not in err


def test_validate_steps_options_are_checked_before_the_simulation(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    d = _steps_dir(tmp_path / "s")
    base = ["validate-steps", str(d), "--gpu", "h200"]
    _one_error_line(*run_cli(base + ["--gap-power", "1e9"], capsys), "below the card's cap")
    _one_error_line(*run_cli(base + ["--characterization", str(d / "steps.json")], capsys),
                    "is not a kdvfs-characterization/1 file")
    nothing = _char(tmp_path, "no-idle.json", lambda doc: doc.pop("idle_after"))
    _one_error_line(*run_cli(base + ["--characterization", str(nothing)], capsys), "has no 'idle_after' power")
    _one_error_line(*run_cli(base + ["-o", str(tmp_path)], capsys), "is a directory")


def test_calibrate_h200_checks_its_output_before_fitting(tmp_path, capsys, monkeypatch):
    _one_error_line(*run_cli(["calibrate-h200", "--no-bundle", "--data", str(CHAR4), "-o", str(tmp_path)], capsys),
                    "is a directory")
    monkeypatch.chdir(tmp_path)  # outside a checkout, the default -o must not leave folders behind
    _one_error_line(*run_cli(["calibrate-h200", "--no-bundle"], capsys), "run from the repository root")
    assert list(tmp_path.iterdir()) == []


def test_whatif_under_the_limiter_says_what_its_rows_are(capsys):
    code, out, _ = run_cli(["whatif", "--trace", "gpt3xl-torch-h200-bf16", "--preset-latency-only", "--mechanism",
                            "sync", "--policy", "pass", "--slack", "0"], capsys)
    assert code == 0 and "under the card's power limiter" in out
    assert "chosen under it" in " ".join(out.split())
    code, out, _ = run_cli(["whatif", "--trace", "gpt3xl-torch-h200-bf16", "--preset-latency-only", "--mechanism",
                            "sync", "--policy", "pass", "--slack", "0", "--limiter", "off"], capsys)
    assert code == 0 and "chosen under it" not in " ".join(out.split())


# ----------------------------------------------------------------------------------------------- conv work (ViT)
def test_conv_work_takes_the_recorded_stride_and_the_backward_op_its_own_operands():
    """ViT-B/16's patch embedding (the held-out vit-base step): a 16 × 16 conv with stride 16 over 224 × 224 images.
    The estimate took the output as large as the input (256 × the FLOPs: 7 PFLOP/s on the H200), and read
    convolution_backward's grad_output as the input (1.7 PFLOP/s)."""
    from kdvfs.work import op_work

    x, w = [128, 3, 224, 224], [768, 3, 16, 16]
    true = 2.0 * 128 * 768 * 14 * 14 * 3 * 16 * 16
    f = op_work("aten::cudnn_convolution", [x, w, [], [], [], [], [], [], []], ["c10::BFloat16"] * 2,
                concrete=["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"])
    assert f.flops == pytest.approx(true)
    f = op_work("aten::convolution", [x, w, [768], [], [], [], [], [], []], ["c10::BFloat16"] * 3,
                concrete=["", "", "", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"])
    assert f.flops == pytest.approx(true)
    g = [128, 768, 14, 14]
    b = op_work("aten::convolution_backward", [g, x, w, [], [], [], [], [], [], [], []], ["c10::BFloat16"] * 3,
                concrete=["", "", "", "[768]", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1",
                          "[False, True, True]"])
    assert b.flops == pytest.approx(true)  # the weight's gradient only: the images need none
    b2 = op_work("aten::convolution_backward", [g, x, w, [], [], [], [], [], [], [], []], ["c10::BFloat16"] * 3,
                 concrete=["", "", "", "[768]", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1",
                           "[True, True, True]"])
    assert b2.flops == pytest.approx(2 * true) and b2.bytes > b.bytes
    # a 3 × 3 conv with stride 1 and padding 1 keeps its size, as before; without the arguments, as before
    same = 2.0 * 8 * 64 * 56 * 56 * 32 * 9
    c = op_work("aten::conv2d", [[8, 32, 56, 56], [64, 32, 3, 3], [64], [], [], [], []], ["float"] * 3,
                concrete=["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"])
    assert c.flops == pytest.approx(same)
    assert op_work("aten::conv2d", [[8, 32, 56, 56], [64, 32, 3, 3]], ["float"] * 2).flops == pytest.approx(same)


def test_limiter_check_with_a_file_that_is_not_a_fit_is_one_line(tmp_path, capsys):
    other = tmp_path / "steps.json"
    other.write_text(json.dumps({"format": "kdvfs-steps/1", "steps": []}))
    sr = ROOT / "validation/h200/characterization/characterization.json.gz"
    _one_error_line(*run_cli(["limiter", "check", str(sr), "--gpu", "h200", "--fit", str(other)], capsys),
                    "is not a limiter fit")


def test_tables_print_no_negative_zero():
    """'-0.000 %' time on the auto row (or '-0.00' on the 0 % ideal row) read as faster than auto."""
    from kdvfs.cli.common import signed_pct as _signed

    assert _signed(-1e-14, 3) == "+0.000" and _signed(-0.0004, 3) == "+0.000" and _signed(-0.0006, 3) == "-0.001"
    assert _signed(-0.004, 2) == "+0.00" and _signed(1.5, 2) == "+1.50"


def test_validate_steps_reads_each_trace_once_across_the_gap_powers(tmp_path, monkeypatch):
    import kdvfs.importers as imp
    from kdvfs.gpus import get_gpu
    from simulator.stepcheck import check_steps

    calls = []
    real = imp.import_kineto

    def counted(path, *a, **k):
        calls.append(str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(imp, "import_kineto", counted)
    d = _steps_dir(tmp_path)
    doc = check_steps(d, get_gpu("h200"), gap_power_w=116.7, alt_gap_powers={"a": 100.0, "b": 130.0})
    assert len(calls) == 1 and doc["met"]["of"] == 1 and set(doc["gap_power_sensitivity"]) == {"a", "b"}
    e = {k: v["error"]["toy"]["limiter_with_gaps"]["energy_pct"] for k, v in doc["gap_power_sensitivity"].items()}
    assert e["a"] < doc["steps"][0]["error"]["limiter_with_gaps"]["energy_pct"] < e["b"]  # more gap power, more energy


def test_validate_steps_draws_the_errors(tmp_path, capsys):
    """--plot draws each step's energy and clock error against the targets; a folder is refused before the check."""
    d = _steps_dir(tmp_path / "s") if (tmp_path / "s").mkdir() is None else None
    png = tmp_path / "fig" / "steps.png"
    code, _, _ = run_cli(["validate-steps", str(d), "--gpu", "h200", "--plot", str(png)], capsys)
    assert code == 0 and png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run_cli(["validate-steps", str(d), "--gpu", "h200", "--plot", str(tmp_path)], capsys)
    assert code == 2 and "--plot" in err and "directory" in err
