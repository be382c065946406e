"""Benchmarks, measured side by side in one run (not part of the test suite's pass/fail).

    python benchmarks/bench.py [--quick]

1. Fast global solver vs the MILP (HiGHS) on the unrolled GPT-3 XL iteration (897 instances) over the full RTX 3080 Ti
   grid (655 settings): time of each and the fast solver's energy gap to the MILP optimum (targets: ≤ 0.5 s, ≤ 0.01 %).
2. Switch-aware scheduling of the same under the Hopper switch model (target ≤ 5 s).
3. Simulator engine (kernel instances per second; target ≥ 200 000) and the fast path beside it (target ≥ 100×),
   on the H200 bf16 trace repeated over 20 iterations, for a schedule without switches and one switching at most
   kernel boundaries.
4. A 1 000-scenario what-if grid on the local process pool (target < 2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kdvfs.bundled import load_trace_by_name, resolve_profile_path  # noqa: E402
from kdvfs.gpus import get_gpu  # noqa: E402
from kdvfs.optimize import Problem, switch_aware  # noqa: E402
from kdvfs.optimize.knapsack import solve_fast, solve_milp  # noqa: E402
from kdvfs.profile import load_profile  # noqa: E402
from kdvfs.switching import SwitchCosts  # noqa: E402
from kdvfs.trace import Trace  # noqa: E402


def best_of(fn, n=3):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a 200-scenario grid instead of 1 000")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    tr = load_trace_by_name("gpt3xl-llmc-rtx3080ti")
    pb = Problem(tr, load_profile(resolve_profile_path("gpt3xl-llmc-rtx3080ti")))
    B = pb.budget(0.0)
    tf, fast = best_of(lambda: solve_fast(pb.T, pb.E, pb.r, B))
    tm, milp = best_of(lambda: solve_milp(pb.T, pb.E, pb.r, B), 1)
    ef, em = pb.evaluate(fast)[1], pb.evaluate(milp)[1]
    print(f"[1] global solver, {len(tr.instances())} instances × {len(pb.profile.settings)} settings: fast {tf:.4f} s, "
          f"MILP {tm:.3f} s ({tm / tf:.0f}× slower); fast energy {ef:.4f} J vs MILP {em:.4f} J: gap "
          f"{100 * (ef / em - 1):+.5f} %  [targets ≤ 0.5 s, ≤ 0.01 %]")
    sw = dataclasses.replace(get_gpu("h200").switch, spread=0.0)
    ts, sa = best_of(lambda: switch_aware(pb, sw, "sync", 0.0), 1)
    print(f"[2] switch-aware (Hopper, sync): {ts:.3f} s → {sa.predicted['energy_change_pct']:+.2f} % energy, "
          f"{sa.predicted['time_change_pct']:+.3f} % time  [target ≤ 5 s]")
    tp, sp = best_of(lambda: switch_aware(pb, sw, "predictive", 0.0), 1)
    print(f"[2] switch-aware (Hopper, predictive): {tp:.3f} s → {sp.predicted['energy_change_pct']:+.2f} % energy, "
          f"{sp.predicted['time_change_pct']:+.3f} % time  [target ≤ 5 s]")

    from simulator.api import build_run
    from simulator.engine import SimConfig, run_single
    from simulator.fastpath import fast_single

    h = load_trace_by_name("gpt3xl-torch-h200-bf16")
    hp = load_profile(resolve_profile_path("gpt3xl-torch-h200-bf16")).for_trace(h)
    reps = 20
    big = Trace("bench", tuple(dataclasses.replace(s, name=f"{s.name}_{i}") for i in range(reps) for s in h.segments))
    from kdvfs.profile import Profile

    keys = big.kernel_keys
    bp = Profile(keys, hp.settings, np.tile(hp.time_s, (reps, 1)), np.tile(hp.power_w, (reps, 1)),
                 np.tile(hp.source, (reps, 1)), hp.gpu, "bench")
    n = len(big.instances())
    from kdvfs.schedule import Schedule

    rng = np.random.default_rng(0)
    cores = np.array(get_gpu("h200").core_clocks_mhz)
    for label, core in (("no switches", np.zeros(n, int)), ("switch at ~90 % of boundaries", rng.choice(cores[::10], n))):
        mem = np.where(core == 0, 0, 3201)
        sched = Schedule("bench", "h200", core, mem)
        run = build_run(big, bp, sched, get_gpu("h200"))
        cfg = SimConfig("sync", sw, SwitchCosts())
        te, re_ = best_of(functools.partial(run_single, run, cfg), 3)
        tfp, rf = best_of(functools.partial(fast_single, run, cfg), 20)
        assert abs(re_["energy_j"] / rf["energy_j"] - 1) < 1e-9
        print(f"[3] {n} instances, {label} ({re_['switches']} switches): engine {n / te:,.0f} instances/s, "
              f"fast path {n / tfp:,.0f} instances/s = {te / tfp:.0f}× the engine  [targets ≥ 200 000/s, ≥ 100×]")

    from kdvfs.executor import make_executor
    from simulator.whatif import default_latencies, grid, run_grid

    lats = default_latencies(25 if a.quick else 25)
    presets = ["rtx3080ti", "h200"] if a.quick else ["rtx3080ti", "h200", "b200", "ivr"]
    sc = grid(presets, lats, ["sync", "callback", "predictive"][: 1 if a.quick else 2],
              ["auto", "pass", "ideal", "naive", "switch-aware"], [0.0])
    sc = sc[:200] if a.quick else sc[:1000]
    ex = make_executor("local")
    t0 = time.perf_counter()
    rows = run_grid("gpt3xl-llmc-rtx3080ti", "gpt3xl-llmc-rtx3080ti", "rtx3080ti", sc, ex)
    dt = time.perf_counter() - t0
    ex.close()
    print(f"[4] what-if grid: {len(rows)} scenarios in {dt:.1f} s on {ex.workers if hasattr(ex, 'workers') else 1} "
          f"workers  [target 1 000 in < 120 s on 2 cores]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
