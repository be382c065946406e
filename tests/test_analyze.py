"""``kdvfs analyze`` and the command line's help, version, labels and defaults."""

import argparse
import json

from conftest import ROOT, run_cli
from test_runtime import fake_trace

from kdvfs.analyze import IDEAL
from kdvfs.cli import build_parser
from kdvfs.trace import save_trace

HF = ROOT / "validation/h200/runtime/hf_gpt2_step.kineto.json.gz"


def test_analyze_kdvfs_trace_writes_report_and_clean_json(tmp_path, capsys):
    t = tmp_path / "fake.trace.json"
    save_trace(fake_trace(), t)
    out = tmp_path / "an"
    code, o, _ = run_cli(["analyze", str(t), "--gpu", "h200", "--slack", "0", "2", "-o", str(out), "--json"], capsys)
    assert code == 0
    d = json.loads(o)  # stdout is one JSON document, progress went elsewhere
    pols = {r["policy"] for r in d["rows"]}
    assert {IDEAL, "naive", "switch-aware", "switch-aware at module boundaries"} == pols
    assert d["slacks_pct"] == [0.0, 2.0] and d["gpu"] == "h200" and d["profile"] == "model"
    for name in ("analysis.json", "report.md", "analysis.png", "schedule-boundary-slack2.json"):
        assert (out / name).exists()
    report = (out / "report.md").read_text()
    assert IDEAL in report and "None" not in report
    # the free-switching numbers never appear unlabelled: every ideal row is named so
    ideal = [r for r in d["rows"] if r["mechanism"] is None]
    assert ideal and all(r["policy"] == IDEAL for r in ideal)


def test_analyze_kineto_file_end_to_end(tmp_path, capsys):
    code, o, _ = run_cli(["analyze", str(HF), "--gpu", "h200", "--slack", "1", "--no-kernel-switch-aware",
                          "-o", str(tmp_path / "hf")], capsys)
    assert code == 0 and IDEAL in " ".join(o.split())
    d = json.loads((tmp_path / "hf" / "analysis.json").read_text())
    assert any(g["name"] == "forward.GPT2Block" and g["repeat"] == 24 for g in d["trace"]["repeated_segments"])
    b = next(r for r in d["rows"] if r["policy"] == "switch-aware at module boundaries")
    assert b["time_change_pct"] <= 1.0 + 1e-9


def test_analyze_needs_a_card(tmp_path, capsys):
    t = tmp_path / "fake.trace.json"
    save_trace(fake_trace(), t)
    code, _, err = run_cli(["analyze", str(t)], capsys)
    assert code == 2 and "--gpu" in err


def test_every_option_has_help_and_version(capsys):
    p = build_parser()
    missing = []

    def walk(parser, path):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, path + [name])
            elif not a.help:
                missing.append((" ".join(path), a.dest))

    walk(p, [])
    assert missing == []
    code, o, _ = run_cli(["--version"], capsys)
    assert code == 0 and o.startswith("kdvfs ")
    code, o, _ = run_cli(["optimize", "--help"], capsys)
    o = " ".join(o.split())  # argparse wraps lines
    assert "(default: waste)" in o and "(default: None)" not in o


def test_optimize_labels_free_switching_and_builds_model_profile(tmp_path, capsys):
    t = tmp_path / "fake.trace.json"
    save_trace(fake_trace(), t)
    code, o, _ = run_cli(["optimize", "--trace", str(t), "--gpu", "h200", "--slack", "1"], capsys)
    assert code == 0 and IDEAL in " ".join(o.split())
    code, _, err = run_cli(["optimize", "--trace", str(t)], capsys)
    assert code == 2 and "--gpu" in err


def test_whatif_takes_the_card_from_the_profile_header(capsys):
    code, o, _ = run_cli(["whatif", "--trace", "gpt3xl-torch-h200-bf16", "--preset-latency-only", "--policy", "ideal",
                          "--mechanism", "sync", "--executor", "serial", "--json"], capsys)
    assert code == 0
    assert {r["gpu"] for r in json.loads(o)} == {"h200"}


def test_boundary_schedules_stay_within_their_slack_under_the_limiter(tmp_path, capsys):
    """On a card with a fitted power limiter analyze plans a boundary schedule again, with less slack, until the
    schedule run under the limiter stays within the slack asked; a larger slack never saves less than a smaller one."""
    code, o, _ = run_cli(["analyze", str(HF), "--gpu", "h200", "--slack", "1", "2", "5",
                          "--no-kernel-switch-aware", "-o", str(tmp_path / "an"), "--json"], capsys)
    d = json.loads(o)
    assert code == 0
    lim = d["limiter_check"]
    assert [r["slack_pct"] for r in lim] == [1.0, 2.0, 5.0]
    for r in lim:
        assert r["time_change_pct"] <= r["slack_pct"] + 1e-6
        assert r.get("planned_slack_pct", r["slack_pct"]) <= r["slack_pct"]
    e = [r["energy_change_pct"] for r in lim]
    assert e[1] <= e[0] + 1e-9 and e[2] <= e[1] + 1e-9
    rows = {r["slack_pct"]: r for r in d["rows"] if r["policy"] == "switch-aware at module boundaries"}
    for r in lim:  # the table's row is the schedule kept, with the slack it was planned with
        assert rows[r["slack_pct"]].get("planned_slack_pct") == r.get("planned_slack_pct")


def test_accepted_boundary_backs_off_and_reuses_a_smaller_slacks_schedule():
    import numpy as np

    from kdvfs.analyze import _accepted_boundary
    from kdvfs.bundled import default_profile_path, load_trace_by_name
    from kdvfs.gpus import get_gpu
    from kdvfs.optimize.problem import Problem
    from kdvfs.profile import load_profile
    from kdvfs.runtime_plan import boundary_schedule
    from kdvfs.switching import SwitchCosts

    tr = load_trace_by_name("gpt3xl-llmc-rtx3080ti")
    pb = Problem(tr, load_profile(default_profile_path(tr)))
    spec = get_gpu("rtx3080ti")
    costs = SwitchCosts(idle_power_w=spec.idle_power_w)
    seen = []

    def accept(s, slack):  # a stricter judge: only plans predicted within a quarter of the slack
        seen.append(s.predicted.time_change_pct)
        return s.predicted.time_change_pct <= 0.25 * slack + 1e-9

    first = boundary_schedule(pb, spec.switch, "predictive", 4.0, costs)
    s, planned = _accepted_boundary(pb, spec.switch, "predictive", 4.0, costs, first, accept, [])
    assert s.slack_pct == 4.0 and planned < 4.0 and s.predicted.time_change_pct <= 1.0 + 1e-9 and len(seen) >= 2
    # nothing accepted above an earlier slack's plan: that plan is reused, labelled with this slack
    never = _accepted_boundary(pb, spec.switch, "predictive", 5.0, costs, first, lambda s, sl: False,
                               [(4.0, planned, s)])
    assert never[1] == planned and never[0].slack_pct == 5.0 and np.array_equal(never[0].core_mhz, s.core_mhz)
