"""The importer's hook into the work estimates: each GPU event of a profiler trace joined to the CPU op that launched
it, and its work taken from that op's shapes (``kdvfs.work.op_work``), else from its name (``work_from_name``), else
left to its category. The formulas themselves are ``kdvfs.work``'s.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

from kdvfs.work import NAME_PEAK_FLOPS, Work, math_class, op_work, work_from_name

__all__ = ["MAX_BYTES_PER_S", "index_ops", "kernel_work", "moves_data_only", "op_of_kernel"]

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
    # total duration of the kernels each op launched, for the split (bytes); and of those that compute (FLOPs)
    dur_of_op: dict[int, float] = {}
    compute_dur: dict[int, float] = {}
    mover = [moves_data_only(k.name) for k in kernels]
    for k, o, mv in zip(kernels, op_for, mover):
        if o is not None:
            dur_of_op[id(o)] = dur_of_op.get(id(o), 0.0) + k.time_s
            if not mv:
                compute_dur[id(o)] = compute_dur.get(id(o), 0.0) + k.time_s
    out = []
    for i in range(n):
        k, o = kernels[i], op_for[i]
        if k.flops is not None and k.bytes is not None and k.work_source is None:
            out.append(k)
            continue
        w = None
        if o is not None:
            a = o.get("args") or {}
            w = op_work(str(o.get("name", "")), a.get("Input Dims"), a.get("Input type"),
                        backward=bool(backward[i]) if backward is not None else False, tf32=tf32,
                        concrete=a.get("Concrete Inputs"), strides=a.get("Input Strides"))
            if w is not None:
                share = k.time_s / dur_of_op[id(o)] if dur_of_op.get(id(o)) else 1.0
                cd = compute_dur.get(id(o), 0.0)
                # FLOPs to the op's compute kernels only, where it launched any beside its data movers
                fshare = share if cd <= 0 or cd >= dur_of_op.get(id(o), 0.0) else (0.0 if mover[i] else k.time_s / cd)
                w = Work(w.flops * fshare, w.bytes * share, w.dtype, w.tensor, "shapes")
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
        # a GEMM or attention op on 16-bit inputs runs on tensor cores; its kernels (split) inherit that
        tensor = w.tensor and k.category in ("gemm", "attention")
        out.append(replace(k, flops=w.flops, bytes=w.bytes, dtype=dt, math=math_class(k.category, dt, tensor),
                           work_source=w.source))
    return out
