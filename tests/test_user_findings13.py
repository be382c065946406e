"""What a new user and a hostile tester found in session 13, each fixed and kept fixed; first session 12's leftovers
(bad numeric flags refused only after loading, an interrupted whatif without ``-o``, SqueezeBERT's sub-module
segments, the catch-all's upsampling and ``scatter_reduce_``). The commands and numbers are in
``validation/user-findings13/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step
MISSING = "/nonexistent/kdvfs-tester13/never.json"  # a path that would fail to load: a flag said first never reaches it


# ------------------------------------------------- leftover 1: bad numeric flags are refused before anything is loaded
@pytest.mark.parametrize(("argv", "needles"), [
    (["optimize", "--trace", MISSING, "--slack", "nan"], ["slack nan %", "(-100, 1000]"]),
    (["optimize", "--trace", MISSING, "--slack", "1e9"], ["slack 1000000000.0 %"]),
    (["optimize", "--trace", MISSING, "--switch-aware", "--switch-latency", "-1"], ["switch latency", "got -1.0"]),
    (["compare", "--trace", MISSING, "--slack", "-200"], ["slack -200.0 %"]),
    (["compare", "--trace", MISSING, "--switch-latency", "nan"], ["switch latency", "got nan"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--gpus", "0"], ["--gpus 0", "whole number ≥ 1"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--switch-latency", "11"], ["got 11.0"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--spread", "-1"], ["--spread -1.0"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--governor-lag", "-1"], ["--governor-lag -1.0"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--batch", "0"], ["--batch 0"]),
    (["simulate", "--trace", MISSING, "--schedule", MISSING, "--tp", "-2"], ["--tp -2"]),
    (["whatif", "--trace", MISSING, "--batch", "0"], ["--batch 0"]),
    (["whatif", "--trace", MISSING, "--tp", "0"], ["--tp 0"]),
    (["whatif", "--trace", MISSING, "--latency", "-1"], ["switch latency must be in (0, 10] s"]),
    (["analyze", MISSING, "--gpu", "h200", "--slack", "nan"], ["slack nan %"]),
    (["analyze", MISSING, "--gpu", "h200", "--switch-latency", "100"], ["got 100.0"]),
    (["limiter", "whatif", "--trace", MISSING, "--gpu", "h200", "--slack", "5000"], ["slack 5000.0 %"]),
])
def test_a_bad_numeric_flag_is_said_before_anything_is_loaded(argv, needles, capsys):
    """`optimize --slack nan`, `compare --switch-latency -1`, `simulate --gpus 0`, `whatif --batch 0`, `analyze
    --slack nan` were refused only after the trace and profile were loaded (5–25 s on SqueezeBERT's step): the flag
    is said first, so the missing trace here is never reached."""
    line = one_error_line(*run_cli(argv, capsys), *needles)
    assert "never.json" not in line


def test_governor_lag_nan_is_refused_not_a_silent_limiter_off(capsys):
    """`simulate --governor-lag nan` passed the engine's `< 0` check, turned the H200's power limiter off (a lag
    disables it) and printed a result, exit 0."""
    from kdvfs.errors import InputError
    from simulator import SimConfig

    one_error_line(*run_cli(["simulate", "--trace", MISSING, "--schedule", MISSING, "--governor-lag", "nan"], capsys),
                   "--governor-lag nan")
    with pytest.raises(InputError, match="governor lag"):
        SimConfig(governor_lag_s=float("nan"))


# ------------------------------------------------------ leftover 2: an interrupted whatif without -o keeps what it did
WHATIF = ["whatif", "--trace", TRACE, "--latency", "6e-3", "--mechanism", "sync", "--policy", "auto", "--policy",
          "naive", "--executor", "serial", "--limiter", "off"]


def _journals() -> list[Path]:
    return sorted((Path(os.environ["KDVFS_STATE_DIR"]) / "whatif").glob("*.partial.jsonl"))


def _interrupt_after_one(monkeypatch, capsys, argv):
    import simulator.whatif as wi

    real, calls = wi.run_scenarios, []

    def stop_after_one(*args):
        if calls:
            raise KeyboardInterrupt
        calls.append(args[3])
        return real(*args)

    monkeypatch.setattr(wi, "run_scenarios", stop_after_one)
    code, _, err = run_cli(argv, capsys)
    monkeypatch.setattr(wi, "run_scenarios", real)
    return code, " ".join(err.split())


def test_an_interrupted_whatif_without_output_keeps_its_scenarios_and_resumes(tmp_path, capsys, monkeypatch):
    """Without -o, Ctrl-C kept nothing ("give -o FILE.csv to keep finished scenarios"). The finished tasks now go to
    kdvfs's state folder (``$KDVFS_STATE_DIR``, default ~/.cache/kdvfs) under the grid's key; the same command resumes
    and prints what an uninterrupted run prints, and the journal is removed once done."""
    import simulator.whatif as wi

    code, ref_out, _ = run_cli([*WHATIF, "--json"], capsys)
    assert code == 0 and _journals() == []

    code, err = _interrupt_after_one(monkeypatch, capsys, [*WHATIF, "--json"])
    assert code == 130
    (j,) = _journals()
    assert f"1 of 2 scenarios kept in {j}; run the same command again to resume (with or without -o FILE.csv)" in err

    real, calls = wi.run_scenarios, []
    monkeypatch.setattr(wi, "run_scenarios", lambda *args: calls.append(args[3]) or real(*args))
    code, out, err = run_cli([*WHATIF, "--json"], capsys)
    assert code == 0, err
    assert f"resuming: 1 of 2 scenarios from {j}" in " ".join(err.split())
    assert len(calls) == 1  # only the task not done
    assert json.loads(out) == json.loads(ref_out)
    assert _journals() == []


def test_a_whatif_interrupted_without_output_resumes_with_it(tmp_path, capsys, monkeypatch):
    """A user told to add -o after the interruption loses nothing: the run with -o takes the state folder's tasks and
    writes the CSV an uninterrupted run writes, byte for byte; both journals are gone afterwards."""
    ref = tmp_path / "ref.csv"
    assert run_cli([*WHATIF, "-o", str(ref)], capsys)[0] == 0
    assert _interrupt_after_one(monkeypatch, capsys, WHATIF)[0] == 130
    assert len(_journals()) == 1
    out = tmp_path / "w.csv"
    code, _, err = run_cli([*WHATIF, "-o", str(out)], capsys)
    assert code == 0, err
    assert "resuming: 1 of 2 scenarios" in " ".join(err.split())
    assert out.read_bytes() == ref.read_bytes()
    assert _journals() == [] and not (tmp_path / "w.csv.partial.jsonl").exists()


def test_an_unwritable_state_folder_does_not_stop_a_whatif_without_output(tmp_path, capsys, monkeypatch):
    """Keeping the tasks is a courtesy: where the state folder cannot be written, the grid runs and says so."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KDVFS_STATE_DIR", str(blocker / "state"))
    code, out, err = run_cli([*WHATIF, "--json"], capsys)
    assert code == 0, err
    assert "an interrupted run keeps nothing" in " ".join(err.split())
    assert len(json.loads(out)) == 2
