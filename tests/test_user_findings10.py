"""What a new user and a hostile tester found in session 10 on the H200 steps of
`validation/h200/lease_anchor/leaseA/steps/` (eight training steps with their measured energies), each fixed and kept
fixed. The commands and numbers are in `validation/user-findings10/README.md`.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback, and leaves its inputs as they
were."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import one_error_line, one_step_folder, run_cli

ROOT = Path(__file__).resolve().parents[1]
H200_TRACE = "gpt3xl-torch-h200-bf16"  # bundled, an H200 step (its profile comes from the model)
RTX_TRACE = "gpt3xl-llmc-rtx3080ti"  # bundled, with its measured (calibrated) profile
LEASE_A = ROOT / "validation" / "h200" / "lease_anchor" / "leaseA"
CAUTION = "below half the boost clock"


def _flat(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- the low-clock caution (tester9's leftover 1)
@pytest.mark.parametrize("verb", [
    ["compare", "--trace", H200_TRACE, "--gpu", "h200", "--slack", "1", "--limiter", "off"],
    ["compare", "--trace", H200_TRACE, "--gpu", "h200", "--slack", "1"],  # under the limiter
    ["frontier", "--trace", H200_TRACE, "--gpu", "h200", "--slack-max", "2"],
])
def test_compare_and_frontier_give_the_low_clock_caution(verb, capsys):
    """`optimize` and `analyze` cautioned that the plan runs much of the step below half the boost clock on model
    rows (an extrapolation on the H200); `compare` and `frontier` showed the same savings without a word."""
    code, out, err = run_cli(verb, capsys)
    assert code == 0, err
    flat = _flat(err)
    assert "Caution:" in flat and CAUTION in flat, err
    assert re.search(r"run(s)? (up to )?\d+ % of the iteration's time", flat), flat


def test_the_caution_is_one_helper_and_silent_on_measured_profiles(capsys):
    """One helper (``kdvfs.cli.common.low_clock_caution``), not a copy per verb; a measured profile gets no caution."""
    import inspect

    from kdvfs.cli import optimize

    src = inspect.getsource(optimize)
    assert src.count("low_clock_caution(") == 3 and "schedule_low_clock_note" not in src
    for verb in (["compare", "--trace", RTX_TRACE, "--slack", "1"], ["frontier", "--trace", RTX_TRACE, "--slack-max", "1"],
                 ["optimize", "--trace", RTX_TRACE, "--slack", "1"]):
        code, _, err = run_cli(verb, capsys)
        assert code == 0 and CAUTION not in _flat(err), (verb, err)


# ------------------------------------------------------------ which "auto" a number is against (leftover 2)
def test_optimize_names_its_auto_baseline_with_and_without_the_limiter(capsys):
    """`optimize` measured against the profile's auto without `--limiter` and against auto under the limiter with
    it (0.5842 and 0.5369 s on the phi-1.5 step), both printed as "vs auto"."""
    base = ["optimize", "--trace", H200_TRACE, "--gpu", "h200", "--slack", "1"]
    code, out_off, err = run_cli(base, capsys)
    assert code == 0, err
    code, out_on, err = run_cli(base + ["--limiter", "on"], capsys)
    assert code == 0, err
    t_off = re.search(r"vs auto \(each kernel throttled on its own, ([\d.]+) s\)", _flat(out_off))
    t_on = re.search(r"vs auto under the limiter \(steady state, ([\d.]+) s\)", _flat(out_on))
    assert t_off and t_on, (out_off, out_on)
    assert t_off.group(1) != t_on.group(1)  # two baselines, and the outputs say so
    docs = {}
    for lim in ("off", "on"):
        code, out, _ = run_cli(base + ["--limiter", lim, "--json"], capsys)
        docs[lim] = json.loads(out)
    assert "throttled on its own" in docs["off"]["auto_basis"] and "limiter" in docs["on"]["auto_basis"]
    assert docs["off"]["auto"]["time_s"] != docs["on"]["auto"]["time_s"]


def test_analyze_says_which_auto_each_part_is_against(tmp_path, capsys):
    """`analyze`'s table is against the profile's auto, its limiter sentence against auto under the limiter: the
    output said "against auto" for both."""
    code, out, err = run_cli(["analyze", H200_TRACE, "--gpu", "h200", "--slack", "1", "--no-kernel-switch-aware",
                              "-o", str(tmp_path / "an")], capsys)
    assert code == 0, err
    flat = _flat(out)
    doc = json.loads((tmp_path / "an" / "analysis.json").read_text())
    table_ms = 1e3 * doc["auto"]["time_s"]
    assert f"each kernel throttled on its own: {table_ms:.4g} ms" in flat, flat
    assert "throttled on its own" in doc["auto"]["basis"]
    lim_ms = 1e3 * doc["limiter_check"][0]["auto_time_s"]
    assert f"against auto under it ({lim_ms:.4g} ms, not the table's auto)" in flat, flat
    assert abs(lim_ms - table_ms) > 0.01 * table_ms  # really two baselines
    assert "throttled on its own" in (tmp_path / "an" / "report.md").read_text()
    assert "Two \"auto\" baselines" in (ROOT / "docs" / "limiter.md").read_text()


# --------------------------------------------------------- the sync mechanism's fixed cost (leftover 3)
@pytest.mark.parametrize("verb", ["optimize", "compare", "whatif", "simulate", "analyze"])
def test_mechanism_help_states_the_fixed_sync_and_callback_costs(verb, capsys):
    """The 163 µs every sync switch stalls (``SwitchCosts.sync_overhead_s``) was documented only in the code; the
    what-if's sync curve never reaches the ideal at 100 ns because of it."""
    from kdvfs.switching import SwitchCosts

    code, out, _ = run_cli([verb, "--help"], capsys)
    assert code == 0
    text = _flat(out)
    m = text[text.rindex("--mechanism {sync,callback,predictive}"):]  # the option, not the usage line
    c = SwitchCosts()
    assert f"fixed {1e6 * c.sync_overhead_s:.0f} µs" in m[:600] and f"{1e6 * c.callback_overhead_s:.0f} µs" in m[:600]


def test_design_notes_describe_the_fixed_mechanism_overheads():
    text = _flat((ROOT / "docs" / "design-notes.md").read_text())
    assert "sync_overhead_s` = 163 µs" in text and "callback_overhead_s" in text and "whatif" in text


# ---------------------------------------------- idle_after was the last entry's power, not the idle card's
def test_characterize_reads_idle_after_once_the_card_settled(tmp_path, capsys):
    """`idle_after` was read right after the last entry, while NVML's ~1 s power average still held it: 699.4 W after
    the GELU of anchorA1, 674.9 W on the fake; `validate-steps --characterization` used it as a gap power."""
    out = tmp_path / "c.json"
    assert run_cli(["characterize", "--backend", "fake", "--set", "anchor", "--only", "gemm_bf16_4096", "--no-steps",
                    "--warmup", "0", "--window", "0.5", "-o", str(out)], capsys)[0] == 0
    doc = json.loads(out.read_text())
    assert doc["kernels"][-1]["power_w"] > 600  # a heavy last entry
    after = doc["idle_after"]
    assert after["settle_s"] >= 2 and after["power_w"] < 1.2 * doc["idle"]["power_w"], after


def test_validate_steps_refuses_an_unsettled_idle_after(tmp_path, capsys):
    d = one_step_folder(tmp_path, LEASE_A)
    ch = LEASE_A / "anchorA1.json.gz"
    before = ch.read_bytes()
    one_error_line(*run_cli(["validate-steps", str(d), "--gpu", "h200", "--characterization", str(ch),
                             "-o", str(tmp_path / "vs.json")], capsys),
                   "'idle_after' power (699.4 W)", "gelu_bf16_1GiB", "--gap-power 129.1")
    assert ch.read_bytes() == before and not (tmp_path / "vs.json").exists()
    assert json.loads(gzip.decompress(before))["idle_after"]["power_w"] == 699.446


# ------------------------------------------------------------------------------ validate-steps, hostile
def test_validate_steps_refuses_a_model_measured_twice(tmp_path, capsys):
    """Two steps.json merged by hand: the step counted twice ("5 of 9 within the targets" for 8 steps)."""
    d = tmp_path / "steps"
    d.mkdir()
    doc = json.loads((LEASE_A / "steps" / "steps.json").read_text())
    block = next(s for s in doc["steps"] if s["model"] == "block-bf16")
    doc["steps"] = [block, dict(block, step_energy_j=block["step_energy_j"] * 1.01)]
    (d / "steps.json").write_text(json.dumps(doc))
    shutil.copy(LEASE_A / "steps" / "block-bf16.kineto.json.gz", d)
    one_error_line(*run_cli(["validate-steps", str(d), "--gpu", "h200", "-o", str(tmp_path / "vs.json")], capsys),
                   "step 1 repeats the model 'block-bf16' of step 0", "block-bf16-run2")


# ------------------------------------------------------------------ a CSV where a JSON file belongs
@pytest.mark.parametrize("verb", [["trace", "show", "{P}"],
                                  ["simulate", "--trace", H200_TRACE, "--gpu", "h200", "--schedule", "{P}"]])
def test_a_profile_given_as_trace_or_schedule_is_named_not_called_truncated(verb, tmp_path, capsys):
    """A profile CSV given as a trace or schedule was "not valid JSON … the file may be truncated — re-export it"."""
    p = tmp_path / "p.csv"
    assert run_cli(["profile", "build", "--trace", H200_TRACE, "--gpu", "h200", "-o", str(p)], capsys)[0] == 0
    code, out, err = run_cli([str(p) if a == "{P}" else a for a in verb], capsys)
    one_error_line(code, out, err, "is not JSON: it begins with '# kdvfs-profile/1", "give it with --profile")
    assert "truncated" not in err


# ------------------------------------------------------------------ a step recorded without record_shapes
def _without_shapes(src: Path, dst: Path) -> Path:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if isinstance(e.get("args"), dict):
            for k in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides"):
                e["args"].pop(k, None)
    dst.write_text(json.dumps(doc))
    return dst


def test_a_step_without_input_shapes_is_noted_on_import_and_analyze(tmp_path, capsys):
    """The ViT step of leaseA with its shapes stripped imported and analysed without a word: its work came from kernel
    names, and the answer moved (−15.5 % against −17.7 % at 1 % slack). Checked here on the smaller block step."""
    raw = _without_shapes(LEASE_A / "steps" / "block-bf16.kineto.json.gz", tmp_path / "ns.json")
    code, _, err = run_cli(["trace", "import", str(raw), "-o", str(tmp_path / "ns.trace.json")], capsys)
    assert code == 0 and "from input shapes" in _flat(err) and "record_shapes=True" in _flat(err), err
    code, _, err = run_cli(["analyze", str(raw), "--gpu", "h200", "--slack", "0", "--no-kernel-switch-aware",
                            "-o", str(tmp_path / "an")], capsys)
    assert code == 0 and "from input shapes" in _flat(err), err
    # with its shapes (as recorded), and for the bundled study table: nothing said
    code, _, err = run_cli(["trace", "import", str(LEASE_A / "steps" / "block-bf16.kineto.json.gz"), "-o",
                            str(tmp_path / "b.trace.json")], capsys)
    assert code == 0 and "from input shapes" not in err
    code, _, err = run_cli(["analyze", RTX_TRACE, "--gpu", "rtx3080ti", "--slack", "0", "--no-kernel-switch-aware",
                            "-o", str(tmp_path / "an2")], capsys)
    assert code == 0 and "from input shapes" not in err


def test_analyze_takes_each_slack_once_in_order(tmp_path, capsys):
    """`analyze --slack 1 1` printed every row twice; `--slack 5 1` planned 5 % before 1 %, so a 5 % boundary schedule
    refused under the limiter could not fall back to 1 %'s (the order of the list changed the answer)."""
    docs = []
    for sl in (["2", "0", "2"], ["0", "2"]):
        code, out, err = run_cli(["analyze", H200_TRACE, "--gpu", "h200", "--slack", *sl, "--no-kernel-switch-aware",
                                  "--json", "-o", str(tmp_path / "-".join(sl))], capsys)
        assert code == 0, err
        docs.append(json.loads(out))
    assert docs[0]["slacks_pct"] == [0.0, 2.0] and docs[0]["rows"] == docs[1]["rows"]
    assert docs[0]["limiter_check"] == docs[1]["limiter_check"]
