"""The importer's hook into the work estimates: each GPU event of a profiler trace joined to the CPU op that launched
it, and its work taken from that op's shapes (``kdvfs.work.op_work``), else from its name (``work_from_name``), else
left to its category. The formulas themselves are ``kdvfs.work``'s.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

from kdvfs.work import NAME_PEAK_FLOPS, Work, first_dtype, math_class, op_work, simt_by_name, work_from_name

__all__ = ["MAX_BYTES_PER_S", "concurrent_wall_share", "conv_gradient", "index_ops", "kernel_work", "moves_data_only", "op_of_kernel"]

log = logging.getLogger(__name__)


MAX_BYTES_PER_S = 25e12
"""More than any card moves through memory (HBM3e: 4.8–8 TB/s; Hopper's L2 ~12 TB/s): shape-derived work beyond it,
or beyond twice the highest ``NAME_PEAK_FLOPS`` (an fp32 op may run on tf32 tensor cores unbeknown to the importer),
means the op's formula does not describe that kernel (before they were fixed, nll_loss was priced at 440 TB/s and an
embedding's gather at 114 TB/s on the Gemma step)."""


# Kernels that only move data: an op that launches one of them beside its compute kernels (cuDNN's convolutions
# convert NCHW to NHWC and back around an implicit GEMM; a matmul may copy an operand to make it contiguous) does its
# arithmetic in the others, so the op's FLOPs are split over those alone (its bytes over all, by duration as before).
# Session 8's blind ResNet-50 step: the layout kernels took 40 % of the convolutions' FLOPs, priced at 54 TFLOP/s of
# SIMT math (the cap's power) where they move memory at ~190 GB/s.
# (explicit names: a GEMM's template arguments may read "NoPermute" or "Transpose")
_DATA_MOVEMENT = re.compile(r"nchwToNhwc|nhwcToNchw|^Mem(set|cpy)|copy_kernel|CatArrayBatchedCopy|transpose_kernel|"
                            r"permute_kernel|batch_transpose")


def moves_data_only(name: str) -> bool:
    """Whether a kernel's name marks it as a layout conversion, transpose or copy (no arithmetic of its op)."""
    return bool(_DATA_MOVEMENT.search(name))


# cuDNN's and CUTLASS's convolution-gradient kernels say which gradient they compute: sm90_xmma_dgrad_…,
# cutlass_tensorop_bf16_s16816dgrad_…, sm80_xmma_wgrad_…, ImplicitGemmConvolution<…Conv2dWgradOutputGradient…>,
# dgrad2d_c1_k1_nhwc, wgrad2d_c1_k1_nhwc
_GRADIENT = re.compile(r"(dgrad|wgrad)", re.I)


def conv_gradient(name: str) -> str | None:
    """``dgrad`` (the input's gradient) or ``wgrad`` (the weight's) where a kernel's name says which one it computes
    (and only one), else ``None``."""
    kinds = {m.lower() for m in _GRADIENT.findall(name or "")}
    return kinds.pop() if len(kinds) == 1 else None


def _gradient_shares(kernels: Sequence, op_for: Sequence, share: dict[int, float]) -> dict[int, float]:
    """A convolution backward's two gradients do the same arithmetic (dx = dy ⋆ w and dw = dy ⋆ x: 2 · N · Cout · out ·
    Cin/groups · k each) and move the same bytes (``kdvfs.work._conv_from``), whatever their kernels' durations: where
    an op's kernels name both (``conv_gradient``), the share its dgrad kernels hold together, by duration, and its wgrad
    kernels' are pooled and split half and half, by duration within each. wav2vec 2.0's grouped position convolution
    (validation/h200/steps11) runs sixteen 8-block dgrad kernels for 3.8 ms and one wgrad kernel for 0.15 ms: split by
    duration, the wgrad kernel took 4 % of the work and the dgrad kernels 96 % — each half's rate off by 12× and 2×.
    ``share`` maps kernel index → its duration share; the result has the new shares of the kernels it changes."""
    by_op: dict[int, list[int]] = {}
    for i, o in enumerate(op_for):
        if o is not None and i in share:
            by_op.setdefault(id(o), []).append(i)
    out: dict[int, float] = {}
    for idx in by_op.values():
        kinds = {i: conv_gradient(kernels[i].name) for i in idx}
        d = [i for i in idx if kinds[i] == "dgrad"]
        w = [i for i in idx if kinds[i] == "wgrad"]
        if not d or not w:
            continue
        pool = sum(share[i] for i in d + w)
        for grp in (d, w):
            t = sum(kernels[i].time_s for i in grp)
            for i in grp:
                out[i] = 0.5 * pool * (kernels[i].time_s / t if t > 0 else 1.0 / len(grp))
    return out


def _possible(w: Work, time_s: float) -> bool:
    if not time_s > 0:
        return True
    return w.bytes / time_s <= MAX_BYTES_PER_S and w.flops / time_s <= 2 * max(NAME_PEAK_FLOPS.values())


def index_ops(events: Sequence[Mapping]) -> dict:
    """CPU op events by their ``External id`` (the id a kernel launched inside the op carries), innermost op last.
    Only ops with recorded shapes (``Input Dims``) are kept."""
    out: dict = {}
    for ev in events:
        if not isinstance(ev, Mapping) or ev.get("cat") not in ("cpu_op", "Operator"):
            continue
        a = ev.get("args") or {}
        if "Input Dims" in a and "External id" in a:
            out.setdefault(a["External id"], []).append(ev)
    for v in out.values():
        v.sort(key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
    return out


def op_of_kernel(ev: Mapping, ops: Mapping) -> Mapping | None:
    """The innermost CPU op (with shapes) that launched a GPU event, or ``None``."""
    cands = ops.get((ev.get("args") or {}).get("External id"))
    return cands[-1] if cands else None


def kernel_work(kernels: Sequence, events: Sequence[Mapping], ops: Mapping, *, backward: Sequence[bool] | None = None,
                tf32: bool = False) -> list:
    """Kernels (``kdvfs.trace.Kernel``, one per GPU event, same order) with ``flops``, ``bytes``, ``dtype``, ``math``
    and ``work_source`` filled in: from the launching op's shapes where recorded (an op's work is split over the
    kernels it launched in proportion to their durations; its FLOPs only over those that compute where it also launched
    layout conversions or copies, ``moves_data_only``), else from the kernel's name and grid, else left to the
    category (``work_source="category"``). Kernels that already carry both FLOPs and bytes are kept as they are."""
    from dataclasses import replace

    n = len(kernels)
    op_for = [op_of_kernel(ev, ops) for ev in events]
    # cuDNN's layout conversions around a convolution, priced as copies of the tensor each converts (``_layout_copy``)
    layout = [_layout_copy(k, o) if o is not None else None for k, o in zip(kernels, op_for)]
    # a convolution backward's wgrad reductions, workspace and bias kernels, and its GEMMs with them, priced by role
    # (``kdvfs.work_conv``): no share of the op's work by duration
    from kdvfs.work_conv import conv_backward_kernel_works

    by_role = conv_backward_kernel_works(kernels, op_for, tf32=tf32)
    # total duration of the kernels each op launched, for the split (bytes; less the conversions priced as copies);
    # and of those that compute (FLOPs)
    dur_of_op: dict[int, float] = {}
    compute_dur: dict[int, float] = {}
    mover = [moves_data_only(k.name) for k in kernels]
    for i, (k, o, mv, lay) in enumerate(zip(kernels, op_for, mover, layout)):
        if o is not None and lay is None and i not in by_role:
            dur_of_op[id(o)] = dur_of_op.get(id(o), 0.0) + k.time_s
            if not mv:
                compute_dur[id(o)] = compute_dur.get(id(o), 0.0) + k.time_s
    # each kernel's share of its op's FLOPs and bytes by duration, then the two gradients of a convolution's backward
    # evened out (``_gradient_shares``)
    fsh: dict[int, float] = {}
    bsh: dict[int, float] = {}
    for i, (k, o, mv) in enumerate(zip(kernels, op_for, mover)):
        if o is None:
            continue
        tot, cd = dur_of_op.get(id(o), 0.0), compute_dur.get(id(o), 0.0)
        bsh[i] = k.time_s / tot if tot else 1.0
        # FLOPs to the op's compute kernels only, where it launched any beside its data movers
        fsh[i] = bsh[i] if cd <= 0 or cd >= tot else (0.0 if mv else k.time_s / cd)
    if any("convolution_backward" in str(o.get("name", "")) for o in op_for if o is not None):
        conv_ops = [o if o is not None and "convolution_backward" in str(o.get("name", "")) else None for o in op_for]
        fsh.update(_gradient_shares(kernels, conv_ops, fsh))
        bsh.update(_gradient_shares(kernels, conv_ops, bsh))
    out = []
    for i in range(n):
        k, o = kernels[i], op_for[i]
        if k.flops is not None and k.bytes is not None and k.work_source is None:
            out.append(k)
            continue
        w = None
        if layout[i] is not None:
            w = layout[i]
        elif i in by_role:
            w = by_role[i]
        elif o is not None:
            a = o.get("args") or {}
            w = op_work(str(o.get("name", "")), a.get("Input Dims"), a.get("Input type"),
                        backward=bool(backward[i]) if backward is not None else False, tf32=tf32,
                        concrete=a.get("Concrete Inputs"), strides=a.get("Input Strides"))
            if w is not None:
                w = Work(w.flops * fsh[i], w.bytes * bsh[i], w.dtype, w.tensor, "shapes")
                if not _possible(w, k.time_s):
                    log.debug("%s: %s's shapes give work no card does in %.3g s; work from the name instead",
                              k.name[:60], o.get("name"), k.time_s)
                    w = None
        if w is None:
            w = work_from_name(k.name, k.category, k.grid, k.block, k.time_s, peak_flops=NAME_PEAK_FLOPS)
        if w is None:
            out.append(replace(k, work_source="category"))
            continue
        dt = w.dtype
        # a GEMM or attention op on 16-bit inputs runs on tensor cores; its kernels (split) inherit that, except those
        # whose name says they multiply-add on the CUDA cores (cuDNN's convolve_sgemm engines)
        tensor = w.tensor and k.category in ("gemm", "attention") and not simt_by_name(k.name)
        out.append(replace(k, flops=w.flops, bytes=w.bytes, dtype=dt, math=math_class(k.category, dt, tensor),
                           work_source=w.source))
    return out


def _layout_copy(k, o: Mapping) -> Work | None:
    """The work of one of cuDNN's layout-conversion kernels (``nchwToNhwcKernel``/``nhwcToNchwKernel``) that a
    convolution op launched: no FLOPs, a copy of the tensor it converts (``kdvfs.work_passes.layout_copy_bytes``: the
    tensor found by the kernel's grid among the op's operands and its output, priced by the stride rule for tiled
    conversions, one read and one write reaching DRAM). Before (session 11) they took a share of
    the op's bytes by duration, the GEMM's operands once: characterization16's 1 × 1 convolution spent 68 % of its time
    in them, so they moved the GEMM's bytes, where they copy the input and the output. ``None`` for other kernels, for
    other ops, and without a grid (then the split by duration, as before)."""
    from kdvfs.work import op_rule
    from kdvfs.work_passes import layout_copy_bytes, layout_direction

    if layout_direction(k.name) is None or not k.grid:
        return None
    name = str(o.get("name", ""))
    if op_rule(name) != "conv":
        return None
    a = o.get("args") or {}
    dims = a.get("Input Dims")
    shapes = [list(map(int, d)) for d in (dims if isinstance(dims, list) else [])
              if isinstance(d, list) and len(d) >= 3 and all(isinstance(x, int) for x in d)]
    if not shapes:
        return None
    dt = first_dtype(a.get("Input type"), ("bf16", "fp16", "fp32", "fp64"))
    tensors = list(shapes)
    if "backward" not in name and len(shapes) >= 2:  # the forward's output: the batch, the weight's out-channels
        from kdvfs.work import _conv_out

        tensors.append([shapes[0][0], shapes[1][0], *_conv_out(shapes[0], shapes[1], name, a.get("Concrete Inputs"))])
    # a grouped convolution is converted one group at a time: the activations' channels and the weights' filters
    # divided by the groups (RegNet's 3 × 3 convolutions of 24 channels per group)
    wi = 1 if "backward" not in name else 2
    if len(shapes) > wi and shapes[wi][1] > 0:
        x = shapes[0] if "backward" not in name else shapes[1]
        g = x[1] // shapes[wi][1]
        if g > 1:
            tensors += [[t[0] // g, *t[1:]] if i == wi else [t[0], t[1] // g, *t[2:]] for i, t in enumerate(tensors)]
    nbytes = layout_copy_bytes(k.grid, tensors, dt)
    return None if nbytes is None else Work(0.0, nbytes, dt, False, "shapes")


def concurrent_wall_share(starts_us: Sequence[float], durs_us: Sequence[float], streams: Sequence,
                          ops: Sequence) -> list[float]:
    """Each GPU event's share of the wall time, over its own duration: 1, except for kernels that one op launched on
    several streams at once, which split the time they overlap evenly (``∫ 1/n(t) dt`` over the kernel, ``n`` the op's
    kernels running at ``t``), so that the op's kernels sum to its span, not to their durations summed.

    cuDNN runs a grouped convolution's groups on internal streams side by side: wav2vec 2.0's position convolution
    (kernel 128, 16 groups; validation/h200/steps11) launches 48 forward kernels of 4–24 blocks on 8 streams, 30.9 ms of
    kernel time in a 12.3 ms span at batch 4, and the zoo measures the op over that span (``gconv1d`` entries:
    12.4 ms a call). The model runs a trace's kernels one after another, so each of them keeps its work (split by
    duration: the op's kernels each compute while they run) and takes its share of the wall time: the whole card's rate
    while they share it, as the zoo's rows have it. Kernels of different ops are left alone (a collective beside the
    backward's compute is another op), and so is an op whose kernels all ran on one stream. ``ops`` holds each event's
    launching op (``External id``), ``None`` where unknown."""
    n = len(starts_us)
    out = [1.0] * n
    by: dict = {}
    for i in range(n):
        if ops[i] is not None:
            by.setdefault(ops[i], []).append(i)
    for idx in by.values():
        if len(idx) < 2 or len({streams[i] for i in idx}) < 2:
            continue
        iv = [(float(starts_us[i]), float(starts_us[i]) + max(0.0, float(durs_us[i]))) for i in idx]
        # F(t) = ∫ 1/n(τ) dτ from the first start, swept over the edges; a kernel running over [a, b] (so through every
        # elementary interval there) takes F(b) − F(a)
        delta: dict[float, int] = {}
        for a, b in iv:
            delta[a] = delta.get(a, 0) + 1
            delta[b] = delta.get(b, 0) - 1
        F: dict[float, float] = {}
        acc, active, prev = 0.0, 0, None
        for t in sorted(delta):
            if prev is not None and active > 0:
                acc += (t - prev) / active
            F[t] = acc
            active += delta[t]
            prev = t
        for (a, b), i in zip(iv, idx):
            if b > a:  # at most 1 (alone throughout), which rounding can overshoot
                out[i] = min(1.0, (F[b] - F[a]) / (b - a))
    return out
