"""This checkout beside another (an older commit) on issue 15's speed targets, the two alternating in one run.

    git archive a5ec1e0 | tar -x -C /tmp/base      # any checkout of the commit to compare with
    python benchmarks/side_by_side.py /tmp/base --rounds 3 --json validation/benchmarks/side-by-side-a5ec1e0.json

Each measurement runs in a fresh process with its working directory in one tree (so that tree's ``kdvfs`` and
``simulator`` are the ones imported), the trees alternating round by round, so that both see the same load. Times are
CPU seconds (``time.process_time``) in the child, except ``optimize_cli_wall_s`` (the wall time of the whole command,
interpreter start included, as ``benchmarks/test_benchmarks.py`` measures it). The table gives each tree's minimum
over the rounds and the 1-minute load average seen during the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# every child imports the bundled inputs the benchmarks share (benchmarks/workloads.py, present in both trees)
_PRELUDE = "import sys, time, json\nsys.path.insert(0, 'benchmarks')\nimport workloads as w\n"

SNIPPETS = {
    "switch_aware_s": """
from kdvfs.optimize import Problem, knapsack, switch_aware
from kdvfs.switching import SwitchCosts
costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
out = {}
for mech in ("sync", "callback", "predictive"):
    best = []
    for i in range(6):  # the first call imports and warms up; the rest each plan on a cold problem
        knapsack._HULL_CACHE.clear()
        pb = Problem(w.spaan_problem().trace, w.spaan_problem().profile)
        t = time.process_time()
        switch_aware(pb, w.HOPPER, mech, 0.0, costs)
        best.append(time.process_time() - t)
    out[mech] = min(best[1:])
print(json.dumps(out))
""",
    "whatif_1000_s": """
from kdvfs.executor import make_executor
from simulator import whatif
sc = whatif.grid(["rtx3080ti", "h200", "b200", "ivr"], whatif.default_latencies(25), ["sync", "callback"],
                 ["auto", "pass", "ideal", "naive", "switch-aware"], [0.0])[:1000]
t = time.process_time()
rows = whatif.run_grid(w.SPAAN, w.SPAAN, "rtx3080ti", sc, make_executor("serial"))
print(json.dumps({"grid": time.process_time() - t, "rows": len(rows)}))
""",
    "simulate_s": """
from simulator.api import simulate
from simulator.engine import SimConfig
from kdvfs.switching import SwitchCosts
spec = w.get_gpu("h200")
cfg = SimConfig("sync", w.HOPPER, SwitchCosts.for_gpu(spec))
out = {}
for switching in (False, True):
    big, bp, sched = w.repeated_h200(20, switching)
    for path, n in (("fast", 30), ("engine", 3)):
        simulate(big, bp, sched, spec, cfg, path=path)
        ts = []
        for i in range(n):
            t = time.process_time()
            simulate(big, bp, sched, spec, cfg, path=path)
            ts.append(time.process_time() - t)
        out[f"{path}-{'switching' if switching else 'no-switches'}"] = sorted(ts)[len(ts) // 2]
print(json.dumps(out))
""",
}


def _child(tree: Path, code: str) -> dict:
    res = subprocess.run([sys.executable, "-c", _PRELUDE + code], cwd=tree, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(res.stdout.strip().splitlines()[-1])


def _cli_wall(tree: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    cmd = [sys.executable, "-m", "kdvfs", "optimize", "--trace", "gpt3xl-llmc-rtx3080ti"]
    subprocess.run(cmd, cwd=tree, env=env, capture_output=True, check=True)  # bytecode cached, as installed
    t = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, capture_output=True, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the other checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", action="append", default=[], help="a measurement to leave out (repeatable)")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args()
    trees = {"base": a.base.resolve(), "this": ROOT}
    runs: dict[str, dict[str, list]] = {t: {} for t in trees}
    loads = []
    for _ in range(a.rounds):
        for name, code in SNIPPETS.items():
            if name in a.skip:
                continue
            for t, tree in trees.items():
                runs[t].setdefault(name, []).append(_child(tree, code))
                loads.append(os.getloadavg()[0])
        if "optimize_cli_wall_s" not in a.skip:
            for t, tree in trees.items():
                runs[t].setdefault("optimize_cli_wall_s", []).append({"wall": _cli_wall(tree)})
                loads.append(os.getloadavg()[0])  # (with every other measurement skipped, the only loads seen)
    best = {t: {name: {k: min(r[k] for r in rs) for k in rs[0]} for name, rs in by.items()} for t, by in runs.items()}
    doc = {"base": str(trees["base"]), "rounds": a.rounds, "load_1min_min": min(loads), "load_1min_max": max(loads),
           "cpus": os.cpu_count(), "min_over_rounds": best, "runs": runs}
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"load (1-min) {min(loads):.2f}–{max(loads):.2f} on {os.cpu_count()} CPUs; minimum over {a.rounds} rounds\n")
    print("| measurement | base | this |\n|---|---:|---:|")
    for name in best["this"]:
        for k, v in best["this"][name].items():
            print(f"| {name} {k} | {best['base'][name][k]:.4g} | {v:.4g} |")
    for t in trees:
        s = best[t].get("simulate_s")
        if s:
            print(f"\n{t}: fast path ÷ engine: no switches {s['engine-no-switches'] / s['fast-no-switches']:.0f}×, "
                  f"switching {s['engine-switching'] / s['fast-switching']:.0f}×")


if __name__ == "__main__":
    main()
