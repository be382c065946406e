"""Several GPUs: data parallelism (gradient all-reduce after backward, optionally bucketed and overlapped) and
tensor parallelism (an all-reduce per layer in forward and backward), collectives timed by a ring model. Each GPU gets
a seeded manufacturing spread in power: a hungrier GPU throttles harder on capped kernels, so stragglers appear; the
slowest GPU sets the pace and the others idle at idle power."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import simpy

from kdvfs.errors import InputError
from simulator.engine import Controller, Gpu, GpuRun, SimConfig, planned_lateness
from simulator.timeline import TimelineEvent

__all__ = ["ParallelConfig", "ring_allreduce_s", "run_parallel"]


@dataclass(frozen=True, slots=True)
class ParallelConfig:
    """Attributes:
        gpus: number of GPUs (≥ 1).
        mode: ``dp`` or ``tp``.
        link_bw_gbs: per-GPU link bandwidth for collectives (NVLink 4: ~450 GB/s per direction; assumption).
        link_latency_s: per-hop latency.
        grad_bytes: gradient bytes all-reduced per iteration (DP); default GPT-3 XL in bf16 (1.3e9 × 2).
        act_bytes: activation bytes all-reduced per layer and pass (TP); default batch 40 × seq 1024 × 2048 × 2.
        overlap: DP only: all-reduce in buckets, one per backward layer, overlapped with compute.
        power_spread: relative standard deviation of per-GPU power.
    """

    gpus: int = 1
    mode: str = "dp"
    link_bw_gbs: float = 450.0
    link_latency_s: float = 5e-6
    grad_bytes: float = 2.6e9
    act_bytes: float = 40 * 1024 * 2048 * 2
    overlap: bool = False
    power_spread: float = 0.02

    def __post_init__(self) -> None:
        if not isinstance(self.gpus, int) or self.gpus < 1:
            raise InputError(f"number of GPUs must be an integer ≥ 1, got {self.gpus!r}")
        if self.mode not in ("dp", "tp"):
            raise InputError(f"parallelism {self.mode!r} is not dp or tp")
        if self.link_bw_gbs <= 0 or self.link_latency_s < 0:
            raise InputError("link bandwidth must be > 0 and latency ≥ 0")


def ring_allreduce_s(nbytes: float, n: int, bw_gbs: float, lat_s: float) -> float:
    """Ring all-reduce: 2(n−1)/n of the data over each link, 2(n−1) latency hops."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / (bw_gbs * 1e9) + 2 * (n - 1) * lat_s


class _Collective:
    """A blocking all-reduce: everyone waits for the last arrival, then for the transfer."""

    def __init__(self, env: simpy.Environment, n: int, dur: float):
        self.env, self.n, self.dur = env, n, dur
        self.arrived = 0
        self.done = env.event()

    def join(self, gpu: Gpu, seg: int):
        t0 = self.env.now
        self.arrived += 1
        if self.arrived == self.n:
            self.env.process(self._finish())
        yield self.done
        gpu.idle(self.env.now - t0, seg, "collective")

    def _finish(self):
        yield self.env.timeout(self.dur)
        self.done.succeed()


class _Buckets:
    """Bucketed, overlapped all-reduce: bucket b starts when every GPU has posted it and the link is free."""

    def __init__(self, env: simpy.Environment, n: int, nb: int, dur: float):
        self.env, self.n, self.dur = env, n, dur
        self.posted = [0] * nb
        self.ready = [env.event() for _ in range(nb)]
        self.finished = [env.event() for _ in range(nb)]
        env.process(self._link())

    def post(self, b: int):
        self.posted[b] += 1
        if self.posted[b] == self.n:
            self.ready[b].succeed()
        return
        yield  # pragma: no cover

    def _link(self):
        for b in range(len(self.ready)):
            yield self.ready[b]
            yield self.env.timeout(self.dur)
            self.finished[b].succeed()

    def wait_all(self, gpu: Gpu, seg: int):
        t0 = self.env.now
        yield simpy.AllOf(self.env, self.finished)
        gpu.idle(self.env.now - t0, seg, "all-reduce wait")


def _boundaries(run: GpuRun, seg_names: list[str], seg_of_kernel_rep: np.ndarray, name: str) -> list[int]:
    """Instance indices just after each repetition of segment ``name`` ends."""
    out = []
    segs = run.segment
    rep = seg_of_kernel_rep
    for i in range(1, len(segs) + 1):
        if seg_names[segs[i - 1]] == name and (i == len(segs) or segs[i] != segs[i - 1] or rep[i] != rep[i - 1]):
            out.append(i)
    return out


def _post(bk: _Buckets, b: int, gpu: Gpu):
    yield from bk.post(b)


def _join(c: _Collective, seg: int, gpu: Gpu):
    return c.join(gpu, seg)


def run_parallel(runs: list[GpuRun], cfg: SimConfig, pc: ParallelConfig, rep_index: np.ndarray) -> dict:
    """Simulate ``len(runs)`` GPUs meeting at collectives."""
    env = simpy.Environment()
    n = len(runs)
    names = runs[0].names
    timeline: list[TimelineEvent] | None = [] if cfg.timeline else None
    gpus = [Gpu(env, r, cfg, g, timeline) for g, r in enumerate(runs)]
    ctls = []
    for g, r in enumerate(runs):
        ctl = Controller(env, cfg, np.random.default_rng([cfg.seed, g]),
                         planned_lateness(r, cfg.switch) if cfg.mechanism == "predictive" else {})
        ctls.append(ctl)
    hooks: dict[int, object] = {}
    run0 = runs[0]
    if pc.mode == "dp" and n > 1:
        bwd = [i for i, nm in enumerate(names) if "backward" in nm]
        last_bwd = max((i for i in range(len(run0.segment)) if run0.segment[i] in bwd), default=len(run0.segment) - 1) + 1
        if pc.overlap:
            ends = [b for nm in names if "backward_layer" in nm for b in _boundaries(run0, names, rep_index, nm)]
            ends = sorted(ends) or [last_bwd]
            bk = _Buckets(env, n, len(ends), ring_allreduce_s(pc.grad_bytes / len(ends), n, pc.link_bw_gbs, pc.link_latency_s))
            for b, i in enumerate(ends):
                hooks[i] = functools.partial(_post, bk, b)
            prev = hooks.get(last_bwd)

            def final(gpu, prev=prev):
                if prev is not None:
                    yield from prev(gpu)
                yield from bk.wait_all(gpu, int(run0.segment[last_bwd - 1]))
            hooks[last_bwd] = final
        else:
            coll = _Collective(env, n, ring_allreduce_s(pc.grad_bytes, n, pc.link_bw_gbs, pc.link_latency_s))
            hooks[last_bwd] = lambda gpu: coll.join(gpu, int(run0.segment[last_bwd - 1]))
    elif pc.mode == "tp" and n > 1:
        dur = ring_allreduce_s(pc.act_bytes, n, pc.link_bw_gbs, pc.link_latency_s)
        for nm in names:
            if "layer" in nm:
                for i in _boundaries(run0, names, rep_index, nm):
                    c = _Collective(env, n, dur)
                    seg = int(run0.segment[i - 1])
                    hooks[i] = functools.partial(_join, c, seg)
    procs = [env.process(gpu.process(ctl, hooks)) for gpu, ctl in zip(gpus, ctls)]
    env.run(until=simpy.AllOf(env, procs))
    end = env.now
    energy = 0.0
    seg_t = np.zeros(len(names))
    seg_e = np.zeros(len(names))
    for gpu in gpus:
        # a GPU that finished early idles until the slowest one is done
        energy += gpu.energy_j
        seg_e += gpu.seg_e
        seg_t = np.maximum(seg_t, gpu.seg_t)
    finish = [g.seg_t.sum() for g in gpus]
    energy += sum((end - f) * cfg.costs.idle_power_w for f in finish)
    return {"time_s": end, "energy_j": energy, "segment_time_s": seg_t, "segment_energy_j": seg_e,
            "switches": sum(c.switches for c in ctls), "switch_time_s": float(np.mean([g.switch_time_s for g in gpus])),
            "timeline": timeline, "gpus": n, "per_gpu_time_s": finish}
