"""Issue 12, session 12: the zoo set ``light-ops2`` (the step-ops set's light ops at other shapes and dtypes, measured
as a held-out check of that session's fit)."""

from __future__ import annotations

import json

from conftest import run_cli


def test_light_ops2_is_new_and_runs_only_known_ops():
    from hw_backend.zoo import ZOO_SETS

    z = ZOO_SETS["light-ops2"]()
    names = [k.name for k in z]
    assert len(z) == 16 and len(set(names)) == len(names)
    others = {k.name for s, make in ZOO_SETS.items() if s != "light-ops2" for k in make()}
    assert not set(names) & others  # no repeats: every entry is a shape or dtype no other set ran
    step_ops = {k.op for k in ZOO_SETS["step-ops"]()}
    assert {k.op for k in z} <= step_ops  # the same ops, so the check is of the model, not of a new formula
    by = {k.name: k for k in z}
    up = by["upsample_bilinear_bf16_16x150x128x128_x4"].work
    big, small = 16 * 150 * 512 * 512, 16 * 150 * 128 * 128
    assert up.bytes == 2 * (big + small) and up.dtype == "bf16"
    conv = by["conv2d_bf16_64x64x56x56_to256_k1_graph64"]
    assert conv.work.flops == 2.0 * 64 * 256 * 56 * 56 * 64 * conv.graph and conv.work.tensor


def test_light_ops2_on_the_fake_device(tmp_path, capsys):
    from hw_backend.zoo import ZOO_SETS

    out = tmp_path / "c.json"
    fast = ["--backend", "fake", "--window", "0.05", "--warmup", "0", "--no-steps"]
    code, _, err = run_cli(["characterize", *fast, "--set", "light-ops2", "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in ZOO_SETS["light-ops2"]()]
    assert all(k["power_w"] > 0 and k["time_s"] > 0 for k in doc["kernels"])
