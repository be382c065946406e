"""The H200 experiments' analyses (``simulator.h200_analyses``), checked against the documents kept under validation/.

What depends only on the measurements is rebuilt exactly; the replays depend on the model of the day and are checked
where the model does not enter."""

import json

from conftest import ROOT

from simulator.h200_analyses import (
    card_lines,
    fidelity_lines,
    fidelity_summary,
    parse_session5_log,
    ray_sweep_comparison,
    ray_sweep_lines,
    session5_lines,
)

V = ROOT / "validation"


def test_session5_log_reads_every_window_it_kept():
    kept = json.loads((V / "h200x2/session5/analysis.json").read_text())
    rows = parse_session5_log((V / "h200x2/session5/log.txt").read_text())
    assert rows == kept["windows"] and {r["card"] for r in rows} == {"00:06.0", "00:07.0"}
    lines = session5_lines(kept)
    assert lines[0].startswith("card 00:06.0: DDP ") and any(ln.startswith("second card over first: {") for ln in lines)


def test_ray_sweep_comparison_rebuilds_the_kept_units():
    kept = json.loads((V / "ray/h200x2_sweep_compare.json").read_text())
    doc = ray_sweep_comparison(V / "ray/h200x2_sweep_auto.csv", V / "h200/h200_sweep_auto.csv")
    assert doc["units"] == kept["units"]
    assert {str(k): v for k, v in doc["by_gpu"].items()} == kept["by_gpu"]
    assert doc["command"] == ("python -m scripts.ray_sweep_compare validation/ray/h200x2_sweep_auto.csv "
                              "validation/h200/h200_sweep_auto.csv").replace("validation", str(V))
    assert len(ray_sweep_lines(doc)) == len(doc["units"]) + len(doc["by_gpu"])


def test_fidelity_summary_rebuilds_the_kept_file_byte_for_byte():
    from hw_backend.zoo import full_zoo

    doc = fidelity_summary(ROOT, {k.name: k.category for k in full_zoo()})
    assert json.dumps(doc, indent=1) + "\n" == (V / "h200/fidelity/summary.json").read_text()
    lines = fidelity_lines(doc)
    assert lines[0].startswith("| class | kernels |") and "" in lines


def test_card_lines_name_each_rank_and_its_card():
    row = {"run": "r", "rank": 0, "card": "00:06.0", "step_energy_j": 1.0, "power_w": 500.0, "sm_mhz": 1980.0,
           "min_sm_mhz": 1900, "max_temp_c": 50, "no_sync_step_energy_j": 0.9, "simulated_step_energy_j": 1.01,
           "energy_error_pct": 1.0, "idle_power_w": 120.0}
    assert card_lines({"rows": [row]}) == ["r rank 0 on 00:06.0: DDP 1.00 J/step (500 W, SM 1980 MHz, min 1900, 50 °C), "
                                           "sync off 0.90 J; simulated 1.01 J (+1.00 %), idle 120 W"]
