"""kdvfs.scaling: kernels predicted at another per-GPU batch size or tensor-parallel shard; schedules carried."""

import json

import numpy as np
import pytest

from kdvfs.errors import InputError
from kdvfs.gpus import get_gpu
from kdvfs.scaling import carry_schedule, scale_params, scaled_for, scaling_experiment, wave_efficiency
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def setup(spaan_problem):
    from kdvfs.bundled import model_params
    from kdvfs.optimize import allocate_schedule

    spec = get_gpu("rtx3080ti")
    return spaan_problem, spec, model_params(spaan_problem.trace, spec), allocate_schedule(spaan_problem, "kernel")


def test_wave_efficiency():
    assert wave_efficiency(80, 80) == 1.0
    assert wave_efficiency(81, 80) == pytest.approx(81 / 160)
    assert wave_efficiency(0.2, 80) == pytest.approx(1 / 80)


def test_same_size_is_identity(setup):
    pb, spec, params, sched = setup
    p2, ks = scale_params(pb.trace, params, spec, batch=pb.trace.batch_size, tp=1)
    assert np.allclose(p2.tc_s, params.tc_s) and np.allclose(p2.tm_s, params.tm_s) and np.allclose(p2.uc, params.uc)
    pb2, sc = scaled_for(pb, spec, None, 1)
    assert np.allclose(pb2.T, pb.T) and np.allclose(pb2.E, pb.E)
    r = carry_schedule(sc, sched)
    assert r["time_s"] == pytest.approx(sched.predicted.time_s, rel=1e-9)


def test_small_batch_gemms_lose_efficiency_and_per_token_time_rises(setup):
    pb, spec, params, _ = setup
    p1, ks = scale_params(pb.trace, params, spec, batch=1)
    gemm = [i for i, k in enumerate(pb.trace.kernels) if k.category == "gemm"]
    assert all(ks[i].efficiency <= 1.0 for i in gemm) and min(ks[i].efficiency for i in gemm) < 0.95
    # 40× fewer tokens, but the GEMMs' core time shrinks by less than 40× (wave quantisation)
    assert all(p1.tc_s[i] >= params.tc_s[i] / 40 * (1 - 1e-12) for i in gemm)
    assert all("gemm wave model" in ks[i].source for i in gemm)
    pb1, _ = scaled_for(pb, spec, 1, 1)
    assert pb1.auto_time_s * 40 > pb.auto_time_s  # per-token time rises at batch 1
    assert pb1.trace.batch_size == 1


def test_tp_shards_layer_kernels_and_replicates_norms(setup):
    pb, spec, params, sched = setup
    p4, ks = scale_params(pb.trace, params, spec, tp=4)
    for i, k in enumerate(pb.trace.kernels):
        if k.category == "norm":
            assert p4.tm_s[i] == pytest.approx(params.tm_s[i]) and "replicated" in ks[i].source
        if k.category == "optimizer":
            assert p4.tm_s[i] == pytest.approx(params.tm_s[i] / 4)
    _, sc = scaled_for(pb, spec, None, 4)
    r = carry_schedule(sc, sched)
    assert sc.collective_time_s > 0 and r["auto_time_s"] > sc.collective_time_s
    assert r["energy_change_pct"] < 0


def test_gemm_shard_memory_term_keeps_its_compulsory_traffic(setup):
    """A tensor-parallel GEMM shard still reads one activation whole: its memory term shrinks less than its FLOPs
    (the compulsory bytes' share of the fitted term follows those bytes, the rest the FLOPs)."""
    from kdvfs.scaling import gemm_compulsory_bytes

    assert gemm_compulsory_bytes(40960, 2048, 16) / gemm_compulsory_bytes(40960, 2048) == pytest.approx(
        (40960 * 2048 + 2048 * 2048 / 16 + 40960 * 2048 / 16) / (40960 * 2048 * 2 + 2048 * 2048))
    pb, spec, params, sched = setup
    p16, ks = scale_params(pb.trace, params, spec, tp=16)
    bw = max(spec.mem_bandwidth_gbs) * 1e9
    gemm = [i for i, k in enumerate(pb.trace.kernels) if k.category == "gemm"]
    for i in gemm:
        share = min(1.0, ks[i].compulsory_bytes / bw / params.tm_s[i])
        assert 0 < share < 1 and 0.4 < ks[i].compulsory_ratio < 0.6
        assert p16.tm_s[i] == pytest.approx(params.tm_s[i] * (share * ks[i].compulsory_ratio + (1 - share) / 16))
        assert p16.tm_s[i] / params.tm_s[i] > p16.tc_s[i] / params.tc_s[i]  # memory shrinks less than the FLOPs
    # at the trace's own size nothing moves
    p1, _ = scale_params(pb.trace, params, spec)
    assert p1.tm_s == pytest.approx(params.tm_s)


def test_bad_sizes(setup):
    pb, spec, params, sched = setup
    with pytest.raises(InputError, match="tensor-parallel degree"):
        scale_params(pb.trace, params, spec, tp=0)
    with pytest.raises(InputError, match="cannot split an assumed 16 attention heads"):
        scale_params(pb.trace, params, spec, tp=3)
    with pytest.raises(InputError, match="batch size"):
        scale_params(pb.trace, params, spec, batch=-3)
    with pytest.raises(InputError, match="SM count"):
        scale_params(pb.trace, params, get_gpu("ivr").__class__(**{**{f: getattr(spec, f) for f in spec.__slots__},
                                                                    "name": "nope"}), batch=2)


def test_experiment_rows(setup):
    pb, spec, _, sched = setup
    rows = scaling_experiment(pb, spec, sched, [1, 40], [1, 16])
    assert [(r["experiment"], r["batch"], r["tp"]) for r in rows] == [("batch", 1, 1), ("batch", 40, 1), ("tp", 40, 1),
                                                                     ("tp", 40, 16)]
    assert rows[1]["time_change_pct"] == pytest.approx(rows[2]["time_change_pct"])


def test_cli_simulate_batch(tmp_path, capsys):
    s = tmp_path / "s.json"
    assert run_cli(["optimize", "--trace", "gpt3xl-llmc-rtx3080ti", "-o", str(s)], capsys)[0] == 0
    code, out, _ = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(s), "--gpu", "rtx3080ti",
                            "--batch", "8", "--switch-latency", "1e-7", "--mechanism", "predictive", "--json"], capsys)
    assert code == 0
    d = json.loads(out)
    assert d["batch"] == 8 and d["auto_time_s"] < 2.0 and d["energy_change_pct"] < -5
    code, _, err = run_cli(["simulate", "--trace", "gpt3xl-llmc-rtx3080ti", "--schedule", str(s), "--gpu", "rtx3080ti",
                            "--tp", "0"], capsys)
    assert code == 2 and "tensor-parallel degree" in err


def test_carried_scaling_rows_split_the_batch(setup):
    from simulator.carried import scaling_rows, transformer_grad_bytes
    from simulator.engine import SimConfig

    pb, spec, _, sched = setup
    assert transformer_grad_bytes(pb.trace, 2048) == pytest.approx(2 * 12 * 24 * 2048 ** 2)
    cfg = SimConfig(switch=get_gpu("ivr").switch)
    rows = scaling_rows(pb, spec, sched, cfg, [1, 8], "dp")
    assert [r["batch"] for r in rows] == [40, 5] and rows[0]["communication_s"] == 0 < rows[1]["communication_s"]
    assert rows[1]["auto_time_s"] < rows[0]["auto_time_s"] / 4
    tp = scaling_rows(pb, spec, sched, cfg, [4], "tp")[0]
    assert tp["tp"] == 4 and tp["batch"] == 40 and tp["energy_change_pct"] < 0


def test_whatif_carries_to_batch(capsys):
    code, out, _ = run_cli(["whatif", "--batch", "4", "--preset-latency-only", "--executor", "serial", "--policy", "auto",
                            "--policy", "ideal", "--mechanism", "predictive", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and [r["policy"] for r in rows] == ["auto", "ideal"] and all(r["batch"] == 4 for r in rows)
    assert rows[0]["time_change_pct"] == pytest.approx(0, abs=1e-9) and rows[1]["energy_change_pct"] < -10
