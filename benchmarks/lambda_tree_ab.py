"""A/B of the speculative λ search (``kdvfs/optimize/lamsearch.py``): cold ``switch_aware`` with ``_TREE_JOBS`` (and ``_TREE_JOBS_PREDICTIVE``) 1
(the plain bisection), 3 and 7 (two and three steps per DP), alternating, 7 rounds, CPU time:
``python benchmarks/lambda_tree_ab.py sync``."""

from __future__ import annotations

import os
import sys
import time

import workloads as w

import kdvfs.optimize.switchaware as sa
from kdvfs.optimize import Problem, knapsack, switch_aware
from kdvfs.switching import SwitchCosts


def _cold() -> Problem:
    knapsack._HULL_CACHE.clear()
    pb = w.spaan_problem()
    return Problem(pb.trace, pb.profile)


def main(mech: str) -> None:
    costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
    res: dict[int, list[float]] = {}
    for _ in range(7):
        for jobs in (1, 3, 7):
            sa._TREE_JOBS_PREDICTIVE = jobs
            sa._TREE_JOBS = jobs
            pb = _cold()
            t = time.process_time()
            switch_aware(pb, w.HOPPER, mech, 0.0, costs)
            res.setdefault(jobs, []).append(time.process_time() - t)
    for jobs, v in res.items():
        print(f"{mech} tree jobs {jobs}: min {1e3 * min(v):.1f} median {1e3 * sorted(v)[3]:.1f} ms")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sync")
