import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli


def test_demo_from_an_unrelated_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "kdvfs", "demo", "--executor", "local"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "kdvfs-demo"
    for f in ("table2.csv", "whatif.csv", "whatif.png", "frontier.csv", "frontier.png", "summary.json"):
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    gens = {r["generation"] for r in s["whatif"]}
    assert gens == {"Ampere", "Hopper", "Blackwell", "IVR"}
    assert {r["policy"] for r in s["whatif"]} == {"auto", "pass", "ideal", "naive", "switch-aware"}
    assert "What survives the switch latency" in r.stdout


def test_gpu_commands(capsys):
    code, out, _ = run_cli(["gpu", "list", "--json"], capsys)
    assert code == 0 and {g["name"] for g in json.loads(out)} >= {"rtx3080ti", "h200", "ivr"}
    code, out, _ = run_cli(["gpu", "show", "h200", "--json"], capsys)
    d = json.loads(out)
    fit = json.loads((Path(__file__).resolve().parent.parent / "traces" / "h200.fit.json").read_text())
    # the h200 preset reads its fitted constants from the stored fit, each sourced to it
    assert code == 0 and d["cap_w"] == fit["params"]["cap_w"] and "fitted" in d["sources"]["cap_w"]
    assert d["idle_power_w"] == 122.0 and "read here" in d["sources"]["idle_power_w"]


def test_compare_table(capsys):
    code, out, _ = run_cli(["compare", "--trace", "gpt3xl-llmc-rtx3080ti", "--switch-model", "b200", "--mechanism",
                            "predictive", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and [r["policy"] for r in d["rows"]] == ["auto", "pass-level", "kernel ideal (free switching)",
                                                             "kernel naive", "switch-aware"]


def test_usage_error_exit_code(capsys):
    code, _, err = run_cli(["optimize"], capsys)
    assert code == 2 and "--trace" in err
