"""Session 7 of issue 12: the top-clock zoo set, and `calibrate-h200 --check` — a stored fit against characterisation
files without fitting (a held-out check of a new campaign)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from conftest import run_cli

from hw_backend.zoo import full_zoo, top_clock_zoo
from kdvfs.calibrate_h200 import check_h200_fit, load_rows

ROOT = Path(__file__).resolve().parents[1]
CHAR = ROOT / "validation/h200/characterization"


def test_top_clock_set_roles_and_work():
    z = {k.name: k for k in top_clock_zoo()}
    assert {k.name for k in full_zoo()} >= set(z)  # part of `--set all`
    assert z["duty_gemm_bf16_16384x8192x2048_x8_gap4ms"].role == "duty"
    assert z["duty_sdpa_bf16_causal_8x16x2048x128_x20_gap4ms"].role == "duty"
    assert z["fill_fp32_1GiB"].role == "kernel"
    w = z["duty_gemm_bf16_16384x8192x2048_x8_gap4ms"].work
    assert w.flops == 8 * 2 * 16384 * 8192 * 2048  # eight GEMMs per burst
    assert z["fill_fp32_1GiB"].work.bytes == (1 << 30) and z["fill_fp32_1GiB"].work.flops == 0
    # the fp32 cast down reads 1 GiB and writes half of it
    assert z["cast_fp32_to_bf16_1GiB"].work.bytes == (1 << 30) + (1 << 29)


def test_stored_session7_measurements():
    rows = load_rows(CHAR / "characterization5.json.gz")[0]
    got = {r["name"]: r for r in rows}
    assert len(rows) == 12 and "duty_sdpa_bwd_bf16_causal_8x16x2048x128_x8_gap4ms" not in got  # skipped on the card
    assert all(r["role"] == "duty" for n, r in got.items() if n.startswith("duty_"))
    assert got["duty_gemm_bf16_4096_x25_gap1ms"]["sm_mhz_median"] < 1980  # the 1 ms gap brings the window to the cap


def test_stored_attention_set_and_repeats():
    rows = {r["name"]: r for r in load_rows(CHAR / "characterization6.json.gz")[0]}
    assert len(rows) == 7 and rows["sdpa_bf16_causal_16x16x2048x64"]["sm_mhz_median"] < 1980  # at the cap alone
    rep = {r["name"]: r for r in load_rows(CHAR / "repeat_base6.json")[0]}
    first = {r["name"]: r for r in load_rows(CHAR / "characterization.json.gz")[0]}
    assert len(rep) == 8
    # hotter than in session 4, every capped kernel ran at a lower clock (the leakage grows with temperature)
    capped = [n for n in rep if first[n]["sm_mhz_median"] < 1975]
    assert len(capped) == 7
    assert all(rep[n]["temperature_c"] > first[n]["temperature_c"] for n in capped)
    assert all(rep[n]["sm_mhz_median"] < first[n]["sm_mhz_median"] for n in capped)


def test_check_a_fit_on_files_it_did_not_see():
    # the session-6 fit (four files) against the session-7 top-clock file, as stored before this session's refit
    stored = json.loads((CHAR / "check5_session6_fit.json").read_text())
    by = {r["name"]: r for r in stored["check"]["per_kernel"]}
    assert stored["files_in_fit"] == [] and stored["check"]["kernels"] == 12 and stored["check"]["meet_both"] == 9
    assert not by["fill_fp32_1GiB"]["meets_power"]  # the check can miss: the constant fill was far off then
    fit = json.loads((CHAR / "fit.json").read_text())
    doc = check_h200_fit(fit, [str(CHAR / "characterization7.json.gz")])  # the held-duty file is not fitted
    ch = doc["check"]
    assert doc["files_in_fit"] == [] and ch["kernels"] == 8
    assert all(r["predicted_sm_mhz"] == r["measured_sm_mhz"] for r in ch["per_kernel"])  # duty: at its measured clock
    again = check_h200_fit(fit, [str(CHAR / "characterization5.json.gz")])
    assert again["files_in_fit"] == ["characterization5.json.gz"]  # said so when the file was fitted


def test_check_cli_writes_only_where_asked(capsys, tmp_path):
    fit = CHAR / "fit.json"
    before = fit.read_bytes()
    code, out, _ = run_cli(["calibrate-h200", "--check", str(fit), "--data", str(CHAR / "characterization7.json.gz")],
                           capsys)
    assert code == 0 and "8 kernels (held out)" in out and fit.read_bytes() == before
    dest = tmp_path / "check.json"
    code, _, _ = run_cli(["calibrate-h200", "--check", str(fit), "--data", str(CHAR / "characterization5.json.gz"),
                          "-o", str(dest)], capsys)
    assert code == 0 and json.loads(dest.read_text())["format"] == "kdvfs-h200-fit-check/1"
    code, _, err = run_cli(["calibrate-h200", "--check", str(fit)], capsys)
    assert code == 2 and "--data" in err and "Traceback" not in err
    code, _, err = run_cli(["calibrate-h200", "--check", str(CHAR / "characterization5.json.gz"), "--data",
                            str(CHAR / "characterization5.json.gz")], capsys)
    assert code == 2 and "kdvfs-h200-fit/1" in err


def test_attention_coefficient_acts_on_attention_only():
    from dataclasses import replace

    from kdvfs.gpus import get_gpu
    from kdvfs.model import activity_from_work

    spec = get_gpu("h200")
    co = dict(spec.work_activity)
    args = ([1e12, 1e12], [1e8, 1e8], ["tensor16", "tensor16"], [2e-3, 2e-3], [1980, 1980])
    plain = replace(spec, work_activity=tuple((k, v) for k, v in co.items() if k != "att"))
    more = replace(spec, work_activity=tuple({**co, "att": 1.3}.items()))
    u0, _ = activity_from_work(plain, *args, categories=["gemm", "attention"])
    u1, _ = activity_from_work(more, *args, categories=["gemm", "attention"])
    assert u0[0] == u0[1] and u1[0] == u0[0]  # a GEMM keeps its activity
    assert u1[1] > u0[1]  # an attention kernel of the same work draws more
    u2, _ = activity_from_work(more, *args)  # without categories: as before
    assert np.allclose(u2, u0)
