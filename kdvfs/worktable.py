"""The work the importer gave each kernel, laid out to be checked by eye (``kdvfs trace show --kernels N``).

A kernel's FLOPs and bytes over its recorded time give the rate it would have run at. A memory rate above the card's
bandwidth (the H200's HBM3e: 4.8 TB/s), or a FLOP rate above its peak, means the work estimate is wrong for that
kernel. Session 7's tester found the ``nll_loss`` of a Gemma step at 440 TB/s, a fill at 9.4 TB/s and a log-softmax
backward at 5.1 TB/s that way; before, the numbers were only in the trace file's JSON.
"""

from __future__ import annotations

from typing import Any

from kdvfs.trace import Trace

__all__ = ["kernel_work_rows", "work_source_time_share"]


def work_source_time_share(trace: Trace) -> dict[str, float]:
    """Share of the iteration's kernel time whose work came from op shapes, the kernel name, or neither."""
    total = trace.total_time_s
    out: dict[str, float] = {}
    for k, r in zip(trace.kernels, trace.repeats):
        src = k.work_source or ("shapes" if k.flops is not None and k.bytes is not None else "category")
        out[src] = out.get(src, 0.0) + (k.time_s * float(r) / total if total > 0 else 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def kernel_work_rows(trace: Trace, top: int) -> list[dict[str, Any]]:
    """The ``top`` kernels by their share of the iteration's time, with their work and the rates it implies.

    Each row: ``key``, ``name``, ``op``, ``category``, ``repeat`` (instances per iteration), ``time_s`` (one
    instance), ``time_share``, ``flops``, ``bytes``, ``work_source``, ``dtype``, ``tbytes_per_s`` and
    ``tflops_per_s`` (None where the work is unknown)."""
    total = trace.total_time_s
    shares = [k.time_s * float(r) / total if total > 0 else 0.0 for k, r in zip(trace.kernels, trace.repeats)]
    rows = []
    for key, k, r, share in zip(trace.kernel_keys, trace.kernels, trace.repeats, shares):
        tera_s = k.time_s * 1e12 if k.time_s > 0 else None  # work / (time · 1e12): a rate in tera-units per second
        rows.append({
            "key": key, "name": k.name, "op": k.op, "category": k.category, "repeat": int(r), "time_s": k.time_s,
            "time_share": share, "flops": k.flops, "bytes": k.bytes, "work_source": k.work_source, "dtype": k.dtype,
            "tbytes_per_s": k.bytes / tera_s if k.bytes is not None and tera_s else None,
            "tflops_per_s": k.flops / tera_s if k.flops is not None and tera_s else None,
        })
    order = sorted(range(len(rows)), key=lambda i: -shares[i])
    return [rows[i] for i in order[:max(0, int(top))]]
