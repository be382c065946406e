"""Issue 12, session 11: the zoo set ``step-ops`` (the ops of the blind set steps12 that no other set runs alone) and
the step breakdown (``simulator.step_breakdown``)."""

from __future__ import annotations

import json

from conftest import run_cli

from kdvfs.work import copy_work, norm_work, softmax_work


# ------------------------------------------------------------------------------------------------- the zoo set
def test_step_ops_set_is_new_and_sized_from_arithmetic():
    from hw_backend.zoo import UPSAMPLE_FLOPS, ZOO_SETS

    z = ZOO_SETS["step-ops"]()
    names = [k.name for k in z]
    assert 8 <= len(z) <= 12 and len(set(names)) == len(names)
    others = {k.name for s, make in ZOO_SETS.items() if s != "step-ops" for k in make()}
    assert not set(names) & others
    old_ops = {k.op for s, make in ZOO_SETS.items() if s != "step-ops" for k in make()}
    assert not {k.op for k in z} & old_ops  # every op is one no other set runs
    by = {k.op: k for k in z}
    up = by["upsample_bilinear"]
    nb, c, h, w, sc = up.shape
    big, small = nb * c * h * w * sc * sc, nb * c * h * w
    assert up.work.flops == UPSAMPLE_FLOPS["forward"] * big and up.work.bytes == 4 * (big + small)
    bw = by["upsample_bilinear_bwd"].work
    assert bw.flops == UPSAMPLE_FLOPS["backward"] * big and bw.bytes == 4 * (big + 2 * small)
    n = 16 * 150 * 512 * 512
    assert by["log_softmax_ch_bwd"].work == softmax_work(n, "fp32", row=150, backward=True, log=True)
    assert by["copy_nhwc"].work == copy_work(n, "fp32")
    g = by["group_norm_bwd"]
    assert g.work.bytes == norm_work(128 * 64 * 56 * 56, "fp32", backward=True).bytes * g.graph
    pool = by["avg_pool2d"]
    m = 128 * 64 * 56 * 56
    assert pool.work.flops == 10 * m * pool.graph and pool.work.bytes == 2 * 4 * m * pool.graph
    conv = by["conv2d_bwd"]
    macs = 128 * 1280 * 14 * 14 * 320
    assert conv.work.flops == 4.0 * macs * conv.graph and conv.work.tensor
    assert not by["col2im"].work.tensor


def test_step_ops_on_the_fake_device(tmp_path, capsys):
    from hw_backend.zoo import ZOO_SETS

    out = tmp_path / "c.json"
    fast = ["--backend", "fake", "--window", "0.05", "--warmup", "0", "--no-steps"]
    code, _, err = run_cli(["characterize", *fast, "--set", "step-ops", "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in ZOO_SETS["step-ops"]()]
    assert all(k["power_w"] > 0 and k["time_s"] > 0 for k in doc["kernels"])
