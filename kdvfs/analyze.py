"""``kdvfs analyze``: from a user's trace to an answer in one call.

For a trace (imported from ``torch.profiler``, or a kdvfs trace) and a card: the profile (from the kernel model, or a
given one), then for each tolerated slowdown (default 0, 1, 2 and 5 %):

- **ideal (free switching)** — the kernel-level global optimum when a clock switch costs nothing (the study's case);
- **naive** — that same schedule paying the card's switch latency at every switch (``kdvfs.switching``: the simulator's
  fast path), under each switch mechanism;
- **switch-aware** — the schedule planned with the card's switch model (kernel-level: what a per-kernel controller
  could do);
- **at module boundaries** — switch-aware with switches only where a training-loop runtime sees a boundary (module
  hooks, ``hw_backend.torch_runtime``): what can be applied to the live model today.

``write_report`` writes ``analysis.json``, ``report.md``, a figure, and the boundary-level schedules ready for the
runtime. Every number computed with free switching carries the words "ideal (free switching)".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.optimize import Problem, evaluate_with_switching, optimize, switch_aware
from kdvfs.profile import Profile, build_profile
from kdvfs.runtime_plan import boundary_schedule, regions_of
from kdvfs.schedule import Schedule, save_schedule
from kdvfs.switching import MECHANISMS, SwitchCosts, check_mechanism
from kdvfs.trace import Trace

__all__ = ["IDEAL", "analyze", "limiter_caution", "schedule_low_clock_note", "write_report"]

log = logging.getLogger(__name__)

IDEAL = "ideal (free switching)"
DEFAULT_SLACKS = (0.0, 1.0, 2.0, 5.0)
AUTO_BASIS = "the profile's auto: each kernel at the driver's clocks, throttled on its own"
"""What the rows' changes are against. On a card with a fitted power limiter, ``limiter_check`` rows are against auto
simulated under the limiter instead (``auto_time_s`` in each): a different, usually shorter, time (tester9, tester10)."""


def _row(policy: str, slack: float, mech: str | None, t_pct: float, e_pct: float, switches: int) -> dict[str, Any]:
    return {"slack_pct": slack, "policy": policy, "mechanism": mech, "time_change_pct": float(t_pct),
            "energy_change_pct": float(e_pct), "switches": int(switches)}


def _accepted_boundary(pb: Problem, sw: SwitchModel, mechanism: str, slack: float, costs: SwitchCosts,
                       first: Schedule, accept: Callable[[Schedule, float], bool],
                       kept: list[tuple[float, float, Schedule]]) -> tuple[Schedule, float]:
    """The boundary schedule for ``slack`` that ``accept`` takes: planned with the slack itself, else with ¾, ½, ¼ of
    it — not below what a smaller slack's accepted schedule was planned with, which is within this slack too and is
    taken instead when nothing planned here is accepted — else with none. Returns it (labelled with ``slack``) and the
    slack it was planned with."""
    if accept(first, slack):
        return first, slack
    earlier = [(p, s) for sl, p, s in kept if sl <= slack]
    floor_p, floor_s = max(earlier, key=lambda x: x[0]) if earlier else (0.0, None)
    for f in (0.75, 0.5, 0.25):
        planned = f * slack
        if planned <= floor_p:
            break
        bs = replace(boundary_schedule(pb, sw, mechanism, planned, costs), slack_pct=slack)
        if accept(bs, slack):
            return bs, planned
    if floor_s is not None:
        return replace(floor_s, slack_pct=slack), floor_p
    return replace(boundary_schedule(pb, sw, mechanism, 0.0, costs), slack_pct=slack), 0.0


def analyze(trace: Trace, spec: GpuSpec, profile: Profile | None = None, slacks: Sequence[float] = DEFAULT_SLACKS,
            mechanism: str = "predictive", switch: SwitchModel | None = None, kernel_switch_aware: bool = True,
            progress: Callable[[str, int, int], None] | None = None,
            accept: Callable[[Schedule, float], bool] | None = None) -> tuple[dict[str, Any], dict[str, Schedule]]:
    """The analysis document and the schedules it made (name → schedule); see the module docstring.

    ``accept(schedule, slack_pct)``: a further check of each module-boundary schedule (the command line simulates it
    under the card's windowed power limiter, which this package cannot import). A schedule it refuses is planned again
    with less slack (¾, ½, ¼ of it, none) and the first one accepted is kept, its row and file noting the slack it was
    planned at (``planned_slack_pct``); if none is, the one planned with no slack is kept."""
    from kdvfs.model import default_params

    check_mechanism(mechanism)
    sw = switch or spec.switch
    costs = SwitchCosts(idle_power_w=spec.idle_power_w)
    prof_src = "given"
    if profile is None:
        profile = build_profile(trace, spec, default_params(trace, spec))
        prof_src = "model"
    pb = Problem(trace, profile)
    steps = len(slacks) * (3 if kernel_switch_aware else 2)
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(what, done, steps)

    rows: list[dict[str, Any]] = []
    schedules: dict[str, Schedule] = {}
    kept: list[tuple[float, float, Schedule]] = []  # accepted boundary schedules: (slack asked, slack planned, schedule)
    low_share = 0.0
    for sl in slacks:
        ideal = optimize(pb, "waste", sl, "kernel", "global")
        low_share = max(low_share, _low_clock_share(pb, ideal, spec))
        p = ideal.predicted
        assert p is not None  # the optimisers always predict
        rows.append(_row(IDEAL, sl, None, p.time_change_pct, p.energy_change_pct, ideal.switches))
        for m in MECHANISMS:
            ev = evaluate_with_switching(pb, ideal, sw, m, costs)
            rows.append(_row("naive", sl, m, ev["time_change_pct"], ev["energy_change_pct"], ev["switches"]))
        schedules[f"schedule-ideal-slack{sl:g}.json"] = ideal
        tick(f"ideal and naive, slack {sl:g} %")
        if kernel_switch_aware:
            sa = switch_aware(pb, sw, mechanism, sl, costs)
            q = sa.predicted
            assert q is not None
            rows.append(_row("switch-aware", sl, mechanism, q.time_change_pct, q.energy_change_pct, q.switches))
            tick(f"switch-aware, slack {sl:g} %")
        bs, planned = boundary_schedule(pb, sw, mechanism, sl, costs), sl
        if accept is not None:
            bs, planned = _accepted_boundary(pb, sw, mechanism, sl, costs, bs, accept, kept)
            kept.append((sl, planned, bs))
        q = bs.predicted
        assert q is not None
        rows.append(_row("switch-aware at module boundaries", sl, mechanism, q.time_change_pct,
                         q.energy_change_pct, q.switches))
        if planned != sl:
            rows[-1]["planned_slack_pct"] = planned
        schedules[f"schedule-boundary-slack{sl:g}.json"] = bs
        tick(f"module boundaries, slack {sl:g} %")
    s = trace.summary()
    doc = {
        "trace": {"name": trace.name, "gpu_at_capture": trace.gpu, "model": trace.model, "batch_size": trace.batch_size,
                  "seq_len": trace.seq_len, "kernels": s["kernels"], "instances": s["instances"],
                  "time_s": s["total_time_s"], "notes": trace.notes,
                  "repeated_segments": [{"name": g["name"], "repeat": g["repeat"], "kernels": g["kernels"]}
                                        for g in s["segments"] if g["repeat"] > 1],
                  "runtime_regions": len(regions_of(trace))},
        "gpu": spec.name, "settings": len(profile.settings), "profile": prof_src,
        "auto": {"time_s": pb.auto_time_s, "energy_j": pb.auto_energy_j, "basis": AUTO_BASIS},
        "switch_model": {"latency_s": sw.total_s, "host_call_s": sw.host_call_s, "transition_s": sw.transition_s,
                         "source": sw.source},
        "mechanism": mechanism, "slacks_pct": list(slacks), "rows": rows,
        "low_clock_time_share": low_share,
        "note": f"'{IDEAL}' rows assume a clock switch costs nothing; the others pay the card's switch latency "
                f"({1e3 * sw.total_s:.3g} ms) as kdvfs.switching (the simulator's fast path) models it.",
    }
    return doc, schedules


def low_clock_note(doc: dict, subject: str = "the free-switching schedules run") -> str:
    """The caution that the free-switching schedules spend much of the iteration below half the boost clock, where a
    model profile extrapolates ("" when they do not, or the profile was measured). Printed by `analyze` as well as
    written to report.md: on the Falcon step 54 % of the time was there, and only the report said so (session 8)."""
    if doc.get("profile") != "model" or doc.get("low_clock_time_share", 0.0) <= 0.05:
        return ""
    return (f"Caution: {subject} {100 * doc['low_clock_time_share']:.0f} % of the "
            "iteration's time below half the boost clock. The model there is an extrapolation: a card fitted to "
            "observe-only data (the H200) never ran a kernel at such a clock, and a kernel whose time the model "
            "finds independent of the core clock is sent to the lowest one. Measure a few of those kernels "
            "(`kdvfs sweep`) before trusting that part of the saving.")


def switch_queue_note(doc: dict[str, Any]) -> str | None:
    """A caution for predictive rows with more switches than one host call after another fit in the iteration.

    The switch model prices each predictive switch on its own (late by at most its latency less the time since the
    previous one); it does not queue them, so such a row's cost is a floor, not a prediction."""
    host = doc["switch_model"].get("host_call_s") or 0.0
    t = doc["auto"]["time_s"]
    over = [r for r in doc["rows"] if r["mechanism"] == "predictive" and host > 0 and r["switches"] * host > t]
    if not over:
        return None
    worst = max(over, key=lambda r: r["switches"])
    return (f"Caution: {len(over)} predictive row(s) switch more often than the host can issue switches one after "
            f"another (up to {worst['switches']} switches × {1e3 * host:.3g} ms host call against a "
            f"{1e3 * t:.4g} ms iteration). The switch model does not queue predictive switches, so their cost there is a "
            "lower bound.")


def coarse_boundaries_note(doc: dict[str, Any]) -> str | None:
    """A warning when the trace gives the runtime only the step and the optimizer to switch between (no module
    annotations: the profiler ran without ``with_stack``), so the module-boundary rows can switch only there."""
    n = doc["trace"].get("runtime_regions")
    if n is None or n > 2:
        return None
    return (f"Module boundaries: the trace has {n} runtime region(s) (the step, the optimizer) and no module "
            "annotations, so the module-boundary schedules can switch only there. Record with "
            "`with_modules=True, with_stack=True` (README, step 1; `kdvfs measure-steps` marks its models' modules "
            "since session 11) to let them switch at every layer.")


def schedule_low_clock_note(pb: Problem, sched: Schedule | Iterable[Schedule], spec: GpuSpec,
                            subject: str = "this schedule runs") -> str:
    """``low_clock_note`` for one schedule, or the largest share among several: the share of the iteration's auto
    time a schedule runs below half the boost clock at settings the profile took from the model (measured rows are
    not an extrapolation). ``kdvfs optimize``, ``compare`` and ``frontier`` print it (tester8–10: only `analyze`
    warned, then only `analyze` and `optimize`)."""
    scheds = [sched] if isinstance(sched, Schedule) else sched
    share = max((_low_clock_share(pb, s, spec, model_only=True) for s in scheds), default=0.0)
    return low_clock_note({"profile": "model", "low_clock_time_share": share}, subject)


def _low_clock_share(pb: Problem, sched: Schedule, spec: GpuSpec, model_only: bool = False) -> float:
    """Share of the iteration's auto time that ``sched`` runs below half the card's boost clock (``model_only``: at
    settings whose profile entry came from the model)."""
    s = pb.instance_setting_index(sched)
    inst = pb.trace.instances()
    core = np.array([c for c, _ in pb.profile.settings])[s]
    low = (core != 0) & (core < 0.5 * spec.boost_core_mhz)
    if model_only:
        low &= pb.profile.source[inst, s] == "model"
    t = pb.T[inst, pb.auto]
    return float(t[low].sum() / t.sum()) if t.sum() > 0 else 0.0


def write_report(doc: dict[str, Any], schedules: dict[str, Schedule], out: str | Path) -> dict[str, Path]:
    """``analysis.json``, ``report.md``, ``analysis.png`` and the schedules, in ``out`` (created)."""
    from kdvfs.console import to_jsonable

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "analysis.json", "report": out / "report.md", "figure": out / "analysis.png"}
    paths["json"].write_text(json.dumps(to_jsonable(doc), indent=1) + "\n")
    for name, s in schedules.items():
        save_schedule(s, out / name)
    _figure(doc, paths["figure"])
    paths["report"].write_text(report_markdown(doc, sorted(schedules)))
    return paths


def _best(doc: dict[str, Any], policy: str, slack: float, mech: str | None) -> dict[str, Any] | None:
    for r in doc["rows"]:
        if r["policy"] == policy and r["slack_pct"] == slack and r["mechanism"] == mech:
            return r
    return None


def _pct(v: float, digits: int = 1) -> str:
    """``+1.2 %``; values that round to zero print as ``+0.0 %`` (never ``-0.0 %``)."""
    v = 0.0 if abs(v) < 0.5 * 10 ** -digits else v
    return f"{v:+.{digits}f} %"


def report_markdown(doc: dict[str, Any], schedule_files: Sequence[str] = ()) -> str:
    """The short Markdown report (every number from ``doc``)."""
    t = doc["trace"]
    sw = doc["switch_model"]
    mech = doc["mechanism"]
    lines = [f"# kdvfs analysis: {t['name']} on {doc['gpu']}", ""]
    facts = [f"{t['instances']} kernel instances per iteration ({t['kernels']} distinct kernels), "
             f"{1e3 * t['time_s']:.4g} ms at capture"]
    if t["gpu_at_capture"]:
        facts.append(f"captured on {t['gpu_at_capture']}")
    if t["batch_size"] is not None and t["seq_len"] is not None:
        facts.append(f"batch {t['batch_size']} × sequence {t['seq_len']}")
    lines += ["- " + "; ".join(facts) + "."]
    blocks = [g for g in t["repeated_segments"] if g["kernels"] > 1]
    runs = [g for g in t["repeated_segments"] if g["kernels"] == 1]
    if blocks or runs:
        parts = [f"{g['name']} × {g['repeat']} ({g['kernels']} kernels)" for g in blocks]
        if runs:
            parts.append(f"{len(runs)} run(s) of one kernel launched back to back ({sum(g['repeat'] for g in runs)} "
                         "launches)")
        lines.append("- Repeated structure: " + ", ".join(parts) + ".")
    coarse = coarse_boundaries_note(doc)
    if coarse:
        lines.append(f"- {coarse}")
    ca = doc.get("card_anchor")
    if ca:  # `analyze --anchors`: the kernel model is the bundled fit adapted to the user's card
        lines.append(f"- Card: the bundled fit adapted by `kdvfs card-anchor` to {ca['source']} (static "
                     f"{ca['static_w']:+.1f} W, core dynamic power × {ca['core_scale']:.3f}, memory-traffic power × "
                     f"{ca['mem_scale']:.3f}, {ca['ambient_shift_c']:+.1f} °C ambient).")
    lines += [f"- Profile: {'the kernel model of the card (no measurement)' if doc['profile'] == 'model' else 'given'}, "
              f"{doc['settings']} clock settings.",
              f"- Switch latency of {doc['gpu']}: {1e3 * sw['latency_s']:.3g} ms ({sw['source']}); mechanism for the "
              f"switch-aware plans: {mech}.", ""]
    lines += ["| slack | policy | time | energy | switches / iteration |", "|---:|---|---:|---:|---:|"]
    for r in doc["rows"]:
        if r["policy"] == "naive" and r["mechanism"] != mech:
            continue
        pol = r["policy"] + (f" ({r['mechanism']})" if r["policy"] == "naive" else "")
        lines.append(f"| {r['slack_pct']:g} % | {pol} | {_pct(r['time_change_pct'], 2)} | "
                     f"{_pct(r['energy_change_pct'], 2)} | {r['switches']} |")
    lines.append("")
    kept = []
    for sl in doc["slacks_pct"]:
        ideal = _best(doc, IDEAL, sl, None)
        bnd = _best(doc, "switch-aware at module boundaries", sl, mech)
        if ideal and bnd:
            kept.append(f"slack {sl:g} %: {_pct(ideal['energy_change_pct'])} {IDEAL} → "
                        f"{_pct(bnd['energy_change_pct'])} at module boundaries ({bnd['switches']} switches)")
    if kept:
        lines.append("Energy per iteration, what per-kernel clocks would give against what survives this card's switch "
                     "latency when switching where a training-loop runtime can: " + "; ".join(kept) + ".")
    queue = switch_queue_note(doc)
    if queue:
        lines += ["", queue]
    low = low_clock_note(doc)
    if low:
        lines += ["", low]
    if doc.get("limiter_check"):
        lines += ["", limiter_caution(doc["limiter_check"], doc["gpu"])]
    lines += ["", "Time and energy are relative to the driver's own clocks (auto: each kernel throttled on its own, "
              f"{1e3 * doc['auto']['time_s']:.4g} ms), per iteration, from the profile. "
              f"'{IDEAL}' assumes a switch costs nothing. 'naive' pays every switch of that schedule; the naive rows "
              "of the other mechanisms are in analysis.json.", ""]
    if schedule_files:
        lines += ["Files: `analysis.json`, `analysis.png`, " + ", ".join(f"`{f}`" for f in schedule_files) + ".",
                  "Apply a `schedule-boundary-*` file in the training loop with `hw_backend.torch_runtime.KdvfsRuntime` "
                  "(README, step 4).", ""]
    return "\n".join(lines)


def limiter_caution(rows: list[dict[str, Any]], gpu: str) -> str:
    """One paragraph: the boundary schedules under the card's fitted power limiter (rows from the command line, which
    may run the simulator), beside the slack they were planned for without it."""
    over = [r for r in rows if r["time_change_pct"] > r["slack_pct"] + 0.05]
    parts = "; ".join(f"slack {r['slack_pct']:g} %: {_pct(r['time_change_pct'], 2)} time, "
                      f"{_pct(r['energy_change_pct'])} energy"
                      + (f" (planned with {r['planned_slack_pct']:g} % slack to stay within it)"
                         if r.get("planned_slack_pct") is not None else "") for r in rows)
    t = rows[0].get("auto_time_s") if rows else None
    base = f"against auto under it ({1e3 * t:.4g} ms, not the table's auto)" if t else "against auto under it"
    head = (f"Caution: these plans throttle each kernel on its own. {gpu} has a fitted windowed power limiter "
            f"(`kdvfs simulate` uses it by default); under it, {base}, the module-boundary schedules "
            "give ") if over else (
            f"Under {gpu}'s fitted windowed power limiter, {base}, the module-boundary schedules give ")
    tail = (" (over their slack). `kdvfs compare --trace T --gpu G --slack S` shows plans chosen under the limiter "
            "(limiter-aware rows); `kdvfs simulate --limiter off` reproduces the table above.") if over else "."
    return head + parts + tail


def _figure(doc: dict[str, Any], path: Path) -> None:
    from kdvfs.plots import _plt

    plt = _plt()
    mech = doc["mechanism"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for pol, m, style in ((IDEAL, None, "o-"), ("naive", mech, "x--"), ("switch-aware", mech, "s-"),
                          ("switch-aware at module boundaries", mech, "d-")):
        pts = [(r["slack_pct"], r["energy_change_pct"], r["time_change_pct"]) for r in doc["rows"]
               if r["policy"] == pol and r["mechanism"] == m]
        if not pts:
            continue
        label = pol if m is None else f"{pol} ({m})"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        bx.plot([p[0] for p in pts], [p[2] for p in pts], style, label=label)
    ax.set_xlabel("tolerated slowdown (%)")
    ax.set_ylabel("energy change vs auto (%)")
    bx.set_xlabel("tolerated slowdown (%)")
    bx.set_ylabel("time change vs auto (%)")
    # keep the axes on the data that matters: a naive schedule can lose by orders of magnitude
    good = [r for r in doc["rows"] if r["policy"] != "naive"]
    if good:
        lo = min(r["energy_change_pct"] for r in good)
        ax.set_ylim(min(lo * 1.15, -1), max(5.0, -0.1 * lo))
        hi = max(r["time_change_pct"] for r in good)
        top = max(hi * 1.3, 2)
        bx.set_ylim(-1, top)
        naive = [r["time_change_pct"] for r in doc["rows"] if r["policy"] == "naive" and r["mechanism"] == mech]
        if naive and max(naive) > top:
            bx.text(0.02, 0.97, f"naive ({mech}): {min(naive):+.3g} to {max(naive):+.3g} % time, off this scale",
                    transform=bx.transAxes, va="top", fontsize=8, color="C1")
    for a in (ax, bx):
        a.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(f"{doc['trace']['name']} on {doc['gpu']} (switch {1e3 * doc['switch_model']['latency_s']:.3g} ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
