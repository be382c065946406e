"""What a hostile tester found in session 10's second pass on the card's anchors (``kdvfs card-anchor``,
``--anchors`` and ``--anchor-params`` on ``validate-steps``, ``profile build`` and ``analyze``), each fixed and kept
fixed. The commands and numbers are in ``validation/user-findings10b/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback, and leaves its inputs as they
were; a command that used a card's anchors says so in every output."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import one_error_line, one_step_folder, run_cli

ROOT = Path(__file__).resolve().parents[1]
LEASE_A = ROOT / "validation" / "h200" / "lease_anchor" / "leaseA"
ANCHOR_A1 = LEASE_A / "anchorA1.json.gz"
CHAR = ROOT / "validation" / "h200" / "characterization"
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step


def _anchor_doc() -> dict:
    return json.loads(gzip.decompress(ANCHOR_A1.read_bytes()))


def _write(tmp_path: Path, name: str, doc) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# ----------------------------------------------------------------- outputs over the anchor inputs (overwrote them)
def test_profile_build_does_not_write_over_its_anchor_run(tmp_path, capsys):
    """`profile build --anchors A -o A` replaced the anchor run (a measurement) with the profile, exit 0."""
    a = tmp_path / "anchors.json.gz"
    shutil.copy(ANCHOR_A1, a)
    before = _sha(a)
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(a), "-o", str(a)],
                             capsys)
    one_error_line(code, out, err, "-o", "anchors", "new file name")
    assert _sha(a) == before


def test_card_anchor_does_not_write_over_an_also_file(tmp_path, capsys):
    """`card-anchor L --also C -o C` replaced the lease's other characterisation file with the report, exit 0."""
    la, c = tmp_path / "la.json.gz", tmp_path / "c13.json.gz"
    shutil.copy(CHAR / "lease_anchor13.json.gz", la)
    shutil.copy(CHAR / "characterization13.json.gz", c)
    before = _sha(c)
    code, out, err = run_cli(["card-anchor", str(la), "--gpu", "h200", "--also", str(c), "-o", str(c)], capsys)
    one_error_line(code, out, err, "-o", "also")
    assert _sha(c) == before


# ------------------------------------------------------------------------- anchor files that gave a traceback
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -50.0, 0.0, 250.0])
def test_a_non_finite_temperature_is_refused(tmp_path, value, capsys):
    """An anchor's temperature_c of NaN or inf: scipy's "Residuals are not finite in the initial point" traceback;
    −50, 0 or 250 °C (no running die reads that) were fitted as a thermal ambient tens of degrees off."""
    d = _anchor_doc()
    d["kernels"][3]["temperature_c"] = value
    f = _write(tmp_path, "a.json", d)
    for verb in (["card-anchor", f, "--gpu", "h200"],
                 ["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", f, "-o",
                  str(tmp_path / "p.csv.gz")]):
        code, out, err = run_cli(verb, capsys)
        one_error_line(code, out, err, "add_bf16_1GiB", "temperature_c", "characterize")
    assert not (tmp_path / "p.csv.gz").exists()


def test_an_anchor_without_its_category_is_refused(tmp_path, capsys):
    """An anchor entry without 'category' (hand-edited or written by another tool): KeyError traceback."""
    d = _anchor_doc()
    del d["kernels"][2]["category"]
    f = _write(tmp_path, "a.json", d)
    code, out, err = run_cli(["card-anchor", f, "--gpu", "h200"], capsys)
    one_error_line(code, out, err, "gemm_bf16_1024_graph32", "category", "characterize")


# ------------------------------------------------------------------------------- accepted without a word
@pytest.mark.parametrize("gpu", ["NVIDIA GeForce RTX 3080 Ti", "NVIDIA A100-SXM4-80GB"])
def test_card_anchor_refuses_another_cards_anchor_run(tmp_path, gpu, capsys):
    """`--anchors` refused an anchor run of another GPU, but `card-anchor FILE --gpu h200` fitted it, exit 0."""
    d = _anchor_doc()
    d["gpu"] = gpu
    f = _write(tmp_path, "a.json", d)
    code, out, err = run_cli(["card-anchor", f, "--gpu", "h200"], capsys)
    one_error_line(code, out, err, gpu, "h200", "--gpu")


def test_card_anchor_refuses_an_also_file_of_another_card(tmp_path, capsys):
    d = json.loads(gzip.decompress((CHAR / "characterization13.json.gz").read_bytes()))
    d["gpu"] = "NVIDIA GeForce RTX 3080 Ti"
    f = _write(tmp_path, "c.json", d)
    code, out, err = run_cli(["card-anchor", str(CHAR / "lease_anchor13.json.gz"), "--gpu", "h200", "--also", f], capsys)
    one_error_line(code, out, err, "RTX 3080 Ti", "h200")


def test_an_anchor_measured_twice_in_one_file_is_refused(tmp_path, capsys):
    """The second measurement of a name was dropped without a word (the fit used the first, whatever the second)."""
    d = _anchor_doc()
    k = copy.deepcopy(d["kernels"][3])
    k["power_w"] *= 0.5
    d["kernels"].append(k)
    f = _write(tmp_path, "a.json", d)
    code, out, err = run_cli(["card-anchor", f, "--gpu", "h200"], capsys)
    one_error_line(code, out, err, "add_bf16_1GiB", "twice", "characterize")


@pytest.mark.parametrize("params,needle", [("static,static", "static"), ("static,core,core", "core"),
                                           ("", "static")])
def test_anchor_params_duplicated_or_empty_are_refused(params, needle, tmp_path, capsys):
    """`--anchor-params static,static` fitted static only (meant static,mem?), exit 0; `--anchor-params ''` was
    refused by card-anchor but taken as the default by profile build."""
    for verb in (["card-anchor", str(ANCHOR_A1), "--gpu", "h200", "--anchor-params", params],
                 ["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1),
                  "--anchor-params", params, "-o", str(tmp_path / "p.csv.gz")]):
        code, out, err = run_cli(verb, capsys)
        one_error_line(code, out, err, "--anchor-params", needle)
    assert not (tmp_path / "p.csv.gz").exists()


@pytest.mark.parametrize("key,value", [("static_w", 1e9), ("mem_scale", 100.0), ("core_scale", 0.01),
                                       ("core_scale", True)])
def test_a_card_anchor_report_outside_the_fits_bounds_is_refused(tmp_path, key, value, capsys):
    """A hand-edited `card-anchor -o` report with static_w 1e9 W or mem_scale 100 built a profile, exit 0."""
    rep = json.loads((ROOT / "validation" / "h200" / "card_anchor" / "check_leaseA_anchorA1.json").read_text())
    rep["anchor"][key] = value
    f = _write(tmp_path, "card.json", rep)
    code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", f, "-o",
                              str(tmp_path / "p.csv.gz")], capsys)
    line = one_error_line(code, out, err, key, "card-anchor")
    assert "InputError(" not in line  # one message, not a message inside another's repr
    assert not (tmp_path / "p.csv.gz").exists()


def test_a_card_anchor_report_works_as_anchors(tmp_path, capsys):
    """The docs: `--anchors` takes the characterisation file or `card-anchor`'s report, the same card either way."""
    rep = tmp_path / "card.json"
    code, _, err = run_cli(["card-anchor", str(ANCHOR_A1), "--gpu", "h200", "-o", str(rep)], capsys)
    assert code == 0, err
    outs = []
    for a in (str(ANCHOR_A1), str(rep)):
        code, out, err = run_cli(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", a, "--json",
                                  "-o", str(tmp_path / "p.csv.gz")], capsys)
        assert code == 0, err
        outs.append(json.loads(out)["card_anchor"])
    assert outs[0]["static_w"] == pytest.approx(outs[1]["static_w"])
    assert outs[0]["mem_scale"] == pytest.approx(outs[1]["mem_scale"])


# ------------------------------------------------------------------- every output says which card it used
def test_analyze_says_which_card_it_planned_for(tmp_path, capsys):
    """`analyze --anchors` printed, wrote analysis.json and report.md without a word of the anchors: the same as
    without them, to the reader."""
    out_dir = tmp_path / "an"
    code, out, err = run_cli(["analyze", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "--slack", "1",
                              "--no-kernel-switch-aware", "-o", str(out_dir)], capsys)
    assert code == 0, err
    flat = " ".join((out + err).split())
    assert "anchorA1.json.gz" in flat and "static +3.1 W" in flat, flat
    doc = json.loads((out_dir / "analysis.json").read_text())
    assert doc["card_anchor"]["source"].startswith("anchorA1.json.gz")
    assert "anchorA1.json.gz" in (out_dir / "report.md").read_text()
    code, out, err = run_cli(["analyze", TRACE, "--gpu", "h200", "--slack", "1", "--no-kernel-switch-aware",
                              "-o", str(tmp_path / "bare")], capsys)
    assert code == 0 and "card_anchor" not in json.loads((tmp_path / "bare" / "analysis.json").read_text())
    assert "card-anchor" not in (tmp_path / "bare" / "report.md").read_text()


def test_validate_steps_says_which_card_it_checked_with(tmp_path, capsys):
    """`validate-steps --anchors` put the card in its JSON only: the printed table read as the bundled fit's."""
    steps = one_step_folder(tmp_path, LEASE_A)
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200", "--anchors", str(ANCHOR_A1)], capsys)
    assert code == 0, err
    flat = " ".join((out + err).split())
    assert "anchorA1.json.gz" in flat and "GPU-012ece08" in flat and "static +3.1 W" in flat, flat


# ------------------------------------------------------------------------------------ another card's anchors
def test_a_card_anchor_report_is_not_applied_to_another_card(tmp_path, capsys):
    """An H200 `card-anchor -o` report adapted an RTX 3080 Ti profile (`profile build --gpu rtx3080ti --anchors
    card.json`: static +3.1 W, memory-traffic power × 0.771), exit 0: the report did not say which card it was of."""
    rep = tmp_path / "card.json"
    code, _, err = run_cli(["card-anchor", str(ANCHOR_A1), "--gpu", "h200", "-o", str(rep)], capsys)
    assert code == 0, err
    anchor = json.loads(rep.read_text())["anchor"]
    assert anchor["gpu"] == "h200" and anchor["gpu_uuid"].startswith("GPU-012ece08")
    out_csv = tmp_path / "p.csv"
    old = tmp_path / "old.json"  # a report written before the card was recorded in it: the committed ones
    old.write_text((ROOT / "validation" / "h200" / "card_anchor" / "check_leaseA_anchorA1.json").read_text())
    for a in (rep, old):
        code, out, err = run_cli(["profile", "build", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "rtx3080ti",
                                  "--anchors", str(a),
                                  "-o", str(out_csv)], capsys)
        one_error_line(code, out, err, "rtx3080ti")
    assert not out_csv.exists()


def test_validate_steps_cautions_on_another_leases_anchors(tmp_path, capsys):
    """Lease B's anchors on lease A's steps (two cards, UUIDs in both files) were taken without a word."""
    steps = one_step_folder(tmp_path, LEASE_A)
    b1 = ROOT / "validation" / "h200" / "lease_anchor" / "leaseB" / "anchorB1.json.gz"
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200", "--anchors", str(b1), "-o",
                              str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    flat = " ".join(err.split())
    assert "Caution:" in flat and "GPU-5edce069" in flat and "GPU-012ece08" in flat, flat
    assert "card_anchor_caution" in json.loads((tmp_path / "r.json").read_text())
    code, out, err = run_cli(["validate-steps", str(steps), "--gpu", "h200", "--anchors", str(ANCHOR_A1)], capsys)
    assert code == 0 and "Caution: the anchors ran on card" not in err, err


@pytest.mark.parametrize("also", ["self", "twice"])
def test_card_anchor_counts_each_also_file_once(also, capsys):
    """`--also F --also F` (or the anchor file as its own --also) checked every held-out entry twice: 24 → 48."""
    main = CHAR / ("characterization12.json.gz" if also == "self" else "lease_anchor13.json.gz")
    extra = [main] if also == "self" else [CHAR / "characterization13.json.gz"] * 2
    args = ["card-anchor", str(main), "--gpu", "h200"]
    for e in extra:
        args += ["--also", str(e)]
    code, out, err = run_cli(args, capsys)
    one_error_line(code, out, err, "--also", "twice" if also == "twice" else "anchor file itself")


@pytest.mark.parametrize("verb", [
    ["validate-steps", str(LEASE_A / "steps"), "--gpu", "h200"],
    ["profile", "build", "--trace", TRACE, "--gpu", "h200", "-o", "OUT"],
    ["analyze", TRACE, "--gpu", "h200", "--slack", "1", "--no-kernel-switch-aware", "-o", "OUT"],
])
def test_anchor_params_without_anchors_is_refused(verb, tmp_path, capsys):
    """`validate-steps DIR --anchor-params static,core` with --anchors forgotten checked the bundled fit, exit 0."""
    args = [str(tmp_path / "out") if x == "OUT" else x for x in verb] + ["--anchor-params", "static,core"]
    code, out, err = run_cli(args, capsys)
    one_error_line(code, out, err, "--anchor-params", "--anchors")
    assert not (tmp_path / "out").exists()


def test_validate_steps_plot_over_the_anchors_suggests_a_figure_name(tmp_path, capsys):
    """`--plot A` over the anchor run is refused; the name it suggests must itself be a figure name (not
    out-A.json.gz, which the figure check then refuses)."""
    a = tmp_path / "anchors.json.gz"
    shutil.copy(ANCHOR_A1, a)
    code, out, err = run_cli(["validate-steps", str(LEASE_A / "steps"), "--gpu", "h200", "--anchors", str(a),
                              "--plot", str(a)], capsys)
    line = one_error_line(code, out, err, "--plot", "anchors")
    assert "out-anchors.png" in line, line


@pytest.mark.parametrize("stride", ["[0, 0]", "[2, 0]"])
def test_a_zero_stride_convolution_is_priced_not_a_crash(stride):
    """``op_work('aten::convolution', ...)`` with a recorded stride of 0 (a corrupt trace) raised ZeroDivisionError;
    such a stride is taken as unrecorded (stride 1), as a missing one is."""
    from kdvfs.work import op_work

    dims = [[8, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]
    types = ["c10::BFloat16", "c10::BFloat16"] + [""] * 7
    w = op_work("aten::convolution", dims, types, concrete=["", "", "", stride, "[3, 3]", "[1, 1]", "False", "[0, 0]",
                                                            "1"])
    unrecorded = op_work("aten::convolution", dims, types)
    assert w is not None and unrecorded is not None and w.flops == unrecorded.flops > 0
