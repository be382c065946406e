"""What a new user and a hostile tester found in session 11, each fixed and kept fixed; first session 10's three
leftovers (the card in an anchored profile's header, the idle plant's line under ``--anchors``, module ranges in
``measure-steps`` traces). The commands and numbers are in ``validation/user-findings11/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import one_error_line, one_step_folder, run_cli

from kdvfs.importers import import_kineto
from kdvfs.profile import load_profile, save_profile
from kdvfs.runtime_plan import regions_of

ROOT = Path(__file__).resolve().parents[1]
LEASE_A = ROOT / "validation" / "h200" / "lease_anchor" / "leaseA"
ANCHOR_A1 = LEASE_A / "anchorA1.json.gz"
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step


# ------------------------------------------------------------- leftover 1: the card in an anchored profile's CSV
def test_an_anchored_profile_records_its_card_in_the_header(tmp_path, capsys):
    """`profile build --anchors` said the card on the screen only: the CSV read as the bundled fit's."""
    p = tmp_path / "p.csv.gz"
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1),
                              "-o", str(p)], capsys)
    assert code == 0, err
    head = gzip.decompress(p.read_bytes()).decode().splitlines()[0]
    assert "card.anchors=anchorA1.json.gz" in head and "card.gpu_uuid=GPU-012ece08" in head, head
    card = dict(load_profile(p).card)
    assert card["gpu_uuid"].startswith("GPU-012ece08") and float(card["static_w"]) == pytest.approx(3.1, abs=0.05)
    assert {"core_scale", "mem_scale", "ambient_shift_c"} <= set(card)
    # analyze --profile says whose card the profile's powers are, on the screen and in analysis.json
    code, out, err = run_cli(["analyze", TRACE, "--profile", str(p), "--slack", "1", "--no-kernel-switch-aware",
                              "-o", str(tmp_path / "an")], capsys)
    assert code == 0, err
    assert "the profile was built (`profile build --anchors`) for the card of anchorA1.json.gz" in " ".join(out.split())
    assert json.loads((tmp_path / "an" / "analysis.json").read_text())["profile_card"]["gpu_uuid"] == card["gpu_uuid"]
    assert float(card["static_w"]) == json.loads((tmp_path / "an" / "analysis.json").read_text())["profile_card"][
        "static_w"]  # exactly: the header keeps the shortest round-trip text
    # without --anchors: no card words, and analyze says nothing of one
    bare = tmp_path / "bare.csv"
    code, _, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", str(bare)], capsys)
    assert code == 0 and "card." not in bare.read_text().splitlines()[0] and load_profile(bare).card == ()


def test_a_card_with_spaces_in_its_file_name_survives_the_header(tmp_path):
    import dataclasses

    p0 = load_profile(ROOT / "traces" / f"{TRACE}.profile.csv.gz")
    card = (("anchors", "my anchors (lease 1).json.gz"), ("static_w", "+3.100"), ("note", "a=b c"))
    save_profile(dataclasses.replace(p0, card=card), tmp_path / "p.csv")
    back = load_profile(tmp_path / "p.csv")
    assert back.card == card and back.gpu == p0.gpu and back.trace_sha == p0.trace_sha


# -------------------------------------------------- leftover 2: the idle plant's line under --anchors (118.7 W)
def test_validate_steps_adds_the_anchors_static_power_to_the_idle_plant(tmp_path, capsys):
    """With --anchors the default gap power took the anchors' static power, the idle plant's line did not: it
    printed 118.7 W, the bundled card's, beside a table of the anchored card."""
    steps = one_step_folder(tmp_path, LEASE_A)
    plant = json.loads((ROOT / "traces" / "h200.limiter.json").read_text())["plants"]["idle"]["a_w"]
    rep = tmp_path / "r.json"
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o",
                              str(rep)], capsys)
    assert code == 0, err
    doc = json.loads(rep.read_text())
    static = doc["card_anchor"]["static_w"]
    assert doc["gap_power_sensitivity"]["idle_plant"]["gap_power_w"] == pytest.approx(plant + static)
    flat = " ".join(out.split())
    assert f"gap power at {plant + static:.1f} W (the limiter fit's idle plant {plant:.1f} W with the anchors' " \
           f"static power {static:+.1f} W)" in flat, flat
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200"], capsys)  # bundled: as before
    assert code == 0 and f"gap power at {plant:.1f} W (the limiter fit's idle plant)" in " ".join(out.split())


# --------------------------------------------------- leftover 3: module ranges in measure-steps traces
def _kineto_layers(layers: int, frames: str) -> dict:
    """One forward step of ``layers`` identical layers (an ``mm`` then an ``add`` kernel each) under a root model,
    with the modules marked as ``frames``: ``ranges`` (``record_function("kdvfs.module:…")``, as
    ``hw_backend.module_ranges`` writes them) or ``stack`` (``nn.Module:`` frames of ``with_stack=True``)."""
    ev: list[dict] = []
    corr = [0]

    def module(name, ts, dur):
        if frames == "ranges":
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"kdvfs.module:{name}", "ts": ts, "dur": dur,
                       "pid": 1, "tid": 1})
        else:
            ev.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {name}", "ts": ts, "dur": dur,
                       "pid": 1, "tid": 1})

    def op(name, kernel, ts):
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 4, "pid": 1, "tid": 1, "args": {}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts + 1, "dur": 1, "pid": 1,
                   "tid": 1, "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": 1000 + 20 * corr[0], "dur": 10 + corr[0] % 2,
                   "pid": 0, "tid": 7, "args": {"correlation": corr[0], "stream": 7, "grid": [8, 1, 1],
                                                 "block": [128, 1, 1]}})

    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 990, "pid": 1, "tid": 1})
    module("Model_0", 1, 980)
    op("aten::embedding", "embedding_kernel", 2)
    for i in range(layers):
        t0 = 10 + 100 * i
        module(f"Layer_{i}", t0, 90)
        op("aten::mm", "gemm_kernel", t0 + 5)
        op("aten::add", "vectorized_elementwise_kernel_add", t0 + 20)
    op("aten::sum", "reduce_kernel", 10 + 100 * layers)
    return {"traceEvents": ev}


@pytest.mark.parametrize("frames", ["ranges", "stack"])
def test_module_ranges_give_the_layers_as_with_stack_does(tmp_path, frames):
    """A measure-steps trace (no with_stack) imported by period detection only, and its module-boundary schedules
    could switch at the step and the optimizer only; the kdvfs.module: ranges give the layers, as nn.Module frames do."""
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(_kineto_layers(4, frames)).encode()))
    imp = import_kineto(p)
    assert imp.structure == "modules"
    segs = {s.name: s for s in imp.trace.segments}
    assert segs["forward.Layer"].repeat == 4 and len(segs["forward.Layer"].kernels) == 2
    regions = regions_of(imp.trace)
    assert sum(ev == "forward.Layer" for ev, *_ in regions) == 4, regions


def test_module_ranges_and_stack_frames_import_the_same(tmp_path):
    out = []
    for frames in ("ranges", "stack"):
        p = tmp_path / f"{frames}.json"
        p.write_text(json.dumps(_kineto_layers(3, frames)))
        out.append(import_kineto(p, name="t").trace)
    assert out[0].segments == out[1].segments


class _Hook:
    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        self.hooks.remove(self.fn)


class _Mod:
    """Just enough of torch.nn.Module: children, modules(), forward hooks, and __call__ running them."""

    def __init__(self, *children, fail=False):
        self._children, self.pre, self.post, self.fail = list(children), [], [], fail

    def children(self):
        return iter(self._children)

    def modules(self):
        yield self
        for c in self._children:
            yield from c.modules()

    def register_forward_pre_hook(self, fn):
        self.pre.append(fn)
        return _Hook(self.pre, fn)

    def register_forward_hook(self, fn):
        self.post.append(fn)
        return _Hook(self.post, fn)

    def __call__(self):
        for h in self.pre:
            h(self, ())
        for c in self._children:
            c()
        if self.fail:
            raise RuntimeError("forward failed")
        for h in self.post:
            h(self, (), None)


class Block(_Mod):
    pass


class Leaf(_Mod):
    pass


def _recorder(log):
    class Range:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(("open", self.name))

        def __exit__(self, *exc):
            log.append(("close", self.name))
    return Range


def test_module_ranges_mark_the_modules_that_hold_others_and_nest():
    from hw_backend.module_ranges import marked_modules, module_ranges

    model = _Mod(Block(Leaf(), Leaf()), Block(Leaf()))
    names = [n for _, n in marked_modules(model)]
    assert names == ["kdvfs.module:_Mod_0", "kdvfs.module:Block_0", "kdvfs.module:Block_1"]  # leaves are not marked
    log: list = []
    with module_ranges(model, _recorder(log)) as n:
        model()
    assert n == 3
    assert log == [("open", "kdvfs.module:_Mod_0"), ("open", "kdvfs.module:Block_0"), ("close", "kdvfs.module:Block_0"),
                   ("open", "kdvfs.module:Block_1"), ("close", "kdvfs.module:Block_1"), ("close", "kdvfs.module:_Mod_0")]
    log.clear()
    model()  # the hooks are gone after the recording
    assert log == [] and all(not m.pre and not m.post for m in model.modules())


def test_module_ranges_close_what_a_failed_forward_left_open():
    from hw_backend.module_ranges import module_ranges

    model = _Mod(Block(Leaf(), fail=True))
    log: list = []
    with pytest.raises(RuntimeError), module_ranges(model, _recorder(log)):
        model()
    assert [x for x in log if x[0] == "open"] and sorted(log) == sorted(
        [("open", "kdvfs.module:_Mod_0"), ("open", "kdvfs.module:Block_0"), ("close", "kdvfs.module:Block_0"),
         ("close", "kdvfs.module:_Mod_0")])
    with module_ranges(None, _recorder(log)) as n:  # a step that is not one module (the GPT-3 block): nothing marked
        assert n == 0


# ------------------------------------------------------------------------------------- hostile findings
FOREIGN = ROOT / "tests" / "data" / "foreign-transformer.kineto.json.gz"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_gpu_event_with_a_non_finite_start_is_refused(tmp_path, value, capsys):
    """A kernel whose ts is NaN or Infinity (JSON accepts both) was imported, exit 0: sorted anywhere, it broke the
    step's structure (171 kernels with a repeated block became 201 without one)."""
    doc = json.loads(gzip.decompress(FOREIGN.read_bytes()))
    next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")["ts"] = value
    src = tmp_path / "k.json"
    src.write_text(json.dumps(doc))
    code, out, err = run_cli(["trace", "import", str(src), "-o", str(tmp_path / "t.json")], capsys)
    one_error_line(code, out, err, "start ts=", "finite", "record or export it again")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("cat", ["cuda_runtime", "cpu_op"])
def test_a_launch_or_op_with_a_non_finite_time_is_refused(tmp_path, cat, capsys):
    doc = json.loads(gzip.decompress(FOREIGN.read_bytes()))
    ev = next(e for e in doc["traceEvents"] if e.get("cat") == cat and (cat != "cuda_runtime" or
                                                                          "correlation" in (e.get("args") or {})))
    ev["ts" if cat == "cuda_runtime" else "dur"] = float("nan")
    src = tmp_path / "k.json"
    src.write_text(json.dumps(doc))
    code, out, err = run_cli(["trace", "import", str(src), "-o", str(tmp_path / "t.json")], capsys)
    one_error_line(code, out, err, f"({cat})", "finite")


def test_analyze_refuses_a_profile_of_another_card(tmp_path, capsys):
    """`analyze --profile H200.csv --gpu rtx3080ti` planned the H200's powers with the RTX's switch latency and called
    it rtx3080ti's, exit 0; optimize, simulate and compare refused it."""
    code, out, err = run_cli(["analyze", TRACE, "--profile", TRACE, "--gpu", "rtx3080ti", "--slack", "1",
                              "-o", str(tmp_path / "an")], capsys)
    one_error_line(code, out, err, "profile was made for GPU 'h200'", "--gpu is 'rtx3080ti'", "give --gpu h200")
    assert not (tmp_path / "an").exists()


def test_card_anchor_cautions_on_another_cards_also_file(tmp_path, capsys):
    """`card-anchor D --also C13` (cards GPU-c977881e and GPU-4eb8362f) printed C13's entries as held out within
    the lease, exit 0."""
    char = ROOT / "validation" / "h200" / "characterization"
    d = ROOT / "validation" / "h200" / "lease_anchor" / "leaseD" / "anchorD.json.gz"
    code, out, err = run_cli(["card-anchor", str(d), "--gpu", "h200", "--also",
                              str(char / "characterization13.json.gz"), "--json"], capsys)
    assert code == 0, err
    flat = " ".join(err.split())
    assert "Caution: --also characterization13.json.gz ran on card GPU-4eb8362f" in flat and "GPU-c977881e" in flat
    assert json.loads(out)["caution"]
    code, out, err = run_cli(["card-anchor", str(d), "--gpu", "h200", "--also",
                              str(char / "characterization14.json.gz"), "--json"], capsys)  # the same card
    assert code == 0 and "Caution" not in err and "caution" not in json.loads(out)


H200X2 = ROOT / "validation" / "h200x2"


def test_gpus_per_node_on_one_file_is_refused(tmp_path, capsys):
    """`trace import r0.json.gz --gpus-per-node 0` ignored the option (even at 0), exit 0."""
    code, out, err = run_cli(["trace", "import", str(H200X2 / "rank0.kineto.json.gz"), "--gpus-per-node", "0",
                              "-o", str(tmp_path / "t.json")], capsys)
    one_error_line(code, out, err, "--gpus-per-node 0", "several ranks", "drop --gpus-per-node")
    assert not (tmp_path / "t.json").exists()


def test_simulate_ranks_says_when_the_ranks_ran_on_another_card(capsys):
    """H200 ranks replayed as an RTX 3080 Ti's printed the table without a word; analyze and profile build say it."""
    ranks = str(H200X2 / "ranks.trace.json.gz")
    code, out, err = run_cli(["simulate-ranks", "--trace", ranks, "--gpu", "rtx3080ti"], capsys)
    assert code == 0 and "recorded on 'NVIDIA H200'" in " ".join(err.split()), err
    code, out, err = run_cli(["simulate-ranks", "--trace", ranks, "--gpu", "h200"], capsys)
    assert code == 0 and "recorded on" not in err


def test_validate_steps_reports_progress(tmp_path, monkeypatch, capsys):
    """validate-steps ran ~1 s a step in silence (23 steps: 21 s without a line); it now says which step it is on."""
    import kdvfs.cli.common as common

    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)  # every update printed (off a terminal, at most every 10 s)
    steps = one_step_folder(tmp_path, LEASE_A)
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200"], capsys)
    assert code == 0, err
    assert "validate-steps: block-bf16 (1/1): 0 %" in err, err
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200", "--json"], capsys)
    assert code == 0 and json.loads(out)["met"]["of"] == 1  # stdout stays one document


def test_analyze_takes_slack_repeated(tmp_path, capsys):
    """`analyze --slack 1 --slack 5` analysed 5 % only (the last --slack replaced the first), exit 0; whatif and
    limiter whatif take --slack repeated."""
    for args in (["--slack", "1", "--slack", "5"], ["--slack", "1", "5"]):
        code, out, err = run_cli(["analyze", TRACE, "--gpu", "h200", *args, "--no-kernel-switch-aware", "--json",
                                  "-o", str(tmp_path / "an")], capsys)
        assert code == 0, err
        assert json.loads(out)["slacks_pct"] == [1.0, 5.0]


def test_analyze_with_an_anchored_profile_plans_as_with_the_anchors(tmp_path, capsys):
    """`analyze --profile P` (P built with --anchors) checked its schedules under the limiter with the bundled card's
    idle power: the auto step read 124.2 J against 122.0 J with `analyze --anchors` on the Qwen3 step. The docs give
    both ways; the header's parameters now adapt the card, and both give the same analysis."""
    p = tmp_path / "p.csv.gz"
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)],
                   capsys)[0] == 0
    docs = []
    for extra in (["--gpu", "h200", "--anchors", str(ANCHOR_A1)], ["--profile", str(p)]):
        code, out, err = run_cli(["analyze", TRACE, *extra, "--slack", "2", "--no-kernel-switch-aware", "--json",
                                  "-o", str(tmp_path / "an")], capsys)
        assert code == 0, err
        docs.append(json.loads(out))
    assert docs[0]["rows"] == docs[1]["rows"] and docs[0]["limiter_check"] == docs[1]["limiter_check"]
    assert docs[1]["profile_card"] == {**docs[0]["card_anchor"], "entries": [], "loss": 0.0, "loss_before": 0.0,
                                       "core_scale_fitted": True, "mem_scale_fitted": False}


def test_a_damaged_card_word_in_a_profile_header_is_one_line(tmp_path, capsys):
    p = tmp_path / "p.csv"
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)],
                   capsys)[0] == 0
    lines = p.read_text().splitlines(keepends=True)
    import re

    for bad, needle in (("abc", "is not a number"), ("1e9", "outside the range")):
        p.write_text(re.sub(r"card\.static_w=\S+", f"card.static_w={bad}", lines[0]) + "".join(lines[1:]))
        code, out, err = run_cli(["analyze", TRACE, "--profile", str(p), "--slack", "1", "-o", str(tmp_path / "an")],
                                 capsys)
        one_error_line(code, out, err, "static_w", needle)


@pytest.mark.parametrize("verb", ["compare", "simulate", "optimize-switch-aware"])
def test_verbs_with_an_anchored_profile_use_its_card(tmp_path, verb, capsys):
    """optimize, compare and simulate with a profile built with --anchors priced the limiter's idle card, the gaps
    and the switch stalls at the bundled card's idle power, without a word; they now adapt the card to the header
    and say so (stderr)."""
    p = tmp_path / "p.csv"
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)],
                   capsys)[0] == 0
    lines = p.read_text().splitlines(keepends=True)
    bare = tmp_path / "bare.csv"  # the same kernel powers, the header's card words dropped
    bare.write_text(" ".join(w for w in lines[0].split() if not w.startswith("card.")) + "\n" + "".join(lines[1:]))
    sched = tmp_path / "s.json"
    assert run_cli(["optimize", "--trace", TRACE, "--profile", str(bare), "--slack", "1", "-o", str(sched)],
                   capsys)[0] == 0
    args = {"compare": ["compare", "--slack", "1"],
            "simulate": ["simulate", "--schedule", str(sched)],
            "optimize-switch-aware": ["optimize", "--slack", "1", "--switch-aware"]}[verb]
    outs = []
    for prof in (p, bare):
        code, out, err = run_cli([*args, "--trace", TRACE, "--profile", str(prof), "--json"], capsys)
        assert code == 0, err
        outs.append(json.loads(out))
        assert ("Card: the profile was built" in err) == (prof == p), err
    if verb != "optimize-switch-aware":  # there the stalls cost 3.1 W more, too little to move this plan
        assert outs[0] != outs[1]


FAST = ["--backend", "fake", "--window", "0.05", "--warmup", "0", "--no-steps"]


def test_characterize_does_not_resume_another_cards_campaign(tmp_path, capsys):
    """A campaign (an anchor run killed, run again in the next lease on another H200) was resumed on the other card:
    both cards' entries in one file under the first card's UUID, exit 0. Resuming checked the card's name only."""
    out = tmp_path / "anchors.json"
    code, _, err = run_cli(["characterize", *FAST, "--set", "anchor", "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["gpu_uuid"]  # the fake card has one
    doc["gpu_uuid"] = "GPU-00000000-another-card"
    doc["kernels"] = doc["kernels"][:3]  # killed after three entries
    out.write_text(json.dumps(doc))
    before = out.read_bytes()
    code, o, err = run_cli(["characterize", *FAST, "--set", "anchor", "-o", str(out)], capsys)
    one_error_line(code, o, err, "measured on card GPU-00000000-another-card", "give a new -o")
    assert out.read_bytes() == before


def test_measure_steps_refuses_to_resume_on_another_card(tmp_path):
    """measure_steps resumed a steps folder on another card the same way (checked here without torch)."""
    from types import SimpleNamespace

    from hw_backend.nvml import refuse_other_card
    from kdvfs.errors import InputError

    doc = {"gpu_uuid": "GPU-aaa"}
    refuse_other_card(tmp_path, doc, SimpleNamespace(uuid="GPU-aaa"), "steps")
    refuse_other_card(tmp_path, {"gpu_uuid": None}, SimpleNamespace(uuid="GPU-bbb"), "steps")  # older files: no UUID
    with pytest.raises(InputError, match="holds steps measured on card GPU-aaa; this run is on card GPU-bbb"):
        refuse_other_card(tmp_path, doc, SimpleNamespace(uuid="GPU-bbb"), "steps")
    src = (ROOT / "hw_backend" / "steps.py").read_text()
    assert 'refuse_other_card(path, doc, be, "steps")' in src  # measure_steps calls it on the doc it resumes


def test_anchor_params_with_a_fitted_report_is_refused(tmp_path, capsys):
    """`--anchors card.json --anchor-params static` (card.json from `card-anchor -o`, fitted with core and mem) used
    the report's core × 1.047 and memory-traffic × 0.771, exit 0: the choice was ignored without a word."""
    rep = tmp_path / "card.json"
    assert run_cli(["card-anchor", str(ANCHOR_A1), "--gpu", "h200", "-o", str(rep)], capsys)[0] == 0
    out_csv = tmp_path / "p.csv"
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(rep),
                              "--anchor-params", "static", "-o", str(out_csv)], capsys)
    one_error_line(code, out, err, "--anchor-params static", "report, fitted already", "drop --anchor-params")
    assert not out_csv.exists()
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1),
                              "--anchor-params", "static", "--json", "-o", str(out_csv)], capsys)
    assert code == 0 and json.loads(out)["card_anchor"]["mem_scale"] == 1.0  # the anchor run itself: fitted so


@pytest.mark.parametrize("key, value", [("sm_mhz_median", 1e9), ("power_w", 1e7)])
def test_an_impossible_clock_or_power_in_an_anchor_run_is_refused(tmp_path, key, value, capsys):
    """An anchor at sm_mhz_median 1e9 MHz was fitted (the core and memory scales fell to 1), exit 0."""
    doc = json.loads(gzip.decompress(ANCHOR_A1.read_bytes()))
    doc["kernels"][2][key] = value
    bad = tmp_path / "anchors.json"
    bad.write_text(json.dumps(doc))
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(bad),
                              "-o", str(tmp_path / "p.csv")], capsys)
    one_error_line(code, out, err, "gemm_bf16_1024_graph32", key, "no GPU reaches", "damaged")


STEPS11 = ROOT / "validation" / "h200" / "steps11"


def _steps11_folder(tmp_path, models, swap=False):
    """A steps folder with steps11's rows of ``models`` and their traces; ``swap``: the two rows' traces exchanged."""
    import shutil

    doc = json.loads((STEPS11 / "steps.json").read_text())
    doc["steps"] = [s for s in doc["steps"] if s["model"] in models]
    if swap:
        a, b = doc["steps"]
        a["trace"], b["trace"] = b["trace"], a["trace"]
    d = tmp_path / "steps"
    d.mkdir()
    (d / "steps.json").write_text(json.dumps(doc))
    for s in doc["steps"]:
        shutil.copy(STEPS11 / s["trace"], d)
    return d


def test_busy_overlap_counts_overlapping_kernels_once():
    from types import SimpleNamespace as E

    from kdvfs.importers import busy_overlap

    ev = [E(ts_us=0, dur_us=10, stream=7), E(ts_us=5, dur_us=10, stream=8), E(ts_us=30, dur_us=5, stream=7)]
    total, union, streams = busy_overlap(ev)
    assert total == pytest.approx(25e-6) and union == pytest.approx(20e-6) and streams == 2


def test_kernels_overlapping_on_several_streams_are_named(tmp_path, capsys):
    """Kernels of different ops side by side on several streams are named on import, in the trace's notes and by
    validate-steps: kdvfs runs a trace's kernels one after another, so such a step reads high by up to the overlap.
    wav2vec 2.0's grouped convolution ran on 17 streams (its raw kernel times summed to 74 % over the busy time at
    batch 4, and validate-steps read +48 % without a word); those are kernels of one op, which now take their share of
    the wall time (helper i12n, ``kdvfs.kernelwork.concurrent_wall_share``), so nothing is left to note there."""
    doc = _kineto_layers(4, "ranges")
    adds = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "add" in e["name"]]
    for e in adds:  # each layer's add on its own stream, beside the layer's GEMM
        e["ts"] -= 20
        e["args"]["stream"] = e["tid"] = 8
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    imp = import_kineto(p)
    assert imp.streams == 2 and imp.overlap_share > 0.5, imp.overlap_share
    code, out, err = run_cli(["trace", "import", str(p), "-o", str(tmp_path / "w.json")], capsys)
    assert code == 0 and "kernels on 2 streams overlap: their times sum to" in " ".join(err.split()), err
    code, out, err = run_cli(["trace", "show", str(tmp_path / "w.json")], capsys)  # kept in the trace's notes
    assert "2 streams overlap" in " ".join(out.split())
    w = import_kineto(STEPS11 / "wav2vec2-base-b4.kineto.json.gz")  # one op's kernels: their wall share, no note
    assert w.streams == 17 and w.overlap_share < 0.01 and not any("streams overlap" in n for n in w.trace.notes)
    code, out, err = run_cli(["validate-steps", str(_steps11_folder(tmp_path, {"wav2vec2-base-b4"})), "--gpu",
                              "h200"], capsys)
    assert code == 0 and "overlap on several streams" not in " ".join(out.split()), out
    one = import_kineto(STEPS11 / "regnet-y-1.6gf-b32.kineto.json.gz")  # 5 streams, 0.7 %: no note
    assert one.overlap_share < 0.01 and "streams overlap" not in one.trace.notes


def test_validate_steps_skips_a_row_whose_trace_is_another_steps(tmp_path, capsys):
    """steps.json's wav2vec 2.0 row naming Qwen3's trace was checked (+268 %): the GPU ran that trace's kernels for
    2.6 × the measured step, its gap clipped to 0 without a word. Now the row is skipped with the reason."""
    d = _steps11_folder(tmp_path, {"wav2vec2-base", "qwen3-0.6b"}, swap=True)
    code, out, err = run_cli(["validate-steps", str(d), "--gpu", "h200", "--json"], capsys)
    assert code == 0, err
    rows = {r["model"]: r for r in json.loads(out)["steps"]}
    assert "is not this step's" in rows["wav2vec2-base"]["skipped"] and "qwen3-0.6b.kineto" in rows[
        "wav2vec2-base"]["skipped"]


def test_whatif_with_an_anchored_profile_says_which_card_it_prices(tmp_path, capsys):
    """whatif builds the card by name in its workers: with a profile built with --anchors it prices the limiter's idle
    card and the stalls at the bundled card's idle power. Mended in session 12 (the workers adapt the card to the
    header; tests/test_user_findings12.py); the card is named on stderr."""
    p = tmp_path / "p.csv"
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)],
                   capsys)[0] == 0
    code, out, err = run_cli(["whatif", "--trace", TRACE, "--profile", str(p), "--latency", "6e-3", "--mechanism",
                              "sync", "--policy", "auto", "--json"], capsys)
    assert code == 0, err
    assert "Card: the profile was built (`profile build --anchors`) for the card of anchorA1.json.gz" in \
        " ".join(err.split()), err


def test_optimize_does_not_write_its_schedule_over_a_profile(tmp_path, capsys):
    """`optimize -o my.profile.csv.gz` replaced the user's profile with a schedule, exit 0; the next `analyze --profile
    my.profile.csv.gz` then said "needs columns …; it has {". Now -o replaces only a schedule, and a JSON document
    given as a profile is named."""
    p = tmp_path / "my.profile.csv.gz"
    assert run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", str(p)], capsys)[0] == 0
    before = p.read_bytes()
    code, out, err = run_cli(["optimize", "--trace", TRACE, "-o", str(p)], capsys)
    one_error_line(code, out, err, "is a kdvfs profile, not a kdvfs schedule", "give a new file name", "--force")
    assert p.read_bytes() == before
    s = tmp_path / "s.json"
    for slack in ("1", "2"):  # a schedule is replaced by the next one
        assert run_cli(["optimize", "--trace", TRACE, "--slack", slack, "-o", str(s)], capsys)[0] == 0
    code, out, err = run_cli(["analyze", TRACE, "--profile", str(s), "-o", str(tmp_path / "an")], capsys)
    one_error_line(code, out, err, "is JSON (a kdvfs-schedule/1 document), not a profile CSV")


def test_sweep_settings_in_another_form_name_the_form(tmp_path, capsys):
    """`sweep --settings 1980/3201` said "core '1980/3201' is not a number of MHz or 'auto'", not the CORE:MEM form."""
    code, out, err = run_cli(["sweep", "--backend", "fake", "--trace", TRACE, "--gpu", "h200", "--settings",
                              "1980/3201", "-o", str(tmp_path / "s.csv")], capsys)
    one_error_line(code, out, err, "--settings '1980/3201'", "CORE:MEM", "e.g. 1980:3201")


def test_validate_steps_names_the_card_mismatch_first(tmp_path, capsys):
    """H200 steps with --gpu h100 said "h100 has no fitted limiter model; fit one", not that they were the H200's."""
    steps = one_step_folder(tmp_path, LEASE_A)
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h100"], capsys)
    one_error_line(code, out, err, "was measured on 'NVIDIA H200', not on h100")
