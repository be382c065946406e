"""The simulator: replays a trace under a schedule on one or several GPUs.

- ``engine`` — simpy processes: GPU, frequency controller (sync / callback / predictive switching), governor lag.
- ``fastpath`` — vectorised evaluation of the single-GPU, no-spread case; agrees with the engine.
- ``parallel`` — data and tensor parallelism with ring all-reduce collectives and per-GPU power spread.
- ``timeline`` — the engine's events (``TimelineEvent``) and their Chrome trace (Perfetto) output.
- ``evaluate`` — one policy under one switch model (``kdvfs compare``, ``whatif`` and the demo use it);
  ``compare_rows``, the rows of ``kdvfs compare``.
- ``demo`` — the demo's job (``run_demo``), returning what ``kdvfs demo`` prints and writes; ``analyze_limiter`` —
  ``kdvfs analyze``'s check under the card's limiter; ``versus_auto`` — one schedule simulated against auto.
- ``whatif`` — grids of scenarios through an executor.
- ``limiter`` — the card's power limiter in both paths (a limiter process in simpy, the same controller in a loop).
- ``limited_whatif`` — policies against auto under the limiter, before and after; ``stepcheck`` — measured steps
  against the model under the limiter; ``summaries`` — the validation summaries (``kdvfs summarize``): measurements
  beside the model and the simulator; ``h200_analyses`` — the H200 experiments' analyses (session logs, DDP runs per
  card, batch carrying, the Ray sweep, the model's fidelity) that ``scripts/`` call.
``simulate`` picks the fast path where it applies, unless told otherwise.
"""

from simulator.api import LimiterStats, SegmentResult, SimResult, build_run, scaling_report, simulate
from simulator.engine import SimConfig
from simulator.evaluate import PolicyResult, evaluate_policy
from simulator.parallel import ParallelConfig, ring_allreduce_s
from simulator.timeline import TimelineEvent, write_timeline

__all__ = [
    "LimiterStats", "ParallelConfig", "PolicyResult", "SegmentResult", "SimConfig", "SimResult", "TimelineEvent",
    "build_run", "evaluate_policy", "ring_allreduce_s", "scaling_report", "simulate", "write_timeline",
]
