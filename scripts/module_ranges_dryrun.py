"""CPU dry run of measure-steps' module ranges (needs torch and transformers, no GPU):
``python -m scripts.module_ranges_dryrun OUT_DIR [MODEL …]`` (default gpt2-medium resnet-50 wav2vec2-base).

Each model's small step is recorded by ``hw_backend.steps._record`` (as ``kdvfs measure-steps`` records it); the
script counts the ``kdvfs.module:`` ranges in the Chrome trace and checks none is recorded after it. A CPU trace has no
GPU kernels, so one fake kernel is injected under each innermost CPU op (launched from it, on one stream) before the
import, which then reports how it found the structure and the repeated segments.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def inject_kernels(doc: dict) -> int:
    """One fake GPU kernel launched from each innermost CPU op of ``doc`` (in place); returns how many."""
    ev = doc["traceEvents"]
    ops = sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    t_gpu, n, add = 0.0, 0, []
    for i, e in enumerate(ops):
        if i + 1 < len(ops) and ops[i + 1]["ts"] < e["ts"] + e["dur"] and ops[i + 1]["tid"] == e["tid"]:
            continue  # not innermost
        n += 1
        ts = e["ts"] + e["dur"] / 2
        add.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 0.001,
                    "pid": e["pid"], "tid": e["tid"], "args": {"correlation": 10**6 + n}})
        t_gpu = max(t_gpu, ts) + 1
        add.append({"ph": "X", "cat": "kernel", "name": f"k_{e['name']}", "ts": t_gpu, "dur": 0.5, "pid": 0,
                    "tid": 7, "args": {"correlation": 10**6 + n, "stream": 7, "grid": [1, 1, 1], "block": [1, 1, 1]}})
    ev.extend(add)
    return n


def main(out: Path, models: list[str]) -> None:
    import torch

    from hw_backend.steps import _record, build
    from kdvfs.importers import import_kineto

    out.mkdir(parents=True, exist_ok=True)
    for name in models:
        step, _ = build(name, small=True)
        path = out / f"{name}.kineto.json.gz"
        _record(step, path, torch)
        doc = json.loads(gzip.decompress(path.read_bytes()))
        ranges = {e["name"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("kdvfs.module:")}
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            step()
        after = sum(1 for e in p.events() if e.name.startswith("kdvfs.module:"))
        n = inject_kernels(doc)
        gpu = out / f"{name}.gpu.json"
        gpu.write_text(json.dumps(doc))
        imp = import_kineto(gpu, name=name)
        reps = [(s.name, s.repeat, len(s.kernels)) for s in imp.trace.segments if s.repeat > 1 and len(s.kernels) > 1]
        print(f"{name}: {len(ranges)} module ranges, {after} after the recording; {n} kernels injected; structure "
              f"{imp.structure}; repeated {reps}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:] or ["gpt2-medium", "resnet-50", "wav2vec2-base"])
