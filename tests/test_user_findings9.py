"""What a new user and a hostile tester found in session 9 on the H200 steps of `validation/h200/steps9` (BART,
StarCoder-shaped, ResNet-50, MobileNetV2), each fixed and kept fixed. The commands and numbers are in
`validation/user-findings9/README.md`.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback, and leaves its inputs and
earlier outputs as they were."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
RTX_TRACE = "gpt3xl-llmc-rtx3080ti"  # bundled, with its bundled profile
H200_TRACE = "gpt3xl-torch-h200-bf16"  # bundled, an H200 step (its profile comes from the model)


# ------------------------------------------------------------------ simulate --timeline under the power limiter
def test_simulate_timeline_under_the_limiter_is_refused_not_written_empty(tmp_path, capsys):
    """`simulate --timeline tl.json` on the H200 (limiter on by default) wrote `{"traceEvents": []}` and said
    "timeline in tl.json", exit 0: the limiter's simulation records no events."""
    s, tl = tmp_path / "s.json", tmp_path / "tl.json"
    assert run_cli(["optimize", "--trace", H200_TRACE, "--gpu", "h200", "--slack", "1", "-o", str(s)], capsys)[0] == 0
    one_error_line(*run_cli(["simulate", "--trace", H200_TRACE, "--gpu", "h200", "--schedule", str(s),
                             "--timeline", str(tl)], capsys), "--timeline", "limiter", "--limiter off")
    assert not tl.exists()
    code, _, err = run_cli(["simulate", "--trace", H200_TRACE, "--gpu", "h200", "--schedule", str(s),
                            "--timeline", str(tl), "--limiter", "off"], capsys)
    assert code == 0, err
    assert len(json.loads(tl.read_text())["traceEvents"]) > 100


# ------------------------------------------------------------------------- the figure beside a CSV output
@pytest.mark.parametrize("verb", [
    ["frontier", "--trace", RTX_TRACE, "--slack-max", "1"],
    ["whatif", "--trace", RTX_TRACE, "--policy", "ideal", "--preset-latency-only", "--mechanism", "sync"],
])
def test_an_output_named_like_its_figure_is_refused(tmp_path, capsys, verb):
    """`whatif -o w.png` and `frontier -o f.png` wrote the CSV, then the figure "beside it" under the same name:
    a PNG and no CSV, exit 0."""
    out = tmp_path / "w.png"
    one_error_line(*run_cli(verb + ["-o", str(out)], capsys), "-o", "replace the CSV", "w.csv")
    assert not out.exists()


@pytest.mark.parametrize("verb", [
    ["frontier", "--trace", RTX_TRACE, "--slack-max", "1"],
    ["whatif", "--trace", RTX_TRACE, "--policy", "ideal", "--preset-latency-only", "--mechanism", "sync"],
])
def test_png_without_a_csv_writes_the_figure(tmp_path, capsys, verb):
    """`frontier --png f.png` and `whatif --png w.png` without -o wrote nothing and said nothing, exit 0."""
    fig = tmp_path / "fig.png"
    code, _, err = run_cli(verb + ["--png", str(fig)], capsys)
    assert code == 0, err
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_existing_file_as_a_figure_with_a_csv_suffix_is_refused_before_the_work(tmp_path, capsys):
    """Session 8 refused `frontier -o f.csv --png f.csv` only when f.csv did not exist yet: with an f.csv already
    there it wrote the CSV, then died in matplotlib (`ValueError: Format 'csv' is not supported`, a traceback)."""
    out = tmp_path / "f.csv"
    out.write_text("an earlier result\n")
    one_error_line(*run_cli(["frontier", "--trace", RTX_TRACE, "--slack-max", "1", "-o", str(out), "--png", str(out)],
                            capsys), "--png", "'.csv'", ".png")
    assert out.read_text() == "an earlier result\n"


def test_two_outputs_of_one_command_in_one_file_are_refused(tmp_path, capsys):
    """Two output options naming one file: the second replaced the first."""
    fig = tmp_path / "same.png"
    one_error_line(*run_cli(["validate-steps", str(tmp_path), "--gpu", "h200", "-o", str(fig), "--plot", str(fig)],
                            capsys), "-o", "--plot", "both name")


# ----------------------------------------------------------------------------------- whatif latency options
def test_whatif_preset_latency_only_with_latency_is_refused(capsys):
    """`whatif --preset-latency-only --latency nan` ran with exit 0: --latency was ignored, so not even checked."""
    one_error_line(*run_cli(["whatif", "--trace", RTX_TRACE, "--policy", "ideal", "--preset-latency-only",
                             "--latency", "nan"], capsys), "--preset-latency-only", "--latency", "one of them")


# ------------------------------------------------------------------------------- characterize --window
def test_characterize_measures_the_window_it_records(tmp_path, capsys):
    """`characterize --window 100` measured 60 s windows (the loop's limit per entry) in a file whose window_s said
    100, with only a log line per entry."""
    out = tmp_path / "c.json"
    code, _, err = run_cli(["characterize", "--backend", "fake", "--set", "cache-gaps", "--only", "idle_10ms",
                            "--no-steps", "--warmup", "0", "--window", "70", "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["window_s"] == 70
    assert doc["kernels"][0]["window_s"] >= 70


def test_characterize_refuses_a_window_of_years(tmp_path, capsys):
    """`--window 1e9` was taken (on a real card, each entry would have run until the loop's limit)."""
    one_error_line(*run_cli(["characterize", "--backend", "fake", "--set", "held-duty", "--no-steps",
                             "--window", "1e9", "-o", str(tmp_path / "c.json")], capsys), "--window", "3600")
    assert not (tmp_path / "c.json").exists()


# -------------------------------------------------------------------------------------- summarize's folder
def test_summarize_outside_a_checkout_names_the_missing_measurement_folder(tmp_path, monkeypatch, capsys):
    """Run from another folder, `summarize h200x2` said "cannot write validation/h200x2/comparison.json: folder …
    does not exist; create it", as if the output were the problem."""
    monkeypatch.chdir(tmp_path)
    line = one_error_line(*run_cli(["summarize", "h200x2"], capsys), "measurement folder", "--folder")
    assert "cannot write" not in line
    assert not (tmp_path / "validation").exists()


def test_validate_steps_plot_over_an_existing_csv_is_refused_before_the_work(tmp_path, capsys):
    """`validate-steps steps9 -o vs.json --plot old.csv` with old.csv already there ran the steps, then died in
    matplotlib with a traceback (exit 1): the central figure check leaves existing files to validate-steps' own."""
    old = tmp_path / "old.csv"
    old.write_text("an earlier result\n")
    one_error_line(*run_cli(["validate-steps", str(ROOT / "validation" / "h200" / "steps9"), "--gpu", "h200",
                             "-o", str(tmp_path / "vs.json"), "--plot", str(old)], capsys), "--plot", "'.csv'")
    assert old.read_text() == "an earlier result\n"
    assert not (tmp_path / "vs.json").exists()


def test_an_interrupted_thermal_set_is_not_resumed_out_of_order(tmp_path, capsys):
    """`--set thermal` heats the card with its first entries, then measures "warm" entries as it cools; interrupted
    and rerun, it resumed after the last finished entry: the "warm" entries on a card that had cooled meanwhile."""
    out = tmp_path / "th.json"
    fast = ["characterize", "--backend", "fake", "--no-steps", "--warmup", "0", "--window", "0.3", "-o", str(out)]
    first = "gemm_bf16_8192_heat1,gemm_bf16_8192_heat2"
    assert run_cli(fast + ["--set", "thermal", "--only", first], capsys)[0] == 0  # as if interrupted after two
    before = out.read_bytes()
    one_error_line(*run_cli(fast + ["--set", "thermal"], capsys), "2 of the 18", "new -o", "--only")
    assert out.read_bytes() == before
    # a set that is not ordered still resumes
    assert run_cli(fast + ["--set", "cache-gaps", "--only", "idle_10ms"], capsys)[0] == 0


def test_validate_steps_prints_the_check_with_the_characterizations_gap_power(tmp_path, capsys):
    """`validate-steps DIR --characterization F` printed the same table as without F: its check with F's idle power
    was only in the JSON, and nothing said F came from the fake device."""
    steps9 = ROOT / "validation" / "h200" / "steps9"
    doc = json.loads((steps9 / "steps.json").read_text())
    doc["steps"] = [s for s in doc["steps"] if s["model"] == "bigcode-0.3b"]
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    (tmp_path / "bigcode-0.3b.kineto.json.gz").write_bytes((steps9 / "bigcode-0.3b.kineto.json.gz").read_bytes())
    ch = tmp_path / "ch.json"
    assert run_cli(["characterize", "--backend", "fake", "--set", "cache-gaps", "--only", "idle_10ms", "--no-steps",
                    "--warmup", "0", "--window", "0.5", "-o", str(ch)], capsys)[0] == 0
    code, out, err = run_cli(["validate-steps", str(tmp_path), "--gpu", "h200", "--characterization", str(ch)], capsys)
    assert code == 0, err
    line = next(ln for ln in " ".join(out.split()).split("with the gap power at ")[1:] if "--characterization" in ln)
    # the count depends on the bundled model (1 of 1 with session 8's, 0 of 1 with session 9's thermal gap model):
    # what is checked is that the check with F's idle power is on the terminal and names F's (fake) card
    assert "(fake)" in line and re.search(r"energy [01] of 1, median clock [01] of 1", line), line


def test_crossval_refuses_a_model_profile_as_measurements(tmp_path, capsys):
    """`profile crossval P.csv` with P a model profile from `profile build` ran (exit 0) and reported "time 0.25 %,
    power 0.66 %": the model fitted to its own predictions, printed like a validation."""
    p = tmp_path / "p.csv"
    assert run_cli(["profile", "build", "--trace", RTX_TRACE, "--gpu", "rtx3080ti", "-o", str(p)], capsys)[0] == 0
    one_error_line(*run_cli(["profile", "crossval", str(p)], capsys), "source is 'model'", "kdvfs sweep")
    one_error_line(*run_cli(["profile", "fit", str(p), "--gpu", "rtx3080ti", "-o", str(tmp_path / "f.csv")], capsys),
                   "source is 'model'")


def test_only_names_the_set_whose_list_holds_the_entries(tmp_path, capsys):
    """`--set warm-cool --only gemm_bf16_8192_heat1` (a thermal entry) said "not in the zoo; `kdvfs characterize
    --list` names them", but the plain --list (set all) lists no thermal or warm-cool entry either."""
    line = one_error_line(*run_cli(["characterize", "--backend", "fake", "--set", "warm-cool", "--only",
                                    "gemm_bf16_8192_heat1", "-o", str(tmp_path / "c.json")], capsys),
                          "gemm_bf16_8192_heat1", "--set warm-cool --list")
    assert "not in the zoo" in line


def test_a_trace_with_every_gpu_event_written_twice_is_refused(tmp_path, capsys):
    """A Kineto file with each kernel event in it twice (two exports merged) imported with exit 0 as a step twice as
    long (0.108 s for ResNet-50's 0.054 s, 2 042 instances for 1 051), every kernel counted twice."""
    src = ROOT / "tests" / "data" / "foreign-transformer.kineto.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] += [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    k = tmp_path / "twice.json"
    k.write_text(json.dumps(doc))
    one_error_line(*run_cli(["trace", "import", str(k), "-o", str(tmp_path / "t.json")], capsys),
                   "appear twice", "record the step again")
    assert not (tmp_path / "t.json").exists()
    # the recorded step itself still imports (its kernels on one stream overlap by a few µs at most, never start twice)
    assert run_cli(["trace", "import", str(src), "-o", str(tmp_path / "t.json")], capsys)[0] == 0


def test_optimize_cautions_when_the_plan_runs_below_half_the_boost_clock(tmp_path, capsys):
    """tester8/tester9: the free-switching plans send memory-bound kernels to 345 MHz on the H200, a clock its
    observe-only data never ran at; `analyze` said so, `optimize` did not."""
    t = tmp_path / "t.json"
    assert run_cli(["trace", "import", str(ROOT / "validation/h200/steps9/bigcode-0.3b.kineto.json.gz"), "-o", str(t)],
                   capsys)[0] == 0
    code, out, err = run_cli(["optimize", "--trace", str(t), "--gpu", "h200", "--slack", "1"], capsys)
    assert code == 0, err
    flat = " ".join(err.split())
    assert "this schedule runs" in flat and "below half the boost clock" in flat and "extrapolation" in flat
    code, out, err = run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "--slack", "0", "--settings", "study"],
                             capsys)
    assert code == 0 and "below half the boost clock" not in " ".join(err.split())
