"""Session 5 of issue 12: the zoo sets that measure L2 residency, launch-bound and host-gap power and heavy bursts below
the cap; the fit's use of them; the work estimates they exposed; auto as the fastest setting at the card's own clocks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hw_backend.characterize import (
    FakeZoo,
    ZooKernel,
    cache_gap_zoo,
    characterize,
    duty_zoo,
    full_zoo,
    load_characterization,
    step_shape_zoo,
)
from hw_backend.fake import FakeNvml
from hw_backend.nvml import NvmlBackend
from kdvfs.calibrate_h200 import busy_fraction, gap_power, kernel_time_s, onset_rows, period_s, prepared_rows, zoo_rows
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import activity_from_work, dram_fraction
from kdvfs.work import op_work, work_from_name

ROOT = Path(__file__).resolve().parents[1]
CHAR = ROOT / "validation/h200/characterization"


def test_zoo_sets_and_roles():
    names = [k.name for k in full_zoo()]
    assert len(names) == len(set(names)) and len(names) >= 38 + 14 + 13 + 9
    roles = {k.name: k.role for k in cache_gap_zoo() + duty_zoo() + step_shape_zoo()}
    assert roles["gap_add_bf16_4KiB_1ms"] == roles["idle_10ms"] == "gap"
    assert roles["launch_add_bf16_4KiB"] == "launch"
    assert roles["duty_gemm_bf16_4096_x25_gap4ms"] == "duty"
    assert roles["add_bf16_4MiB_graph32"] == roles["gemm_bf16_16384x50257x1024"] == "kernel"
    g = next(k for k in cache_gap_zoo() if k.name == "add_bf16_4MiB_graph32")
    one = ZooKernel("x", g.category, g.op, g.dtype, g.shape)
    assert g.work.bytes == pytest.approx(32 * one.work.bytes) and g.work.flops == pytest.approx(32 * one.work.flops)
    assert ZooKernel("i", "other", "idle", "bf16", (1,), gap_s=1e-3).work.bytes == 0.0


def test_fake_campaign_gap_entry_reads_idle_power(tmp_path):
    spec = get_gpu("h200")
    zoo = tuple(k for k in cache_gap_zoo() if k.name in ("gap_add_bf16_4KiB_1ms", "idle_10ms", "add_bf16_64MiB_graph8"))
    fake = FakeNvml(spec, seed=0)
    doc = characterize(NvmlBackend(fake, observe_only=True), FakeZoo(fake, zoo), tmp_path / "c.json", zoo=zoo,
                       window_s=0.5, warmup_s=0.1, steps=False, threaded_sampler=False, command="test")
    by = {k["name"]: k for k in doc["kernels"]}
    assert by["idle_10ms"]["power_w"] == pytest.approx(spec.idle_power_w, rel=1e-6)
    assert by["idle_10ms"]["time_s"] == pytest.approx(0.01, rel=1e-6) and by["idle_10ms"]["role"] == "gap"
    # a tiny kernel every millisecond: the GPU is idle almost all the time
    assert by["gap_add_bf16_4KiB_1ms"]["power_w"] == pytest.approx(spec.idle_power_w, rel=0.05)
    assert by["add_bf16_64MiB_graph8"]["power_w"] > 2 * spec.idle_power_w
    rows = zoo_rows(doc)
    assert gap_power([r for r in rows if r["role"] == "gap"]) == pytest.approx(spec.idle_power_w, rel=0.05)


def test_busy_fraction_rules():
    r = {"name": "k", "time_s": 10e-6, "cuda_kernels": [{"name": "a", "us": 3.0}, {"name": "b", "us": 1.0}]}
    assert busy_fraction(r) == pytest.approx(0.4)  # launch-bound: 4 µs of kernels in 10 µs
    assert busy_fraction(dict(r, time_s=5e-6)) == 1.0  # 80 %: not launch-bound
    trunc = dict(r, cuda_kernels=[{"name": f"k{i}", "us": 0.1} for i in range(20)])
    assert busy_fraction(trunc) == 1.0  # 20 names without the "(+N more)" tail: an old, truncated list
    more = dict(r, cuda_kernels=[{"name": f"k{i}", "us": 0.1} for i in range(20)] + [{"name": "(+5 more)", "us": 1.0}])
    assert busy_fraction(more) == pytest.approx(0.3)
    assert busy_fraction(dict(r, graph=8)) == 1.0


def test_stored_session5_measurements():
    d2 = load_characterization(CHAR / "characterization2.json.gz")
    rows = zoo_rows(d2)
    gaps = [r for r in rows if r["role"] == "gap"]
    assert len(gaps) == 3 and 110 < gap_power(gaps) < 125  # the GPU between kernels draws about idle power
    by = {r["name"]: r for r in rows}
    # L2 residency: the same add draws less when its working set fits in the 50 MB L2
    assert by["add_bf16_4MiB_graph32"]["power_w"] < by["add_bf16_16MiB_graph16"]["power_w"] < by["add_bf16_64MiB_graph8"]["power_w"]
    # launch gaps dilute a short kernel: the same relu / GEMM as a graph replay draws far more
    d1 = {k["name"]: k for k in zoo_rows(load_characterization(CHAR / "characterization.json.gz"))}
    assert d1["relu_bf16_16MiB"]["busy"] < 0.7 and d1["gemm_bf16_1024"]["busy"] < 0.7
    assert by["relu_bf16_16MiB_graph16"]["power_w"] > 1.5 * d1["relu_bf16_16MiB"]["power_w"]
    d4 = {k["name"]: k for k in zoo_rows(load_characterization(CHAR / "characterization4.json.gz"))}
    duty = d4["duty_gemm_bf16_4096_x25_gap4ms"]
    assert duty["uncapped"] and 0.3 < duty["busy"] < 0.7 and duty["sm_mhz_median"] >= 1965
    rows_all, gap_w, _, docs = prepared_rows([CHAR / f"characterization{i}.json.gz" for i in ("", "2", "3", "4")])
    onset = onset_rows(docs)
    assert len(onset) == 1 and onset[0]["uncapped"] and 700 < onset[0]["power_w"] < 1000
    # the onset row (NVML's lagging instantaneous power) is reported, not fitted
    assert onset[0]["name"] not in {r["name"] for r in rows_all} and all(r["role"] != "gap" for r in rows_all)


def test_busy_share_is_over_the_energy_window():
    """A duty or launch-bound entry's power is its window's energy over the window, so its busy share is the kernels'
    time over the mean time per invocation (the window / invocations), not over the median wait for one invocation,
    which leaves out the host's time between invocations (the duty entries idle 1.2–1.6 × longer than the median)."""
    d4 = {k["name"]: k for k in zoo_rows(load_characterization(CHAR / "characterization4.json.gz"))}
    for r in d4.values():
        if r["role"] != "duty":
            continue
        assert r["time_mean_s"] > 1.1 * r["time_s"]
        assert abs(r["busy"] - r["burst_time_s"] / r["time_mean_s"]) < 1e-12
        assert abs(kernel_time_s(r) - r["burst_time_s"]) < 1e-12
    d1 = {k["name"]: k for k in zoo_rows(load_characterization(CHAR / "characterization.json.gz"))}
    r = d1["gemm_bf16_1024"]
    us = sum(c["us"] for c in r["cuda_kernels"]) * 1e-6
    assert abs(r["busy"] - us / r["time_mean_s"]) < 1e-12 and abs(kernel_time_s(r) - us) < 1e-12
    assert period_s({"time_s": 2.0}) == 2.0  # files without the window's mean fall back to the median


def test_dram_fraction_and_elementwise_coefficient():
    spec = get_gpu("h200")
    co = dict(spec.work_activity)
    ws = np.array([1e6, 1e7, 5e7, 2e8, 1e9])
    fr = dram_fraction(spec, ws)
    assert np.all(np.diff(fr) > 0) and fr[0] < 0.01 and fr[-1] > 0.99
    from dataclasses import replace

    plain = replace(spec, work_activity=tuple((k, v) for k, v in co.items() if k not in ("l2_mb", "ew")))
    assert np.all(dram_fraction(plain, ws) == 1.0)
    # the same SIMT FLOPs: an elementwise kernel takes the ew coefficient, an fp32 GEMM the simt one
    uc, um = activity_from_work(spec, [1e9, 1e9], [1e9, 1e9], ["simt", "simt"], [1e-3, 1e-3], [1980, 1980],
                                categories=["elementwise", "gemm"])
    util = 1e9 / (spec.peak_flops("simt") * 1e-3)
    assert uc[0] - uc[1] == pytest.approx((co["ew"] - co["simt"]) * util)
    uc2, _ = activity_from_work(spec, [1e9], [1e9], ["simt"], [1e-3], [1980])  # without categories: as before
    assert uc2[0] == pytest.approx(uc[1])


def test_work_estimates_fixed_in_session5():
    # the memory-efficient / flash kernels' own ops take (batch, seq, heads, dim)
    a = op_work("aten::_efficient_attention_forward", [[8, 2048, 16, 128]] * 3, ["float"] * 3)
    b = op_work("aten::_scaled_dot_product_efficient_attention", [[8, 16, 2048, 128]] * 3, ["float"] * 3)
    assert a.flops == pytest.approx(b.flops) and a.flops == pytest.approx(4 * 8 * 16 * 2048 * 2048 * 128)
    # cat of a tensor list: every input read, the result written
    c = op_work("aten::cat", [[[8, 16, 2048, 128]] * 3, []], ["TensorList", "Scalar"])
    assert c is not None and c.bytes == pytest.approx(2 * 3 * 8 * 16 * 2048 * 128 * 4)
    # a foreach optimizer kernel: one 65536-element chunk per block
    w = work_from_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
                       "namespace)::TensorListMetadata<2>, float>", "optimizer", (320, 1, 1), (512, 1, 1), 60e-6)
    assert w.bytes == pytest.approx(320 * 65536 * 3 * 4)
    # the same with a list of scalars (the foreach AdamW's addcdiv_ and div_): three lists read, one written; these
    # fell through to the generic estimate (one element per thread: 1/(4·65536/512) of the work) before
    w = work_from_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
                       "namespace)::TensorListScalarListMetadata<float, 3>, at::native::(anonymous namespace)::"
                       "PointwiseOpScalarListFunctor<float, 3, 3, 0>, std::divides<float> >", "optimizer", (320, 1, 1),
                       (512, 1, 1), 60e-6)
    assert w.flops == pytest.approx(320 * 65536 * 3) and w.bytes == pytest.approx(320 * 65536 * 4 * 4)


def test_shapeless_gemm_bytes_are_near_the_shapes():
    """A GEMM without recorded shapes gets the cube GEMM's compulsory traffic for the FLOPs its duration allows: on
    the Llama step's GEMMs (which have shapes) that is within 0.3–1.5× of the shapes' bytes, time-weighted ~0.55×
    (a fortieth of the FLOPs, the earlier estimate, was ~33× too many)."""
    from kdvfs.importers import import_kineto
    from kdvfs.work import NAME_PEAK_FLOPS

    tr = import_kineto(ROOT / "validation/h200/steps/llama-0.5b.kineto.json.gz", name="llama").trace
    r, w = [], []
    for k in tr.kernels:
        if k.category == "gemm" and k.work_source == "shapes" and k.bytes > 0:
            x = work_from_name(k.name, "gemm", None, None, k.time_s, peak_flops=NAME_PEAK_FLOPS)
            r.append(x.bytes / k.bytes)
            w.append(k.time_s)
    assert len(r) > 10 and 0.3 < np.median(r) < 1.5 and 0.3 < np.average(r, weights=w) < 1.5


def test_softmax_long_rows_read_once_per_pass():
    """A softmax row longer than a block's 48 KiB of shared memory (a vocabulary's fp32 log-softmax) is read once per
    pass: three reads and a write forward, five accesses backward (four for log-softmax, whose backward sums the
    gradient alone); a short row is read once (the zoo's fp32 softmax over 50 272 columns ran at 4.1 TB/s counted so,
    2.0 TB/s counted as one read)."""
    long_f = op_work("aten::_log_softmax", [[16384, 32000], [], []], ["float", "Scalar", "Scalar"])
    assert long_f.bytes == pytest.approx(16384 * 32000 * 4 * 4)
    long_b = op_work("aten::_log_softmax_backward_data", [[16384, 32000], [16384, 32000], [], []],
                     ["float", "float", "Scalar", "Scalar"])
    assert long_b.bytes == pytest.approx(16384 * 32000 * 4 * 4)
    soft_b = op_work("aten::_softmax_backward_data", [[16384, 32000], [16384, 32000], [], []],
                     ["float", "float", "Scalar", "Scalar"])
    assert soft_b.bytes == pytest.approx(16384 * 32000 * 4 * 5)
    short = op_work("aten::_softmax", [[8, 16, 2048, 2048], [], []], ["c10::BFloat16", "Scalar", "Scalar"])
    assert short.bytes == pytest.approx(8 * 16 * 2048 * 2048 * 2 * 2)


def test_auto_is_the_fastest_setting_on_a_held_out_step():
    """The H200 model offered settings faster than auto on the held-out Llama step: a 15 W memory saving at 2201 MHz
    that was never measured bought capped GEMMs clock. With no unmeasured saving, auto is the fastest."""
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params, evaluate

    spec = get_gpu("h200")
    assert spec.mem_power_w[0] == spec.mem_power_w[-1]
    tr = import_kineto(ROOT / "validation/h200/steps/llama-0.5b.kineto.json.gz", name="llama").trace
    p = default_params(tr, spec)
    st = [(AUTO, AUTO)] + [(c, m) for m in spec.mem_clocks_mhz for c in spec.core_clocks_mhz[-20:]]
    ev = evaluate(spec, p, np.array([s[0] for s in st]), np.array([s[1] for s in st]))
    assert np.all(ev.time_s[:, 1:].min(axis=1) >= ev.time_s[:, 0] * (1 - 1e-9))


def test_stored_step_check_uses_the_measured_gap_power():
    fit = json.loads((ROOT / "traces/h200.fit.json").read_text())
    chk = json.loads((ROOT / "validation/h200/steps_check.json").read_text())
    assert chk["gap_power_w"] == pytest.approx(fit["params"]["gap_power_w"])
    assert chk["met"]["of"] == 23 and {r["model"] for r in chk["steps"]} >= {"qwen2-0.5b", "opt-350m", "phi-1.5", "vit-base"}
