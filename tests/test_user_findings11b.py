"""What a hostile tester found in session 11's additions (tester11b), each fixed and kept fixed. The commands and
numbers are in ``validation/user-findings11b/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step


# ---------------------------------------------------------------- 1: a negative --seed
@pytest.mark.parametrize("verb", [
    ["characterize", "--backend", "fake", "--set", "tiny-grid2", "--no-steps", "--window", "0.05", "--warmup", "0"],
    ["sweep", "--backend", "fake", "--trace", TRACE, "--gpu", "h200", "--settings", "1980:3201", "--window", "0.01",
     "--warmup", "0"],
    ["simulate", "--trace", TRACE, "--gpu", "h200", "--schedule", "SCHED"],
])
def test_a_negative_seed_is_one_line(tmp_path, capsys, verb):
    """numpy's generator refused it with a traceback, exit 1 (characterize --set tiny-grid2 on the fake backend,
    sweep and validate on the fake backend, simulate)."""
    sched = tmp_path / "s.json"
    sched.write_text("{}")  # never read: the seed is checked before any work
    args = [str(sched) if v == "SCHED" else v for v in verb] + ["--seed", "-1", "-o", str(tmp_path / "out.json")]
    if verb[0] == "simulate":
        args = args[:-2]
    one_error_line(*run_cli(args, capsys), "--seed -1", "≥ 0")
    assert not (tmp_path / "out.json").exists()


def _edited_profile(tmp_path, old: str, new: str, name: str = "p.csv") -> Path:
    """The bundled H200 profile with its header line edited (``old`` → ``new``)."""
    import gzip

    text = gzip.decompress((ROOT / "traces" / f"{TRACE}.profile.csv.gz").read_bytes()).decode()
    head, body = text.split("\n", 1)
    assert old in head, head
    p = tmp_path / name
    p.write_text(head.replace(old, new, 1) + "\n" + body)
    return p


# ------------------------------------------- 2: analyze a profile holding settings its header's card lacks
def test_analyze_refuses_a_profile_with_settings_its_card_lacks(tmp_path, capsys):
    """An H200 profile whose header was edited to gpu=h100 was analysed as h100's (2201 MHz memory, which h100
    lacks), exit 0; optimize, compare and simulate refuse it."""
    p = _edited_profile(tmp_path, "gpu=h200", "gpu=h100")
    one_error_line(*run_cli(["analyze", TRACE, "--profile", str(p), "--slack", "1", "--no-kernel-switch-aware",
                             "-o", str(tmp_path / "an")], capsys), "holds a setting the card lacks", "not supported by h100")
    one_error_line(*run_cli(["optimize", "--trace", TRACE, "--profile", str(p), "--slack", "1"], capsys),
                   "holds a setting the card lacks")


# ------------------------------------------- 3: an anchored profile's header, hand-edited or damaged
@pytest.fixture(scope="module")
def anchored_profile(tmp_path_factory):
    """The bundled H200 profile with the header ``profile build --anchors anchorA1.json.gz`` writes."""
    import gzip

    from kdvfs.card_anchor import CardAnchor

    card = CardAnchor.from_dict({"static_w": 3.0873408197361285, "core_scale": 1.0473402036891348,
                                 "ambient_shift_c": 7.891790159059731, "mem_scale": 0.7707987934282327,
                                 "source": "anchorA1.json.gz (card GPU-012ece08)", "gpu_uuid": "GPU-012ece08"})
    words = " ".join(f"card.{k}={v}" for k, v in card.header_items())
    text = gzip.decompress((ROOT / "traces" / f"{TRACE}.profile.csv.gz").read_bytes()).decode()
    head, body = text.split("\n", 1)
    p = tmp_path_factory.mktemp("anchored") / "p.csv"
    p.write_text(f"{head} {words}\n{body}")
    return p


@pytest.mark.parametrize("old, new, needles", [
    # the last of two values had won: the limiter planned with 50 W of static power, exit 0
    ("card.static_w=3.0873408197361285", "card.static_w=3.1 card.static_w=50",
     ("card.static_w twice", "card.static_w=3.1 and card.static_w=50")),
    # a misspelt key was ignored and mem_scale read as 1.0 (the profile's powers are × 0.771), exit 0
    ("card.mem_scale=", "card.mem_scal=", ("unknown key(s) card.mem_scal", "card.mem_scale missing",
                                           "kdvfs profile build --anchors")),
    ("card.mem_scale=0.7707987934282327", "", ("card.mem_scale missing",)),
    ("card.static_w=", "card.foo=1 card.static_w=", ("unknown key(s) card.foo",)),
    # refused before, with a report's fix (`kdvfs card-anchor FILE -o card.json`) for a profile
    ("card.static_w=3.0873408197361285", "card.static_w=nan", ("card.static_w must be a finite number",
                                                               "kdvfs profile build --anchors")),
    ("card.core_scale=1.0473402036891348", "card.core_scale=0", ("card.core_scale = 0.0 is outside",
                                                                 "kdvfs profile build --anchors")),
    # taken, and printed as '+1000000.0 °C ambient'
    ("card.ambient_shift_c=7.891790159059731", "card.ambient_shift_c=1e6", ("card.ambient_shift_c = 1000000.0",
                                                                            "-105 to 105")),
])
def test_a_damaged_card_header_is_one_line(tmp_path, capsys, anchored_profile, old, new, needles):
    head, body = anchored_profile.read_text().split("\n", 1)
    assert old in head
    p = tmp_path / "d.csv"
    p.write_text(head.replace(old, new, 1) + "\n" + body)
    line = one_error_line(*run_cli(["optimize", "--trace", TRACE, "--profile", str(p), "--slack", "1", "--limiter",
                                    "on"], capsys), *needles)
    assert "card-anchor FILE" not in line and (str(p) in line)


def test_the_undamaged_card_header_and_a_repeated_equal_key_still_load(tmp_path, capsys, anchored_profile):
    code, _, err = run_cli(["optimize", "--trace", TRACE, "--profile", str(anchored_profile), "--slack", "1",
                            "--limiter", "on"], capsys)
    assert code == 0 and "Card: the profile was built" in err, err
    head, body = anchored_profile.read_text().split("\n", 1)
    p = tmp_path / "d.csv"
    p.write_text(head + " card.static_w=3.0873408197361285\n" + body)
    code, _, err = run_cli(["optimize", "--trace", TRACE, "--profile", str(p), "--slack", "1", "--limiter", "on"], capsys)
    assert code == 0, err


# ------------------------------------------- 4: a card-anchor report's ambient shift beyond any die
def test_a_report_with_an_absurd_ambient_shift_is_refused(tmp_path, capsys):
    """validate-steps --anchors took a report edited to ambient_shift_c 1e6 and printed '+1000000.0 °C ambient', exit 0."""
    from kdvfs.card_anchor import CardAnchor

    good = {"static_w": 3.1, "core_scale": 1.05, "ambient_shift_c": 7.9, "mem_scale": 0.77}
    assert CardAnchor.from_dict(good).ambient_shift_c == 7.9
    for v in (1e6, -200.0):
        with pytest.raises(Exception, match=r"ambient_shift_c = .* outside the range .*-105 to 105"):
            CardAnchor.from_dict(good | {"ambient_shift_c": v})
    bad = tmp_path / "card.json"
    bad.write_text(json.dumps({"format": "kdvfs-card-anchor/1"} | good | {"ambient_shift_c": 1e6}))
    one_error_line(*run_cli(["analyze", TRACE, "--gpu", "h200", "--anchors", str(bad), "--slack", "1",
                             "--no-kernel-switch-aware"], capsys), "ambient_shift_c = 1000000.0")


# ------------------------------------------- 5: damaged kdvfs.module: ranges in a Kineto file
def _layers_file(tmp_path, edit) -> Path:
    from test_user_findings11 import _kineto_layers

    doc = _kineto_layers(4, "ranges")
    for e in doc["traceEvents"]:
        if e["name"] == "kdvfs.module:Layer_1":
            edit(e)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("edit, dur", [(lambda e: e.update(dur=-50), "-50"), (lambda e: e.pop("dur"), "None")])
def test_a_module_range_without_a_proper_duration_is_refused(tmp_path, capsys, edit, dur):
    """A module range of negative or no duration enclosed nothing: 'forward.Layer × 4' imported as forward.Layer,
    forward#2, forward.Layer#2 × 2, without a word, exit 0."""
    p = _layers_file(tmp_path, edit)
    one_error_line(*run_cli(["trace", "import", str(p), "-o", str(tmp_path / "t.trace.json")], capsys),
                   "'kdvfs.module:Layer_1'", f"duration {dur}", "damaged")


@pytest.mark.parametrize("end_us", [150, 10**6])  # into the next layer; left open to the end of the step
def test_crossing_module_ranges_are_named(tmp_path, end_us):
    """A range that crosses the next instead of nesting (an unclosed hook) gave other layers, without a word."""
    from kdvfs.importers import import_kineto

    p = _layers_file(tmp_path, lambda e: e.update(dur=end_us))
    imp = import_kineto(p, name="t")
    assert "module range(s) cross another of their thread" in imp.trace.notes and "Layer_" in imp.trace.notes
    good = import_kineto(_layers_file(tmp_path, lambda e: None), name="t")  # nested ranges: no note
    assert "cross another" not in good.trace.notes
    assert {s.name: s.repeat for s in good.trace.segments}["forward.Layer"] == 4


def test_the_crossing_check_reads_a_real_with_stack_trace_as_nested():
    """hf_gpt2_step (H200, with_stack=True): 295 nn.Module frames, none crossing."""
    from kdvfs.kineto import crossed_module_ranges, read_kineto

    raw = read_kineto(ROOT / "validation" / "h200" / "runtime" / "hf_gpt2_step.kineto.json.gz")
    assert sum(iv[2] == 1 for ivs in raw.threads.values() for iv in ivs) == 295
    assert crossed_module_ranges(raw.threads) == (0, "")


# ------------------------------------------- 6: scripts/h200_heldout_check.py's --data and -o
def test_the_heldout_check_refuses_a_file_its_fits_saw(tmp_path):
    """--data characterization14 (in the nine+c14 fits) was reported 'held out for every candidate: no fit saw this
    file'; -o equal to --data replaced the measured file; a missing file failed after ~30 s of fits."""
    from scripts.h200_heldout_check import C15, refuse_data

    c14 = "validation/h200/characterization/characterization14.json.gz"
    assert "not held out" in refuse_data(str(ROOT / c14), None)
    assert "not held out" in refuse_data(str(ROOT / "validation/h200/characterization/characterization.json.gz"), None)
    assert "not a file" in refuse_data(str(tmp_path / "nope.json"), None)
    assert "would be replaced" in refuse_data(str(ROOT / C15), str(ROOT / C15))
    assert refuse_data(str(ROOT / C15), str(tmp_path / "r.json")) is None


# ------------------------------------------- 7: characterize --set tiny-grid2 --only an entry of another set
def test_only_names_the_set_that_holds_an_entry(tmp_path, capsys):
    """'gemm_bf16_4096 not in the zoo of --set tiny-grid2 … (or give the --set that holds them)' named no set."""
    one_error_line(*run_cli(["characterize", "--backend", "fake", "--set", "tiny-grid2", "--only", "gemm_bf16_4096",
                             "-o", str(tmp_path / "c.json")], capsys),
                   "not in the zoo of --set tiny-grid2", "gemm_bf16_4096 is in --set anchor and --set base")
    one_error_line(*run_cli(["characterize", "--backend", "fake", "--set", "tiny-grid2", "--only", "nope", "-o",
                             str(tmp_path / "c.json")], capsys), "no --set holds nope")
    assert not (tmp_path / "c.json").exists()


# ------------------------------------------- 8: trace import given a kdvfs trace (one with concurrency)
def test_trace_import_of_a_kdvfs_trace_says_it_is_one(tmp_path, capsys):
    """Round trip: a kdvfs trace (with a concurrent kernel) given back to `trace import` read 'has no traceEvents
    list: it is not a PyTorch profiler (Chrome) trace', naming no fix."""
    from kdvfs.trace import Kernel, Segment, Trace, load_trace, save_trace

    k = Kernel("sm80_xmma_fprop_implicit_gemm_convolve_sgemm", "gemm", 6.25e-6, grid=(4, 1, 1), block=(128, 1, 1),
               stream=7, op="aten::cudnn_convolution", concurrency=8.0)
    p = tmp_path / "t.trace.json"
    save_trace(Trace("conc", (Segment("forward.repeat", (k,), 24, "forward"),)), p)
    assert load_trace(p).segments[0].kernels[0].concurrency == 8.0  # the field survives the file
    one_error_line(*run_cli(["trace", "import", str(p), "-o", str(tmp_path / "re.json")], capsys),
                   "is a kdvfs file (kdvfs-trace/2)", "give it to the verbs directly")


# ------------------------------------------- 9: a damaged profiled kernel time in a characterisation file
@pytest.mark.parametrize("us", ["abc", -5.0, True])
def test_a_damaged_profiled_kernel_time_is_one_line(tmp_path, capsys, us):
    """The zoo rows' concurrency, SM share and convolution test sum cuda_kernels' us: 'abc' ended card-anchor in
    ValueError's traceback; -5 was summed."""
    import gzip

    doc = json.loads(gzip.decompress((ROOT / "validation/h200/lease_anchor/leaseA/anchorA1.json.gz").read_bytes()))
    entry = next(k for k in doc["kernels"] if any(isinstance(c, dict) and "us" in c for c in k.get("cuda_kernels") or []))
    next(c for c in entry["cuda_kernels"] if isinstance(c, dict) and "us" in c)["us"] = us
    p = tmp_path / "anchors.json"
    p.write_text(json.dumps(doc))
    one_error_line(*run_cli(["card-anchor", str(p), "--gpu", "h200"], capsys), str(p), repr(entry["name"]),
                   f"us = {us!r}", "damaged")


def test_an_anchored_profile_without_its_gpu_is_refused(tmp_path, capsys, anchored_profile):
    """gpu= emptied in an anchored profile's header: compare adapted the RTX 3080 Ti's fit with the H200 card's
    anchors (the fallback card of a profile naming none) and printed its table, exit 0."""
    head, body = anchored_profile.read_text().split("\n", 1)
    p = tmp_path / "d.csv"
    p.write_text(head.replace("gpu=h200", "gpu=-", 1) + "\n" + body)
    for verb in (["compare", "--trace", TRACE], ["optimize", "--trace", TRACE, "--slack", "1", "--limiter", "on"]):
        one_error_line(*run_cli([*verb, "--profile", str(p)], capsys), "gpu= is empty", "rtx3080ti")
