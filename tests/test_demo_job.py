"""The demo's job (``simulator.demo``) without running it: its grid and the second table's arithmetic."""

import pytest

from simulator.demo import GENERATIONS, demo_grid, generation_latencies_s, survival_rows


def test_demo_grid_covers_each_generation_and_the_sweep():
    scen, sweep = demo_grid()
    # 3 mechanisms × 5 policies at slack 0, and switch-aware at 1 % in sync and predictive, per generation
    assert len(scen) == len(GENERATIONS) * (3 * 5 + 2)
    assert {s.gpu for s in scen} == set(GENERATIONS.values())
    assert {s.gpu for s in sweep} == {"h200"} and len(sweep) == 13 * 2 * 5
    assert all(s.switch_latency_s is None for s in scen) and all(s.switch_latency_s for s in sweep)


def test_generation_latencies_are_the_presets():
    from kdvfs.gpus import get_gpu

    assert generation_latencies_s() == {g: get_gpu(p).switch.total_s for g, p in GENERATIONS.items()}


def _row(gpu, mech, policy, dt, de, n, slack=0.0):
    return {"gpu": gpu, "mechanism": mech, "policy": policy, "slack_pct": slack, "switch_latency_s": 1e-3,
            "time_change_pct": dt, "energy_change_pct": de, "switches": n}


def test_survival_rows_keep_the_share_of_the_ideal():
    rows = [_row("rtx3080ti", "sync", "ideal", 0.0, -10.0, 500)]
    for preset in GENERATIONS.values():
        for mech in ("sync", "callback", "predictive"):
            rows += [_row(preset, mech, "naive", 5.0, -2.0, 500), _row(preset, mech, "switch-aware", 0.5, -4.0, 20),
                     _row(preset, mech, "switch-aware", 1.0, -9.0, 30, slack=1.0)]  # slack 1: not in the table
    ideal, surv = survival_rows(rows)
    assert ideal is rows[0]
    assert [(r.generation, r.mechanism) for r in surv] == [(g, m) for g in GENERATIONS
                                                          for m in ("sync", "callback", "predictive")]
    r = surv[0]
    assert (r.naive_energy_change_pct, r.aware_energy_change_pct, r.aware_switches) == (-2.0, -4.0, 20)
    assert r.kept_of_ideal_pct == pytest.approx(40.0)
    with pytest.raises(KeyError):  # a generation without its switch-aware row cannot be tabled
        survival_rows([r for r in rows if not (r["gpu"] == "ivr" and r["policy"] == "switch-aware")])
