"""Issue 12, session 13: what a copy between layouts moves, from its operands' strides (``kdvfs.work_copies``), one
rule for the importer's ``aten::copy_``, cuDNN's layout conversions and the zoo's copy entries."""

from __future__ import annotations

import pytest

from kdvfs.work import copy_work, op_work
from kdvfs.work_copies import (
    L2_BYTES,
    L2_BYTES_DEFAULT,
    L2_PARTITIONS,
    SECTOR_BYTES,
    channels_last_strides,
    contiguous_strides,
    copy_traffic,
    l2_bytes_of,
    layout_copy_traffic,
    transpose_strides,
)

B, F = "c10::BFloat16", "float"


def test_strides_of_the_layouts():
    assert contiguous_strides((2, 3, 4)) == [12, 4, 1]
    assert channels_last_strides((2, 3, 4, 5)) == [60, 1, 15, 3]
    assert transpose_strides(8, 16) == [1, 16]  # a.t() of a contiguous 8 × 16: a 16 × 8 view


def test_a_contiguous_copy_moves_its_useful_bytes_in_full_sectors():
    t = copy_traffic((1 << 20,), [1], [1], "bf16")
    assert t.useful_bytes == t.sector_bytes == t.dram_bytes == 4 * (1 << 20)
    assert not t.spills and t.reuse_bytes == 0
    # a cast: each side at its own dtype
    c = copy_traffic((1000, 64), [64, 1], [64, 1], "fp32", "bf16")
    assert (c.read_bytes, c.write_bytes, c.dram_bytes) == (128_000, 256_000, 384_000)
    # a run shorter than a sector fetches the whole sector: 3 bf16 per row of a [N, 3] slice of a wider tensor (source
    # rows 64 apart) read 6-byte runs, one 32-byte sector each, from DRAM too; rows 4 apart share their sectors
    s = copy_traffic((1000, 3), [3, 1], [64, 1], "bf16")
    assert s.read_sector_bytes == s.read_dram_bytes == 1000 * SECTOR_BYTES and s.write_dram_bytes == 1000 * 3 * 2
    assert copy_traffic((1000, 3), [3, 1], [4, 1], "bf16").read_dram_bytes == 1000 * 4 * 2
    # ... and a long run wastes at most its last sector: T5's [16, 511] slices of 512-wide rows
    t5 = copy_traffic((16, 511), [511, 1], [512, 1], "fp32")
    assert t5.read_dram_bytes == 16 * 64 * SECTOR_BYTES and t5.write_dram_bytes == 16 * 511 * 4


def test_a_transpose_reads_a_sector_per_element_and_keeps_the_waste_in_l2():
    # c.copy_(a.t()), a 16384²bf16: the source is read 32 KB apart, a whole sector per 2-byte element; a sector's 16
    # elements are read 16 rows of the output apart, 16384 iterations each: W = 16384 · (128 + 2) B = 2.1 MB
    n = 16384
    t = copy_traffic((n, n), contiguous_strides((n, n)), transpose_strides(n, n), "bf16")
    assert t.read_sector_bytes == n * n * SECTOR_BYTES and t.write_sector_bytes == n * n * 2
    assert t.reuse_bytes == n * (128 + 2) and not t.spills
    assert t.dram_bytes == t.useful_bytes == copy_work(n * n, "bf16").bytes


def test_a_channels_last_copy_spills_where_a_channel_plane_outgrows_the_l2_partition():
    # characterization16's [16, 150, 512, 512] fp32: a channel's plane is 512² iterations, one 128-byte line each
    # (the source's stride is 150 · 4 B) plus the 4 bytes written: 34.6 MB > 25 MiB of one L2 partition
    s = (16, 150, 512, 512)
    n = 16 * 150 * 512 * 512
    t = copy_traffic(s, contiguous_strides(s), channels_last_strides(s), "fp32")
    assert t.reuse_bytes == 512 * 512 * (128 + 4) > L2_BYTES["h200"] / L2_PARTITIONS
    assert t.spills and t.read_dram_bytes == n * SECTOR_BYTES and t.write_dram_bytes == n * 4
    # the same copy on 56² pixels (characterization17): 3136 lines a plane, in L2
    s2 = (64, 256, 56, 56)
    t2 = copy_traffic(s2, contiguous_strides(s2), channels_last_strides(s2), "bf16")
    assert not t2.spills and t2.dram_bytes == t2.useful_bytes and t2.sector_bytes == pytest.approx(
        t2.numel * (32 + 2))


def test_the_l2_switch_follows_the_card():
    s = (16, 150, 512, 512)
    args = (s, contiguous_strides(s), channels_last_strides(s), "fp32")
    # with twice the H200's L2 the plane (34.6 MB) fits one partition: the waste stays between the SMs and L2
    assert not copy_traffic(*args, l2_bytes=2 * L2_BYTES["h200"]).spills
    assert copy_traffic(*args, l2_bytes=l2_bytes_of("NVIDIA A100-SXM4-80GB")).spills
    assert l2_bytes_of("NVIDIA H200") == l2_bytes_of("h200") == 50 * 2**20
    assert l2_bytes_of("some future card") == L2_BYTES_DEFAULT == max(L2_BYTES.values())


def test_a_strided_slice_fetches_its_holes_and_a_lone_element_per_sector_spills():
    # every other fp32 element: sectors hold 4 used elements of 8, each sector fetched once: twice the useful reads
    t = copy_traffic((1024, 512), [512, 1], [2048, 2], "fp32")
    assert t.read_dram_bytes == 2 * t.read_bytes and not t.spills
    # every 16th fp32 element: one used element per sector, fetched for it alone
    u = copy_traffic((1024, 512), [512, 1], [16 * 512, 16], "fp32")
    assert u.spills and u.read_dram_bytes == u.numel * SECTOR_BYTES


def test_what_the_rule_cannot_describe_gives_none():
    assert copy_traffic((4, 4), [4, 1], [1], "fp32") is None  # strides of another rank
    assert copy_traffic((4, 4), [4, 1], [0, 1], "fp32") is None  # an expanded source


def test_the_importer_prices_copy_from_recorded_strides_and_falls_back_without_them():
    dims = [[16, 150, 512, 512], [16, 150, 512, 512], []]
    s = (16, 150, 512, 512)
    st = [contiguous_strides(s), channels_last_strides(s), []]
    w = op_work("aten::copy_", dims, [F, F, "Scalar"], strides=st)
    tr = copy_traffic(s, st[0], st[1], "fp32")
    assert w is not None and tr is not None and w.bytes == tr.dram_bytes and w.flops == 0
    # no strides recorded: the useful bytes, as before the rule
    w0 = op_work("aten::copy_", dims, [F, F, "Scalar"])
    assert w0 is not None and w0.bytes == copy_work(16 * 150 * 512 * 512, "fp32").bytes
    # SqueezeBERT's [B, L, C] → [B, C, L] transposes (steps13's records): strided, but in L2: useful bytes
    sq = op_work("aten::copy_", [[32, 768, 512], [32, 768, 512], []], [B, B, "Scalar"],
                 strides=[[393216, 512, 1], [393216, 1, 768], []])
    assert sq is not None and sq.bytes == 2 * 2 * 32 * 768 * 512


def test_zoo_and_importer_agree_on_one_shape():
    from hw_backend.zoo import ZOO_SETS

    zoo = {k.name: k for make in ZOO_SETS.values() for k in make()}
    for name, strides in (("copy_nhwc_fp32_16x150x512x512", None), ("transpose_bf16_16384x16384", None),
                          ("copy_nhwc_bf16_32x768x512x1_graph64", None)):
        k = zoo[name]
        g = max(1, k.graph)
        dt = {"bf16": B, "fp32": F}[k.dtype]
        if k.op == "transpose":
            shape = [k.shape[1], k.shape[0]]
            strides = [contiguous_strides(shape), transpose_strides(*k.shape), []]
        else:
            shape = list(k.shape)
            strides = [contiguous_strides(shape), channels_last_strides(shape), []]
        w = op_work("aten::copy_", [shape, shape, []], [dt, dt, "Scalar"], strides=strides)
        assert w is not None and w.bytes * g == k.work.bytes, name
        assert k.copy_traffic() is not None and k.copy_traffic().dram_bytes * g == k.work.bytes


def test_cudnn_tiled_conversions_fill_their_sectors():
    # [128, 320, 14, 14] bf16: NCHW rows of 196 pixels cut into 6 tiles of 32 and one of 4 (8 bytes in one sector),
    # NHWC rows of 320 channels in 10 full tiles: DRAM moves the useful bytes, L2 a little more for the partial tiles
    t = layout_copy_traffic((128, 320, 14, 14), "bf16")
    numel = 128 * 320 * 196
    assert t.dram_bytes == t.useful_bytes == 2 * 2 * numel and not t.spills
    assert t.read_sector_bytes == 128 * 320 * (6 * 2 + 1) * SECTOR_BYTES
    assert t.write_sector_bytes == 128 * 196 * 10 * 2 * SECTOR_BYTES
    # three channels (an image's RGB): the NHWC side's rows merge across a tile's pixels, whole sectors again
    r = layout_copy_traffic((8, 3, 224, 224), "bf16")
    assert r.write_sector_bytes == 8 * (224 * 224 // 32) * 6 * SECTOR_BYTES


def test_the_importer_prices_cudnn_conversions_by_the_rule():
    from types import SimpleNamespace

    from kdvfs.kernelwork import _layout_copy

    k = SimpleNamespace(name="void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", grid=(7, 10, 128))
    op = {"name": "aten::cudnn_convolution", "args": {"Input Dims": [[128, 320, 14, 14], [1280, 320, 1, 1]],
                                                       "Input type": [B, B]}}
    w = _layout_copy(k, op)
    assert w is not None and w.bytes == layout_copy_traffic((128, 320, 14, 14), "bf16").dram_bytes


def test_the_per_entry_check_is_calibrate_h200s_with_time_and_energy():
    """``scripts.h200_copies --check`` (the command for a sealed characterisation file) gives each entry the clock and
    power ``kdvfs calibrate-h200 --check`` gives it, and its time and energy per invocation beside them."""
    import json
    from pathlib import Path

    from kdvfs.calibrate_h200 import check_h200_fit
    from simulator.h200_copies import zoo_check

    root = Path(__file__).resolve().parents[1]
    fit = json.loads((root / "traces/h200.fit.json").read_text())
    data = [str(root / "validation/h200/characterization/characterization17.json.gz")]
    mine = zoo_check(fit, data)
    ref = check_h200_fit(fit, data)["check"]
    assert [(o["name"], o["predicted_sm_mhz"], o["predicted_power_w"], o["meets_both"]) for o in mine["per_kernel"]] \
        == [(o["name"], o["predicted_sm_mhz"], o["predicted_power_w"], o["meets_both"]) for o in ref["per_kernel"]]
    assert mine["meet_both"] == ref["meet_both"]
    for o in mine["per_kernel"]:
        assert o["measured_energy_mj"] == pytest.approx(o["measured_power_w"] * o["measured_time_us"] * 1e-3, rel=1e-3)
        assert o["predicted_energy_mj"] == pytest.approx(o["predicted_power_w"] * o["predicted_time_us"] * 1e-3,
                                                         rel=1e-3)
        if o["predicted_sm_mhz"] == o["measured_sm_mhz"]:  # at the measured clock the model takes the measured time
            assert o["time_error_pct"] == pytest.approx(0.0, abs=0.01)


def test_step_copy_rates_split_an_op_over_its_kernels(tmp_path):
    import json

    from simulator.h200_copies import step_copy_rates

    s = (16, 150, 512, 512)
    op = {"cat": "cpu_op", "name": "aten::copy_", "ts": 0, "dur": 10,
          "args": {"External id": 7, "Input Dims": [list(s), list(s), []], "Input type": [F, F, "Scalar"],
                   "Input Strides": [contiguous_strides(s), channels_last_strides(s), []]}}
    ks = [{"cat": "kernel", "name": "elementwise_kernel", "ts": 1 + i, "dur": 2958.0, "args": {"External id": 7}}
          for i in range(2)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [op, *ks]}))
    (r,) = step_copy_rates(p)
    tr = copy_traffic(s, contiguous_strides(s), channels_last_strides(s), "fp32")
    assert r["ops"] == 1 and r["us_per_op"] == pytest.approx(5916.0)
    assert r["sector_tbs"] == pytest.approx(tr.sector_bytes / 5916e-6 / 1e12, abs=1e-3)
    assert r["dram_tbs"] == r["sector_tbs"]  # it spills
