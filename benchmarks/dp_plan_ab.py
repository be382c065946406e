"""One DP plan of this checkout beside another checkout's, in one process: ``python benchmarks/dp_plan_ab.py BASE``.

BASE is a checkout of another commit (``git archive COMMIT | tar -x -C /tmp/base``). Its
``kdvfs/optimize/switchaware.py`` is imported beside this one (everything else is this checkout's), both plan the
benchmark's problem (GPT-3 XL llm.c, 897 instances, RTX 3080 Ti profile, Hopper switch model, λ = the search's
first) and must return the same plan; then they alternate for 15 rounds and the minimum and median CPU time of one
plan are printed, sync (48 settings) and predictive (24 settings × 6 run ages; each side given what it takes from
the search: the late fractions, and here also ``_late_steps`` of them where the module has it).
``python benchmarks/dp_plan_ab.py BASE REPS`` does the same on the trace repeated REPS times (5 rounds).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import numpy as np
import workloads as w

import kdvfs.optimize.switchaware as sa
from kdvfs.switching import SwitchCosts


def _exec(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod


def _load(base: str):
    """BASE's ``switchaware``, and its ``switchaware_predictive`` where it has one (split off in session 11): the base
    module is run with BASE's predictive module standing in for this checkout's, so that it imports its own."""
    pred = os.path.join(base, "kdvfs", "optimize", "switchaware_predictive.py")
    name = "kdvfs.optimize.switchaware_predictive"
    ours = sys.modules[name]
    try:
        if os.path.exists(pred):
            sys.modules[name] = _exec("kdvfs.optimize._switchaware_predictive_base", pred)
        return _exec("kdvfs.optimize._switchaware_base", os.path.join(base, "kdvfs", "optimize", "switchaware.py"))
    finally:
        sys.modules[name] = ours


def _predictive(mod, pb, cand, lam, fr):
    if hasattr(mod, "_late_steps"):  # (its late fractions only, before session 12; with the instances since)
        try:
            steps = mod._late_steps(fr, pb.trace.instances())
        except TypeError:
            steps = mod._late_steps(fr)
        return lambda: mod._dp_predictive(pb, cand, lam, w.HOPPER, 6, fr, steps)
    return lambda: mod._dp_predictive(pb, cand, lam, w.HOPPER, 6, fr)


def main(base: str, rounds: int = 15, reps: int = 1) -> None:
    other = _load(base)
    pb = w.spaan_problem()
    if reps > 1:  # the trace repeated, as the benchmarks' linearity check has it (its kernels renamed per repetition)
        from test_benchmarks import _cold_problem

        pb = _cold_problem(reps)
    costs = SwitchCosts.for_gpu(w.get_gpu("rtx3080ti"))
    lam = float(np.median(pb.E[:, pb.auto] / pb.T[:, pb.auto]))
    cand = sa.candidate_settings(pb)
    fr = sa._late_fractions(pb, cand[:24], w.HOPPER, 6)
    cases = {
        "sync": {"base": lambda: other._dp(pb, cand, lam, w.HOPPER, "sync", costs),
                 "this": lambda: sa._dp(pb, cand, lam, w.HOPPER, "sync", costs)},
        "predictive": {"base": _predictive(other, pb, cand[:24], lam, fr),
                       "this": _predictive(sa, pb, cand[:24], lam, fr)},
    }
    for mech, fns in cases.items():
        assert np.array_equal(fns["base"](), fns["this"]()), f"{mech}: the two checkouts plan differently"
        spent: dict[str, list[float]] = {"base": [], "this": []}
        for _ in range(rounds):
            for side, fn in fns.items():
                t = time.process_time()
                fn()
                spent[side].append(time.process_time() - t)
        print(f"{mech}: one plan, " + "; ".join(
            f"{side} min {1e3 * min(v):.2f} ms median {1e3 * sorted(v)[len(v) // 2]:.2f} ms" for side, v in spent.items())
            + f" (the same plan; {rounds} rounds alternating; {len(pb.trace.instances())} instances; "
              f"load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: python benchmarks/dp_plan_ab.py BASE_CHECKOUT [REPS]")
    reps = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    main(sys.argv[1], 15 if reps == 1 else 5, reps)
