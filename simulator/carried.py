"""A schedule chosen at one size, simulated at another: per-GPU batch size (data parallelism) or tensor-parallel shard.

The kernels at the new size come from ``kdvfs.scaling`` (each kernel scaled by its work); the shard runs through the
single-GPU simulator (switch latency and mechanism included), and the communication the parallelism adds is charged
to the schedule and to auto alike (link-bound: the same time and power under both):

- tensor parallelism: the per-layer activation all-reduces of ``kdvfs.scaling``;
- data parallelism: one ring all-reduce of the gradients per iteration, their size from the trace's structure
  (≈ 12 · layers · hidden² parameters of a transformer, bf16), not a fixed model's constant.
"""

from __future__ import annotations

from kdvfs.gpus import GpuSpec
from kdvfs.model import CATEGORY_PRIORS, KernelParams, evaluate
from kdvfs.schedule import Schedule
from simulator.api import simulate
from simulator.engine import SimConfig
from simulator.parallel import ring_allreduce_s

__all__ = ["simulate_carried", "scaling_rows", "transformer_grad_bytes"]


def transformer_grad_bytes(trace, hidden: int) -> float:
    """Gradient bytes of one iteration (bf16) of a transformer with the trace's layer count and ``hidden`` width."""
    layers = max((s.repeat for s in trace.segments if s.pass_name == "forward"), default=1)
    return 2.0 * 12 * layers * hidden ** 2


def _collective_energy_j(spec: GpuSpec, t: float) -> float:
    if t <= 0:
        return 0.0
    import numpy as np

    tcs, tms, uc, um = CATEGORY_PRIORS["collective"]
    p = KernelParams(("c",), np.array([0.02 * t]), np.array([tcs * t]), np.array([tms * t]), np.array([uc]),
                     np.array([um]))
    return float(t * evaluate(spec, p, np.array([0]), np.array([0])).power_w[0, 0])


def carry(schedule: Schedule, trace, scaled_trace, spec: GpuSpec) -> Schedule:
    """The schedule, checked against the trace it was made for, rebound to that trace scaled to another size (the
    same kernels and instances, other times: the content hash differs by design)."""
    import dataclasses

    from kdvfs.identity import trace_sha

    schedule.check_for(trace, spec)
    return dataclasses.replace(schedule, trace_sha=trace_sha(scaled_trace))


def simulate_carried(pb, spec: GpuSpec, schedule: Schedule, cfg: SimConfig, batch: int | None = None, tp: int = 1,
                     hidden: int = 2048, extra_comm_s: float = 0.0, path: str = "auto") -> dict:
    """Time and energy of ``schedule`` and of auto on one GPU's share at the new size, with its communication."""
    from kdvfs.optimize import allocate_schedule
    from kdvfs.scaling import scaled_for

    pb2, sc = scaled_for(pb, spec, batch, tp, hidden)
    auto = allocate_schedule(pb2, "static", auto=True)
    schedule = carry(schedule, pb.trace, pb2.trace, spec)
    r = simulate(pb2.trace, pb2.profile, schedule, spec, cfg, path=path)
    ra = simulate(pb2.trace, pb2.profile, auto, spec, cfg, path=path)
    comm_t = sc.collective_time_s + extra_comm_s
    comm_e = sc.collective_energy_j + _collective_energy_j(spec, extra_comm_s)
    t, e = r.time_s + comm_t, r.energy_j + comm_e
    ta, ea = ra.time_s + comm_t, ra.energy_j + comm_e
    return {"batch": sc.batch, "tp": sc.tp, "time_s": t, "energy_j": e, "auto_time_s": ta, "auto_energy_j": ea,
            "time_change_pct": 100 * (t / ta - 1), "energy_change_pct": 100 * (e / ea - 1),
            "communication_s": comm_t, "switches": r.switches, "path": r.path,
            "kernels": [{"kernel": k.key, "source": k.source, "efficiency": k.efficiency} for k in sc.kernels]}


def scaling_rows(pb, spec: GpuSpec, schedule: Schedule, cfg: SimConfig, counts: list[int], mode: str,
                 hidden: int = 2048, link_bw_gbs: float | None = None, path: str = "auto") -> list[dict]:
    """Savings against auto on N GPUs. ``tp``: the trace's batch split into N tensor-parallel shards. ``dp``: the
    trace's batch as the global batch, ⌊batch / N⌋ per GPU (at least 1), plus the gradient all-reduce."""
    from kdvfs.errors import InputError
    from kdvfs.scaling import LINK_BW_GBS, LINK_LATENCY_S

    if mode not in ("dp", "tp"):
        raise InputError(f"parallelism {mode!r} is not dp or tp")
    bw = link_bw_gbs or LINK_BW_GBS.get(spec.name, 450.0)
    rows = []
    for n in counts:
        if mode == "tp":
            row = simulate_carried(pb, spec, schedule, cfg, None, n, hidden, path=path)
        else:
            b = max(1, (pb.trace.batch_size or 1) // n)
            ar = ring_allreduce_s(transformer_grad_bytes(pb.trace, hidden), n, bw, LINK_LATENCY_S)
            row = simulate_carried(pb, spec, schedule, cfg, b, 1, hidden, extra_comm_s=ar, path=path)
        row.pop("kernels")
        rows.append(dict(row, gpus=n, parallel=mode))
    return rows
