"""The vectorised fast path: one GPU, no concurrency, no spread, no governor lag — the common what-if case.

It evaluates ``kdvfs.switching.sequence_cost`` (numpy over instances, a loop over switch points only) and must agree
with the engine to floating-point precision wherever both apply.
"""

from __future__ import annotations

import numpy as np

from kdvfs.switching import sequence_cost
from simulator.engine import GpuRun, SimConfig

__all__ = ["fast_single", "fast_applies"]


def fast_applies(cfg: SimConfig, gpus: int = 1) -> bool:
    return gpus == 1 and cfg.switch.spread == 0 and cfg.governor_lag_s == 0


def fast_single(run: GpuRun, cfg: SimConfig) -> dict:
    T = run.T if run.time_scale is None else run.T * run.time_scale
    P = run.P * run.power_scale
    t_inst = T[run.kernel, run.setting]
    p_inst = P[run.kernel, run.setting]
    sw = cfg.switch
    r = sequence_cost(t_inst, p_inst, run.setting, T, P, run.kernel, sw, cfg.mechanism, cfg.costs)
    nseg = len(run.names)
    seg_t = np.bincount(run.segment, weights=t_inst + r["extra_time_s"], minlength=nseg)
    seg_e = np.bincount(run.segment, weights=t_inst * p_inst + r["extra_energy_j"], minlength=nseg)
    return {"time_s": r["time_s"], "energy_j": r["energy_j"], "segment_time_s": seg_t, "segment_energy_j": seg_e,
            "switches": r["switches"], "switch_time_s": r["time_s"] - float(t_inst.sum()), "timeline": None}
