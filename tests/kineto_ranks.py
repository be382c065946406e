"""Synthetic per-rank PyTorch profiler traces of a data-parallel step (two streams, NCCL all-reduce buckets)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

COMPUTE, COMM = 7, 21


def rank_trace(rank: int, world: int, slow: float = 1.0, model: str = "a", buckets: int = 2,
               with_info: bool = True, coll_end: list[float] | None = None, arrivals: list | None = None,
               layers: bool = False) -> dict:
    """A step: 3 forward GEMMs, 4 backward GEMMs with an all-reduce bucket launched after every second one (on the
    communication stream, overlapped), then an optimizer kernel that waits for the last bucket. Times in µs.
    ``layers``: the forward is one layer repeated six times (same kernels) with each repeat's GEMM a little slower, so the
    importer folds it into one segment holding mean times, while the recording keeps each one's own."""
    ev, corr = [], [0]
    host = [0.0]
    gpu_free = {COMPUTE: 0.0, COMM: 0.0}
    launched = []

    def launch(name, dur, stream, after=0.0, cat="kernel", until=None):
        corr[0] += 1
        host[0] += 5.0
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": host[0], "dur": 3,
                   "pid": 1, "tid": 1, "args": {"correlation": corr[0]}})
        start = max(host[0] + 4.0, gpu_free[stream], after)
        if until is not None:  # a collective: spins from its own arrival until every rank has arrived + transfer
            if arrivals is not None:
                arrivals.append(start)
            dur = max(until - start, 1.0)
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": start, "dur": dur, "pid": 0, "tid": stream,
                   "args": {"stream": stream, "correlation": corr[0], "grid": [64, 1, 1], "block": [128, 1, 1]}})
        gpu_free[stream] = start + dur
        launched.append((name, start, start + dur))
        return start + dur

    names = {"a": ("sm90_xmma_gemm_bf16", "elementwise_kernel"), "b": ("ampere_sgemm_128x64", "vectorized_gelu")}[model]
    for i in range(6 if layers else 3):
        if layers:
            launch(f"{names[0]}_fwd", 400 * slow * (1 + 0.1 * i), COMPUTE)
        else:
            launch(f"{names[0]}_fwd{i}", 400 * slow, COMPUTE)
        launch(names[1], 50 * slow, COMPUTE)
    last = 0.0
    k = 0
    for i in range(4):
        t = launch(f"{names[0]}_bwd{i}", 500 * slow, COMPUTE)
        if i % 2 == 1 and (i // 2) < buckets:
            until = coll_end[k] if coll_end else None
            last = launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 300, COMM, after=t, until=until)
            k += 1
    launch("multi_tensor_apply_kernel_adam", 200 * slow, COMPUTE, after=last)
    doc = {"traceEvents": ev, "schemaVersion": 1}
    if with_info:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return doc


def write_ranks(d: Path, world: int = 2, **kw) -> list[Path]:
    out = []
    # each collective ends when the last rank has arrived plus a 300 µs transfer; a bucket's arrival depends on the
    # earlier buckets' ends (one communication stream), so they are found one after another
    ends: list[float] = []
    for k in range(kw.get("buckets", 2)):
        arr = []
        for r in range(world):
            a: list = []
            rank_trace(r, world, slow=1.0 + 0.1 * r, arrivals=a, coll_end=ends + [1e12] * 8, **kw)
            arr.append(a[k])
        ends.append(max(arr) + 300)
    for r in range(world):
        p = d / f"rank{r}.json.gz"
        doc = rank_trace(r, world, slow=1.0 + 0.1 * r, coll_end=ends, **kw)
        p.write_bytes(gzip.compress(json.dumps(doc).encode()))
        out.append(p)
    return out
