"""Issue 12, session 11: the zoo set ``step-ops`` (the ops of the blind set steps12 that no other set runs alone) and
the step breakdown (``simulator.step_breakdown``)."""

from __future__ import annotations

import json

import pytest

from kdvfs.work import copy_work, norm_work, softmax_work


# ------------------------------------------------------------------------------------------------- the zoo set
def test_step_ops_set_is_new_and_sized_from_arithmetic():
    from hw_backend.zoo import UPSAMPLE_FLOPS, ZOO_SETS

    z = ZOO_SETS["step-ops"]()
    names = [k.name for k in z]
    assert 8 <= len(z) <= 12 and len(set(names)) == len(names)
    others = {k.name for s, make in ZOO_SETS.items() if s != "step-ops" for k in make()}
    assert not set(names) & others
    old_ops = {k.op for s, make in ZOO_SETS.items() if s not in ("step-ops", "light-ops2", "copies", "light-ops3", "light-ops4")
              for k in make()}
    assert not {k.op for k in z} & old_ops  # every op is one no earlier set runs (later sets run some again)
    by = {k.op: k for k in z}
    up = by["upsample_bilinear"]
    nb, c, h, w, sc = up.shape
    big, small = nb * c * h * w * sc * sc, nb * c * h * w
    assert up.work.flops == UPSAMPLE_FLOPS["forward"] * big and up.work.bytes == 4 * (big + small)
    bw = by["upsample_bilinear_bwd"].work
    assert bw.flops == UPSAMPLE_FLOPS["backward"] * big and bw.bytes == 4 * (big + 2 * small)
    n = 16 * 150 * 512 * 512
    # session 12 (i12r): the spatial backward's passes over memory, 2 + 1 reads + 1 write (kdvfs.work_passes), where
    # softmax_work's last-dimension count is 3 accesses
    # (session 13: the re-read's share from device memory by the L2 curve, 0.9996 here: tests/test_work13b.py)
    assert by["log_softmax_ch_bwd"].work.bytes == pytest.approx(4 * 4.0 * n, rel=1e-3)
    assert by["log_softmax_ch_bwd"].work.flops == softmax_work(n, "fp32", row=150, backward=True, log=True).flops
    # session 13 (i13a): the channels-last copy's lines leave L2 before their neighbours are read (kdvfs.work_copies:
    # W = 512² · (128 + 4) B = 35 MB over a 26 MB partition), so DRAM moves a 32-byte sector per fp32 element read
    assert by["copy_nhwc"].work.bytes == n * (32 + 4) and copy_work(n, "fp32").bytes == n * 8
    g = by["group_norm_bwd"]
    assert g.work.bytes == norm_work(128 * 64 * 56 * 56, "fp32", backward=True).bytes * g.graph
    pool = by["avg_pool2d"]
    m = 128 * 64 * 56 * 56
    assert pool.work.flops == 10 * m * pool.graph and pool.work.bytes == 2 * 4 * m * pool.graph
    conv = by["conv2d_bwd"]
    macs = 128 * 1280 * 14 * 14 * 320
    assert conv.work.flops == 4.0 * macs * conv.graph and conv.work.tensor
    assert not by["col2im"].work.tensor


# ------------------------------------------------------------------------------------------------- the breakdown
def test_op_family_follows_op_work_and_flags_the_catch_all():
    from kdvfs.trace import Kernel
    from simulator.step_breakdown import op_family, work_source

    fam = {"aten::mm": "gemm", "aten::convolution_backward": "conv", "aten::_log_softmax": "softmax",
           "aten::native_group_norm": "norm", "aten::add_": "elementwise", "aten::gelu_backward": "activation",
           "aten::copy_": "copy", "aten::upsample_bilinear2d": "upsample", "aten::avg_pool2d_backward": "pool",
           "aten::col2im": "fold", "aten::max_pool2d_with_indices": "pool", "aten::sort": "generic",
           "stage:fwd.qkv": "stage", None: "none",
           "aten::topk": "copy"}  # op_work's copy pattern is unanchored: "aten::to" prices topk as a copy
    assert {op: op_family(op) for op in fam} == fam
    # the family is op_work's own rule (kdvfs.work.op_rule), its last branch split into elementwise and generic
    from kdvfs.work import op_rule

    for op, f in fam.items():
        if op and not op.startswith("stage:"):
            assert op_rule(op) == ("elementwise" if f == "generic" else f)
    up = Kernel("radixSortKVInPlace", "elementwise", 1e-3, flops=1.0, bytes=1.0, op="aten::sort", work_source="shapes")
    add = Kernel("vectorized_elementwise_kernel", "elementwise", 1e-3, flops=1.0, bytes=1.0, op="aten::add",
                 work_source="shapes")
    assert work_source(up) == "shapes-generic" and work_source(add) == "shapes"


def _one_step(tmp_path, factor: float = 1.05):
    """A steps folder with the bundled block's small trace as one measured step: the measurement is the check's own
    prediction times ``factor`` (made up: the test checks the bookkeeping, not the model)."""
    import shutil

    from conftest import ROOT

    src = ROOT / "tests/data/gpt3xl-torch-h200-bf16.kineto.json.gz"
    shutil.copy(src, tmp_path / "blk.kineto.json.gz")
    from kdvfs.importers import import_kineto

    t = import_kineto(src).trace
    busy = float(t.repeats @ t.times_s)
    row = {"model": "blk", "trace": "blk.kineto.json.gz", "step_time_s": 1.25 * busy, "step_energy_j": 1.0,
           "sm_mhz_median": 1980.0}
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "gpu": "NVIDIA H200",
                                                     "steps": [row]}))
    return row, busy


def test_breakdown_partitions_the_predicted_step(tmp_path):
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import limiter_for
    from simulator.step_breakdown import breakdown_steps, summary_rows
    from simulator.stepcheck import check_one

    spec = get_gpu("h200")
    row, busy = _one_step(tmp_path)
    doc = breakdown_steps(tmp_path, spec, gap_power_w=120.0, top=5)
    st = doc["steps"]["blk"]
    assert st["gap_s"] == pytest.approx(0.25 * busy) and st["gap_energy_j"] == pytest.approx(120.0 * st["gap_s"])
    for view in ("by_source", "by_family", "by_zoo", "by_category"):  # each view splits the same kernels
        assert sum(g["energy_j"] for g in st[view]) == pytest.approx(st["kernel_energy_j"], rel=1e-9)
        assert sum(g["time_s"] for g in st[view]) == pytest.approx(st["kernel_time_s"], rel=1e-9)
    assert len(st["by_op"]) == 5
    # the kernels' sum is the step check's prediction under the limiter (steady at one ceiling here)
    chk = check_one(tmp_path / "blk.kineto.json.gz", "blk", spec, limiter_for(spec),
                    measured_time_s=row["step_time_s"], gap_power_w=120.0)
    assert st["predicted_energy_j"] == pytest.approx(chk["limiter_with_gaps"]["energy_j"], rel=5e-3)
    # the measured-minus-predicted energy, and each group's power were all of it its kernels'
    dE = 1.0 - st["predicted_energy_j"]
    assert st["gap_j"] == pytest.approx(dE)
    g = st["by_source"][0]
    assert g["implied_power_w"] == pytest.approx((g["energy_j"] + dE) / g["time_s"])
    (r,) = summary_rows(doc)
    assert r["kernel_error_pct"] == pytest.approx(100 * (st["kernel_energy_j"] / (1.0 - st["gap_energy_j"]) - 1))


def test_breakdown_refuses_a_folder_without_steps(tmp_path):
    from kdvfs.errors import InputError
    from kdvfs.gpus import get_gpu
    from simulator.step_breakdown import breakdown_steps

    with pytest.raises(InputError, match="steps.json' does not exist"):
        breakdown_steps(tmp_path, get_gpu("h200"))


def test_association_describes_error_against_a_share():
    from simulator.step_breakdown import association

    rows = [{"s": x, "e": -2.0 - 10.0 * x} for x in (0.0, 0.1, 0.2, 0.4)]
    a = association(rows, "s", "e")
    assert a["slope_pct_per_share"] == pytest.approx(-10.0) and a["intercept_pct"] == pytest.approx(-2.0)
    assert a["correlation"] == pytest.approx(-1.0)
    assert association(rows[:2], "s", "e") == {"steps": 2}


def test_step_ops_pricing_sets_the_importer_beside_the_zoo():
    """Since session 12 the importer prices upsampling, pooling and col2im by their own rules (``kdvfs.work_ops``; the
    catch-all gave upsampling under 1 % of its FLOPs), the same as the zoo's entries."""
    from simulator.step_breakdown import step_ops_pricing

    rows = {r["entry"].split("_fp32")[0].split("_bf16")[0]: r for r in step_ops_pricing()}
    assert not [r for r in rows.values() if r["family"] == "generic"]
    assert rows["upsample_bilinear"]["family"] == "upsample" and rows["col2im"]["family"] == "fold"
    for name in ("upsample_bilinear", "avg_pool2d_bwd", "log_softmax_ch", "group_norm_bwd", "conv2d_bwd"):
        assert rows[name]["family"] != "generic"
        if name == "conv2d_bwd":
            # session 13: the zoo entry is every kernel the op ran (kdvfs.work_conv), the importer prices them kernel
            # by kernel, not in the op's one Work: tests/test_work13b.py checks the two agree, kernel by kernel
            assert rows[name]["flops_ratio"] == pytest.approx(1.0) and rows[name]["bytes_ratio"] < 1.0
            continue
        assert rows[name]["bytes_ratio"] == pytest.approx(1.0) and rows[name]["flops_ratio"] == pytest.approx(1.0)


def test_power_bands_group_steps_by_their_kernels_power():
    from simulator.step_breakdown import by_power_band

    rows = [{"model": m, "kernel_power_w": p, "kernel_error_pct": e, "missing_power_w": w, "error_pct": t}
            for m, p, e, w, t in (("a", 400.0, -5.0, 20.0, -4.0), ("b", 420.0, -3.0, 10.0, -2.0),
                                  ("c", 700.0, 0.5, -1.0, 0.4))]
    lo, hi = by_power_band(rows, (0.0, 650.0, 1e9))
    assert (lo["steps"], lo["mean_kernel_error_pct"], lo["median_missing_power_w"], lo["within_3pct"]) == \
        (2, -4.0, 15.0, 1)
    assert hi["models"] == ["c"] and hi["to_w"] is None
    assert by_power_band(rows, check=True) == []  # no check-side errors in these rows


def test_measured_substitution_swaps_in_the_zoo_power_of_the_same_kernel(tmp_path):
    from kdvfs.gpus import get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.limiter import limiter_for
    from simulator.step_breakdown import breakdown_steps, kernel_rows, measured_substitution

    spec = get_gpu("h200")
    _one_step(tmp_path)
    t = import_kineto(tmp_path / "blk.kineto.json.gz", name="blk").trace
    busy = float(t.repeats @ t.times_s)
    rows, _ = kernel_rows(t, spec, limiter_for(spec), (0.25 * busy, 120.0))
    k = max((r for r in rows if r["grid"]), key=lambda r: r["energy_j"])
    entry = {"name": "zoo_x", "power_w": 650.0,
             "launch_grids": [{"name": k["name"], "grid": k["grid"], "us": 1e6 * k["time_one_s"]}]}
    # the same name and grid, twice as long: another kernel (the tolerance refuses it)
    other = {"name": "zoo_y", "power_w": 100.0,
             "launch_grids": [{"name": k["name"] + "_", "grid": k["grid"], "us": 2e6 * k["time_one_s"]}]}
    out = measured_substitution(tmp_path, spec, {"kernels": [entry, other]}, static_offset_w=10.0)["blk"]
    same = [r for r in rows if r["name"] == k["name"] and r["grid"] == k["grid"]
            and abs(r["time_one_s"] / k["time_one_s"] - 1) <= 0.15]
    t_m = sum(r["time_s"] for r in same)
    e_m = sum(r["energy_j"] for r in same)
    assert list(out["entries"]) == ["zoo_x"] and out["matched_time_s"] == pytest.approx(t_m)
    assert out["substituted_energy_j"] - out["predicted_energy_j"] == pytest.approx(t_m * 640.0 - e_m)
    st = breakdown_steps(tmp_path, spec)["steps"]["blk"]  # the same default gap power
    assert out["predicted_energy_j"] == pytest.approx(st["predicted_energy_j"], rel=1e-9)
