"""The demo's main job on the bundled default trace (``kdvfs demo`` prints and writes what this returns).

The study's Table 2 from the calibrated model (free switching), the relaxed-waste frontiers, and what survives each
GPU generation's switch latency: every policy under each generation's preset switch model and mechanism, plus a
latency sweep with the Hopper preset's host/transition split for the figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kdvfs.bundled import DEFAULT_TRACE
from kdvfs.executor import Executor
from kdvfs.gpus import get_gpu
from kdvfs.modes import Mechanism, Policy
from kdvfs.optimize import frontier
from kdvfs.reproduce import reproduce_spaan2026, study_problem
from simulator.whatif import Scenario, default_latencies, grid, run_grid

__all__ = ["DEMO_CARD", "GENERATIONS", "DemoResult", "SurvivalRow", "demo_grid", "generation_latencies_s", "run_demo",
           "survival_rows"]

GENERATIONS = {"Ampere": "rtx3080ti", "Hopper": "h200", "Blackwell": "b200", "IVR": "ivr"}
"""Switch latencies of the generations the demo and the what-if figure mark (each preset's own switch model)."""

DEMO_CARD = "rtx3080ti"
"""The card of the bundled default trace and its calibrated profile."""

_MECHANISMS = Mechanism.values()  # sync, callback, predictive: the order of the demo's rows


def generation_latencies_s() -> dict[str, float]:
    """Each generation's preset switch latency (host call + transition), for the what-if figure's marks."""
    return {g: get_gpu(p).switch.total_s for g, p in GENERATIONS.items()}


def demo_grid() -> tuple[list[Scenario], list[Scenario]]:
    """The demo's scenarios: (every policy under each generation's preset at slack 0, with switch-aware also at 1 %;
    the latency sweep of the figure with the Hopper preset's host/transition split)."""
    policies = list(Policy.values())
    scen: list[Scenario] = []
    for preset in GENERATIONS.values():
        scen += grid([preset], [None], list(_MECHANISMS), policies, [0.0])
        scen += grid([preset], [None], ["sync", "predictive"], ["switch-aware"], [1.0])
    sweep = grid(["h200"], default_latencies(13), ["sync", "predictive"], policies, [0.0])
    return scen, sweep


@dataclass(frozen=True, slots=True)
class SurvivalRow:
    """One generation and mechanism of the demo's second table: naive and switch-aware at slack 0.

    Attributes:
        generation: the GPU generation (a key of ``GENERATIONS``).
        switch_latency_s: its preset's switch latency (host call + transition).
        mechanism: how switches are issued.
        naive_time_change_pct, naive_energy_change_pct: the kernel-level ideal schedule with its switches charged.
        aware_time_change_pct, aware_energy_change_pct: the switch-aware schedule.
        aware_switches: the switch-aware schedule's switches per iteration.
        kept_of_ideal_pct: the switch-aware energy saving as a share of the free-switching ideal's, percent.
    """

    generation: str
    switch_latency_s: float
    mechanism: str
    naive_time_change_pct: float
    naive_energy_change_pct: float
    aware_time_change_pct: float
    aware_energy_change_pct: float
    aware_switches: int
    kept_of_ideal_pct: float


def survival_rows(whatif_rows: list[dict]) -> tuple[dict, list[SurvivalRow]]:
    """The free-switching ideal row (the first ``ideal`` row) and, per generation and mechanism, what naive and
    switch-aware keep of it at slack 0."""
    ideal = next(r for r in whatif_rows if r["policy"] == "ideal")
    out = []
    for gen, preset in GENERATIONS.items():
        for mech in _MECHANISMS:
            sel = {r["policy"]: r for r in whatif_rows
                   if r["gpu"] == preset and r["mechanism"] == mech and r["slack_pct"] == 0}
            nv, sa = sel["naive"], sel["switch-aware"]
            out.append(SurvivalRow(gen, nv["switch_latency_s"], mech, nv["time_change_pct"], nv["energy_change_pct"],
                                   sa["time_change_pct"], sa["energy_change_pct"], sa["switches"],
                                   100 * sa["energy_change_pct"] / ideal["energy_change_pct"]))
    return ideal, out


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo computed; the command line prints it and writes its files.

    Attributes:
        table2: the study's Table 2 rows from the calibrated model (``kdvfs.reproduce.reproduce_spaan2026``).
        frontiers: relaxed-waste frontier points by label (``kernel-level local``/``global``), slack 0–20 %.
        whatif: one row per generation scenario (``demo_grid``'s first list), with its ``generation``.
        latency_sweep: one row per latency-sweep scenario.
        ideal: the free-switching ideal's what-if row.
        survival: per generation and mechanism, what naive and switch-aware keep (``survival_rows``).
    """

    table2: list[dict]
    frontiers: dict[str, list[dict]]
    whatif: list[dict]
    latency_sweep: list[dict]
    ideal: dict
    survival: list[SurvivalRow]


def run_demo(executor: Executor, progress: Callable[[int], None] | None = None) -> DemoResult:
    """Run the demo's job: ``executor`` runs the what-if grid, ``progress`` is told each finished batch of
    scenarios (``sum(map(len, demo_grid()))`` in all)."""
    table2 = reproduce_spaan2026()
    pb = study_problem()
    frontiers = {f"kernel-level {sc}": frontier(pb, sc, 0.0, 20.0, 1.0) for sc in ("local", "global")}
    scen, sweep = demo_grid()
    rows = run_grid(DEFAULT_TRACE, DEFAULT_TRACE, DEMO_CARD, scen + sweep, executor, progress=progress)
    wrows, srows = rows[: len(scen)], rows[len(scen):]
    gen_of = {p: g for g, p in GENERATIONS.items()}
    for r in wrows:
        r["generation"] = gen_of[r["gpu"]]
    ideal, surv = survival_rows(wrows)
    return DemoResult(table2, frontiers, wrows, srows, ideal, surv)
