"""What a new user and a hostile tester found in session 12, each fixed and kept fixed; first session 11's six
leftovers (whatif and frontier with an anchored profile, ``-o`` over a file of another kind, an interrupted whatif,
``Kernel.concurrency`` dropped by readers, unmatched Chrome "B" events). The commands and numbers are in
``validation/user-findings12/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
ANCHOR_A1 = ROOT / "validation" / "h200" / "lease_anchor" / "leaseA" / "anchorA1.json.gz"
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step


@pytest.fixture(scope="module")
def anchored(tmp_path_factory):
    """(a profile built with --anchors, the same profile with its header's card words dropped)."""
    from kdvfs.cli import main

    d = tmp_path_factory.mktemp("anchored")
    p = d / "p.csv"
    assert main(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)]) == 0
    lines = p.read_text().splitlines(keepends=True)
    bare = d / "bare.csv"
    bare.write_text(" ".join(w for w in lines[0].split() if not w.startswith("card.")) + "\n" + "".join(lines[1:]))
    return p, bare


# ------------------------------------------------ leftover 1: whatif with an anchored profile uses the profile's card
def test_whatif_with_an_anchored_profile_prices_the_profiles_card(anchored, capsys):
    """whatif's workers built the card by name: with a profile built with --anchors the limiter's idle card, the gaps
    and the switch stalls were the bundled card's (a caution said so). They now adapt the card to the header, as
    compare does: the rows are compare's rows for the same switch model, and differ from the bare profile's."""
    p, bare = anchored
    rows = {}
    for prof in (p, bare):
        code, out, err = run_cli(["whatif", "--trace", TRACE, "--profile", str(prof), "--latency", "6e-3",
                                  "--mechanism", "sync", "--policy", "auto", "--policy", "naive", "--executor",
                                  "serial", "--limiter", "off", "--json"], capsys)
        assert code == 0, err
        assert ("Card: the profile was built" in err) == (prof == p), err
        assert "Caution" not in err
        rows[prof] = {r["policy"]: r for r in json.loads(out)}
    assert rows[p]["naive"]["energy_change_pct"] != rows[bare]["naive"]["energy_change_pct"]
    code, out, err = run_cli(["compare", "--trace", TRACE, "--profile", str(p), "--switch-latency", "6e-3",
                              "--mechanism", "sync", "--limiter", "off", "--json"], capsys)
    assert code == 0, err
    cmp = {r["policy"]: r for r in json.loads(out)["rows"]}
    for pol, cpol in (("auto", "auto"), ("naive", "kernel naive")):
        for k in ("energy_change_pct", "time_change_pct"):
            assert rows[p][pol][k] == pytest.approx(cmp[cpol][k], abs=1e-9), (pol, k)


def test_whatif_under_the_limiter_prices_the_profiles_card(anchored, monkeypatch):
    """The same under the limiter: a worker hands the limited simulation the card adapted to the header (its idle
    power between kernels), not the bundled card by name. (Checked at the hand-over: the limited rows of a real
    policy cost ~10 s each on the shared cores; compare's own limited path is tested in session 11.)"""
    import simulator.limited_whatif as lw
    from kdvfs.card_anchor import CardAnchor, adapted
    from kdvfs.gpus import get_gpu
    from kdvfs.profile import load_profile
    from simulator.whatif import Scenario, run_scenario

    seen = []

    def spy(trace_ref, pb, card, *a):
        seen.append(get_gpu(card) if isinstance(card, str) else card)
        return {"time_change_pct": 0.0, "energy_change_pct": 0.0, "switches": 0}

    monkeypatch.setattr(lw, "limited_scenario_row", spy)
    p, bare = anchored
    for prof in (p, bare):
        run_scenario(TRACE, str(prof), "h200", Scenario("h200", 6e-3, "sync", "naive", 1.0), limiter=True)
    h200 = get_gpu("h200")
    card = adapted(h200, None, CardAnchor.from_header(load_profile(p).card, "h200", "test"))[0]
    assert card.idle_power_w != h200.idle_power_w
    assert [c.idle_power_w for c in seen] == [card.idle_power_w, h200.idle_power_w]


# -------------------------------------------------------------- leftover 2: frontier reads the profile's card header
def test_frontier_checks_and_names_the_profiles_card(anchored, tmp_path, capsys):
    """frontier took a profile's `card.` header without a look: a damaged card word was used silently where every
    other verb refuses it, and the card it was built for went unnamed. (The frontier itself is priced on the profile's
    kernel times and energies with free switching, so its numbers do not move.)"""
    import re

    p, bare = anchored
    docs = []
    for prof in (p, bare):
        code, out, err = run_cli(["frontier", "--trace", TRACE, "--profile", str(prof), "--slack-max", "2", "--json"],
                                 capsys)
        assert code == 0, err
        assert ("Card: the profile was built (`profile build --anchors`) for the card of anchorA1.json.gz"
                in " ".join(err.split())) == (prof == p), err
        docs.append(json.loads(out))
    assert docs[0] == docs[1]
    lines = p.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.csv"
    bad.write_text(re.sub(r"card\.static_w=\S+", "card.static_w=abc", lines[0]) + "".join(lines[1:]))
    code, out, err = run_cli(["frontier", "--trace", TRACE, "--profile", str(bad), "--slack-max", "2"], capsys)
    one_error_line(code, out, err, "static_w", "is not a number")


# ---------------------------------------- leftover 3: an output never replaces a file of another kind without --force
KINETO = ROOT / "validation" / "h200" / "steps12" / "poolformer-s12.kineto.json.gz"
BUNDLED_PROFILE = ROOT / "traces" / f"{TRACE}.profile.csv.gz"
BUNDLED_TRACE = ROOT / "traces" / f"{TRACE}.trace.json"


def test_kind_of_tells_the_projects_files_apart(tmp_path):
    from kdvfs.filekind import CHROME, FIGURE, PROFILER, kind_of

    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [], "displayTimeUnit": "ms"}))
    (tmp_path / "f.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))
    (tmp_path / "r.csv").write_text("slack_pct,time_change_pct\n0,0\n")
    (tmp_path / "empty.csv").write_text("")
    assert kind_of(BUNDLED_PROFILE) == "kdvfs-profile/1"
    assert kind_of(BUNDLED_TRACE) == "kdvfs-trace/1"
    assert kind_of(KINETO) == PROFILER
    assert kind_of(tmp_path / "t.json") == CHROME
    assert kind_of(tmp_path / "f.png") == FIGURE
    for plain in ("r.csv", "empty.csv", "missing.csv"):
        assert kind_of(tmp_path / plain) is None


@pytest.mark.parametrize("victim,args,needle", [
    ("profile", ["frontier", "--trace", TRACE, "-o", "{}"], "is a kdvfs profile, not its results"),
    ("trace", ["whatif", "--trace", TRACE, "--policy", "auto", "--latency", "6e-3", "-o", "{}"],
     "is a kdvfs trace, not its results"),
    ("profile", ["trace", "import", str(KINETO), "-o", "{}"], "is a kdvfs profile, not a kdvfs trace"),
    ("trace", ["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", "{}"], "is a kdvfs trace, not a kdvfs "
                                                                                  "profile"),
    ("kineto", ["simulate", "--trace", TRACE, "--schedule", "{s}", "--timeline", "{}"],
     "is a PyTorch profiler trace, not a Chrome trace"),
    ("schedule", ["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", "{}"], "is a kdvfs schedule"),
    ("profile", ["limiter", "whatif", "--trace", TRACE, "--gpu", "h200", "--md", "{}"], "is a kdvfs profile, not markdown tables"),
])
def test_an_output_over_a_file_of_another_kind_is_refused(tmp_path, capsys, victim, args, needle):
    """`frontier -o my.profile.csv.gz`, `whatif -o my.trace.json`, `simulate --timeline step.json.gz` (a profiler
    trace) and the like replaced the user's file with the result, exit 0 (only `optimize -o` refused, in its own
    words). One check for every verb now refuses a file of another kind, naming it, its kind and the fix."""
    import shutil

    sched = tmp_path / "s.json"
    assert run_cli(["optimize", "--trace", TRACE, "--slack", "1", "-o", str(sched)], capsys)[0] == 0
    src = {"profile": BUNDLED_PROFILE, "trace": BUNDLED_TRACE, "kineto": KINETO, "schedule": sched}[victim]
    target = tmp_path / ("victim-" + src.name)
    shutil.copy(src, target)
    before = target.read_bytes()
    argv = [x.format(str(target), s=str(sched)) for x in args]
    code, out, err = run_cli(argv, capsys)
    one_error_line(code, out, err, repr(str(target)), needle, "give a new file name", "--force")
    assert target.read_bytes() == before


def test_force_replaces_and_an_own_kind_or_plain_file_is_replaced_without_it(tmp_path, capsys):
    import shutil

    target = tmp_path / "p.csv.gz"
    shutil.copy(BUNDLED_TRACE, target)  # a trace where the profile goes: --force replaces it
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", str(target), "--force"],
                   capsys)[0] == 0
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", str(target)], capsys)[0] == 0
    plain = tmp_path / "f.csv"
    plain.write_text("a,b\n1,2\n")  # a CSV of no kdvfs kind (an older frontier) is replaced
    code, out, err = run_cli(["frontier", "--trace", TRACE, "--slack-max", "1", "-o", str(plain)], capsys)
    assert code == 0, err
    assert plain.read_text().startswith("slack_pct")


def test_every_output_kind_names_a_verb_that_exists():
    """A misspelt function name in the table would leave that verb's output unchecked without a word."""
    import kdvfs.cli as cli
    from kdvfs.cli.paths import OUTPUT_KINDS, STRICT_OUTPUTS

    fns = {n for m in cli._MODULES for n in dir(m) if n.startswith("cmd_")}
    assert {f for f, _ in (*OUTPUT_KINDS, *STRICT_OUTPUTS)} <= fns


# ----------------------------------------------------------------- leftover 4: an interrupted whatif resumes
def test_an_interrupted_whatif_resumes_and_writes_what_an_uninterrupted_run_writes(tmp_path, capsys, monkeypatch):
    """`whatif -o w.csv` cut short (Ctrl-C) lost every scenario done and started over. Each finished task is now kept
    beside the CSV; the same command resumes from it, runs only the rest, and writes the same CSV byte for byte."""
    import simulator.whatif as wi

    base = ["whatif", "--trace", TRACE, "--latency", "6e-3", "--mechanism", "sync",
            "--policy", "auto", "--policy", "naive", "--executor", "serial", "--limiter", "off"]
    ref = tmp_path / "ref.csv"
    assert run_cli([*base, "-o", str(ref)], capsys)[0] == 0
    assert not (tmp_path / "ref.csv.partial.jsonl").exists()  # removed once the CSV is written

    real, calls = wi.run_scenarios, []

    def stop_after_one(*args):
        if len(calls) == 1:
            raise KeyboardInterrupt
        calls.append(args[3])
        return real(*args)

    out = tmp_path / "w.csv"
    monkeypatch.setattr(wi, "run_scenarios", stop_after_one)
    code, _, err = run_cli([*base, "-o", str(out)], capsys)
    assert code == 130 and not out.exists()
    assert f"1 of 2 scenarios kept in {out}.partial.jsonl" in " ".join(err.split()), err

    calls.clear()
    monkeypatch.setattr(wi, "run_scenarios", lambda *args: calls.append(args[3]) or real(*args))
    code, _, err = run_cli([*base, "-o", str(out)], capsys)
    assert code == 0, err
    assert "resuming: 1 of 2 scenarios" in " ".join(err.split())
    assert len(calls) == 1  # only the task not done
    assert out.read_bytes() == ref.read_bytes()
    assert not (tmp_path / "w.csv.partial.jsonl").exists()


def test_a_journal_of_another_grid_is_not_taken(tmp_path, capsys):
    """A journal left by another grid (here: another slack) must not fill this grid's rows."""
    from simulator.whatif_journal import JOURNAL_FORMAT

    out = tmp_path / "w.csv"
    j = tmp_path / "w.csv.partial.jsonl"
    j.write_text(json.dumps({"format": JOURNAL_FORMAT, "key": "another"}) + "\n"
                 + json.dumps({"task": [0], "rows": [{"gpu": "h200", "time_change_pct": 99.0}]}) + "\n")
    code, _, err = run_cli(["whatif", "--trace", TRACE, "--latency", "6e-3", "--mechanism", "sync", "--policy", "auto",
                            "--executor", "serial", "--limiter", "off", "-o", str(out)], capsys)
    assert code == 0, err
    assert "holds an interrupted run of another grid" in " ".join(err.split())
    assert "99" not in out.read_text().splitlines()[1]


# ------------------------------------------ leftover 5: Kernel.concurrency is never dropped, by this reader or an older
WAV2VEC = ROOT / "validation" / "h200" / "steps11" / "wav2vec2-base-b4.kineto.json.gz"


@pytest.fixture(scope="module")
def concurrent_trace(tmp_path_factory):
    """The wav2vec2 step (grouped convolutions side by side on several streams) imported by the command line."""
    from kdvfs.cli import main

    p = tmp_path_factory.mktemp("conc") / "w.trace.json"
    assert main(["trace", "import", str(WAV2VEC), "-o", str(p)]) == 0
    return p


def test_a_trace_with_concurrency_is_one_an_older_kdvfs_refuses(concurrent_trace, monkeypatch):
    """A kdvfs older than `concurrency` read such a trace without the field (its reader drops unknown kernel fields)
    and priced those kernels as if each ran alone. The trace is now written as kdvfs-trace/2, which an older reader
    refuses ("newer than this kdvfs understands; upgrade kdvfs"); one without the field stays kdvfs-trace/1."""
    import kdvfs.trace as tr
    from kdvfs.errors import FormatError

    doc = json.loads(concurrent_trace.read_text())
    assert doc["format"] == "kdvfs-trace/2"
    t = tr.load_trace(concurrent_trace)
    assert sum(k.concurrency is not None for k in t.kernels) > 0
    assert tr.trace_to_dict(tr.load_trace(BUNDLED_TRACE))["format"] == "kdvfs-trace/1"
    monkeypatch.setattr(tr, "FORMATS", ("kdvfs-trace/1",))  # the reader of session 11 and before
    with pytest.raises(FormatError, match="newer than this kdvfs understands.*upgrade kdvfs"):
        tr.load_trace(concurrent_trace)


@pytest.mark.slow  # ~10 s: two imports, a profile, a carried problem
def test_every_rebuild_of_a_kernel_keeps_its_concurrency(concurrent_trace, tmp_path, capsys):
    """The trace's kernels rebuilt by saving and loading, by `trace import` of the saved file's source with
    `--step all`, and by carrying the trace to another batch size (kdvfs.scaling) keep it."""
    from kdvfs.gpus import get_gpu
    from kdvfs.optimize import Problem
    from kdvfs.profile import load_profile
    from kdvfs.scaling import scaled_for
    from kdvfs.trace import load_trace, save_trace

    t = load_trace(concurrent_trace)
    conc = [k.concurrency for k in t.kernels]
    back = tmp_path / "again.trace.json.gz"
    save_trace(t, back)
    assert [k.concurrency for k in load_trace(back).kernels] == conc
    allsteps = tmp_path / "all.trace.json"
    assert run_cli(["trace", "import", str(WAV2VEC), "--step", "all", "-o", str(allsteps)], capsys)[0] == 0
    assert [k.concurrency for k in load_trace(allsteps).kernels] == conc
    prof = tmp_path / "p.csv.gz"
    assert run_cli(["profile", "build", "--trace", str(concurrent_trace), "--gpu", "h200", "-o", str(prof)],
                   capsys)[0] == 0
    import dataclasses

    sized = dataclasses.replace(t, batch_size=4, seq_len=1024)  # the recorded step does not say its size
    pb = Problem(sized, load_profile(prof).for_trace(sized))
    sim_pb, _ = scaled_for(pb, get_gpu("h200"), 8, 1)
    assert [k.concurrency for k in sim_pb.trace.kernels] == conc


def test_an_unknown_kernel_field_is_said_not_dropped_silently(tmp_path, caplog):
    """The next field a newer kdvfs adds must not be dropped without a word, as `concurrency` was by older readers."""
    from kdvfs.trace import load_trace

    doc = json.loads(BUNDLED_TRACE.read_text())
    doc["segments"][0]["kernels"][0]["sm_share"] = 0.5
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    with caplog.at_level("WARNING", logger="kdvfs.trace"):
        load_trace(p)
    assert "'sm_share' are unknown to this kdvfs and are ignored" in caplog.text


# ------------------------------------------------------- leftover 6: Chrome "B"/"E" events, paired or named
def _chrome(tmp_path, extra):
    """A small profiler trace: the bundled PoolFormer step's events, with ``extra`` events appended."""
    import gzip

    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    doc["traceEvents"] += extra
    p = tmp_path / "step.json"
    p.write_text(json.dumps(doc))
    return p


def test_an_unmatched_b_event_is_named_not_ignored(tmp_path, capsys, caplog):
    """A "B" event never closed by its "E" was dropped without a word (every non-"X" event was); it is now named on
    stderr and in the trace's notes, and a matched pair is read as the complete event it is."""
    from kdvfs.kineto import read_kineto

    b = {"ph": "B", "name": "nn.Module: Lost", "cat": "python_function", "pid": 1, "tid": 99, "ts": 1.0}
    p = _chrome(tmp_path, [b])
    out = tmp_path / "t.json"
    with caplog.at_level("WARNING", logger="kdvfs.kineto"):  # the command line shows it on stderr
        code, _, err = run_cli(["trace", "import", str(p), "-o", str(out)], capsys)
    assert code == 0, err
    words = caplog.text
    assert "1 Chrome duration event(s) without their pair ignored" in words
    assert "a 'B' never closed by an 'E': 'nn.Module: Lost' (python_function, pid 1 tid 99, ts=1.0)" in words
    assert "'nn.Module: Lost'" in json.loads(out.read_text())["notes"]
    pair = [dict(b, tid=98, name="ProfilerStep#77", cat="user_annotation", ts=5.0),
            {"ph": "E", "pid": 1, "tid": 98, "ts": 9.5}]
    raw = read_kineto(_chrome(tmp_path, pair))
    assert ("ProfilerStep#77" in [s[2] for s in raw.steps]) and not raw.unmatched
    assert [s for s in raw.steps if s[2] == "ProfilerStep#77"][0][:2] == (5.0, 9.5)


# ======================================================== a new user on steps12, then a hostile tester (part 2)
@pytest.mark.parametrize("extra,needles", [
    (["--scaling", "0,1"], ["--scaling '0,1'", "from 1 to 100000"]),  # was a ZeroDivisionError traceback
    (["--scaling", ","], ["--scaling ','"]),
    (["--hidden", "0", "--tp", "2"], ["--hidden 0", "≥ 1"]),  # was exit 0 with all-reduces of no bytes
])
def test_simulate_refuses_absurd_sizes_at_once(tmp_path, capsys, extra, needles):
    sched = tmp_path / "s.json"
    assert run_cli(["optimize", "--trace", TRACE, "--slack", "1", "-o", str(sched)], capsys)[0] == 0
    code, out, err = run_cli(["simulate", "--trace", TRACE, "--schedule", str(sched), *extra], capsys)
    one_error_line(code, out, err, *needles)


def test_simulate_says_a_wrong_schedule_file_before_loading_the_profile(tmp_path, capsys, monkeypatch):
    """A trace given as --schedule was named only after the trace and profile had loaded (12 s on the Mixtral step)."""
    import kdvfs.cli.sim as sim

    monkeypatch.setattr(sim, "problem", lambda a: pytest.fail("the profile was loaded first"))
    code, out, err = run_cli(["simulate", "--trace", TRACE, "--schedule", str(BUNDLED_TRACE)], capsys)
    one_error_line(code, out, err, "not a kdvfs schedule")


@pytest.mark.parametrize("extra,needle", [
    (["--slack-max", "nan"], "--slack-max nan"),
    (["--slack-step", "0"], "--slack-step 0"),
    (["--slack-min", "5", "--slack-max", "1"], "--slack-min 5, --slack-max 1"),
    (["--slack-max", "5000"], "slack 5000"),
])
def test_frontier_names_each_bound_of_a_bad_range_before_loading(capsys, monkeypatch, extra, needle):
    """`frontier --slack-max nan` said "need slack-step > 0 and slack-max ≥ slack-min, got 0.0, nan, 1.0" (which is
    which?) after loading the profile."""
    import kdvfs.cli.optimize as opt

    monkeypatch.setattr(opt, "problem", lambda a: pytest.fail("the profile was loaded first"))
    code, out, err = run_cli(["frontier", "--trace", TRACE, *extra], capsys)
    one_error_line(code, out, err, needle)


def test_compare_under_the_limiter_reports_progress(monkeypatch, capsys):
    """compare under the H200's limiter ran 45 s in silence on the Mixtral step of steps12; it now says how many of
    its policies are done (stderr; stdout stays one JSON document)."""
    import kdvfs.cli.common as common
    import simulator.limited_whatif as lw

    real = lw.limited_rows  # the auto row alone: the eight policies take ~20 s on the shared cores
    monkeypatch.setattr(lw, "limited_rows", lambda *a, **kw: real(*a, **dict(kw, policies=("auto",))))
    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)
    code, out, err = run_cli(["compare", "--trace", TRACE, "--slack", "1", "--json"], capsys)
    assert code == 0, err
    assert "policies under the limiter: 1/8" in err, err
    assert json.loads(out)["limiter"] is True


def test_a_profiler_trace_is_shown_and_named_where_a_kdvfs_trace_is_expected(capsys):
    """`trace show step.json.gz` (the README's step 2 without the import) said "not a kdvfs trace ("format" is None,
    expected 'kdvfs-trace/1')"; it now shows the trace imported in memory, as analyze reads one, and the verbs that
    need a kdvfs trace say what the file is and how to import it."""
    code, out, err = run_cli(["trace", "show", str(KINETO), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["name"] == "poolformer-s12"
    code, out, err = run_cli(["optimize", "--trace", str(KINETO)], capsys)
    one_error_line(code, out, err, "is a PyTorch profiler (Chrome) trace, not a kdvfs trace", "kdvfs trace import")


@pytest.mark.parametrize("verb", [["analyze", "{}", "--gpu", "h200"], ["trace", "show", "{}"]])
def test_a_gzip_cut_short_is_one_line(tmp_path, capsys, verb):
    """`analyze cut.json.gz` (a gzip cut short in its first bytes) ended in an EOFError traceback from the sniff
    that tells a profiler trace from a kdvfs one."""
    import gzip

    p = tmp_path / "cut.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": []}')[:12])
    code, out, err = run_cli([x.format(p) for x in verb], capsys)
    one_error_line(code, out, err, "truncated")
