"""``kdvfs profile diagnose`` (``kdvfs.diagnosis``): the calibration diagnosis that was ``scripts/best_setting_diagnosis``."""

import json

from conftest import ROOT, one_error_line, run_cli

FIT = ROOT / "traces" / "gpt3xl-llmc-rtx3080ti.calibration.json"
KEPT = ROOT / "validation" / "rtx3080ti-calibration" / "structure" / "diagnosis.json"


def test_diagnose_rebuilds_the_kept_diagnosis_of_the_bundled_fit(tmp_path, capsys):
    out = tmp_path / "d.json"
    code, text, err = run_cli(["profile", "diagnose", str(FIT), "--out", str(out)], capsys)
    assert code == 0, err
    doc, kept = json.loads(out.read_text()), json.loads(KEPT.read_text())
    assert doc["data"] == kept["data"] and doc["locked_memory"] == kept["locked_memory"]
    assert doc["fits"][0]["kernels"] == kept["fits"][0]["kernels"]  # the kept file diagnosed this fit first
    assert f"best missed {kept['fits'][0]['best_missed']}/46" in text
    code, js, _ = run_cli(["profile", "diagnose", str(FIT), "--json"], capsys)
    assert code == 0 and json.loads(js)["fits"][0]["best_missed"] == kept["fits"][0]["best_missed"]


def test_diagnose_refuses_a_file_that_is_not_a_calibration(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "something else"}')
    one_error_line(*run_cli(["profile", "diagnose", str(bad)], capsys), "x.json", "card_vector")
    one_error_line(*run_cli(["profile", "diagnose", str(tmp_path / "missing.json")], capsys), "does not exist")


def test_pass_context_check_rebuilds_the_kept_file():
    """``scripts.pass_context_check`` is ``kdvfs.diagnosis.pass_context_check``: the kept document, byte for byte."""
    from kdvfs.diagnosis import pass_context_check, pass_context_lines

    doc = pass_context_check()
    kept = ROOT / "validation" / "rtx3080ti-calibration" / "pass_context.json"
    assert json.dumps(doc, indent=1, default=float) + "\n" == kept.read_text()
    lines = pass_context_lines(doc)
    assert len(lines) == len(doc["table_fit_with_terms"]) + sum(len(v) for v in doc["bounds"].values())
