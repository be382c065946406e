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


# ------------------------------ leftover 3: sub-module segments of a layer that ran without hooks (SqueezeBERT's 104)
def _kineto_sublayers(layers: int, with_layer: bool) -> dict:
    """One forward step of ``layers`` identical layers, each four sub-modules (``Attn``, ``Norm``, ``Mlp``, ``Norm``:
    SqueezeBERT's ``SqueezeBertSelfAttention``, ``ConvDropoutLayerNorm``, ``ConvActivation``,
    ``ConvDropoutLayerNorm``) under an ``Encoder``; the layer's own module range only ``with_layer`` (Hugging Face's
    SqueezeBERT calls ``layer.forward(...)``, which runs no hooks, so its traces have none)."""
    ev: list[dict] = []
    corr = [0]

    def module(name, ts, dur):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"kdvfs.module:{name}", "ts": ts, "dur": dur,
                   "pid": 1, "tid": 1})

    def op(name, kernel, ts):
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 4, "pid": 1, "tid": 1, "args": {}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts + 1, "dur": 1, "pid": 1,
                   "tid": 1, "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": 5000 + 20 * corr[0], "dur": 10 + corr[0] % 2,
                   "pid": 0, "tid": 7, "args": {"correlation": corr[0], "stream": 7, "grid": [8, 1, 1],
                                                 "block": [128, 1, 1]}})

    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 4990, "pid": 1, "tid": 1})
    module("Model_0", 1, 4980)
    op("aten::embedding", "embedding_kernel", 2)
    module("Encoder_0", 9, 4900)
    subs = (("Attn", "gemm_kernel_a"), ("Norm", "layer_norm_kernel"), ("Mlp", "gemm_kernel_b"),
            ("Norm", "layer_norm_kernel"))
    n = {"Attn": 0, "Norm": 0, "Mlp": 0}
    for i in range(layers):
        t0 = 10 + 400 * i
        if with_layer:
            module(f"Layer_{i}", t0, 390)
        for q, (cls, kernel) in enumerate(subs):
            module(f"{cls}_{n[cls]}", t0 + 5 + 90 * q, 80)
            n[cls] += 1
            op("aten::mm" if "gemm" in kernel else "aten::native_layer_norm", kernel, t0 + 10 + 90 * q)
            op("aten::add", "vectorized_elementwise_kernel_add", t0 + 40 + 90 * q)
    op("aten::sum", "reduce_kernel", 10 + 400 * layers)
    return {"traceEvents": ev}


def test_a_layer_seen_only_through_its_sub_modules_is_said_not_silently_unfolded(tmp_path):
    """SqueezeBERT's forward imported as 48 sub-module segments (plus the backward's) with no word why, where the
    README promises `forward.Layer × 12`. The sub-modules are kept as segments: the layer module never ran its hooks,
    so they are the only boundaries a runtime sees, and folding them into a segment named by the group's first class
    would miscount that class's events (it occurs twice in a group). The import now says what repeats and why."""
    from kdvfs.importers import import_kineto
    from kdvfs.runtime_plan import regions_of

    p = tmp_path / "sub.json"
    p.write_text(json.dumps(_kineto_sublayers(3, with_layer=False)))
    imp = import_kineto(p, name="sub")
    fwd = [s for s in imp.trace.segments if s.pass_name == "forward" and "." in s.name]
    assert [s.name.split("#")[0] for s in fwd] == ["forward.Attn", "forward.Norm", "forward.Mlp", "forward.Norm"] * 3
    assert all(s.repeat == 1 for s in fwd)
    note = " ".join(imp.trace.notes.split())
    assert "forward: module instances repeat unfolded × 3, a group of 4 (Attn, Norm, Mlp, Norm)" in note, note
    assert "layer.forward(...)" in note
    # every sub-module start is a runtime event, each counted as the runtime will see it (Norm twice a layer)
    events = [ev for ev, *_ in regions_of(imp.trace)]
    assert events.count("forward.Norm") == 6 and events.count("forward.Attn") == 3

    # the control: with the layer's own range the layers fold, and nothing is said
    p2 = tmp_path / "layer.json"
    p2.write_text(json.dumps(_kineto_sublayers(3, with_layer=True)))
    imp2 = import_kineto(p2, name="layer")
    seg = {s.name: s for s in imp2.trace.segments}
    assert seg["forward.Layer"].repeat == 3 and len(seg["forward.Layer"].kernels) == 8
    assert "a group of" not in str(imp2.trace.notes)


def test_trace_import_says_why_the_layers_did_not_fold(tmp_path, capsys):
    p = tmp_path / "sub.json"
    p.write_text(json.dumps(_kineto_sublayers(2, with_layer=False)))
    code, out, err = run_cli(["trace", "import", str(p), "-o", str(tmp_path / "t.json")], capsys)
    assert code == 0, err
    assert "forward: module instances repeat unfolded × 2" in " ".join(out.split())


def test_a_group_of_one_class_or_of_different_kernels_is_no_group():
    """merge_units already folds consecutive instances of one class; a group whose kernels differ is no repeat."""
    import numpy as np

    from kdvfs.structure import Block, unit_group_repeat

    keys = np.arange(8)
    assert unit_group_repeat(keys, [Block(0, 2, 4, "Layer")]) is None
    blocks = [Block(i, 1, 1, ("Attn_0", "Mlp_0")[i % 2]) for i in range(8)]
    assert unit_group_repeat(keys, blocks) is None  # every kernel different
    assert unit_group_repeat(np.array([5, 6] * 4), blocks) == (("Attn_0", "Mlp_0"), 4)


# ------------------------------------------------------------------------------ part 2: a new user, a hostile tester
def test_whatif_names_a_file_that_is_no_profile_not_a_missing_card(tmp_path, capsys):
    """`whatif --profile s1.json` (a schedule) said "profile 's1.json' does not name its card: give --gpu NAME"; with
    --gpu the same file was then named a schedule. It is named a schedule at once."""
    s = tmp_path / "s1.json"
    assert run_cli(["optimize", "--trace", TRACE, "--slack", "1", "-o", str(s)], capsys)[0] == 0
    one_error_line(*run_cli(["whatif", "--trace", TRACE, "--profile", str(s)], capsys), "kdvfs-schedule/1",
                   "not a profile CSV")
    e = tmp_path / "empty.csv"
    e.write_text("")
    line = one_error_line(*run_cli(["whatif", "--trace", TRACE, "--profile", str(e)], capsys), "empty.csv")
    assert "card" not in line


def test_validate_steps_names_a_profiler_trace_given_for_the_folder(tmp_path, capsys):
    """`validate-steps squeezebert.kineto.json.gz` said "is not JSON ('utf-8' codec can't decode byte 0x8b …)" of a
    gzipped JSON file: it names the file's kind and what to give."""
    k = ROOT / "validation" / "h200" / "steps13" / "squeezebert.kineto.json.gz"
    one_error_line(*run_cli(["validate-steps", str(k), "--gpu", "h200"], capsys), "is a PyTorch profiler trace",
                   "measure-steps")


def test_frontier_reports_progress_and_solves_each_curve_once(tmp_path, monkeypatch, capsys):
    """`frontier` on SqueezeBERT's step (3 505 instances) ran 27 s in silence, `--slack-step 0.001` minutes; with a
    figure it solved the global curve twice, and the low-clock caution solved every printed point again. It says its
    points on stderr, solves each point once (the caution takes the points' own allocations), and writes the same
    CSV."""
    import importlib

    import kdvfs.cli.common as common

    fr = importlib.import_module("kdvfs.optimize.frontier")  # the module (kdvfs.optimize.frontier is the function)
    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)
    real_points, real_allocate, scopes, solves = fr.frontier_points, fr.allocate, [], []
    monkeypatch.setattr(fr, "frontier_points", lambda pb, sc, *a, **kw: scopes.append(sc) or real_points(pb, sc, *a, **kw))
    monkeypatch.setattr(fr, "allocate", lambda *a, **kw: solves.append(a[1:]) or real_allocate(*a, **kw))
    out = tmp_path / "f.csv"
    code, _, err = run_cli(["frontier", "--trace", TRACE, "--slack-max", "2", "-o", str(out)], capsys)
    assert code == 0, err
    assert sorted(scopes) == ["global", "local"]  # the figure's two curves, the printed one among them
    assert "frontier points: 1/6" in err and "frontier points: 6/6" in err, err  # the figure's two curves
    assert len(solves) == 6 and len(set(solves)) == 6, solves  # every point solved once, the caution's included
    rows = out.read_text().splitlines()
    assert rows[0] == "slack_pct,time_change_pct,energy_change_pct" and len(rows) == 4
    assert (tmp_path / "f.png").exists()


def test_a_second_interrupt_does_not_cut_short_what_whatif_says_it_kept(tmp_path, capsys, monkeypatch):
    """`timeout -s INT 16 kdvfs whatif …` sends SIGINT to the command and then to its process group (twice to the
    command): once in four runs on RoBERTa's step the second one landed while the interruption was handled, and the
    line saying where the finished scenarios were kept was lost (another time a traceback from concurrent.futures'
    thread join followed "kdvfs: interrupted"). Once interrupted, further SIGINTs are ignored until main returns."""
    import signal

    import simulator.whatif as wi
    import simulator.whatif_journal as wj

    real_load, real_run, calls, second = wj.Journal.load, wi.run_scenarios, [], []

    def stop_after_one(*args):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real_run(*args)

    def load(self):
        if len(calls) == 1 and not second:  # the handler's count of what was kept: a second SIGINT arrives just then
            second.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real_load(self)

    monkeypatch.setattr(wi, "run_scenarios", stop_after_one)
    monkeypatch.setattr(wj.Journal, "load", load)
    before = signal.getsignal(signal.SIGINT)
    try:
        code, _, err = run_cli(WHATIF, capsys)
        assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back once main returns
    finally:
        signal.signal(signal.SIGINT, before)
    err = " ".join(err.split())
    assert code == 130 and second
    assert "1 of 2 scenarios kept in" in err, err


def test_anchors_name_a_profiler_trace_given_for_them(tmp_path, capsys):
    """`validate-steps DIR --anchors step.kineto.json.gz` (the step's trace in place of the anchor run) said "its
    'format' is None"; it names the file's kind."""
    k = ROOT / "validation" / "h200" / "steps13" / "squeezebert.kineto.json.gz"
    one_error_line(*run_cli(["analyze", str(k), "--gpu", "h200", "--anchors", str(k), "-o", str(tmp_path / "a")],
                           capsys),
                   "is not a kdvfs-characterization/1 file (a PyTorch profiler trace)")


def test_whatif_refuses_another_traces_profile_before_its_workers_start(tmp_path, capsys, monkeypatch):
    """`whatif --trace roberta --profile squeezebert.profile` was refused by every worker after 38 s; it is refused
    before the grid starts, in the words the profile reader uses."""
    import kdvfs.executor as ex

    p = tmp_path / "other.csv"
    assert run_cli(["profile", "build", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "h200", "-o", str(p)],
                   capsys)[0] == 0
    monkeypatch.setattr(ex, "make_executor", lambda *a: pytest.fail("the grid started"))
    one_error_line(*run_cli(["whatif", "--trace", TRACE, "--profile", str(p)], capsys),
                   "was made for trace 'gpt3xl-llmc-rtx3080ti'", "belongs to another trace")


def test_a_tensor_parallel_degree_names_the_head_count_as_assumed_or_given(capsys):
    """`simulate --tp 5` on RoBERTa-base (12 heads) said "cannot split the model's 16 attention heads": the 16 is an
    assumption (a trace does not record heads), and the message says so; a count given is the model's."""
    from kdvfs.bundled import load_trace_by_name
    from kdvfs.errors import InputError
    from kdvfs.gpus import get_gpu
    from kdvfs.model import default_params
    from kdvfs.scaling import scale_params

    t = load_trace_by_name(TRACE)
    spec = get_gpu("h200")
    params = default_params(t, spec)
    with pytest.raises(InputError, match="cannot split an assumed 16 attention heads evenly .*does not record"):
        scale_params(t, params, spec, tp=5)
    with pytest.raises(InputError, match="cannot split the model's 12 attention heads evenly\\)?") as e:
        scale_params(t, params, spec, tp=8, heads=12)
    assert "does not record" not in str(e.value)


def test_a_failed_or_early_interrupted_whatif_leaves_no_empty_journal(tmp_path, capsys, monkeypatch):
    """A whatif refused by its workers (`--profile empty.csv --gpu h200`: "has no data rows") left a journal holding
    no task in ~/.cache/kdvfs/whatif/ each time (three found after this session's runs). A journal with nothing to
    resume is removed; an interruption before any task finished says so."""
    e = tmp_path / "empty.csv"
    e.write_text("")
    one_error_line(*run_cli(["whatif", "--trace", TRACE, "--profile", str(e), "--gpu", "h200", "--executor",
                             "serial"], capsys), "no data rows")
    assert _journals() == []
    import simulator.whatif as wi

    monkeypatch.setattr(wi, "run_scenarios", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    code, _, err = run_cli(WHATIF, capsys)
    assert code == 130 and "no scenario had finished: nothing kept" in " ".join(err.split())
    assert _journals() == []
