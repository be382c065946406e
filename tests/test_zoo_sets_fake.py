"""Issue 12: every zoo set added for a held-out check (sessions 11–13) runs on the fake device through
`kdvfs characterize`, entry by entry in the set's order, each with a positive power and time."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli


@pytest.mark.parametrize("zoo_set", ["tiny-grid2", "step-ops", "light-ops2", "copies", "light-ops3", "light-ops4"])
def test_zoo_set_on_the_fake_device(zoo_set, tmp_path, capsys):
    from hw_backend.zoo import ZOO_SETS

    out = tmp_path / "c.json"
    fast = ["--backend", "fake", "--window", "0.05", "--warmup", "0", "--no-steps"]
    code, _, err = run_cli(["characterize", *fast, "--set", zoo_set, "-o", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in ZOO_SETS[zoo_set]()]
    assert all(k["power_w"] > 0 and k["time_s"] > 0 for k in doc["kernels"])
