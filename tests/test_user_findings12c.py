"""Session 12, a new user from the README (tester12c): what the README said that the package did not do, kept fixed.

The commands and numbers are in ``validation/user-findings12c/README.md``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kdvfs.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _verbs() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")  # argparse keeps no public list of subcommands
    return sorted(sub.choices)


def test_readme_commands_line_names_every_verb():
    """The README's ``Commands:`` list had no ``kdvfs card-anchor`` (the one-minute anchor run's report)."""
    commands = README[README.index("Commands: `kdvfs"):]
    commands = commands[:commands.index("--help")]
    named = set(re.findall(r"`kdvfs ([a-z0-9-]+)", commands))
    missing = [v for v in _verbs() if v not in named]
    assert not missing, f"verbs the README's Commands list does not name: {missing}"
    assert "card-anchor" in _verbs()


def test_test_extra_can_run_the_suite_in_parallel():
    """``pip install '.[test,ray]'`` then ``pytest -n 2`` failed: the test extra had no pytest-xdist."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(req.startswith("pytest-xdist") for req in extras["test"]), extras["test"]
    assert "-n auto" in README


def test_readme_install_comment_names_the_base_dependencies():
    """The install line's comment left out networkx and nvidia-ml-py and put nvidia-ml-py under the torch extra."""
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    line = next(ln for ln in README.splitlines() if ln.startswith("python3 -m pip install .  "))
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", dep).group(0)
        assert name in line, f"{name} missing from the README's install comment: {line}"


@pytest.mark.slow
def test_readme_gpt2_limiter_number_is_what_analyze_gives(tmp_path, capsys):
    """The README said the GPT-2 step's boundary schedules "now run +0.68 %" under the limiter; analyze gives +0.54 %."""
    stated = re.search(r"they now run \+([0-9.]+) % each, planned with ([0-9.]+) %", README)
    assert stated, "the README's GPT-2 limiter sentence changed: update this test with it"
    trace = ROOT / "validation/h200/runtime/hf_gpt2_step.kineto.json.gz"
    assert main(["analyze", str(trace), "--gpu", "h200", "--slack", "1", "-o", str(tmp_path / "a"), "--json"]) == 0
    capsys.readouterr()
    check = json.loads((tmp_path / "a" / "analysis.json").read_text())["limiter_check"]
    row = next(r for r in check if r["slack_pct"] == 1.0)
    assert round(row["time_change_pct"], 2) == float(stated.group(1))
    assert row["planned_slack_pct"] == float(stated.group(2))
