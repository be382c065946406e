"""A sweep spread over several (fake) GPUs on Ray: shares, resumability, one merged output."""

import csv

import pytest

from hw_backend.multisweep import NO_MULTICAST_ENV, merge_parts, split_settings
from hw_backend.sweep import FIELDS
from kdvfs.errors import InputError

SETTINGS = [(0, 0), (1050, 9501), (1500, 9501)]


def _keys(path):
    with open(path, newline="") as f:
        return [(r["kernel"], r["core_mhz"], r["mem_mhz"], r["repeat"]) for r in csv.DictReader(x for x in f if not x.startswith("#"))]


def test_split_round_robin():
    assert split_settings(SETTINGS, 2) == [[(0, 0), (1500, 9501)], [(1050, 9501)]]
    assert split_settings(SETTINGS, 5)[4] == []
    with pytest.raises(InputError, match="at least one GPU"):
        split_settings(SETTINGS, 0)


def test_merge_orders_and_dedups(tmp_path):
    out = tmp_path / "s.csv"
    row = dict.fromkeys(FIELDS, "1")
    for g, rows in ((0, [("b.0", "1500", "9501"), ("a.0", "auto", "auto")]), (1, [("a.0", "1050", "9501"),
                                                                                  ("a.0", "auto", "auto")])):
        with (tmp_path / f"s.csv.gpu{g}.part.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
            w.writeheader()
            for k, c, m in rows:
                w.writerow(dict(row, kernel=k, core_mhz=c, mem_mhz=m, repeat=0))
    assert merge_parts(out, SETTINGS, ["a.0", "b.0"]) == 3
    assert [k[:3] for k in _keys(out)] == [("a.0", "auto", "auto"), ("a.0", "1050", "9501"), ("b.0", "1500", "9501")]
    assert not list(tmp_path.glob("*.part.csv"))


def test_worker_env_multicast_off_and_device_order(monkeypatch):
    from hw_backend.multisweep import worker_env

    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert worker_env() == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert worker_env()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


@pytest.mark.slow
def test_ray_sweep_two_fake_gpus_resumes(tmp_path):
    ray = pytest.importorskip("ray")
    from hw_backend.multisweep import ray_sweep
    from kdvfs.bundled import load_trace_by_name

    trace = load_trace_by_name("gpt3xl-llmc-rtx3080ti")
    out = tmp_path / "sweep.csv"
    # a killed earlier run left GPU 1's part with one row: it must be kept, not measured again
    part = tmp_path / "sweep.csv.gpu1.part.csv"
    with part.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerow(dict(dict.fromkeys(FIELDS, "0"), kernel=trace.kernel_keys[0], core_mhz="1050", mem_mhz="9501",
                        repeat=0, time_s="9.99", unit=trace.kernel_keys[0]))
        f.write("half-written,")
    kw = dict(window_s=0.2, warmup_s=0.05, min_steps=2, allow_clock_control=True, seed=0, noise=0.01)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        info = ray_sweep("fake", "rtx3080ti", "gpt3xl-llmc-rtx3080ti", SETTINGS, out, 2, **kw)
        # NVLink multicast off in every worker, set through the actors' runtime_env (this Ray was started without)
        assert [{k: e[k] for k in NO_MULTICAST_ENV} for e in info["worker_env"]] == [NO_MULTICAST_ENV] * 2
        keys = _keys(out)
        assert len(keys) == len(set(keys)) == 3 * len(trace.kernel_keys) == info["rows"]
        assert info["written"] == [2 * len(trace.kernel_keys), len(trace.kernel_keys) - 1]
        with out.open(newline="") as f:
            kept = [r for r in csv.DictReader(x for x in f if not x.startswith("#")) if r["kernel"] == trace.kernel_keys[0] and r["core_mhz"] == "1050"]
        assert kept[0]["time_s"] == "9.99"
        # run again: nothing left to measure, output unchanged
        again = ray_sweep("fake", "rtx3080ti", "gpt3xl-llmc-rtx3080ti", SETTINGS, out, 2, **kw)
        assert again["written"] == [0, 0] and _keys(out) == keys
        # an observe-only sweep at auto (one setting) on two GPUs: the units are dealt out instead
        out2 = tmp_path / "auto.csv"
        kw2 = dict(kw, allow_clock_control=False)
        info2 = ray_sweep("fake", "rtx3080ti", "gpt3xl-llmc-rtx3080ti", [(0, 0)], out2, 2, **kw2)
        n = len(trace.kernel_keys)
        assert info2["split"] == "units" and info2["written"] == [(n + 1) // 2, n // 2] and info2["rows"] == n
    finally:
        ray.shutdown()
