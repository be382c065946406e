"""Importing a large PyTorch profiler trace: time and memory against the file's size.

    python benchmarks/bench_import.py [--steps 400] [--mb 200] [--keep FILE] [--json OUT.json]

Builds a synthetic Kineto trace shaped like a recorded training loop (``ProfilerStep#N`` annotations; per step a
forward of L layers on the main thread, a backward on autograd's thread with ``evaluate_function`` frames and sequence
numbers, a foreach AdamW; every kernel with its ``cpu_op`` (input shapes), ``cudaLaunchKernel`` and kernel event, the
way Kineto writes them, one key per line group), sized to about ``--mb`` megabytes, then runs
``kdvfs trace import FILE --step all`` in a child process and reports its wall and CPU time and its peak resident
memory. Targets (issue 14): ≤ 30 s and ≤ 2 × the file for 200 MB and 400 steps on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ev(d: dict) -> str:
    # Kineto's own layout: a few fields per line, args on their own lines
    args = d.pop("args", None)
    head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in d.items())
    if args is None:
        return "  {\n    " + head + "\n  }"
    return "  {\n    " + head + ",\n    \"args\": {\n      " + json.dumps(args)[1:-1] + "\n    }\n  }"


def write_trace(path: Path, steps: int, layers: int, per_layer: int, opt_kernels: int) -> int:
    """Write the synthetic trace; returns the number of events."""
    names = [f"void kernel_{j}<float, {j % 7}>(at::Tensor, int, float)" for j in range(per_layer)]
    corr = ext = seq = 0
    n = 0
    t = 1_000_000.0
    with path.open("w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}],\n'
                '  "traceEvents": [\n')
        first = True

        def emit(d: dict) -> None:
            nonlocal first, n
            f.write(("" if first else ",\n") + _ev(d))
            first = False
            n += 1

        for s in range(steps):
            t0 = t
            seqs = []
            for pas in ("forward", "backward", "optimizer"):
                tid = 2 if pas == "backward" else 1
                count = layers * per_layer if pas != "optimizer" else opt_kernels
                if pas == "optimizer":
                    emit({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1,
                          "tid": 1, "ts": t, "dur": count * 12.0, "args": {"External id": ext}})
                for j in range(count):
                    ext += 1
                    corr += 1
                    kname = names[j % per_layer] if pas != "optimizer" else "multi_tensor_apply_kernel<AdamFunctor>"
                    if pas == "backward":
                        emit({"ph": "X", "cat": "cpu_op", "name": f"autograd::engine::evaluate_function: Op{j % per_layer}Backward0",
                              "pid": 1, "tid": tid, "ts": t, "dur": 11.0,
                              "args": {"External id": ext, "Sequence number": seqs.pop() if seqs else 0, "Fwd thread id": 1}})
                        ext += 1
                    a = {"External id": ext, "Record function id": 0, "Input type": ["c10::BFloat16", "c10::BFloat16"],
                         "Input Strides": [[2048, 1], [1, 2048]], "Input Dims": [[8192, 2048], [2048, 2048 + j % per_layer % 3]]}
                    if pas == "forward":
                        seq += 1
                        seqs.append(seq)
                        a["Sequence number"] = seq
                        a["Fwd thread id"] = 0
                    emit({"ph": "X", "cat": "cpu_op", "name": f"aten::op{j % per_layer}", "pid": 1, "tid": tid,
                          "ts": t + 0.5, "dur": 10.0, "args": a})
                    emit({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                          "ts": t + 1.0, "dur": 4.0, "args": {"cbid": 211, "correlation": corr}})
                    emit({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": t + 5.0,
                          "dur": 8.0 + (j % 5), "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                                                         "stream": 7, "correlation": corr, "registers per thread": 32,
                                                         "shared memory": 0, "grid": [132, 1, 1], "block": [256, 1, 1],
                                                         "est. achieved occupancy %": 100}})
                    t += 12.0
            emit({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0 - 1,
                  "dur": t - t0 + 2, "args": {"External id": 0}})
            t += 50.0
        f.write('\n  ],\n  "traceName": "synthetic"\n}\n')
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400, help="profiler steps")
    ap.add_argument("--mb", type=float, default=200.0, help="approximate file size, MB")
    ap.add_argument("--keep", help="write the synthetic trace here (default: a temporary file)")
    ap.add_argument("--json", help="write the result here")
    a = ap.parse_args()
    layers, opt = 12, 40
    per_step_bytes = 1_130  # bytes per kernel (op, launch, kernel; backward frames included) in this layout
    per_layer = max(4, int(a.mb * 1e6 / a.steps / per_step_bytes / (2 * layers)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(a.keep) if a.keep else Path(tmp) / "synthetic.kineto.json"
        t0 = time.perf_counter()
        n = write_trace(path, a.steps, layers, per_layer, opt)
        size = path.stat().st_size
        print(f"wrote {size / 1e6:.1f} MB, {n} events, {a.steps} steps ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        out = Path(tmp) / "t.json"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kdvfs", "trace", "import", str(path), "-o", str(out), "--step",
                                 "all", "--json"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        _, status, ru = os.wait4(proc.pid, 0)  # this child's own CPU time and peak memory
        if os.waitstatus_to_exitcode(status):
            raise SystemExit("kdvfs trace import failed")
        wall = time.perf_counter() - t0
        doc = json.loads(out.read_text())
        reps = sorted({s["repeat"] for s in doc["segments"]})
        res = {"file_mb": size / 1e6, "events": n, "steps": a.steps, "kernels_per_step": (2 * layers * per_layer + opt),
               "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024,
               "rss_over_file": ru.ru_maxrss * 1024 / size,
               "segments": len(doc["segments"]), "repeats_found": reps,
               "targets": {"wall_s": 30.0, "rss_over_file": 2.0}}
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
