"""What a new user and a hostile tester found in session 6 (the H200 work of issue 12), each fixed and kept fixed.

Every bad input must give one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).parent / "data" / "foreign-transformer.kineto.json.gz"
CHAR4 = ROOT / "validation/h200/characterization/characterization4.json.gz"


def _one_error_line(code, out, err, *needles):
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kdvfs: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


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
