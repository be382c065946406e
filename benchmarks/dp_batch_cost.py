"""What one batched DP pass costs against one plan: ``python benchmarks/dp_batch_cost.py``.

A k-ary (speculative) search over λ plans the λ of several bisection steps in one pass of ``_dp_many`` /
``_dp_predictive_many``: the next d steps can try 2^d − 1 λ, so it only wins where a pass of 3 plans costs under 2
single plans (d = 2), or one of 7 under 3 (d = 3). This prints, on the benchmark's problem (GPT-3 XL llm.c, 897
instances, RTX 3080 Ti profile, Hopper switch model), the fastest of 7 passes (CPU time, the rows measured round by
round) for B = 1, 2, 3, 4, 7, 15 sync plans and B = 1 (``_dp_predictive``), 2, 3, 4, 7 predictive plans.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
import workloads as w

from kdvfs.optimize.switchaware import (
    _dp_many,
    _dp_predictive,
    _dp_predictive_many,
    _late_fractions,
    candidate_settings,
)
from kdvfs.switching import SwitchCosts


def main(rounds: int = 7) -> None:
    pb = w.spaan_problem()
    costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
    lam = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    cand = candidate_settings(pb)
    c24 = cand[:24]
    frac = _late_fractions(pb, c24, w.HOPPER, 6)
    runs: dict[tuple[str, int], Callable[[], object]] = {}
    for b in (1, 2, 3, 4, 7, 15):
        jobs = [(lam * (1 + 0.1 * j), w.HOPPER, "sync", costs) for j in range(b)]
        runs["sync", b] = lambda jobs=jobs: _dp_many(pb, cand, jobs)
    runs["predictive", 1] = lambda: _dp_predictive(pb, c24, lam, w.HOPPER, 6, frac)
    for b in (2, 3, 4, 7):
        pjobs = [(lam * (1 + 0.1 * j), frac) for j in range(b)]
        runs["predictive", b] = lambda pjobs=pjobs: _dp_predictive_many(pb, c24, pjobs)
    best = dict.fromkeys(runs, np.inf)
    for _ in range(rounds):  # round by round, so that a change of load touches every row alike
        for key, fn in runs.items():
            t = time.process_time()
            fn()
            best[key] = min(best[key], time.process_time() - t)
    for (mech, b), sec in best.items():
        one = best[mech, 1]
        print(f"{mech:10s} B={b:2d}: {1e3 * sec:6.1f} ms  ({sec / one:.2f} × one plan, {sec / one / b:.2f} per plan)")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
