"""How many measurements the sparse sweep needs to come within 0.5 points of the exhaustive sweep's saving (fake GPU).

The fake RTX 3080 Ti runs the bundled GPT-3 XL kernels with the calibrated model as its truth and realistic noise
(1 % time, 2 % power per run; energy counter stepping every 100 ms). Exhaustive: every kernel at every one of the
study's settings. Sparse: ``hw_backend.sweep.sparse_sweep`` (probes, a fit, the global optimum on the fitted profile,
each kernel's chosen setting measured; two rounds). Each sweep → fit → global strict-waste optimum over the study's
settings → the schedule's *true* saving (the fake's noise-free model). ``scripts/sparse_vs_exhaustive.py`` writes
``validation/fake/sparse_vs_exhaustive.json`` with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hw_backend.fake import FakeNvml
from hw_backend.nvml import NvmlBackend
from hw_backend.sim_workload import SimulatedWorkload
from hw_backend.sweep import parse_settings, run_sweep, sparse_sweep
from kdvfs.bundled import bundled_dir, load_trace_by_name
from kdvfs.calibrate import load_params
from kdvfs.fit import fit_profile, read_sweep
from kdvfs.gpus import get_gpu
from kdvfs.model import evaluate
from kdvfs.optimize import Problem, optimize

__all__ = ["sparse_vs_exhaustive", "true_saving"]


def true_saving(sched, spec, truth, trace) -> tuple[float, float]:
    """(energy, time) change in percent of ``sched`` against auto on the noise-free ``truth`` parameters."""
    inst = trace.instances()
    ev = evaluate(spec, truth, sched.core_mhz, sched.mem_mhz, kernel_index=inst)
    au = evaluate(spec, truth, np.zeros(len(inst), int), np.zeros(len(inst), int), kernel_index=inst)
    return 100 * (ev.energy_j.sum() / au.energy_j.sum() - 1), 100 * (ev.time_s.sum() / au.time_s.sum() - 1)


def _run(mode: str, out: Path, window: float, spec, trace, truth, settings) -> dict:
    fake = FakeNvml(spec, truth, seed=11, time_noise=0.01, power_noise=0.02)
    be, wl = NvmlBackend(fake, observe_only=False), SimulatedWorkload(trace, fake)
    kw: dict[str, Any] = dict(window_s=window, warmup_s=0.5, allow_clock_control=True)
    t0 = time.perf_counter()
    if mode == "exhaustive":
        run_sweep(be, wl, spec, settings, out, **kw)
    else:
        sparse_sweep(be, wl, spec, settings, out, first=2, rounds=2, **kw)
    sw = read_sweep(out, min_points=1)
    n = sum(len(v) for v in sw.points.values())
    prof = fit_profile(read_sweep(out), spec, trace.name).restrict(settings)
    sched = optimize(Problem(trace, prof), "waste", 0.0)
    de, dt = true_saving(sched, spec, truth, trace)
    assert sched.predicted is not None  # optimize predicts
    return {"mode": mode, "measurements": n, "predicted_energy_change_pct": float(sched.predicted.energy_change_pct),
            "true_energy_change_pct": float(de), "true_time_change_pct": float(dt), "simulated_seconds": fake.now_s,
            "wall_s": time.perf_counter() - t0, "clocks_restored": bool(fake.at_default_clocks)}


def sparse_vs_exhaustive(window_s: float = 5.0, out_dir: str | Path = "validation/fake",
                         on_run: Callable[[dict], None] | None = None) -> dict:
    """Both sweeps into ``out_dir`` (their CSVs removed after), each fitted and optimised; ``on_run`` sees each run's
    record. Returns the comparison document (measurement ratio, saving difference, whether the targets are met)."""
    spec = get_gpu("rtx3080ti")
    trace = load_trace_by_name("gpt3xl-llmc-rtx3080ti")
    truth = load_params(bundled_dir() / "gpt3xl-llmc-rtx3080ti.calibration.json")
    settings = parse_settings("study", spec)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = []
    for mode in ("exhaustive", "sparse"):
        f = out / f"sweep-{mode}.csv"
        if f.exists():
            f.unlink()
        r = _run(mode, f, window_s, spec, trace, truth, settings)
        res.append(r)
        f.unlink()
        if on_run is not None:
            on_run(r)
    ex, sp = res
    doc = {"command": f"python -m scripts.sparse_vs_exhaustive --window {window_s:g}", "settings": len(settings),
           "kernels": len(trace.kernels), "noise": {"time": 0.01, "power": 0.02}, "runs": res,
           "measurement_ratio": sp["measurements"] / ex["measurements"],
           "saving_difference_points": abs(sp["true_energy_change_pct"] - ex["true_energy_change_pct"])}
    doc["targets_met"] = bool(doc["measurement_ratio"] <= 0.10 and doc["saving_difference_points"] <= 0.5)
    return doc
