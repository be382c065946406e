"""``kdvfs profile build`` and ``kdvfs optimize`` on a real ~3 000-instance trace × the H200's 333 settings.

    python benchmarks/bench_real.py [--json OUT.json]

The trace: one training step of Hugging Face GPT-2 (24 layers × hidden 2048, batch 4 × 1 024, bf16 autocast, AdamW)
recorded on the lent H200 (validation/h200/runtime/hf_gpt2_step.kineto.json.gz, 2 952 kernel instances), imported
with its structure (165 distinct kernels) and, to bound the worst case, flattened so that every instance is its own
kernel (2 952 kernels). Each command runs in a child process (as a user runs it, interpreter start included); reported:
CPU time (user + system) and peak resident memory. Targets (issue 14): ≤ 1 s and ≤ 300 MB each. The library calls
are timed in-process beside them.
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
sys.path.insert(0, str(ROOT))
KINETO = ROOT / "validation/h200/runtime/hf_gpt2_step.kineto.json.gz"


def child(args: list[str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kdvfs", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    _, status, ru = os.wait4(proc.pid, 0)  # this child's own CPU time and peak memory
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"kdvfs {' '.join(args)} failed ({proc.returncode})")
    return {"command": "kdvfs " + " ".join(args), "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mb": ru.ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the result here")
    a = ap.parse_args()
    from kdvfs.gpus import get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params
    from kdvfs.optimize import Problem, optimize
    from kdvfs.profile import build_profile
    from kdvfs.trace import Segment, Trace, save_trace

    tr = import_kineto(KINETO).trace
    flat = Trace(name="hf-gpt2-flat", segments=(Segment("step", tuple(tr.kernels[i] for i in tr.instances()), 1,
                                                        "forward"),), gpu=tr.gpu)
    g = get_gpu("h200")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in (tr, flat):
            tp = Path(tmp) / f"{t.name}.trace.json"
            save_trace(t, tp)
            c0 = time.process_time()
            prof = build_profile(t, g, default_params(t, g))
            c1 = time.process_time()
            sched = optimize(Problem(t, prof))
            c2 = time.process_time()
            pp = Path(tmp) / f"{t.name}.profile.csv.gz"
            rows.append({
                "trace": t.name, "kernels": len(t.kernels), "instances": len(t.instances()), "settings": len(prof.settings),
                "library": {"build_profile_cpu_s": c1 - c0, "optimize_cpu_s": c2 - c1,
                            "energy_change_pct_ideal_free_switching": sched.predicted.energy_change_pct},
                "profile_build": child(["profile", "build", "--trace", str(tp), "--gpu", "h200", "-o", str(pp)]),
                "optimize_model_profile": child(["optimize", "--trace", str(tp), "--gpu", "h200", "--json"]),
                "optimize_written_profile": child(["optimize", "--trace", str(tp), "--profile", str(pp), "--json"]),
            })
    res = {"cpu_count": os.cpu_count(), "targets": {"cpu_s": 1.0, "peak_rss_mb": 300.0}, "runs": rows}
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
