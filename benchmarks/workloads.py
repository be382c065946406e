"""Inputs the benchmarks share: the bundled problems, and the H200 trace repeated into a long run.

Also runnable as ``python benchmarks/workloads.py memory engine|fast REPS``: simulates the repeated H200 trace once
and prints the process's peak resident memory in MB (the memory benchmark runs it in a fresh process).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kdvfs.bundled import load_trace_by_name, resolve_profile_path
from kdvfs.gpus import get_gpu
from kdvfs.optimize import Problem
from kdvfs.profile import Profile, load_profile
from kdvfs.schedule import Schedule
from kdvfs.trace import Trace

SPAAN = "gpt3xl-llmc-rtx3080ti"
H200 = "gpt3xl-torch-h200-bf16"
HOPPER = dataclasses.replace(get_gpu("h200").switch, spread=0.0)


@functools.cache
def spaan_problem() -> Problem:
    return Problem(load_trace_by_name(SPAAN), load_profile(resolve_profile_path(SPAAN)))


@functools.cache
def h200_profile() -> tuple[Trace, Profile]:
    t = load_trace_by_name(H200)
    return t, load_profile(resolve_profile_path(H200)).for_trace(t)


def repeated_h200(reps: int, switching: bool, seed: int = 0) -> tuple[Trace, Profile, Schedule]:
    """The H200 bf16 trace repeated ``reps`` times as distinct segments (2 336 instances each), its profile tiled,
    and a schedule that never switches or switches at ~90 % of kernel boundaries."""
    h, hp = h200_profile()
    big = Trace("bench", tuple(dataclasses.replace(s, name=f"{s.name}_{i}") for i in range(reps) for s in h.segments))
    bp = Profile(big.kernel_keys, hp.settings, np.tile(hp.time_s, (reps, 1)), np.tile(hp.power_w, (reps, 1)),
                 np.tile(hp.source, (reps, 1)), hp.gpu, "bench")
    n = len(big.instances())
    if switching:
        cores = np.array(get_gpu("h200").core_clocks_mhz)
        core = np.random.default_rng(seed).choice(cores[::10], n)
    else:
        core = np.zeros(n, dtype=np.int64)
    mem = np.where(core == 0, 0, 3201)
    return big, bp, Schedule("bench", "h200", core, mem)


def _memory(path: str, reps: int) -> None:
    import resource

    from kdvfs.switching import SwitchCosts
    from simulator.api import simulate
    from simulator.engine import SimConfig

    big, bp, sched = repeated_h200(reps, switching=True)
    spec = get_gpu("h200")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r = simulate(big, bp, sched, spec, SimConfig("sync", HOPPER, SwitchCosts.for_gpu(spec)), path=path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{peak:.1f} {base:.1f} {len(big.instances())} {r.switches}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "memory":
        _memory(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit("usage: python benchmarks/workloads.py memory engine|fast REPS")
