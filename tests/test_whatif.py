import json

import pytest
from conftest import run_cli

from kdvfs.errors import InputError
from kdvfs.executor import make_executor
from simulator.whatif import default_latencies, grid, run_grid

TR = "gpt3xl-llmc-rtx3080ti"


def _small():
    return grid(["h200"], [1e-6, 6e-3], ["sync", "predictive"], ["auto", "ideal", "naive", "switch-aware"], [0.0])


def test_grid_rows_and_shape():
    rows = run_grid(TR, TR, "rtx3080ti", _small(), make_executor("serial"))
    assert len(rows) == 16
    need = {"gpu", "switch_latency_s", "mechanism", "policy", "slack_pct", "time_change_pct", "energy_change_pct", "switches"}
    assert all(need <= set(r) for r in rows)
    auto = [r for r in rows if r["policy"] == "auto"]
    assert all(abs(r["energy_change_pct"]) < 1e-9 and r["switches"] == 0 for r in auto)
    for lat in (1e-6, 6e-3):
        sel = {r["policy"]: r for r in rows if r["switch_latency_s"] == pytest.approx(lat) and r["mechanism"] == "sync"}
        # paying for switches costs: naive is never better than ideal
        assert sel["naive"]["energy_change_pct"] >= sel["ideal"]["energy_change_pct"] - 1e-9
        assert sel["switch-aware"]["time_change_pct"] <= 1e-6
    assert len(default_latencies()) == 13 and default_latencies()[0] == pytest.approx(1e-7)


def test_local_pool_matches_serial():
    a = run_grid(TR, TR, "rtx3080ti", _small(), make_executor("serial"))
    ex = make_executor("local")
    try:
        b = run_grid(TR, TR, "rtx3080ti", _small(), ex)
    finally:
        ex.close()
    assert a == b


@pytest.mark.slow
@pytest.mark.ray
def test_ray_matches_local():
    pytest.importorskip("ray")
    sc = grid(["b200"], [1e-3], ["sync"], ["auto", "naive", "switch-aware"], [0.0])
    a = run_grid(TR, TR, "rtx3080ti", sc, make_executor("serial"))
    ex = make_executor("ray")
    try:
        b = run_grid(TR, TR, "rtx3080ti", sc, ex)
    finally:
        ex.close()
    assert a == b


def test_bad_grid_values():
    with pytest.raises(InputError, match=r"switch latency must be in \(0, 10\] s"):
        grid(["h200"], [0.0], ["sync"], ["auto"], [0.0])
    with pytest.raises(InputError, match="policy 'best' is not one of"):
        grid(["h200"], [1e-3], ["sync"], ["best"], [0.0])
    with pytest.raises(InputError, match="executor 'spark' is not"):
        make_executor("spark")


def test_whatif_cli_json_csv_png(tmp_path, capsys):
    out = tmp_path / "w.csv"
    code, o, _ = run_cli(["whatif", "--switch-model", "h200", "--switch-model", "ivr", "--preset-latency-only",
                          "--mechanism", "sync", "--policy", "auto", "--policy", "naive", "--executor", "serial",
                          "-o", str(out), "--json"], capsys)
    rows = json.loads(o)
    assert code == 0 and len(rows) == 4 and out.exists() and out.with_suffix(".png").exists()
