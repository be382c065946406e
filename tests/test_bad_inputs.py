"""Every case of issue 13, through the command line: one message naming the thing, the rule, the value and the fix;
exit 2; no traceback; nothing half-written; existing files untouched."""

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import DATA, run_cli

from kdvfs.bundled import resolve_trace_path

RTX = "gpt3xl-llmc-rtx3080ti"
H200 = "gpt3xl-torch-h200-fp32"


def cli(args, capsys):
    code, out, err = run_cli([str(a) for a in args], capsys)
    assert "Traceback" not in err and "np.float64" not in err + out
    return code, out, err


def _trace_doc(name=RTX):
    return json.loads(resolve_trace_path(name).read_text())


def _write(tmp_path, doc, name="t.trace.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def _error(code, err, *needles):
    assert code == 2, err
    assert err.startswith("kdvfs: error: ") and err.count("\n") == 1, err
    for n in needles:
        assert n in err, err


# ---------------------------------------------------------------------- the main path at slack 0


def test_milp_at_slack_0_on_the_h200_trace(capsys):
    code, out, _ = cli(["optimize", "--trace", "gpt3xl-torch-h200-bf16", "--solver", "milp"], capsys)
    import re

    m = re.search(r"time ([+-]\d+\.\d+) %", out)
    assert code == 0 and m and float(m.group(1)) <= 0.0, out  # strict waste: never slower than auto


def test_whatif_on_a_built_profile_keeps_pass_level_at_slack_0(tmp_path, capsys):
    prof = tmp_path / "p.csv"
    assert cli(["profile", "build", "--trace", H200, "--gpu", "h200", "-o", prof], capsys)[0] == 0
    code, out, _ = cli(["whatif", "--trace", H200, "--profile", prof, "--gpu", "h200", "--preset-latency-only",
                        "--policy", "pass", "--mechanism", "sync", "--executor", "serial", "--json"], capsys)
    assert code == 0
    (row,) = json.loads(out)
    assert row["time_change_pct"] <= 1e-9


# ---------------------------------------------------------------------- silent wrong answers


def test_a_profile_of_another_import_is_refused(tmp_path, capsys):
    a = _trace_doc(H200)
    b = json.loads(json.dumps(a))
    b["name"] = a["name"]  # even the same name: the kernels differ
    b["segments"][0]["kernels"][0]["time_s"] *= 2
    pa, pb = _write(tmp_path, a, "a.trace.json"), _write(tmp_path, b, "b.trace.json")
    prof = tmp_path / "a.csv"
    assert cli(["profile", "build", "--trace", pa, "--gpu", "h200", "-o", prof], capsys)[0] == 0
    assert cli(["optimize", "--trace", pa, "--profile", prof], capsys)[0] == 0
    _error(*cli(["optimize", "--trace", pb, "--profile", prof], capsys)[::2], "it belongs to another trace",
           "kdvfs profile build --trace")


def _profile_lines(tmp_path, capsys):
    prof = tmp_path / "p.csv"
    assert cli(["profile", "build", "--trace", RTX, "--gpu", "rtx3080ti", "-o", prof], capsys)[0] == 0
    return prof, prof.read_text().splitlines()


def test_duplicate_profile_rows(tmp_path, capsys):
    prof, lines = _profile_lines(tmp_path, capsys)
    prof.write_text("\n".join(lines + [lines[2]]) + "\n")
    _error(*cli(["optimize", "--trace", RTX, "--profile", prof], capsys)[::2],
           f"line {len(lines) + 1}: kernel", "already appeared on line 3", "drop one of them")


def test_nan_in_a_profile_is_named_not_called_a_missing_row(tmp_path, capsys):
    prof, lines = _profile_lines(tmp_path, capsys)
    f = lines[4].split(",")
    f[3] = "nan"
    lines[4] = ",".join(f)
    prof.write_text("\n".join(lines) + "\n")
    _error(*cli(["optimize", "--trace", RTX, "--profile", prof], capsys)[::2], "line 5: time_s is 'nan'")


def test_a_profile_with_clocks_the_card_lacks(tmp_path, capsys):
    prof, lines = _profile_lines(tmp_path, capsys)
    prof.write_text("\n".join(ln.replace(",1050,9501,", ",1055,9501,") for ln in lines) + "\n")
    _error(*cli(["optimize", "--trace", RTX, "--profile", prof, "-o", tmp_path / "s.json"], capsys)[::2],
           "holds a setting the card lacks: core clock 1055 MHz")
    assert not (tmp_path / "s.json").exists()


def test_a_profile_of_another_card(capsys):
    _error(*cli(["compare", "--trace", RTX, "--gpu", "h200"], capsys)[::2],
           "profile was made for GPU 'rtx3080ti', but --gpu is 'h200'", "give --gpu rtx3080ti")


def test_profile_fit_on_another_cards_sweep(tmp_path, capsys):
    sweep = tmp_path / "s.csv"
    assert cli(["sweep", "--backend", "fake", "--trace", RTX, "--gpu", "rtx3080ti", "--settings",
                "auto:auto,1050:9501,1890:5001", "--allow-clock-control", "--window", "0.2", "--warmup", "0.02",
                "--min-steps", "2", "-o", sweep], capsys)[0] == 0
    _error(*cli(["profile", "fit", sweep, "--gpu", "h200", "-o", tmp_path / "p.csv"], capsys)[::2],
           "was measured on 'rtx3080ti', not 'h200'; fit it with --gpu rtx3080ti")
    body = "\n".join(sweep.read_text().splitlines()[1:]) + "\n"  # an old sweep without the header: by its clocks
    (tmp_path / "old.csv").write_text(body)
    _error(*cli(["profile", "fit", tmp_path / "old.csv", "--gpu", "h200", "-o", tmp_path / "p.csv"], capsys)[::2],
           "are not clocks of h200", "give that card with --gpu")
    assert not (tmp_path / "p.csv").exists()


def test_trace_import_repeat_of_an_unknown_segment(tmp_path, capsys):
    _error(*cli(["trace", "import", DATA / "foreign-transformer.kineto.json.gz", "-o", tmp_path / "t.json",
                 "--repeat", "nosuchseg=24"], capsys)[::2], "'nosuchseg'", "its segments: forward")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("slack, needle", [("1e9", "slack 1000000000.0 % is not a number in (-100, 1000]"),
                                           ("nan", "slack nan % is not a number"), ("-100", "slack -100.0 %")])
def test_absurd_slack(capsys, slack, needle):
    _error(*cli(["optimize", "--trace", RTX, "--slack", slack], capsys)[::2], needle, "--slack 0")


# ---------------------------------------------------------------------- output paths


@pytest.mark.parametrize("verb", [
    ["optimize", "--trace", RTX],
    ["profile", "build", "--trace", RTX, "--gpu", "rtx3080ti"],
    ["trace", "import", str(DATA / "foreign-transformer.kineto.json.gz")],
])
@pytest.mark.parametrize("where", ["missing-dir", "is-dir"])
def test_output_paths(tmp_path, capsys, verb, where):
    target = tmp_path / "nope" / "x.out" if where == "missing-dir" else tmp_path
    _error(*cli(verb + ["-o", target], capsys)[::2], "does not exist" if where == "missing-dir" else "is a directory")
    assert list(tmp_path.iterdir()) == []  # no stray .part


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_output_directory(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _error(*cli(["optimize", "--trace", RTX, "-o", ro / "s.json"], capsys)[::2], "cannot be written")
        _error(*cli(["whatif", "--preset-latency-only", "-o", ro / "w.csv"], capsys)[::2], "cannot be written")
    finally:
        ro.chmod(0o755)


def test_whatif_checks_its_outputs_before_computing(tmp_path, capsys, monkeypatch):
    import simulator.whatif as w

    monkeypatch.setattr(w, "run_grid", lambda *a, **k: pytest.fail("computed before checking the output"))
    (tmp_path / "w.png").mkdir()
    _error(*cli(["whatif", "--preset-latency-only", "-o", tmp_path / "w.csv"], capsys)[::2],
           "figure output", "is a directory")


def test_whatif_keeps_its_csv_when_the_figure_fails(tmp_path, capsys, monkeypatch):
    import kdvfs.plots

    def no_figure(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(kdvfs.plots, "plot_whatif", no_figure)
    out = tmp_path / "w.csv"
    _error(*cli(["whatif", "--preset-latency-only", "--policy", "auto", "--executor", "serial", "-o", out], capsys)[::2],
           "could not be written", f"the results are in {out}")
    assert len(out.read_text().splitlines()) > 1


def test_an_existing_output_is_untouched_when_the_write_fails(tmp_path, capsys, monkeypatch):
    out = tmp_path / "s.json"
    old = '{"format": "kdvfs-schedule/1"}'  # an earlier schedule: optimize -o replaces only a schedule (session 11)
    out.write_text(old)

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    _error(*cli(["optimize", "--trace", RTX, "-o", out], capsys)[::2], "could not be written (No space left",
           "unchanged")
    assert out.read_text() == old and sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


# ---------------------------------------------------------------------- malformed files


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["segments"][0]["kernels"][0].__setitem__("energy_j", "abc"), "field 'energy_j' must be int or float"),
    (lambda d: d["segments"][0]["kernels"][0].__setitem__("grid", "abc"), "field 'grid' must be a list of whole"),
    (lambda d: d.__setitem__("capture_clocks", [1, 2]), "field 'capture_clocks' must be an object"),
    (lambda d: d.__setitem__("batch_size", "x"), "field 'batch_size' must be int"),
    (lambda d: d["segments"][0]["kernels"][0].__setitem__("time_s", 1e400), "time_s"),
    (lambda d: d["segments"][1].__setitem__("repeat", 10 ** 12), "unrolls to"),
])
def test_trace_fields_of_the_wrong_type(tmp_path, capsys, edit, needle):
    d = _trace_doc()
    edit(d)
    p = tmp_path / "t.trace.json"
    p.write_text(json.dumps(d).replace("Infinity", "1e400"))
    _error(*cli(["trace", "show", p], capsys)[::2], needle)


def test_kineto_with_a_bad_timestamp(tmp_path, capsys):
    doc = json.loads(gzip.decompress((DATA / "foreign-transformer.kineto.json.gz").read_bytes()))
    ev = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    ev["ts"] = "abc"
    src = tmp_path / "k.json"
    src.write_text(json.dumps(doc))
    _error(*cli(["trace", "import", src, "-o", tmp_path / "t.json"], capsys)[::2], "is not a well-formed PyTorch")
    assert not (tmp_path / "t.json").exists()


def _schedule(tmp_path, capsys):
    s = tmp_path / "s.json"
    assert cli(["optimize", "--trace", RTX, "-o", s], capsys)[0] == 0
    return s, json.loads(s.read_text())


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.__setitem__("slack_pct", "abc"), "field 'slack_pct' must be int or float"),
    (lambda d: d.__setitem__("runs", [["auto", "auto", 10 ** 12]]), "more than 10 000 000 kernel instances"),
    (lambda d: d.__setitem__("runs", "abc"), "field 'runs' must be list"),
    (lambda d: d.update(trace="other", trace_sha=""), "schedule was made for trace 'other', not"),
    (lambda d: d.update(trace_sha="0123456789abcdef"), "with kernels 0123456789abcdef, but trace"),
])
def test_schedule_fields(tmp_path, capsys, edit, needle):
    s, d = _schedule(tmp_path, capsys)
    edit(d)
    s.write_text(json.dumps(d))
    _error(*cli(["simulate", "--trace", RTX, "--schedule", s, "--gpu", "rtx3080ti"], capsys)[::2], needle)


@pytest.mark.parametrize("extra, needle", [
    (["--switch-latency", "1e9"], "switch latency must be a positive number of seconds up to 10"),
    (["--gpus", "100000"], "this machine allows at most"),
    (["--switch-model", "foo"], "--switch-model 'foo' is not a preset whose switch model can be borrowed"),
])
def test_simulate_ranges(tmp_path, capsys, extra, needle):
    s, _ = _schedule(tmp_path, capsys)
    _error(*cli(["simulate", "--trace", RTX, "--schedule", s, "--gpu", "rtx3080ti"] + extra, capsys)[::2], needle)


def test_whatif_latency_points(capsys):
    _error(*cli(["whatif", "--latency-points", "0"], capsys)[::2], "--latency-points 0 must be a whole number")


@pytest.mark.parametrize("content, needle", [
    ("kernel,core_mhz,mem_mhz,time_s,power_w\nk,1050,9501,abc,100\n", "line 2: could not convert"),
    ("kernel,core_mhz,mem_mhz,time_s,power_w\nk,1050,9501\n", "line 2: 5 columns expected, the row has fewer"),
    ("# kdvfs-sweep/1 gpu=rtx3080ti\nkernel,core_mhz,mem_mhz,time_s,power_w\nk,1050,9501,1,1,9\n", "line 3"),
    ("\x00\x01\x02", "has no data rows"),
])
def test_broken_sweep_in_profile_fit(tmp_path, capsys, content, needle):
    p = tmp_path / "s.csv"
    p.write_text(content)
    _error(*cli(["profile", "fit", p, "--gpu", "rtx3080ti", "-o", tmp_path / "p.csv"], capsys)[::2], needle)


def test_a_directory_is_not_called_truncated(tmp_path, capsys):
    for args in (["trace", "show", tmp_path], ["optimize", "--trace", RTX, "--profile", tmp_path]):
        code, _, err = cli(args, capsys)
        _error(code, err, "directory")
        assert "truncated" not in err


def test_missing_profile_points_at_profile_build(tmp_path, capsys):
    d = _trace_doc()
    d["name"] = "my-model"
    _error(*cli(["optimize", "--trace", _write(tmp_path, d)], capsys)[::2], "kdvfs profile build --trace")


def test_a_trace_name_is_never_a_path(tmp_path, capsys, monkeypatch):
    """A trace named ``../../x`` must not pick up ``x.profile.csv`` or ``x.calibration.json`` outside the bundle."""
    from kdvfs.bundled import bundled_dir, model_params
    from kdvfs.gpus import get_gpu
    from kdvfs.trace import load_trace

    d = _trace_doc()
    evil = tmp_path / "evil"
    d["name"] = os.path.relpath(evil, bundled_dir())
    shutil.copy(bundled_dir() / f"{RTX}.profile.csv.gz", tmp_path / "evil.profile.csv.gz")
    shutil.copy(bundled_dir() / f"{RTX}.calibration.json", tmp_path / "evil.calibration.json")
    monkeypatch.chdir(bundled_dir())  # so that the relative name would resolve to the planted files
    p = _write(tmp_path, d)
    _error(*cli(["optimize", "--trace", p], capsys)[::2], "has no bundled profile")
    t = load_trace(p)
    assert model_params(t, get_gpu("rtx3080ti")).source != "calibrated"
    assert Path(d["name"] + ".profile.csv.gz").exists()  # the planted file was reachable through the name
