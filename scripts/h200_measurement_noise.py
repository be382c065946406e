"""Observe-only, on the H200: how much does one 5 s measurement of a kernel scatter between repeats?

    python -m scripts.h200_measurement_noise OUT [--window 5] [--rounds 6] [--warmup 2]

The study (Spaan et al. 2026) measured every kernel at every clock setting once, in one 5 s window (time from CUDA
events, energy from the NVML energy counter), and picked the best of the 66 measurements; so its per-kernel picks and
Table 2 carry the scatter of a single measurement. This script measures that scatter with the same protocol at the
card's own clocks: stages of the recorded bf16 block (two GEMMs and three memory-bound ops), each measured `rounds`
times in ≥ 5 s energy-counter windows after a short warm-up, the stages interleaved so that every window follows a
different stage (as the study's sweep moved from setting to setting). Per stage it reports the coefficient of variation
of time, energy and mean power per iteration, and their correlation. Reads only (NvmlBackend observe-only): no clock,
power limit or other setting is changed. Writes OUT/measurement_noise.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STAGES = ("fwd.fc1", "fwd.qkv", "fwd.gelu", "fwd.res1", "fwd.ln1")


def cv_pct(xs: list[float]) -> float:
    return 100 * statistics.stdev(xs) / statistics.fmean(xs)


def log_corr(a: list[float], b: list[float]) -> float:
    import math

    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    return statistics.correlation(la, lb)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--warmup", type=float, default=2.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from hw_backend.measure import measure_window
    from scripts.h200_common import observe_only_block

    be, wl, sync = observe_only_block("bf16")
    # units per synchronisation: ~15 ms of work
    batch = {}
    for s in STAGES:
        sync()
        t0 = time.perf_counter()
        for _ in range(20):
            wl.run_stage(s)
        sync()
        batch[s] = max(1, round(0.015 / ((time.perf_counter() - t0) / 20)))
    res: dict = {"command": f"python -m scripts.h200_measurement_noise OUT --window {a.window:g} --rounds {a.rounds} "
                            f"--warmup {a.warmup:g}",
                 "torch": sys.modules["torch"].__version__, "batch": batch, "windows": {s: [] for s in STAGES}}
    for rnd in range(a.rounds):
        order = STAGES[rnd % len(STAGES):] + STAGES[:rnd % len(STAGES)]   # rotate: each stage follows another
        for s in order:
            w = measure_window(functools.partial(wl.run_stage, s), sync, be, window_s=a.window, warmup_s=a.warmup,
                               batch=batch[s]).to_dict()
            w["round"] = rnd
            res["windows"][s].append(w)
            print(f"round {rnd} {s:9s} {1e3 * w['time_per_iter_s']:.4f} ms {w['energy_per_iter_j']:.5f} J "
                  f"{w['power_w']:.1f} W core {w['core_mhz_min']}-{w['core_mhz_max']}", flush=True)
        (out / "measurement_noise.json").write_text(json.dumps(res, indent=1) + "\n")
    summary = {}
    for s, ws in res["windows"].items():
        t = [w["time_per_iter_s"] for w in ws]
        e = [w["energy_per_iter_j"] for w in ws]
        p = [w["power_w"] for w in ws]
        summary[s] = {"windows": len(ws), "time_cv_pct": cv_pct(t), "energy_cv_pct": cv_pct(e), "power_cv_pct": cv_pct(p),
                      "log_time_energy_corr": log_corr(t, e), "mean_power_w": statistics.fmean(p)}
    res["summary"] = summary
    res["wall_clock_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "measurement_noise.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
