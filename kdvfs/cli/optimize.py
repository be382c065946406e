"""Verbs ``optimize``, ``frontier``, ``reproduce`` and ``compare``."""

from __future__ import annotations

import sys

from kdvfs.cli.common import (
    SETTINGS_HELP,
    add_limiter_arg,
    limiter_of,
    low_clock_caution,
    out,
    problem,
    signed_pct,
    switch_model,
    write_csv,
)
from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["print_table2", "register"]

def cmd_optimize(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.optimize import optimize, switch_aware
    from kdvfs.schedule import save_schedule
    from kdvfs.switching import SwitchCosts

    if a.output:
        from kdvfs.cli.characterize import _refuse_foreign
        from kdvfs.fileio import check_output_path
        from kdvfs.schedule import FORMAT as SCHEDULE_FORMAT

        check_output_path(a.output, "schedule output")
        # `optimize -o my.profile.csv.gz` replaced the profile with a schedule, exit 0: only a schedule is replaced
        _refuse_foreign(a.output, SCHEDULE_FORMAT, "schedule output", "a kdvfs schedule", getattr(a, "force", False))
    pb = problem(a)
    lim = None
    if a.limiter != "off":
        from kdvfs.cli.anchor import profile_card

        spec, _ = profile_card(get_gpu(a.gpu or pb.profile.gpu or "rtx3080ti"), pb.profile, f"--profile {a.profile!r}")
        lim = limiter_of(a, spec, can=not a.switch_aware and a.objective == "waste" and a.scope == "global",
                         why="choosing under the limiter is done for the global waste objective, not switch-aware")
    if lim is not None:  # chosen under the card's power limiter (its steady state)
        from kdvfs.limiter import limiter_params
        from kdvfs.optimize.limited import optimize_limited

        s = optimize_limited(pb, spec, limiter_params(pb.trace, spec, lim), lim, a.slack, a.granularity).schedule
    elif a.switch_aware:
        card = a.gpu or pb.profile.gpu
        sw = switch_model(a, card)
        if not card:
            raise InputError("--switch-aware needs the card (its idle power prices the stalls): give --gpu NAME")
        from kdvfs.cli.anchor import profile_card

        # the stalls at the idle power of the card the profile was built for (profile build --anchors)
        s = switch_aware(pb, sw, a.mechanism, a.slack,
                         SwitchCosts.for_gpu(profile_card(get_gpu(card), pb.profile, f"--profile {a.profile!r}",
                                                         say=a.limiter == "off")[0]))
    else:
        s = optimize(pb, a.objective, a.slack, a.granularity, a.scope, a.solver)
    if a.output:
        save_schedule(s, a.output)
    d = s.to_dict()
    d.pop("runs")
    d["predicted_basis"] = "with switch costs" if a.switch_aware else "ideal (free switching)"
    from kdvfs.analyze import AUTO_BASIS

    d["auto_basis"] = AUTO_LIMITED if lim is not None else AUTO_BASIS
    if a.json:
        print_json(dict(d, output=a.output))
        return 0
    p = s.predicted
    assert p is not None  # the optimisers always predict
    gap = f", gap to the proven bound {s.gap_pct:.4f} %" if s.gap_pct is not None else ""
    # a schedule not planned with a switch model is priced as if switching were free: say so wherever it is printed
    basis = "with switch costs" if a.switch_aware else "ideal (free switching)"
    out(a).print(f"{s.granularity}-level {s.scope} {s.objective} (slack {s.slack_pct:+g} %) by {s.solver}: "
                  f"time {signed_pct(p.time_change_pct, 3)} %, energy {signed_pct(p.energy_change_pct, 3)} % vs "
                  f"{_auto_basis(s, lim is not None)}, {basis}, {p.switches} switches{gap}"
                  + (f"; wrote {a.output}" if a.output else ""))
    card = a.gpu or pb.profile.gpu
    if not card:
        return 0
    from kdvfs.limiter import limiter_for

    err = make_console(sys.stderr)
    low_clock_caution(pb, card, s, err=err)  # much of the step below half the boost clock on model rows
    if lim is None and a.limiter == "off" and limiter_for(get_gpu(card)) is not None:
        # simulate/compare/whatif run the limiter by default: say so here
        err.print(f"note: {card} has a fitted power limiter; this plan prices each kernel throttled alone, and "
                  "`kdvfs simulate` runs it under the limiter by default, where it can exceed its slack; `--limiter "
                  "auto` chooses under the limiter", markup=False)
    return 0


AUTO_LIMITED = "auto under the card's windowed power limiter (its steady state)"
"""``auto_basis`` of a plan chosen under the limiter; without it, ``kdvfs.analyze.AUTO_BASIS`` (the profile's auto)."""


def _auto_basis(s, limited: bool) -> str:
    """What "vs auto" measures against, with its time: under ``--limiter`` the all-auto step's steady state under the
    limiter, else the profile's auto. They differ (the phi-1.5 step on the H200: 0.5369 s and 0.5842 s), and
    `analyze` shows both (tester9, tester10)."""
    t = (s.auto or {}).get("time_s")
    at = f", {t:.4g} s" if isinstance(t, (int, float)) else ""
    if limited:
        return f"auto under the limiter (steady state{at})"
    return f"auto (each kernel throttled on its own{at})"


def cmd_frontier(a) -> int:
    from kdvfs.cli.paths import figure_beside
    from kdvfs.fileio import check_output_path
    from kdvfs.optimize.frontier import check_range, frontier_points
    from kdvfs.plots import plot_frontier

    n = check_range(a.slack_min, a.slack_max, a.slack_step)  # before loading the profile (seconds), not after
    png = figure_beside(a.output, a.png)  # --png alone writes the figure too (it was ignored without -o)
    if a.output:
        check_output_path(a.output, "CSV output", make_parents=True)
    if png is not None:
        check_output_path(png, "figure output")
    pb = problem(a)
    card = a.gpu or pb.profile.gpu
    if pb.profile.card:  # the header's card words are checked and named, as by the other verbs (tester11b's leftover)
        from kdvfs.cli.anchor import profile_card
        from kdvfs.gpus import get_gpu

        profile_card(get_gpu(card or "rtx3080ti"), pb.profile, f"--profile {a.profile!r}")
    scopes = ["local", "global"] if a.scope == "both" else [a.scope]
    # the figure always shows local and global side by side (the study's relaxed-waste figure): each curve once (the
    # figure's global curve was solved a second time), and each point's allocation kept for the caution below (every
    # point was solved a second time for it, 0.3 s a point on a 3 505-instance step)
    need = ["local", "global"] if png is not None else scopes
    from kdvfs.cli.common import progress

    points: dict[str, list] = {}
    with progress(None, n * len(need), "frontier points") as prog:  # a bar on a terminal, else a line every ~10 s
        task = prog.add_task("points", total=n * len(need))
        for sc in need:
            points[sc] = []
            for point in frontier_points(pb, sc, a.slack_min, a.slack_max, a.slack_step):
                points[sc].append(point)
                prog.advance(task, 1)
    curves = {sc: [row for row, _ in pts] for sc, pts in points.items()}
    rows = curves[scopes[-1]]
    if a.output:
        write_csv(rows if len(scopes) == 1 else [dict(r, scope=sc) for sc in scopes for r in curves[sc]], a.output)
    if png is not None:
        plot_frontier({f"kernel-level {k}": curves[k] for k in ("local", "global")}, png,
                      f"{pb.trace.name} on {pb.profile.gpu}")
    curves = {sc: curves[sc] for sc in scopes}
    if a.json:
        # every point of a frontier assumes free switching: say so in the document too
        lab = {sc: [dict(r, basis="ideal (free switching)") for r in v] for sc, v in curves.items()}
        print_json(lab if len(scopes) == 2 else lab[scopes[-1]])
    else:
        c = out(a)
        for sc in scopes:
            c.print(table(f"frontier ({sc}), ideal (free switching)", ["slack %", "time %", "energy %"],
                          [[r["slack_pct"], r["time_change_pct"], r["energy_change_pct"]] for r in curves[sc]]))
        # every point's schedule, from the allocation solved for it
        solved = (pb.to_schedule(al, objective="waste", slack_pct=row["slack_pct"], granularity="kernel", scope=sc)
                  for sc in scopes for row, al in points[sc])
        # the largest share among the points counts
        low_clock_caution(pb, card, solved, "the frontier's schedules run up to")
    return 0


def print_table2(c, rows: list[dict], title: str) -> None:
    from kdvfs.reproduce import target_text

    c.print(table(f"{title}; ideal (free switching)", ["granularity", "scope", "objective", "Δt %", "ΔE %", "paper Δt %",
                                                       "paper ΔE %", "target", ""],
                  [[r["granularity"], r["scope"], r["objective"], f"{r['time_change_pct']:+.2f}",
                    f"{r['energy_change_pct']:+.2f}", f"{r['paper_time_change_pct']:+.2f}",
                    f"{r['paper_energy_change_pct']:+.2f}", target_text(r), "met" if r["target_met"] else "missed"]
                   for r in rows]))
    c.print(f"{sum(r['target_met'] for r in rows)} of {len(rows)} rows within the targets (the fit never sees Table 2; "
            "validation/rtx3080ti-calibration/ has the numbers; `kdvfs reproduce spaan2026 --noise` chooses the "
            "clocks from noisy measurements, as the study did)")



def _reproduce_scaling(a) -> int:
    """The study's batch and tensor-parallel experiment: its kernel-level global strict-waste clocks (chosen at batch
    40, degree 1) carried to batch 1…40 and degree 1…16, against auto at each size (``kdvfs.scaling``)."""
    import json
    from pathlib import Path

    from kdvfs.cli.common import write_csv
    from kdvfs.gpus import get_gpu
    from kdvfs.optimize import allocate_schedule
    from kdvfs.plots_multi import plot_carried
    from kdvfs.reproduce import study_problem
    from kdvfs.scaling import scaling_experiment

    pb = study_problem()
    sched = allocate_schedule(pb, "kernel")
    rows = scaling_experiment(pb, get_gpu("rtx3080ti"), sched, [1, 2, 4, 8, 16, 32, 40], [1, 2, 4, 8, 16])
    if a.output:
        d = Path(a.output)
        d.mkdir(parents=True, exist_ok=True)
        write_csv(rows, d / "scaling.csv")
        (d / "scaling.json").write_text(json.dumps(rows, indent=1) + "\n")
        plot_carried(rows, d / "scaling.png", "GPT-3 XL, RTX 3080 Ti: kernel-level clocks chosen at batch 40, carried "
                     "(model prediction)")
    if a.json:
        print_json(rows)
        return 0
    out(a).print(table("the study's clocks (chosen at batch 40, degree 1) at other sizes, against auto there "
                       "(calibrated model scaled by kdvfs.scaling; free switching)",
                       ["experiment", "batch", "TP", "Δt %", "ΔE %", "kernels Δt %", "kernels ΔE %", "TP comm (s)"],
                       [[r["experiment"], r["batch"], r["tp"], f"{r['time_change_pct']:+.2f}",
                         f"{r['energy_change_pct']:+.2f}", f"{r['kernels_time_change_pct']:+.2f}",
                         f"{r['kernels_energy_change_pct']:+.2f}", f"{r['collective_time_s']:.3g}"] for r in rows]))
    return 0


def _write_reproduction(a, rows):
    if not getattr(a, "output", None):
        return []
    from kdvfs.reproduce import spaan2026_pass_rows, write_reproduction

    return write_reproduction(a.output, rows, spaan2026_pass_rows())


def cmd_reproduce(a) -> int:
    from kdvfs.reproduce import MeasurementNoise, reproduce_spaan2026, reproduce_spaan2026_measured

    if a.study != "spaan2026":
        raise InputError(f"unknown study {a.study!r}; known: spaan2026")
    if a.scaling:
        return _reproduce_scaling(a)
    if not a.noise:
        given = [f for f in ("noise_time_pct", "noise_energy_pct", "seeds", "seed") if getattr(a, f) is not None]
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} only applies with --noise (simulated measurement scatter); "
                             "add --noise or drop it")
        rows = reproduce_spaan2026()
        written = _write_reproduction(a, rows)
        if a.json:
            print_json([dict(r, basis="ideal (free switching)") for r in rows])
            return 0
        print_table2(out(a), rows, "Spaan et al. 2026, Table 2, on the calibrated RTX 3080 Ti profile (66 settings)")
        if written:
            out(a).print("wrote " + ", ".join(map(str, written)))
        return 0
    d = MeasurementNoise()
    noise = MeasurementNoise(d.time_pct if a.noise_time_pct is None else a.noise_time_pct,
                             d.energy_pct if a.noise_energy_pct is None else a.noise_energy_pct)
    seeds = 20 if a.seeds is None else a.seeds
    if not 1 <= seeds <= 10_000:
        raise InputError(f"--seeds {seeds} must be a whole number of simulated sweeps in 1–10000; e.g. --seeds 20")
    from kdvfs.cli.common import progress

    err = make_console(sys.stderr)
    with progress(err, seeds, "simulated sweeps") as prog:  # a bar on a terminal, else a line every ~10 s
        task = prog.add_task("sweeps", total=seeds)
        rows = reproduce_spaan2026_measured(noise=noise, seeds=seeds, seed=0 if a.seed is None else a.seed,
                                            progress=lambda n, tot: prog.update(task, completed=n))
    written = _write_reproduction(a, rows)
    if a.json:
        print_json(rows)
        return 0
    c = out(a)
    if written:
        c.print("wrote " + ", ".join(map(str, written)))
    c.print(table(f"Spaan et al. 2026, Table 2, as measured: one noisy measurement per kernel and setting "
                  f"(time ± {noise.time_pct:g} %, energy ± {noise.energy_pct:g} %), {seeds} simulated sweeps",
                  ["level", "scope", "objective", "Δt %", "ΔE %", "sd", "re Δt %", "re ΔE %", "paper Δt", "paper ΔE",
                   "target", "met in"],
                  [[r["granularity"], r["scope"], r["objective"].replace("strict ", ""), f"{r['time_change_pct']:+.2f}",
                    f"{r['energy_change_pct']:+.2f}", f"{r['energy_change_sd_pct']:.2f}",
                    f"{r['true_time_change_pct']:+.2f}", f"{r['true_energy_change_pct']:+.2f}",
                    f"{r['paper_time_change_pct']:+.2f}", f"{r['paper_energy_change_pct']:+.2f}",
                    "met" if r["target_met"] else "missed", f"{100 * r['target_met_share']:.0f} %"] for r in rows]))
    c.print(f"{sum(r['target_met'] for r in rows)} of {len(rows)} rows within the targets on the mean over the sweeps "
            "(met in: share of sweeps whose own row met it). Δt/ΔE: what the study's procedure reports (clocks chosen on "
            "the measured values, against the measured auto); re: the same clocks re-measured, i.e. on the model's "
            "values (the study re-measured its kernel-global choice: −14.6 % energy at +0.6 % time)")
    return 0


def cmd_compare(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.identity import check_card

    pb = problem(a)
    spec = get_gpu(a.gpu or pb.profile.gpu or "rtx3080ti")
    check_card(pb.profile.gpu, spec.name)
    from kdvfs.cli.anchor import profile_card

    spec, _ = profile_card(spec, pb.profile, f"--profile {a.profile!r}")  # the card a profile built with --anchors is of
    sw = switch_model(a, spec.name)
    lim = limiter_of(a, spec)
    if lim is None:
        from simulator.evaluate import compare_rows

        rows = compare_rows(pb, spec, sw, a.mechanism, a.slack)
    else:  # under the card's power limiter: the isolated choices and the limiter-aware ones
        from kdvfs.cli.common import progress
        from kdvfs.limiter import limiter_params
        from simulator.limited_whatif import LIMITED_POLICIES, limited_compare_rows

        # ~45 s on the Mixtral step of steps12, without a word: a bar on a terminal, else a line every ~10 s
        with progress(None, len(LIMITED_POLICIES), "policies under the limiter") as prog:
            task = prog.add_task("policies", total=len(LIMITED_POLICIES))
            rows = limited_compare_rows(pb, spec, limiter_params(pb.trace, spec, lim), lim, sw, a.mechanism, a.slack,
                                        progress=lambda n: prog.advance(task, n))
    if a.json:
        print_json({"switch_latency_s": sw.total_s, "mechanism": a.mechanism, "limiter": lim is not None, "rows": rows})
        return 0
    c = out(a)
    c.print(table(f"{pb.trace.name}: switch {1e3 * sw.total_s:.4g} ms, {a.mechanism} mechanism, slack {a.slack:+g} %"
                  + (" (under the card's power limiter; against auto under it)" if lim is not None
                     else " (against auto, each kernel throttled on its own)"),
                  ["policy", "time %", "energy %", "switches / iteration"],
                  [[_limited_label(r), signed_pct(r["time_change_pct"], 3), signed_pct(r["energy_change_pct"], 3), r["switches"]]
                   for r in rows]))
    if lim is not None:  # the rows mean other things than without the limiter: say so where they are read
        c.print("Under the limiter, 'ideal', 'naive', 'pass' and 'switch-aware' are chosen as if each kernel were "
                "throttled alone, then run under the limiter (so they can exceed the slack); the 'limiter-aware' rows "
                "are chosen under it. 'ideal' rows switch for free. A row marked 'auto' had no plan within the slack.")
    from kdvfs.optimize import optimize

    # the kernel ideal row's schedule: the free-switching global waste optimum at this slack
    low_clock_caution(pb, spec.name, optimize(pb, "waste", a.slack, "kernel", "global"),
                      "the kernel-level ideal (free switching) schedule of this slack runs")
    return 0


def _limited_label(r: dict) -> str:
    label = r["policy"] + (" (free switching)" if r["policy"].endswith("ideal") else "")
    return label + (" → auto" if r.get("fell_back_to_auto") else "")


def register(sub, j) -> None:
    def opt_common(sp):
        sp.add_argument("--trace", required=True)
        sp.add_argument("--profile", help="profile file or bundled name (default: the trace's bundled profile, else "
                                           "built from the kernel model of --gpu)")
        sp.add_argument("--slack", type=float, default=0.0, help="tolerated slowdown in percent (may be negative)")
        sp.add_argument("--settings", choices=["all", "study"], default="all", help=SETTINGS_HELP)
        return sp

    sp = j(opt_common(sub.add_parser("optimize", help="choose clocks per kernel instance")))
    sp.add_argument("--objective", choices=["waste", "edp", "ed2p", "energy"], default="waste")
    sp.add_argument("--granularity", choices=["static", "pass", "kernel"], default="kernel")
    sp.add_argument("--scope", choices=["local", "global"], default="global")
    sp.add_argument("--solver", choices=["fast", "milp"], default="fast")
    sp.add_argument("--switch-aware", action="store_true", help="plan switch points under a switch-latency model")
    sp.add_argument("--gpu")
    sp.add_argument("--switch-model", help="borrow a preset's switch model")
    sp.add_argument("--switch-latency", type=float, help="total switch latency in seconds, split like the card's preset into host call and transition (default: the card's)")
    sp.add_argument("--mechanism", choices=["sync", "callback", "predictive"], default="sync")
    sp.add_argument("-o", "--output")
    sp.add_argument("--limiter", choices=["auto", "on", "off"], default="off",
                    help="choose under the card's power limiter (global waste objective; auto: where the preset has one)")
    sp.set_defaults(fn=cmd_optimize)

    sp = j(sub.add_parser("frontier", help="energy change against tolerated slowdown"))
    sp.add_argument("--trace", required=True)
    sp.add_argument("--profile")
    sp.add_argument("--scope", choices=["local", "global", "both"], default="global")
    sp.add_argument("--slack-min", type=float, default=0.0)
    sp.add_argument("--slack-max", type=float, default=20.0)
    sp.add_argument("--slack-step", type=float, default=1.0)
    sp.add_argument("--settings", choices=["all", "study"], default="all", help=SETTINGS_HELP)
    # the message for a trace without a bundled profile offers --gpu, as on optimize and compare
    sp.add_argument("--gpu", help="the card whose kernel model builds the profile when the trace has no bundled one "
                                  "and --profile is not given (`kdvfs gpu list`)")
    sp.add_argument("-o", "--output")
    sp.add_argument("--png")
    sp.set_defaults(fn=cmd_frontier)

    sp = j(sub.add_parser("reproduce", help="reproduce a study's results"))
    sp.add_argument("study")
    sp.add_argument("--noise", action="store_true",
                    help="simulate the study's measurement: one noisy measurement per kernel and setting, many sweeps")
    sp.add_argument("--noise-time-pct", type=float, help="scatter of one measured time, percent (default: measured, 0.38)")
    sp.add_argument("--noise-energy-pct", type=float,
                    help="scatter of one measured energy, percent (default: measured, 0.36)")
    sp.add_argument("--seeds", type=int, help="simulated sweeps (default 20)")
    sp.add_argument("--seed", type=int, help="first random seed (default 0)")
    sp.add_argument("--scaling", action="store_true",
                    help="the study's clocks carried to per-GPU batch 1…40 and tensor-parallel degree 1…16")
    sp.add_argument("-o", "--output", help="folder for table2.csv (rows with their targets), pass_level.csv and "
                                            "pass_level.png (the study's Figures 3/4 beside the model); with "
                                            "--scaling: scaling.csv, scaling.json and scaling.png")
    sp.set_defaults(fn=cmd_reproduce)

    sp = j(opt_common(sub.add_parser("compare", help="auto, pass-level, kernel ideal/naive and switch-aware under one switch model")))
    sp.add_argument("--gpu")
    sp.add_argument("--switch-model")
    sp.add_argument("--switch-latency", type=float, help="total switch latency in seconds, split like the card's preset into host call and transition (default: the card's)")
    sp.add_argument("--mechanism", choices=["sync", "callback", "predictive"], default="sync")
    add_limiter_arg(sp)
    sp.set_defaults(fn=cmd_compare)
