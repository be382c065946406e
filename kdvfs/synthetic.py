"""Synthetic measured sweeps with realistic noise and throttling, for testing fits without a GPU.

The hidden card is deliberately *not* in the catalog (a V100-like part with its own voltage curve and a 250 W cap),
so a fit that assumes nothing about the card is tested against a truth it does not share.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.model import KernelParams, evaluate

__all__ = ["HIDDEN_CARD", "OLDER_CARD", "random_params", "slowdown_sweep", "synthetic_sweep", "write_sweep"]

HIDDEN_CARD = GpuSpec(
    name="hidden-v100like", full_name="synthetic Volta-like card", arch="synthetic",
    core_clocks_mhz=tuple(range(135, 1531, 15)), mem_clocks_mhz=(877,), boost_core_mhz=1530,
    power_limit_w=250.0, cap_w=250.0, idle_power_w=45.0, v_min=0.78, v_max=1.06, vf_knee_mhz=900.0,
    mem_bandwidth_gbs=(900.0,), core_power_w=230.0, mem_power_w=(25.0,), mem_traffic_power_w=50.0,
    smooth_p=3.0, switch=SwitchModel(0.0, 0.0),
)


# An older datacentre part (405–1380 MHz) whose kernels slow down faster than 1/f at low clocks, as real sweeps of
# such a card showed: compute-bound kernels 6–7× slower at 405 than at 1380 MHz (a clock ratio of 3.41), most kernels
# more than 5 % beyond 1/f between 405 and 502 MHz. The slowdown is applied outside the model's own time form.
OLDER_CARD = GpuSpec(
    name="hidden-older", full_name="synthetic older datacentre card", arch="synthetic",
    core_clocks_mhz=tuple(range(405, 1381, 15)), mem_clocks_mhz=(715,), boost_core_mhz=1380,
    power_limit_w=250.0, cap_w=250.0, idle_power_w=40.0, v_min=0.80, v_max=1.05, vf_knee_mhz=850.0,
    mem_bandwidth_gbs=(732.0,), core_power_w=200.0, mem_power_w=(20.0,), mem_traffic_power_w=40.0,
    smooth_p=3.0, switch=SwitchModel(0.0, 0.0),
)


def random_params(n: int, rng: np.random.Generator) -> KernelParams:
    """n kernels, from compute-bound to memory-bound, 50 µs to 20 ms."""
    t = np.exp(rng.uniform(np.log(5e-5), np.log(2e-2), n))
    share = rng.uniform(0.05, 0.95, n)
    return KernelParams(tuple(f"k{i}" for i in range(n)), 0.01 * t, share * t, (1 - share) * t + 0.05 * t,
                        rng.uniform(0.4, 1.3, n), rng.uniform(0.5, 1.5, n), "model")


def synthetic_sweep(n_kernels: int = 12, n_clocks: int = 10, time_noise: float = 0.01, power_noise: float = 0.02,
                    seed: int = 0, spec: GpuSpec = HIDDEN_CARD, repeats: int = 1) -> list[dict]:
    """Rows of a sweep CSV: each kernel at ``n_clocks`` core clocks spread over the card's range, memory fixed."""
    rng = np.random.default_rng(seed)
    params = random_params(n_kernels, rng)
    cores = np.array(spec.core_clocks_mhz)[np.linspace(0, len(spec.core_clocks_mhz) - 1, n_clocks).round().astype(int)]
    rows = []
    for k in range(n_kernels):
        ev = evaluate(spec, params, cores, np.full(len(cores), spec.max_mem_mhz), kernel_index=np.full(len(cores), k),
                      binned=True)
        for r in range(repeats):
            t = ev.time_s * rng.lognormal(0, time_noise, len(cores))
            p = ev.power_w * rng.lognormal(0, power_noise, len(cores))
            for c, ti, pi in zip(cores, t, p):
                rows.append({"kernel": params.keys[k], "core_mhz": int(c), "mem_mhz": spec.max_mem_mhz,
                             "time_s": f"{ti:.6e}", "power_w": f"{pi:.3f}", "repeat": r})
    return rows


def write_sweep(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def slowdown_sweep(n_kernels: int = 20, n_clocks: int = 11, slow_at_min: float = 0.9, knee_mhz: float = 800.0,
                   time_noise: float = 0.01, power_noise: float = 0.02, seed: int = 0,
                   spec: GpuSpec = OLDER_CARD) -> list[dict]:
    """Rows of a sweep CSV on ``OLDER_CARD`` with a low-clock slowdown: each kernel's time is the model's times
    ``1 + slow_at_min · c · ((knee − f)/(knee − f_min))^1.5`` below ``knee_mhz`` (c its compute share of time), so a
    compute-bound kernel runs 1 + ``slow_at_min`` times longer at the lowest clock than 1/f says; power is the
    model's at that clock (stalled cycles draw what the clock draws)."""
    rng = np.random.default_rng(seed)
    params = random_params(n_kernels, rng)
    cores = np.array(spec.core_clocks_mhz)[np.linspace(0, len(spec.core_clocks_mhz) - 1, n_clocks).round().astype(int)]
    fmin = float(spec.core_clocks_mhz[0])
    ramp = np.clip((knee_mhz - cores) / (knee_mhz - fmin), 0.0, None) ** 1.5
    rows = []
    for k in range(n_kernels):
        ev = evaluate(spec, params, cores, np.full(len(cores), spec.max_mem_mhz), kernel_index=np.full(len(cores), k),
                      binned=True)
        share = params.tc_s[k] / (params.tc_s[k] + params.tm_s[k])
        t = ev.time_s * (1 + slow_at_min * share * ramp) * rng.lognormal(0, time_noise, len(cores))
        p = ev.power_w * rng.lognormal(0, power_noise, len(cores))
        for c, ti, pi in zip(cores, t, p):
            rows.append({"kernel": params.keys[k], "core_mhz": int(c), "mem_mhz": spec.max_mem_mhz,
                         "time_s": f"{ti:.6e}", "power_w": f"{pi:.3f}"})
    return rows
