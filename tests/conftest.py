import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def spaan_trace():
    from kdvfs.bundled import load_trace_by_name

    return load_trace_by_name("gpt3xl-llmc-rtx3080ti")


@pytest.fixture(scope="session")
def spaan_profile():
    from kdvfs.bundled import resolve_profile_path
    from kdvfs.profile import load_profile

    return load_profile(resolve_profile_path("gpt3xl-llmc-rtx3080ti"))


@pytest.fixture(scope="session")
def spaan_problem(spaan_trace, spaan_profile):
    from kdvfs.optimize import Problem

    return Problem(spaan_trace, spaan_profile)


def write_csv_rows(path, rows):
    """``rows`` (dicts with the same keys) written as a CSV with a header at ``path``; returns ``path``."""
    import csv

    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def run_cli(args, capsys):
    from kdvfs.cli import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_step_folder(tmp_path, lease, model="block-bf16"):
    """A steps folder in ``tmp_path`` holding one measured step of ``lease`` (a folder with ``steps/steps.json`` and
    its Kineto traces): that step's row and its trace only."""
    import json
    import shutil

    d = tmp_path / "steps"
    d.mkdir()
    doc = json.loads((lease / "steps" / "steps.json").read_text())
    doc["steps"] = [s for s in doc["steps"] if s["model"] == model]
    (d / "steps.json").write_text(json.dumps(doc))
    shutil.copy(lease / "steps" / f"{model}.kineto.json.gz", d)
    return d


def one_error_line(code, out, err, *needles):
    """A refused command: exit 2, no traceback, one ``kdvfs: error:`` line on stderr holding each of ``needles``."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kdvfs: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _kdvfs_state_dir(tmp_path_factory, monkeypatch):
    """Clock markers (hw_backend.safety) go to a temporary folder, never the user's ~/.cache."""
    monkeypatch.setenv("KDVFS_STATE_DIR", str(tmp_path_factory.mktemp("kdvfs-state")))
