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


def _blocks(run: GpuRun) -> tuple[np.ndarray, np.ndarray]:
    """Start index and segment of each run of consecutive instances of one segment (from the trace, where the run
    was built from one: cached there across runs; else cached on the run)."""
    if run.blocks is not None:
        return run.blocks
    cached = run.__dict__.get("_blocks")
    if cached is None or cached[2] is not run.segment:
        starts = np.concatenate([[0], np.flatnonzero(np.diff(run.segment)) + 1])
        cached = (starts, run.segment[starts], run.segment)
        run.__dict__["_blocks"] = cached
    return cached[0], cached[1]


def fast_single(run: GpuRun, cfg: SimConfig) -> dict:
    T = run.T if run.time_scale is None else run.T * run.time_scale
    P = run.P if run.power_scale == 1.0 else run.P * run.power_scale
    flat = run.kernel * T.shape[1] + run.setting
    t_inst = T.take(flat)  # take() on the flattened table: the same values as T.ravel()[flat], faster
    p_inst = P.take(flat)
    e_inst = t_inst * p_inst
    r = sequence_cost(t_inst, p_inst, run.setting, T, P, run.kernel, cfg.switch, cfg.mechanism, cfg.costs,
                      e_inst=e_inst)
    if r["switches"]:  # in place: the extras are this call's own (the same sums as t_inst + extra)
        tt = np.add(r["extra_time_s"], t_inst, out=r["extra_time_s"])
        ee = np.add(r["extra_energy_j"], e_inst, out=r["extra_energy_j"])
    else:
        tt, ee = t_inst, e_inst
    nseg = len(run.names)
    # instances come in blocks of one segment: sum each block, then the blocks of each segment
    starts, block_seg = _blocks(run)
    seg_t = np.bincount(block_seg, weights=np.add.reduceat(tt, starts), minlength=nseg)
    seg_e = np.bincount(block_seg, weights=np.add.reduceat(ee, starts), minlength=nseg)
    return {"time_s": r["time_s"], "energy_j": r["energy_j"], "segment_time_s": seg_t, "segment_energy_j": seg_e,
            "switches": r["switches"], "switch_time_s": r["time_s"] - r["base_time_s"], "timeline": None}
