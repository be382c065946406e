"""kdvfs.card_anchor: the bundled H200 fit adapted to a card from its anchor entries (issue 12)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import one_error_line, run_cli

from kdvfs.card_anchor import (
    ANCHOR_NAMES,
    CardAnchor,
    adapted,
    anchor_base,
    check_file,
    fit_card_anchor,
    load_card_anchor,
    predict,
    split_lease,
)
from kdvfs.errors import InputError
from kdvfs.gpus import get_gpu
from kdvfs.thermal import thermal_for

ROOT = Path(__file__).resolve().parents[1]
CH = ROOT / "validation/h200/characterization"


def _template() -> tuple[dict, list[dict]]:
    """The eight anchor entries as measured in the first two zoo files (their work, times, temperatures)."""
    from hw_backend.characterize import load_characterization

    docs = [load_characterization(CH / f) for f in ("characterization.json.gz", "characterization2.json.gz")]
    ks = [dict(k) for d in docs for k in d["kernels"] if k["name"] in ANCHOR_NAMES and "skipped" not in k]
    return {k: v for k, v in docs[0].items() if k != "kernels"}, ks


def _write(path: Path, head: dict, ks: list[dict]) -> Path:
    path.write_bytes(gzip.compress(json.dumps(dict(head, kernels=ks)).encode()))
    return path


def synthetic_card(path: Path, static_w: float = 0.0, core_scale: float = 1.0, names=ANCHOR_NAMES,
                   mem_scale: float = 1.0) -> Path:
    """An anchor run of a made-up card: the bundled fit with ``static_w`` more static power and its core dynamic
    power × ``core_scale``, each entry's clock and power as that card's model gives them (a fixed point: a capped
    entry's time is anchored at its clock)."""
    spec = get_gpu("h200")
    true = adapted(spec, thermal_for(spec), CardAnchor(static_w, core_scale, 0.0, True, (), "truth", 0.0, 0.0,
                                                       mem_scale, True))
    head, ks = _template()
    ks = [k for k in ks if k["name"] in names]
    lease = split_lease(_write(path, head, ks))
    rows, gaps = [dict(r) for r in lease.anchors], [dict(g) for g in lease.anchor_gaps]
    for _ in range(8):  # the rows' clocks to the card's, in memory (predict reads the clock, not the power)
        f, p, fg, pg = predict(*true, rows, gaps)
        for r, fi, pi in zip(rows + gaps, np.concatenate([f, fg]), np.concatenate([p, pg])):
            r["sm_mhz_median"], r["power_w"] = float(fi), float(pi)
    new = {r["name"]: (r["sm_mhz_median"], r["power_w"]) for r in rows + gaps}
    for k in ks:
        k["sm_mhz_median"], k["power_w"] = new[k["name"]]
        k["energy_j"] = k["power_w"] * k.get("time_mean_s", k["time_s"])
    return _write(path, head, ks)


def test_anchor_names_match_the_zoo_set_where_it_exists():
    from hw_backend.zoo import ZOO_SETS

    if "anchor" not in ZOO_SETS:
        pytest.skip("the zoo set 'anchor' is added to hw_backend/zoo.py by the lead")
    assert tuple(k.name for k in ZOO_SETS["anchor"]()) == ANCHOR_NAMES or \
        set(k.name for k in ZOO_SETS["anchor"]()) == set(ANCHOR_NAMES)


def test_repeats_under_another_name_count_as_anchors():
    assert anchor_base("gemm_bf16_8192_heat4") == "gemm_bf16_8192"
    assert anchor_base("gap_add_bf16_4KiB_100us_warm3") == "gap_add_bf16_4KiB_100us"
    assert anchor_base("add_bf16_1GiB_cool") == "add_bf16_1GiB"
    assert anchor_base("gemm_bf16_8192_heat4", variants=False) is None
    assert anchor_base("gemm_bf16_2048") is None and anchor_base("duty_gemm_bf16_4096_x25_gap1ms") is None


@pytest.mark.parametrize("static_w, core_scale, mem_scale", [(10.0, 1.0, 1.0), (-6.0, 1.04, 0.8)])
def test_a_leakier_card_is_recovered(tmp_path, static_w, core_scale, mem_scale):
    spec = get_gpu("h200")
    f = synthetic_card(tmp_path / "a.json.gz", static_w, core_scale, mem_scale=mem_scale)
    a = load_card_anchor(f, spec)
    assert a.core_scale_fitted and a.mem_scale_fitted
    assert a.static_w == pytest.approx(static_w, abs=1.0)
    assert a.core_scale == pytest.approx(core_scale, abs=0.01)
    assert a.mem_scale == pytest.approx(mem_scale, abs=0.02)
    assert a.loss < 0.05 * a.loss_before


def test_the_unadapted_card_fits_itself(tmp_path):
    a = load_card_anchor(synthetic_card(tmp_path / "a.json.gz"), get_gpu("h200"))
    assert a.static_w == pytest.approx(0.0, abs=0.5) and a.core_scale == pytest.approx(1.0, abs=0.005)
    assert a.mem_scale == pytest.approx(1.0, abs=0.01)


def test_only_static_power_where_the_anchors_cannot_separate_the_scale(tmp_path):
    # capped entries and the gap entries only: no heavy kernel below the cap pins the dynamic power
    names = ("idle_10ms", "gap_add_bf16_4KiB_100us", "gemm_bf16_8192", "gelu_bf16_1GiB")
    a = load_card_anchor(synthetic_card(tmp_path / "a.json.gz", 10.0, 1.0, names), get_gpu("h200"))
    assert not a.core_scale_fitted and a.core_scale == 1.0 and not a.mem_scale_fitted and a.mem_scale == 1.0
    assert a.static_w == pytest.approx(10.0, abs=1.0)


def test_adapted_card_moves_idle_core_and_gap_power():
    spec = get_gpu("h200")
    th = thermal_for(spec)
    card, th2 = adapted(spec, th, CardAnchor(10.0, 1.1, 2.0, True, (), "x", 0.0, 0.0, 0.9, True))
    assert card.idle_power_w == spec.idle_power_w + 10.0
    assert card.core_power_w == pytest.approx(1.1 * spec.core_power_w)
    assert card.mem_traffic_power_w == pytest.approx(0.9 * spec.mem_traffic_power_w)
    assert th2.gap_power_w(40.0) == pytest.approx(th.gap_power_w(40.0) + 10.0)
    assert th2.operating_c(500.0) == pytest.approx(th.operating_c(500.0) + 2.0)
    assert "card-anchor" in card.source_of("idle_power_w")
    assert adapted(spec, th, None) == (spec, th)


def test_check_within_a_lease_reports_both_cards(tmp_path):
    d = check_file(CH / "characterization2.json.gz", get_gpu("h200"))
    assert d["anchors"]["adapted"]["entries"] == 3 and d["held_out"]["bundled"]["entries"] == 11
    assert {e["name"] for e in d["held_out"]["adapted"]["per_entry"]}.isdisjoint(ANCHOR_NAMES)
    assert "held out within one lease" in d["note"]


def test_too_few_anchors_and_none(tmp_path):
    spec = get_gpu("h200")
    with pytest.raises(InputError, match="1 anchor entry .* at least 2 needed"):
        load_card_anchor(synthetic_card(tmp_path / "a.json.gz", names=("idle_10ms",)), spec)
    with pytest.raises(InputError, match="holds no anchor entry"):
        load_card_anchor(CH / "characterization3.json.gz", spec)
    with pytest.raises(InputError, match="at least 2"):
        fit_card_anchor(spec, thermal_for(spec), [], [])


def test_a_counter_that_did_not_advance_is_named(tmp_path, capsys):
    f = synthetic_card(tmp_path / "a.json.gz")
    doc = json.loads(gzip.decompress(f.read_bytes()))
    doc["kernels"][0]["energy_j"] = 0.0
    bad = _write(tmp_path / "bad.json.gz", {k: v for k, v in doc.items() if k != "kernels"}, doc["kernels"])
    code, out, err = run_cli(["card-anchor", str(bad), "--gpu", "h200"], capsys)
    one_error_line(code, out, err, "energy counter did not advance", doc["kernels"][0]["name"])


def test_cli_card_anchor_writes_a_report_usable_as_anchors(tmp_path, capsys):
    f = synthetic_card(tmp_path / "a.json.gz", 10.0)
    rep = tmp_path / "card.json"
    code, out, err = run_cli(["card-anchor", str(f), "--gpu", "h200", "-o", str(rep)], capsys)
    assert code == 0, err
    assert re.search(r"static \+(9\.\d|10\.\d) W", out), out
    a = load_card_anchor(rep, get_gpu("h200"))
    assert a.static_w == pytest.approx(10.0, abs=1.0)


@pytest.mark.parametrize("verb", [["validate-steps", "validation/h200/steps10"],
                                  ["profile", "build", "--trace", "gpt3xl-torch-h200-bf16"]])
def test_bad_anchor_files_give_one_line(tmp_path, capsys, verb):
    out_args = ["-o", str(tmp_path / "x.csv.gz")] if verb[0] == "profile" else []
    (tmp_path / "junk.json").write_text("{not json")
    for bad, needle in ((str(tmp_path / "junk.json"), "junk.json"),
                        (str(CH / "characterization3.json.gz"), "holds no anchor entry"),
                        (str(tmp_path / "missing.json"), "missing.json")):
        code, out, err = run_cli(verb + ["--gpu", "h200", "--anchors", bad] + out_args, capsys)
        one_error_line(code, out, err, needle)


def test_profile_build_with_anchors_draws_the_static_power(tmp_path, capsys):
    from kdvfs.profile import load_profile

    f = synthetic_card(tmp_path / "a.json.gz", 10.0)
    base, adapt = tmp_path / "b.csv.gz", tmp_path / "a.csv.gz"
    for o, extra in ((base, []), (adapt, ["--anchors", str(f)])):
        code, out, err = run_cli(["profile", "build", "--trace", "gpt3xl-torch-h200-bf16", "--gpu", "h200", "-o",
                                  str(o)] + extra, capsys)
        assert code == 0, err
    pb, pa = load_profile(base), load_profile(adapt)
    # at a low clock no kernel is capped: every kernel draws the 10 W more
    low = [i for i, s in enumerate(pb.settings) if s[0] and s[0] <= 900]
    assert low
    d = pa.power_w[:, low] - pb.power_w[:, low]
    # (a kernel whose capture clock is solved with the cap, kdvfs.model.params_from_work, may also move its time)
    assert np.median(d) == pytest.approx(10.0, abs=0.01) and np.mean(np.abs(d - 10.0) < 0.2) > 0.9


def test_analyze_refuses_anchors_beside_a_profile(tmp_path, capsys):
    f = synthetic_card(tmp_path / "a.json.gz", 10.0)
    code, out, err = run_cli(["analyze", "gpt3xl-torch-h200-bf16", "--gpu", "h200", "--profile",
                              "gpt3xl-torch-h200-bf16", "--anchors", str(f), "-o", str(tmp_path / "o")], capsys)
    one_error_line(code, out, err, "--anchors", "give one or the other")


def test_an_anchor_run_of_another_card_is_refused(tmp_path, capsys):
    f = synthetic_card(tmp_path / "a.json.gz")
    doc = json.loads(gzip.decompress(f.read_bytes()))
    other = _write(tmp_path / "a100.json.gz", {k: v for k, v in doc.items() if k != "kernels"} | {"gpu": "NVIDIA A100"},
                   doc["kernels"])
    code, out, err = run_cli(["profile", "build", "--trace", "gpt3xl-torch-h200-bf16", "--gpu", "h200", "--anchors",
                              str(other), "-o", str(tmp_path / "p.csv.gz")], capsys)
    one_error_line(code, out, err, "measured on 'NVIDIA A100', not on h200")


@pytest.mark.slow  # ~7 s: two step checks
def test_validate_steps_with_anchors_predicts_a_leakier_card_higher(tmp_path, capsys):
    doc = json.loads((ROOT / "validation/h200/steps10/steps.json").read_text())
    st = next(s for s in doc["steps"] if s["model"] == "whisper-base-b4")
    (tmp_path / "steps.json").write_text(json.dumps(dict(doc, steps=[dict(st, trace=str(ROOT / "validation/h200/steps10"
                                                                                      / st["trace"]))])))
    f = synthetic_card(tmp_path / "a.json.gz", 10.0)
    res = []
    for extra in ([], ["--anchors", str(f)]):
        code, out, err = run_cli(["validate-steps", str(tmp_path / "steps.json"), "--gpu", "h200", "--json"] + extra,
                                 capsys)
        assert code == 0, err
        res.append(json.loads(out))
    assert "card_anchor" not in res[0] and res[1]["card_anchor"]["static_w"] == pytest.approx(10.0, abs=1.0)
    p0, p1 = (r["steps"][0]["predicted"] for r in res)
    # every kernel draws 10 W more (the same time: nothing is capped in this step)
    assert p1["limiter"]["energy_j"] - p0["limiter"]["energy_j"] == pytest.approx(10.0 * p0["limiter"]["time_s"],
                                                                                    rel=0.02)
    # the gaps: 10 W more, and the gap line's slope at the step's temperature on this card (the synthetic file keeps
    # the stored anchors' temperatures at other powers, so its ambient differs from the bundled operating point)
    k = thermal_for(get_gpu("h200")).gap_w_per_c
    t0, t1 = p0["thermal"]["operating_c"], p1["thermal"]["operating_c"]
    assert p1["thermal"]["gap_power_w"] - p0["thermal"]["gap_power_w"] == pytest.approx(10.0 + k * (t1 - t0), abs=0.05)
    assert res[1]["steps"][0]["error"]["limiter_with_gaps"]["energy_pct"] > \
        res[0]["steps"][0]["error"]["limiter_with_gaps"]["energy_pct"]
