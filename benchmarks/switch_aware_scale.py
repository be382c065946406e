"""Switch-aware planning time against the trace's length, this checkout beside another, alternating in fresh processes:
``python benchmarks/switch_aware_scale.py /tmp/base [--reps 1 8 40] [--rounds 3] [--json out.json]``.

The benchmark's RTX 3080 Ti trace (897 instances) repeated ``reps`` times as distinct kernels (as
``benchmarks/test_benchmarks.py``'s ``test_switch_aware_8x`` builds it: 7 176 instances at 8×, 35 880 at 40×), one cold
``switch_aware`` call per mechanism at slack 0 under the Hopper switch model; CPU seconds (``time.process_time``) in
the child, the minimum over the rounds, and each size's time divided by the 1× time (linear: ≈ reps).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import sys, time, json
sys.path.insert(0, 'benchmarks')
import workloads as w
from test_benchmarks import _cold_problem
from kdvfs.optimize import switch_aware
from kdvfs.switching import SwitchCosts
costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
reps, mechs = int(sys.argv[1]), sys.argv[2].split(",")
switch_aware(_cold_problem(), w.HOPPER, "sync", 0.0, costs)  # imports and warms up
out = {}
for mech in mechs:
    pb = _cold_problem(reps)
    t = time.process_time()
    switch_aware(pb, w.HOPPER, mech, 0.0, costs)
    out[mech] = time.process_time() - t
print(json.dumps(out))
"""


def _child(tree: Path, reps: int, mechs: list[str]) -> dict[str, float]:
    res = subprocess.run([sys.executable, "-c", _CHILD, str(reps), ",".join(mechs)], cwd=tree, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": f"{tree}:{tree / 'benchmarks'}"})
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the other checkout")
    ap.add_argument("--reps", type=int, nargs="+", default=[1, 8, 40])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mechanisms", default="sync,callback,predictive")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    mechs = a.mechanisms.split(",")
    trees = {"base": a.base.resolve(), "this": ROOT}
    runs: dict[str, dict[int, list[dict[str, float]]]] = {t: {r: [] for r in a.reps} for t in trees}
    loads = []
    for _ in range(a.rounds):
        for reps in a.reps:
            for t, tree in trees.items():
                runs[t][reps].append(_child(tree, reps, mechs))
                loads.append(os.getloadavg()[0])
    best = {t: {r: {m: min(x[m] for x in rs) for m in mechs} for r, rs in by.items()} for t, by in runs.items()}
    doc = {"base": str(trees["base"]), "rounds": a.rounds, "load_1min_min": min(loads), "load_1min_max": max(loads),
           "min_over_rounds_s": best, "runs": runs}
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"load (1-min) {min(loads):.2f}–{max(loads):.2f}; CPU s, minimum over {a.rounds} rounds; × the 1× time\n")
    print("| reps | mechanism | base | this |\n|---:|---|---:|---:|")
    one = min(a.reps)
    for reps in a.reps:
        for m in mechs:
            cells = [f"{best[t][reps][m]:.3f} ({best[t][reps][m] / best[t][one][m]:.1f}×)" for t in trees]
            print(f"| {reps} | {m} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
