"""Kernels that scale with their work: a trace at one per-GPU batch size (or tensor-parallel shard) predicted at another.

A schedule chosen at one size is a clock per kernel instance; the same layers at another batch size or shard degree run
the same kernels on less (or more) work, so the schedule carries over instance by instance. What changes is each
kernel's time and power, which this module predicts from its work, in the kernel model's own terms (``t0``, ``tc``,
``tm``, ``uc``; ``kdvfs.model``):

- **GEMMs** (category ``gemm``): FLOPs scale with the tokens per GPU (batch × sequence) and with 1/degree (a
  column- or row-parallel shard). The core term follows FLOPs divided by a **wave-quantisation efficiency**: output
  tiles of 128 × 128 are spread over the card's SMs in waves, and the last wave is partly empty, so a small GEMM
  keeps fewer SMs busy (efficiency = tiles / (waves × SMs)); core power follows the same occupancy. The memory term
  has two parts. Its **compulsory traffic**, each operand once, ``2·(M·K + K·N + M·N)`` bytes at bf16, shrinks less
  than the FLOPs: the weight (K × N) is read whole at any batch, and a tensor-parallel shard still reads the whole
  unsharded operand (a column-parallel shard the M × K input, a row-parallel one writes the whole M × N output).
  The rest of the fitted memory term (tile re-reads through L2, far larger than the compulsory bytes on a fitted
  GEMM) follows the FLOPs. The compulsory part's share is its time at the highest bandwidth over the fitted memory
  term at the capture size (at most 1); nothing is fitted.
  Shapes come from the kernel's ``flops`` when the trace has them, else from the documented fallback below.
- **Attention** (``attention``): FLOPs ∝ batch × heads × sequence², bytes ∝ batch × heads × sequence; heads/degree.
- **Memory-bound kernels** (``norm``, ``elementwise``, ``reduction``, ``copy``, ``other``): bytes ∝ tokens. Under
  tensor parallelism the kernels on the residual stream (layer norms, residual adds, embeddings, the loss) are
  replicated on every rank (Megatron-style); the rest of a layer's kernels are sharded (work / degree).
- **Optimizer** kernels: bytes ∝ parameters per rank: 1/degree, independent of batch.
- **Collectives**: gradient all-reduce (backward/optimizer pass): 1/degree, independent of batch; activation
  collectives elsewhere: ∝ tokens.
- The fixed part ``t0`` (launch, latency tail) does not scale: it is what makes tiny kernels relatively slow.

Fallback when a kernel has no FLOPs: the FLOPs are estimated from its capture time at ``ASSUMED_GEMM_EFFICIENCY`` of
the capture card's peak, the token dimension is the trace's batch × sequence length, and the other two GEMM
dimensions are taken equal (N = K = sqrt(FLOPs / 2M)). Each prediction's origin is recorded per kernel
(``ScaledKernel.source``).

Tensor parallelism adds per-layer activation all-reduces (two in forward, two in backward per transformer layer,
Megatron-style), timed by the ring model over the card's links and charged at the collective category's power; they
are link-bound, so the same time and power are charged under auto and under the carried schedule.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import GpuSpec
from kdvfs.model import CATEGORY_PRIORS, KernelParams, evaluate
from kdvfs.occupancy import SM_COUNT
from kdvfs.profile import Profile
from kdvfs.schedule import Schedule
from kdvfs.trace import Kernel, Segment, Trace

__all__ = ["ASSUMED_GEMM_EFFICIENCY", "SM_COUNT", "LINK_BW_GBS", "ScaledKernel", "Scaled", "wave_efficiency",
           "gemm_compulsory_bytes",
           "scale_params", "scale_problem", "carry_schedule", "scaled_for", "scaling_experiment"]

log = logging.getLogger(__name__)

# Per-GPU link bandwidth per direction for collectives, GB/s (NVLink 4: 450; the RTX 3080 Ti has PCIe 4 x16: ~25).
LINK_BW_GBS = {"rtx3080ti": 25.0, "ivr": 25.0, "a100": 300.0, "h100": 450.0, "h200": 450.0, "b200": 900.0}
LINK_LATENCY_S = 5e-6
# Fallback only: share of the capture card's peak a GEMM is assumed to reach, to estimate FLOPs from time.
ASSUMED_GEMM_EFFICIENCY = 0.7
TILE = 128
DEFAULT_HEADS = 16
_REPLICATED = ("norm", "resid", "wte", "wpe", "embed", "loss", "cross_entropy", "nll")


@dataclass(frozen=True, slots=True)
class ScaledKernel:
    """How one kernel was scaled.

    Attributes:
        key: kernel key.
        core_factor: factor on the core-bound time ``tc``.
        mem_factor: factor on the memory-bound time ``tm``.
        activity_factor: factor on core activity ``uc`` (SM occupancy).
        efficiency: wave-quantisation efficiency at the new size (GEMMs; 1 otherwise).
        source: where the prediction comes from (``flops/bytes``, ``fallback: …``).
        compulsory_ratio: GEMMs: compulsory DRAM bytes at the new size over those at the capture size (``mem_factor``
            is then the re-read part's factor); None for other kernels.
        compulsory_bytes: GEMMs: compulsory DRAM bytes at the capture size.
    """

    key: str
    core_factor: float
    mem_factor: float
    activity_factor: float
    efficiency: float
    source: str
    compulsory_ratio: float | None = None
    compulsory_bytes: float = 0.0


@dataclass(frozen=True, slots=True)
class Scaled:
    """A trace and profile at a new per-GPU batch size and tensor-parallel degree.

    Attributes:
        trace: the trace at the new size (kernel times at the capture clocks predicted).
        profile: the profile at the new size (same kernels and settings as the original).
        kernels: per kernel, how it was scaled.
        batch: per-GPU batch size.
        tp: tensor-parallel degree.
        collective_time_s: per-iteration tensor-parallel all-reduce time (0 at degree 1).
        collective_energy_j: its energy on one GPU.
    """

    trace: Trace
    profile: Profile
    kernels: tuple[ScaledKernel, ...]
    batch: int
    tp: int
    collective_time_s: float
    collective_energy_j: float


def wave_efficiency(tiles: float, sms: int) -> float:
    """Share of SM-time doing work when ``tiles`` equal tiles run in waves of ``sms``: tiles / (waves × sms)."""
    t = max(1, math.ceil(tiles))
    return t / (math.ceil(t / sms) * sms)


def gemm_compulsory_bytes(m: float, n: float, tp: int = 1) -> float:
    """Each operand of an M × K by K × N GEMM (K = N) read or written once, bf16, on one tensor-parallel shard: the
    weight and one activation are split by the degree, the other activation is whole (column-parallel: the input;
    row-parallel: the output — with K = N both give this)."""
    return 2.0 * (m * n + n * n / tp + m * n / tp)


def _replicated(k: Kernel) -> bool:
    nm = f"{k.name} {k.op or ''}".lower()
    return k.category == "norm" or any(w in nm for w in _REPLICATED)


def _gemm_dims(k: Kernel, tokens: float, spec_ref: GpuSpec) -> tuple[float, float, str]:
    """(FLOPs, N=K, source) of a GEMM at the capture size."""
    if k.flops:
        f, src = float(k.flops), "flops"
    else:
        peak = (spec_ref.peak_tflops or 100.0) * 1e12
        f, src = k.time_s * peak * ASSUMED_GEMM_EFFICIENCY, f"fallback: FLOPs from time at {ASSUMED_GEMM_EFFICIENCY:.0%} of peak"
    n = math.sqrt(max(f, 1.0) / (2 * tokens))
    return f, n, src + "; N = K = sqrt(FLOPs / 2M)"


def _factors(k: Kernel, pass_name: str, r_tok: float, r_batch: float, r_seq: float, tp: int, tokens: float,
             sms: int, spec: GpuSpec, heads: int) -> ScaledKernel:
    key = ""
    cat = k.category
    if cat == "gemm":
        f, n, src = _gemm_dims(k, tokens, spec)
        m0, m1 = tokens, tokens * r_tok
        e0 = wave_efficiency(math.ceil(m0 / TILE) * math.ceil(n / TILE), sms)
        e1 = wave_efficiency(math.ceil(m1 / TILE) * math.ceil(n / tp / TILE), sms)
        # memory term: re-read traffic follows the FLOPs; the compulsory bytes' ratio is returned separately
        # (``compulsory_ratio``) and weighed by scale_params with the fitted memory term it is part of
        b0, b1 = gemm_compulsory_bytes(m0, n, 1), gemm_compulsory_bytes(m1, n, tp)
        return ScaledKernel(key, r_tok / tp * e0 / e1, r_tok / tp, e1 / e0, e1,
                            "gemm wave model, compulsory bytes 2(MK+KN+MN) (N = K): " + src, b1 / b0, b0)
    if cat == "attention":
        h0 = heads
        e0 = wave_efficiency(math.ceil(tokens / TILE) * h0, sms)
        e1 = wave_efficiency(math.ceil(tokens * r_tok / TILE) * max(1.0, h0 / tp), sms)
        core = r_batch * r_seq ** 2 / tp * e0 / e1
        return ScaledKernel(key, core, r_batch * r_seq / tp, e1 / e0, e1,
                            f"attention: FLOPs ∝ batch·heads·seq², bytes ∝ batch·heads·seq ({heads} heads assumed)")
    if cat == "optimizer":
        return ScaledKernel(key, 1 / tp, 1 / tp, 1.0, 1.0, "optimizer: bytes ∝ parameters per rank")
    if cat == "collective":
        if pass_name in ("backward", "optimizer"):
            return ScaledKernel(key, 1 / tp, 1 / tp, 1.0, 1.0, "collective: gradient bytes ∝ parameters per rank")
        return ScaledKernel(key, r_tok, r_tok, 1.0, 1.0, "collective: activation bytes ∝ tokens")
    d = 1 if _replicated(k) else tp
    how = "replicated under TP" if d == 1 and tp > 1 else ("sharded under TP" if tp > 1 else "")
    src = "bytes" if k.bytes else "fallback: bytes ∝ tokens"
    return ScaledKernel(key, r_tok / d, r_tok / d, 1.0, 1.0, f"memory-bound ({src}){'; ' + how if how else ''}")


def scale_params(trace: Trace, params: KernelParams, spec: GpuSpec, batch: int | None = None, tp: int = 1,
                 seq_len: int | None = None, heads: int = DEFAULT_HEADS) -> tuple[KernelParams, tuple[ScaledKernel, ...]]:
    """Model parameters of ``trace``'s kernels at per-GPU ``batch``, ``seq_len`` and tensor-parallel degree ``tp``."""
    if not isinstance(tp, int) or tp < 1:
        raise InputError(f"tensor-parallel degree must be an integer ≥ 1, got {tp!r}; give e.g. --tp 2")
    if heads % tp:
        # a kdvfs trace does not record the head count: RoBERTa-base's 12 heads were called "the model's 16"
        whose = ("an assumed" if heads == DEFAULT_HEADS else "the model's") + f" {heads} attention heads"
        raise InputError(f"tensor-parallel degree {tp} cannot split {whose} evenly (each GPU holds whole heads"
                         + ("; a trace does not record the model's head count" if heads == DEFAULT_HEADS else "")
                         + "); give a degree that divides the head count, e.g. "
                         f"{', '.join(str(d) for d in range(1, heads + 1) if heads % d == 0)}")
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise InputError(f"per-GPU batch size must be an integer ≥ 1, got {batch!r}; give e.g. --batch 8")
    if (batch is not None and not trace.batch_size) or (seq_len is not None and not trace.seq_len):
        raise InputError(f"trace {trace.name!r} does not say its batch size and sequence length; scaling to another "
                         "size needs them (set batch_size and seq_len in the trace file)")
    b0 = trace.batch_size or 1
    s0 = trace.seq_len or 1
    r_batch = (batch or b0) / b0
    r_seq = (seq_len or s0) / s0
    tokens = float(b0 * s0)
    sms = SM_COUNT.get(spec.name)
    if sms is None:
        raise InputError(f"no SM count for card {spec.name!r}; scaling knows {', '.join(sorted(SM_COUNT))}")
    out = []
    for seg in trace.segments:
        for i, k in enumerate(seg.kernels):
            sk = _factors(k, seg.pass_name, r_batch * r_seq, r_batch, r_seq, tp, tokens, sms, spec, heads)
            out.append(replace(sk, key=f"{seg.name}.{i}"))
    cf = np.array([s.core_factor for s in out])
    mf = np.array([s.mem_factor for s in out])
    bw = max(spec.mem_bandwidth_gbs) * 1e9
    for j, sk in enumerate(out):
        if sk.compulsory_ratio is not None and params.tm_s[j] > 0:
            share = min(1.0, sk.compulsory_bytes / bw / float(params.tm_s[j]))
            mf[j] = share * sk.compulsory_ratio + (1 - share) * sk.mem_factor
    af = np.array([s.activity_factor for s in out])
    p = KernelParams(params.keys, params.t0_s.copy(), params.tc_s * cf, params.tm_s * mf,
                     np.clip(params.uc * af, 0.0, None), params.um, params.source, params.p0_w)
    return p, tuple(out)


def _tp_collectives(trace: Trace, spec: GpuSpec, tp: int, batch: int, hidden: int | None) -> tuple[float, float]:
    """Per-iteration time and one GPU's energy of the tensor-parallel activation all-reduces (ring model)."""
    if tp == 1:
        return 0.0, 0.0
    layers = sum(s.repeat for s in trace.segments if s.pass_name == "forward" and s.repeat > 1) or 1
    seq = trace.seq_len or 1
    if hidden is None:
        raise InputError("tensor-parallel scaling needs the model's hidden size for its all-reduces; give --hidden")
    nbytes = batch * seq * hidden * 2  # bf16 activations
    link = LINK_BW_GBS.get(spec.name, 450.0)
    t_one = 2 * (tp - 1) / tp * nbytes / (link * 1e9) + 2 * (tp - 1) * LINK_LATENCY_S
    t = 4 * layers * t_one  # two all-reduces per layer in forward, two in backward
    tcs, tms, uc, um = CATEGORY_PRIORS["collective"]
    p = KernelParams(("collective",), np.array([0.02 * t_one]), np.array([tcs * t_one]), np.array([tms * t_one]),
                     np.array([uc]), np.array([um]))
    ev = evaluate(spec, p, np.array([0]), np.array([0]))
    return t, float(t * ev.power_w[0, 0])


def scale_problem(trace: Trace, profile: Profile, params: KernelParams, spec: GpuSpec, batch: int | None = None,
                  tp: int = 1, hidden: int | None = 2048) -> Scaled:
    """The trace and profile at a new size. The profile's values are multiplied by the model's predicted change at
    every setting (so a measured profile keeps its measurements, scaled by the model's ratio)."""
    new_params, ks = scale_params(trace, params, spec, batch, tp)
    st = profile.settings
    c = np.array([s[0] for s in st])
    m = np.array([s[1] for s in st])
    old = evaluate(spec, params, c, m)
    new = evaluate(spec, new_params, c, m)
    prof = profile.for_trace(trace)
    t = prof.time_s * new.time_s / old.time_s
    pw = prof.power_w * new.power_w / old.power_w
    ai = prof.auto_index
    kit = iter(t[:, ai])
    segs = tuple(Segment(s.name, tuple(replace(k, time_s=float(next(kit)), energy_j=None) for k in s.kernels), s.repeat,
                         s.pass_name) for s in trace.segments)
    b = batch or trace.batch_size or 1
    new_trace = replace(trace, segments=segs, batch_size=b,
                        notes=(trace.notes + f"; scaled by kdvfs.scaling to batch {b}, tensor-parallel degree {tp}").strip("; "))
    newp = Profile(prof.keys, prof.settings, t, pw, prof.source, prof.gpu, new_trace.name)
    ct, ce = _tp_collectives(trace, spec, tp, b, hidden)
    return Scaled(new_trace, newp, ks, b, tp, ct, ce)


def _totals(profile: Profile, trace: Trace, setting: np.ndarray) -> tuple[float, float]:
    inst = trace.instances()
    t = profile.time_s[inst, setting]
    return float(t.sum()), float((t * profile.power_w[inst, setting]).sum())


def carry_schedule(sc: Scaled, schedule: Schedule) -> dict:
    """Time and energy of ``schedule`` (chosen at another size) and of auto at the scaled size, free switching.

    Returns a row: batch, tp, auto and schedule time and energy (kernels plus tensor-parallel collectives, one GPU),
    and their changes in percent."""
    if schedule.n_instances != len(sc.trace.instances()):
        raise InputError(f"schedule has {schedule.n_instances} instances but the trace has {len(sc.trace.instances())}; "
                         "carry a schedule made for this trace")
    prof = sc.profile
    sidx = np.array([prof.setting_index(c, m) for c, m in zip(schedule.core_mhz.tolist(), schedule.mem_mhz.tolist())])
    ta, ea = _totals(prof, sc.trace, np.full(len(sidx), prof.auto_index))
    ts, es = _totals(prof, sc.trace, sidx)
    ta, ts = ta + sc.collective_time_s, ts + sc.collective_time_s
    ea, es = ea + sc.collective_energy_j, es + sc.collective_energy_j
    kt, ke = ta - sc.collective_time_s, ea - sc.collective_energy_j
    return {"batch": sc.batch, "tp": sc.tp, "auto_time_s": ta, "auto_energy_j": ea, "time_s": ts, "energy_j": es,
            "collective_time_s": sc.collective_time_s,
            "time_change_pct": 100 * (ts / ta - 1), "energy_change_pct": 100 * (es / ea - 1),
            "kernels_time_change_pct": 100 * ((ts - sc.collective_time_s) / kt - 1),
            "kernels_energy_change_pct": 100 * ((es - sc.collective_energy_j) / ke - 1)}


def scaled_for(pb, spec: GpuSpec, batch: int | None, tp: int, hidden: int | None = 2048):
    """``(Problem, Scaled)`` at the new size for a problem (trace + profile), with the card's model parameters."""
    from kdvfs.bundled import model_params
    from kdvfs.optimize.problem import Problem

    sc = scale_problem(pb.trace, pb.profile, model_params(pb.trace, spec), spec, batch, tp, hidden)
    return Problem(sc.trace, sc.profile), sc


def scaling_experiment(pb, spec: GpuSpec, schedule: Schedule, batches: list[int], degrees: list[int],
                       hidden: int | None = 2048) -> list[dict]:
    """The study's experiment: ``schedule`` (chosen at the trace's own size) carried to each per-GPU batch size (degree
    1) and each tensor-parallel degree (the trace's batch), against auto at that size."""
    rows = []
    for b in batches:
        rows.append(dict(carry_schedule(scaled_for(pb, spec, b, 1, hidden)[1], schedule), experiment="batch"))
    for d in degrees:
        rows.append(dict(carry_schedule(scaled_for(pb, spec, None, d, hidden)[1], schedule), experiment="tp"))
    return rows
