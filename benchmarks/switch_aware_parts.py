"""Where a cold switch-aware call spends its CPU time: ``python benchmarks/switch_aware_parts.py [sync callback
predictive]``.

Wraps the planner's parts (the DP, the portfolio's tries, the exact evaluations, …) with ``time.process_time`` and
prints, per mechanism, the fastest of 7 cold calls (nothing memoised, hull cache emptied, as
``test_switch_aware``) split into them; "rest" is what no wrapped part covers.
"""

from __future__ import annotations

import sys
import time

import workloads as w

import kdvfs.optimize.switchaware as sa
from kdvfs.optimize import Problem, knapsack, switch_aware
from kdvfs.switching import SwitchCosts

PARTS = ("_dp", "_dp_many", "_dp_predictive", "_waste_setting_index", "_evaluate_sidx", "candidate_settings",
         "_late_fractions", "_schedule_from_settings")


def _wrapped(spent: dict[str, float]) -> None:
    for name in PARTS:
        fn = getattr(sa, name)

        def timed(*a, _fn=fn, _name=name, **k):
            t = time.process_time()
            try:
                return _fn(*a, **k)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - t

        setattr(sa, name, timed)


def _cold() -> Problem:
    knapsack._HULL_CACHE.clear()
    pb = w.spaan_problem()
    return Problem(pb.trace, pb.profile)


def main(mechanisms: list[str]) -> None:
    costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
    spent: dict[str, float] = {}
    _wrapped(spent)
    for mech in mechanisms:
        switch_aware(_cold(), w.HOPPER, mech, 0.0, costs)  # imports and warms up
        best: tuple[float, dict[str, float]] | None = None
        for _ in range(7):
            spent.clear()
            pb = _cold()
            t = time.process_time()
            switch_aware(pb, w.HOPPER, mech, 0.0, costs)
            total = time.process_time() - t
            if best is None or total < best[0]:
                best = (total, dict(spent))
        assert best is not None
        total, parts = best
        # _waste_setting_index calls nothing else wrapped; the others neither: the parts do not overlap
        rest = total - sum(parts.values())
        print(f"{mech}: total {1e3 * total:.1f} ms; " + ", ".join(f"{k} {1e3 * v:.1f}" for k, v in parts.items())
              + f", rest {1e3 * rest:.1f} (ms; load {__import__('os').getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["sync", "callback", "predictive"])
