"""Command-line verbs that use the simulator: ``simulate``, ``whatif``, ``demo`` (simulator imported lazily)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kdvfs.cli.common import (
    MECHANISM_OVERHEADS,
    SETTINGS_HELP,
    add_limiter_arg,
    limiter_of,
    load_profile_ref,
    problem,
    profile_gpu,
    progress,
    signed_pct,
    switch_model,
    write_csv,
)
from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["register"]


def cmd_simulate(a) -> int:
    import dataclasses

    from kdvfs.fileio import check_output_path
    from kdvfs.gpus import get_gpu
    from kdvfs.identity import check_card
    from kdvfs.schedule import load_schedule
    from kdvfs.switching import SwitchCosts
    from simulator import ParallelConfig, SimConfig, write_timeline
    from simulator.versus_auto import simulate_against_auto, unthrottled_tables

    for path, what in ((a.timeline, "--timeline output"), (a.scaling_png, "--scaling-png figure")):
        if path:  # before the simulation, not after it
            check_output_path(path, what)
    if a.hidden < 1:  # --hidden 0 simulated tensor-parallel all-reduces of no bytes, exit 0
        raise InputError(f"--hidden {a.hidden} must be the model's hidden size, a whole number ≥ 1 (e.g. --hidden 2048)")
    if a.scaling:
        _gpu_counts(a.scaling)  # before loading the trace and profile (seconds), not after
    sched = load_schedule(a.schedule)  # likewise: a wrong file is said at once
    pb = problem(a)
    if not (a.gpu or pb.profile.gpu):
        raise InputError("the profile does not name its card: give --gpu NAME")
    spec = get_gpu(a.gpu or pb.profile.gpu)  # the profile's own card unless --gpu says otherwise
    check_card(pb.profile.gpu, spec.name)
    from kdvfs.cli.anchor import profile_card

    spec, _ = profile_card(spec, pb.profile, f"--profile {a.profile!r}")  # the card a profile built with --anchors is of
    if a.mechanism is None:
        # the mechanism the schedule was planned for (`analyze` plans for predictive): replaying a 1 % boundary plan
        # of the Gemma step with sync switching ran +2.8 % where its own mechanism gives +1.0 %
        a.mechanism = sched.switch_plan.mechanism.value if sched.switch_plan is not None else "sync"
    a.parallel_given = a.parallel is not None
    a.parallel = a.parallel or "dp"
    sw = switch_model(a, spec.name)
    if a.switch_latency is None and a.spread is not None:
        sw = dataclasses.replace(sw, spread=a.spread)
    cfg = SimConfig(mechanism=a.mechanism, switch=sw, costs=SwitchCosts(idle_power_w=spec.idle_power_w), seed=a.seed,
                    timeline=bool(a.timeline), governor_lag_s=a.governor_lag)
    unthrottled = unthrottled_tables(pb, spec) if a.governor_lag > 0 else None
    pc = ParallelConfig(gpus=a.gpus, mode=a.parallel, overlap=a.overlap)
    if a.scaling:
        return _scaling(a, pb, sched, spec, cfg)
    if a.parallel == "tp" and a.gpus > 1 and a.tp == 1:
        # tensor parallelism shards each kernel's work (kdvfs.scaling), not its time: one shard with its all-reduces
        a.tp, a.gpus = a.gpus, 1
    if a.batch is not None or a.tp != 1:
        return _carried(a, pb, sched, spec, cfg)
    lim = limiter_of(a, spec, can=a.gpus == 1 and a.governor_lag == 0)
    if lim is not None and a.timeline:
        # the limiter's simulation records no events: it wrote an empty timeline and said "timeline in FILE", exit 0
        raise InputError(f"--timeline {a.timeline!r}: the simulation under {spec.name}'s power limiter (--limiter "
                         f"{a.limiter}) records no timeline; add --limiter off for a timeline without the limiter, or "
                         "leave out --timeline")
    res = simulate_against_auto(pb, sched, spec, cfg, pc, a.path, unthrottled, lim)
    r = res.result
    if a.timeline:
        write_timeline(r.timeline or [], a.timeline, list(pb.profile.settings))
    doc = dict(r.to_dict(), time_change_pct=res.time_change_pct, energy_change_pct=res.energy_change_pct,
               switch_latency_s=sw.total_s, mechanism=a.mechanism, timeline=a.timeline)
    if a.json:
        print_json(doc)
        return 0
    c = make_console()
    c.print(f"{pb.trace.name} under {a.schedule} on {a.gpus}× {spec.name} ({a.parallel}), {a.mechanism} switching "
            f"at {1e3 * sw.total_s:.4g} ms [{r.path}]" + (
                f"; power limiter on: median clock {r.limiter.median_core_mhz:.0f} MHz" if r.limiter else ""))
    c.print(table("per segment", ["segment", "time (s)", "energy (J)"],
                  [[k, v.time_s, v.energy_j] for k, v in r.segments.items()]))
    extra = (f" ({doc['time_change_pct']:+.3f} % time, {doc['energy_change_pct']:+.3f} % energy vs auto)"
             if a.gpus == 1 else "")
    lost = "stalled for switches" if r.limiter else "lost to switching"
    c.print(f"iteration: {r.time_s:.6g} s, {r.energy_j:.6g} J{extra}; {r.switches} switches, "
            f"{1e3 * r.switch_time_s:.4g} ms {lost}" + (f"; timeline in {a.timeline}" if a.timeline else ""))
    return 0


def _carried(a, pb, sched, spec, cfg) -> int:
    """``--batch``/``--tp``: the schedule (chosen at the trace's own size) simulated at another per-GPU batch size or
    tensor-parallel shard, against auto at that size (``simulator.carried``); one GPU's shard, its all-reduces added."""
    from simulator.carried import simulate_carried

    if a.gpus != 1 or a.governor_lag > 0:
        raise InputError("--batch/--tp simulate one GPU's share (all shards alike); drop --gpus and --governor-lag")
    doc = simulate_carried(pb, spec, sched, cfg, a.batch, a.tp, a.hidden, path=a.path)
    doc["mechanism"] = a.mechanism
    if a.json:
        print_json(doc)
        return 0
    make_console().print(
        f"{pb.trace.name} under {a.schedule} carried to batch {doc['batch']}, tensor-parallel degree {doc['tp']} on "
        f"{spec.name} ({a.mechanism} switching) [{doc['path']}]: {doc['time_s']:.6g} s, {doc['energy_j']:.6g} J per "
        f"GPU against auto {doc['auto_time_s']:.6g} s, {doc['auto_energy_j']:.6g} J ({doc['time_change_pct']:+.3f} % "
        f"time, {doc['energy_change_pct']:+.3f} % energy; {doc['communication_s']:.4g} s of tensor-parallel "
        "all-reduce in both)")
    return 0


def _gpu_counts(text: str) -> list[int]:
    """``--scaling 1,2,4``'s GPU counts, each a whole number in 1–100000 (0 ended in a ZeroDivisionError traceback)."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or not all(1 <= n <= 100_000 for n in counts):
        raise InputError(f"--scaling {text!r} must be GPU counts (whole numbers from 1 to 100000) separated by commas, "
                         "e.g. 1,2,4,8,16")
    return counts


def _scaling(a, pb, sched, spec, cfg) -> int:
    """How the schedule's savings against auto hold as the number of GPUs grows (``--scaling 1,2,4,8,16``)."""
    from kdvfs.plots import plot_scaling
    from simulator.carried import scaling_rows

    counts = _gpu_counts(a.scaling)
    rows = []
    # dp: the trace's batch as the global batch, split over the GPUs; tp: the layers split into shards (kdvfs.scaling)
    for mode in ([a.parallel] if a.parallel_given else ["dp", "tp"]):
        rows += scaling_rows(pb, spec, sched, cfg, counts, mode, a.hidden, path=a.path)
    if a.scaling_png:
        plot_scaling(rows, a.scaling_png, f"{pb.trace.name}: schedule vs auto on N GPUs")
    if a.json:
        print_json(rows)
        return 0
    make_console().print(table("savings as the number of GPUs grows (simulated)",
                               ["parallel", "GPUs", "time (s)", "energy (J)", "time %", "energy %"],
                               [[r["parallel"], r["gpus"], r["time_s"], r["energy_j"], f"{r['time_change_pct']:+.2f}",
                                 f"{r['energy_change_pct']:+.2f}"] for r in rows]))
    return 0


def _on_executor(executor_spec, console, total, label, job):
    """``job(executor, progress)`` on the executor named by ``executor_spec``, with a progress bar of ``total``
    scenarios on stderr; the executor is closed however the job ends."""
    from kdvfs.executor import make_executor

    ex = make_executor(executor_spec)
    try:
        with progress(console, total, label) as prog:
            task = prog.add_task(label, total=total)
            return job(ex, lambda n: prog.advance(task, n))
    except KeyboardInterrupt:
        _no_second_interrupt()
        ex.close(abort=True)  # end the running tasks: waiting for them kept Ctrl-C waiting a minute for nothing
        raise
    finally:
        ex.close()


def _no_second_interrupt() -> None:
    """Ignore SIGINT from here on: the command is ending. `timeout -s INT` signals the command and then its process
    group, so a second SIGINT came while the workers were ended and cut short the message saying what was kept (or,
    at exit, printed a traceback from concurrent.futures' thread join); an impatient second Ctrl-C did the same.
    SIGTERM and SIGKILL still end it."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _whatif(trace_ref, profile_ref, card, scenarios, executor_spec, console, label="what-if", limiter=False,
            size=None, settings="all", output=None):
    """The grid's rows. Each finished task is kept in a journal (``simulator.whatif_journal``): beside the CSV with
    ``output``, else in kdvfs's state folder by the grid's key; a run of the same grid cut short (Ctrl-C, a lost
    machine) resumes from either. Returns the rows and the journals, which the caller removes once the results are safe."""
    from collections.abc import Callable

    from kdvfs.bundled import resolve_profile_path, resolve_trace_path
    from simulator.whatif import run_grid
    from simulator.whatif_journal import Journal, grid_journal_path, grid_key, journal_path

    key = grid_key(resolve_trace_path(trace_ref), resolve_profile_path(profile_ref), card, scenarios, limiter, size,
                   settings)
    kept = Journal(grid_journal_path(key), key)  # where a run without -o keeps its tasks
    journal = Journal(journal_path(output), key) if output else kept
    own = journal.load()
    done = own or (kept.load() if journal is not kept else {})  # a run without -o resumed with it takes those too
    err = make_console(sys.stderr)
    if done:
        err.print(f"resuming: {len(done)} of {len(scenarios)} scenarios from {(journal if own else kept).path} (an "
                  "interrupted run of this grid)", markup=False)
    elif journal.stale:
        err.print(f"note: {journal.path} holds an interrupted run of another grid (other inputs or options); "
                  "starting over", markup=False)
    record: Callable[[list[int], list[dict]], None] | None = journal.record
    try:
        journal.start(keep=bool(own))
        if done and not own:
            journal.record(list(done), list(done.values()))
    except OSError as e:
        if output:  # the CSV's own folder was checked writable: this is the disk, not the path
            raise
        err.print(f"note: {journal.path} cannot be written ({e.strerror or e}): an interrupted run keeps nothing; "
                  "give -o FILE.csv to keep finished scenarios beside it", markup=False)
        record = None
    try:
        rows = _on_executor(executor_spec, console, len(scenarios), label,
                            lambda ex, prog: run_grid(trace_ref, profile_ref, card, scenarios, ex, progress=prog,
                                                      limiter=limiter, size=size, settings=settings, done=done,
                                                      on_task=record))
    except BaseException as e:
        n = len(journal.load()) if record is not None else 0
        if record is not None and not n:  # nothing to resume: a failed run left an empty journal in ~/.cache each time
            journal.remove()
        if isinstance(e, KeyboardInterrupt) and record is not None:
            how = "run the same command again to resume" + ("" if output else " (with or without -o FILE.csv)")
            err.print(f"{n} of {len(scenarios)} scenarios kept in {journal.path}; {how}" if n else
                      "no scenario had finished: nothing kept", markup=False)
        raise
    return rows, (journal, kept)


def cmd_whatif(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.plots import plot_whatif
    from simulator.demo import generation_latencies_s
    from simulator.whatif import default_latencies, grid

    trace_ref = a.trace
    profile_ref = a.profile or _default_profile_ref(a)
    # the card the profile belongs to: --gpu, else the profile's own header (never a silent default)
    card = a.gpu or profile_gpu(profile_ref)
    if not card:
        load_profile_ref(profile_ref)  # a schedule, a trace, an empty file: said as such, not as a missing card word
        raise InputError(f"profile {profile_ref!r} does not name its card: give --gpu NAME")
    get_gpu(card)
    from kdvfs.bundled import resolve_profile_path
    from kdvfs.identity import check_card, file_header

    head = file_header(resolve_profile_path(profile_ref))
    check_card(head.get("gpu", ""), get_gpu(card).name)
    from kdvfs.cli.common import load_trace
    from kdvfs.identity import check_binding

    # a profile of another trace was said by every worker after 38 s (RoBERTa's grid, 2 workers): said here, at once
    t = load_trace(trace_ref)
    check_binding(f"profile {profile_ref!r} ({head.get('gpu') or 'unknown card'})", head.get("trace", ""),
                  head.get("trace_sha", ""), t, f"build one for it with `kdvfs profile build --trace {trace_ref} --gpu "
                  "GPU -o P.csv` or fit one from a sweep of it")
    spec = get_gpu(card)
    if any(k.startswith("card.") for k in head):  # checked here, said once; the workers adapt the card the same way
        from kdvfs.cli.anchor import profile_card

        spec, _ = profile_card(spec, load_profile_ref(profile_ref), f"--profile {profile_ref!r}")
    presets = a.switch_model or [card]
    if a.preset_latency_only and a.latency:  # one of the two was ignored without a word (even --latency nan)
        raise InputError(f"--preset-latency-only and --latency {a.latency[0]!r} ask for different latencies: "
                         "--preset-latency-only simulates each preset's own and ignores --latency; give one of them")
    lats: list = [None] if a.preset_latency_only else (a.latency or default_latencies(a.latency_points))
    scen = grid(presets, lats, a.mechanism or ["sync", "predictive"], a.policy or ["auto", "pass", "ideal", "naive", "switch-aware"],
                a.slack or [0.0])
    from kdvfs.cli.paths import figure_beside
    from kdvfs.fileio import check_output_path

    png = figure_beside(a.output, a.png)  # --png alone writes the figure too (it was ignored without -o)
    if a.output:  # before computing: a scenario grid must not be lost to an unwritable path
        check_output_path(a.output, "CSV output", make_parents=True)
    if png is not None:
        check_output_path(png, "figure output")
    c = make_console()
    t0 = time.perf_counter()
    if a.settings != "all":  # checked here, once, with a clear message, before any worker starts
        from kdvfs.passweep import restrict_settings

        restrict_settings(load_profile_ref(profile_ref), a.settings)
    lim = limiter_of(a, spec)
    size = (a.batch, a.tp) if a.batch is not None or a.tp != 1 else None
    rows, journal = _whatif(trace_ref, profile_ref, card, scen, a.executor, c, limiter=lim is not None and size is None,
                            size=size, settings=a.settings, output=a.output)
    if a.output:
        write_csv(rows, a.output)  # the results first: a failing figure must not lose them
    for jn in journal:  # the results are written (or, without -o, about to be printed): nothing left to resume
        jn.remove()
    if png is not None:
        try:
            plot_whatif(rows, png, generation_latencies_s(), f"{trace_ref} on {card}")
        except OSError as e:
            raise InputError(f"figure {str(png)!r} could not be written ({e.strerror or e})"
                             + (f"; the results are in {a.output}" if a.output else "")) from None
    if a.json:
        print_json(rows)
        return 0
    c.print(table(f"what-if: {len(rows)} scenarios in {time.perf_counter() - t0:.1f} s"
                  + (" (under the card's power limiter)" if lim is not None else ""),
                  ["switch model", "latency (s)", "mechanism", "policy", "slack %", "time %", "energy %", "switches"],
                  [[r["gpu"], f"{r['switch_latency_s']:.3g}", r["mechanism"],
                    "ideal (free switching)" if r["policy"] == "ideal" else r["policy"], r["slack_pct"],
                    f"{r['time_change_pct']:+.3f}", f"{r['energy_change_pct']:+.3f}", r["switches"]] for r in rows[:200]]))
    if len(rows) > 200:
        c.print(f"… {len(rows) - 200} more rows in the CSV")
    if lim is not None:  # the rows are not the ones of the same names without the limiter: say so where they are read
        c.print("Under the limiter, 'ideal', 'naive' and 'switch-aware' are chosen under it (`kdvfs compare` shows "
                "them beside the choices made without it); a 'pass' or 'switch-aware' row at +0.000 % with no "
                "switch had no plan within the slack and stayed at auto.")
    return 0


def _default_profile_ref(a) -> str:
    """The trace's bundled profile, else (with ``--gpu``) one built from the kernel model into a temporary file (the
    what-if's workers read profiles by path)."""
    import tempfile

    from kdvfs.cli.common import default_profile, load_trace
    from kdvfs.profile import save_profile

    t = load_trace(a.trace)
    found = default_profile(t, a.trace, a.gpu)
    if isinstance(found, Path):
        return str(found)
    path = Path(tempfile.mkdtemp(prefix="kdvfs-whatif-")) / f"{t.name}.{found.gpu}.profile.csv.gz"
    return str(save_profile(found, path))


def cmd_demo(a) -> int:
    """The main job on the bundled default (``simulator.demo.run_demo``): the study's Table 2, then what survives each
    generation's switch latency; printed, and written as CSVs, figures and ``summary.json`` into the folder."""
    from kdvfs.bundled import DEFAULT_TRACE
    from kdvfs.cli.optimize import print_table2
    from kdvfs.plots import plot_frontier, plot_whatif
    from simulator.demo import demo_grid, generation_latencies_s, run_demo

    out_dir = Path(a.out)
    c = make_console(file=open("/dev/null", "w")) if a.json else make_console()  # noqa: SIM115
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    c.print(f"[bold]kdvfs demo[/bold]: {DEFAULT_TRACE} (GPT-3 XL, llm.c, RTX 3080 Ti; Spaan et al. 2026) with the "
            "calibrated model profile")
    res = _on_executor(a.executor, c, sum(map(len, demo_grid())), "simulating switch latencies", run_demo)
    write_csv(res.table2, out_dir / "table2.csv")
    print_table2(c, res.table2, "1. Ideal savings (free switching) beside the study's Table 2, on the study's 66 settings")
    write_csv([dict(r, scope=k) for k, v in res.frontiers.items() for r in v], out_dir / "frontier.csv")
    plot_frontier(res.frontiers, out_dir / "frontier.png", "GPT-3 XL on RTX 3080 Ti (calibrated model)")
    write_csv(res.whatif, out_dir / "whatif.csv")
    write_csv(res.latency_sweep, out_dir / "latency_sweep.csv")
    plot_whatif(res.latency_sweep, out_dir / "whatif.png", generation_latencies_s(),
                "GPT-3 XL on RTX 3080 Ti: saving under each generation's switch latency")
    trows = [[r.generation, f"{1e3 * r.switch_latency_s:.4g}", r.mechanism,
              f"{signed_pct(r.naive_energy_change_pct, 2)} / {signed_pct(r.naive_time_change_pct, 2)}",
              f"{signed_pct(r.aware_energy_change_pct, 2)} / {signed_pct(r.aware_time_change_pct, 2)}",
              r.aware_switches, f"{r.kept_of_ideal_pct:.0f} %"] for r in res.survival]
    # the card's full grid, not table 1's 66 settings: its ideal (−17.05 %) differs from table 1's kernel-global row
    c.print(table(f"2. What survives the switch latency, on the card's full clock grid (kernel-level ideal (free switching): "
                  f"{res.ideal['energy_change_pct']:+.2f} % energy, "
                  f"{res.ideal['switches']} switches; strict waste, slack 0)",
                  ["generation", "switch (ms)", "mechanism", "naive ΔE/Δt %", "switch-aware ΔE/Δt %", "switches",
                   "of ideal kept"], trows))
    summary = {"table2": res.table2, "whatif": res.whatif, "seconds": time.perf_counter() - t0,
               "files": sorted(p.name for p in out_dir.iterdir())}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    c.print(f"figures and CSVs in {out_dir}/ (table2.csv, frontier.csv/png, whatif.csv/png, latency_sweep.csv, "
            "summary.json); "
            f"{summary['seconds']:.1f} s")
    if a.json:
        print_json(summary)
    return 0


def register(sub, j) -> None:
    sp = j(sub.add_parser("simulate", help="replay a trace under a schedule with switch latency"))
    sp.add_argument("--trace", required=True)
    sp.add_argument("--profile")
    sp.add_argument("--schedule", required=True)
    sp.add_argument("--gpu", help="the card (default: the one the profile's header names)")
    sp.add_argument("--mechanism", choices=["sync", "callback", "predictive"],
                    help="how a switch is issued: sync (host waits; every switch also stalls the GPU a fixed "
                         f"{MECHANISM_OVERHEADS}), callback, predictive (default: the one the schedule was planned "
                         "for, else sync)")
    sp.add_argument("--switch-latency", type=float, help="total switch latency in seconds, split like the card's preset into host call and transition (default: the card's)")
    sp.add_argument("--switch-model", help="borrow another preset's switch model")
    sp.add_argument("--spread", type=float, help="relative spread of switch latencies (engine)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--governor-lag", type=float, default=0.0,
                    help="seconds the driver takes to throttle a newly landed setting that exceeds the cap (engine)")
    sp.add_argument("--gpus", type=int, default=1)
    sp.add_argument("--parallel", choices=["dp", "tp"])
    sp.add_argument("--scaling", help="GPU counts, e.g. 1,2,4,8,16: savings against auto for each (dp: the trace's "
                                      "batch split over the GPUs; tp: the layers split into shards)")
    sp.add_argument("--scaling-png", help="figure of --scaling")
    sp.add_argument("--overlap", action="store_true", help="DP: bucketed all-reduce overlapped with backward")
    sp.add_argument("--batch", type=int, help="per-GPU batch size to carry the schedule to (kernels scaled by work)")
    sp.add_argument("--tp", type=int, default=1, help="tensor-parallel degree to carry the schedule to (one shard)")
    sp.add_argument("--hidden", type=int, default=2048, help="--tp: model hidden size, for the activation all-reduces")
    sp.add_argument("--path", choices=["auto", "engine", "fast"], default="auto")
    sp.add_argument("--timeline", help="write a Chrome trace JSON (Perfetto)")
    add_limiter_arg(sp)
    sp.set_defaults(fn=cmd_simulate)

    sp = j(sub.add_parser("whatif", help="grid over switch latency, presets, mechanisms, policies and slack"))
    sp.add_argument("--trace", default="gpt3xl-llmc-rtx3080ti")
    sp.add_argument("--profile")
    sp.add_argument("--gpu", help="the card the profile belongs to (default: the one its header names)")
    sp.add_argument("--switch-model", action="append", help="preset(s) whose switch model to use (repeatable)")
    sp.add_argument("--latency", type=float, action="append", help="switch latency in seconds (repeatable)")
    sp.add_argument("--latency-points", type=int, default=13, help="log-spaced points from 100 ns to 200 ms")
    sp.add_argument("--preset-latency-only", action="store_true", help="only each preset's own latency")
    sp.add_argument("--mechanism", action="append", choices=["sync", "callback", "predictive"])
    sp.add_argument("--policy", action="append", choices=["auto", "pass", "ideal", "naive", "switch-aware"])
    sp.add_argument("--slack", type=float, action="append")
    sp.add_argument("--executor", default="local", help="local, serial, ray (local instance), ray:auto or ray:HOST:PORT (a cluster from `ray start --head`), "
                         "ray://HOST:PORT (Ray Client)")
    sp.add_argument("--batch", type=int, help="per-GPU batch size: schedules chosen at the trace's size, simulated here")
    sp.add_argument("--tp", type=int, default=1, help="tensor-parallel degree: schedules carried to one shard")
    sp.add_argument("--settings", choices=["all", "study"], default="all", help=SETTINGS_HELP)
    sp.add_argument("-o", "--output", help="CSV (a PNG is written beside it); finished scenarios are kept in "
                                           "OUTPUT.partial.jsonl (without -o: in $KDVFS_STATE_DIR/whatif/, default "
                                           "~/.cache/kdvfs/whatif/) so that an interrupted run resumes")
    sp.add_argument("--png")
    add_limiter_arg(sp)
    sp.set_defaults(fn=cmd_whatif)

    sp = j(sub.add_parser("demo", help="the main job on the bundled default trace"))
    sp.add_argument("-o", "--output", "--out", dest="out", default="kdvfs-demo", help="output folder")
    sp.add_argument("--executor", default="local")
    sp.set_defaults(fn=cmd_demo)

