"""Summaries under validation/ are computed from their measurement files (``kdvfs summarize``), prose included."""

import json
import shutil

from conftest import ROOT, run_cli

from simulator.summaries import h200_summary, hf_runtime_summary

H200 = ROOT / "validation/h200"
BF16 = ROOT / "traces/gpt3xl-torch-h200-bf16.trace.json"


def test_h200_summary_is_the_kept_one():
    assert json.dumps(h200_summary(H200, BF16), indent=1) + "\n" == (H200 / "summary.json").read_text()


def test_h200_summary_prose_follows_the_data(tmp_path):
    for f in ("h200_measurements.json", "carryover.json"):
        shutil.copy(H200 / f, tmp_path / f)
    m = json.loads((tmp_path / "h200_measurements.json").read_text())
    m["stages"]["bwd.fc2"]["power_w"] = 699.4  # now the stage nearest the cap
    m["live_noop"]["none"]["boundaries_per_step"] = 21
    (tmp_path / "h200_measurements.json").write_text(json.dumps(m))
    doc = h200_summary(tmp_path, BF16)
    assert "(bwd.fc2 699 W at 1800-1965 MHz, fwd.fc1 684 W" in doc["energy_explanation"]["limiter"]
    assert doc["live_noop_switching"]["boundaries_per_step"] == 21
    assert "moves energy by +3.9 %" in doc["energy_explanation"]["session_variation"]


def test_hf_runtime_summary_counts_what_was_measured():
    kept = json.loads((H200 / "runtime/summary.json").read_text())
    doc = hf_runtime_summary(H200 / "runtime")
    for name, s in doc["schedules"].items():
        k = kept["schedules"][name]
        for key in ("regions_per_step", "plan_switches_per_step", "steps_with_expected_count", "steps", "measured"):
            assert s[key] == k[key], (name, key)


def test_summarize_cli_writes_the_file(tmp_path, capsys):
    code, out, _ = run_cli(["summarize", "h200", "--folder", str(H200), "-o", str(tmp_path / "s.json")], capsys)
    assert code == 0 and "isolated-and-summed" in out
    assert (tmp_path / "s.json").read_text() == (H200 / "summary.json").read_text()
