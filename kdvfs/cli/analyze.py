"""Verbs ``analyze`` (a user's trace, Kineto or kdvfs, to an answer in one command) and ``results`` (docs/results.md
from validation/)."""

from __future__ import annotations

import sys
from pathlib import Path

from kdvfs.cli.common import MECHANISM_OVERHEADS, out, signed_pct, stage_progress
from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["load_any_trace", "register"]


def _is_kineto(path: Path) -> bool:
    """A PyTorch profiler trace, judged from its first bytes (a kdvfs trace starts with its format)."""
    from kdvfs.filekind import head_bytes

    try:  # a gzip cut short reads as empty (it was an EOFError traceback from analyze): the reader proper says so
        text = head_bytes(path, 4096).decode("utf-8", "replace")
    except OSError:
        return False
    return "kdvfs-trace/" not in text and any(k in text for k in ('"traceEvents"', '"schemaVersion"',
                                                                  '"deviceProperties"', '"ph"'))


def load_any_trace(ref: str, step: str = "last", err=None):
    """A kdvfs trace (file or bundled name), or a Kineto file imported on the fly (progress on ``err``)."""
    from kdvfs.cli.common import load_trace

    p = Path(ref)
    if p.exists() and _is_kineto(p):
        from kdvfs.importers import import_kineto

        with stage_progress(err, "import") as prog:
            return import_kineto(p, step=step, progress=prog).trace
    return load_trace(ref)


DEFAULT_SLACKS_PCT = (0.0, 1.0, 2.0, 5.0)


def cmd_analyze(a) -> int:
    from kdvfs.analyze import IDEAL, analyze, coarse_boundaries_note, low_clock_note, switch_queue_note, write_report
    from kdvfs.gpus import SwitchModel, get_gpu

    err = make_console(sys.stderr)
    t = load_any_trace(a.trace, a.step, err)
    prof = None
    gpu = a.gpu
    if a.profile:
        from kdvfs.cli.common import load_profile_ref

        prof = load_profile_ref(a.profile)
        gpu = gpu or prof.gpu
    if not gpu:
        raise InputError("analyze needs the card to plan for: give --gpu NAME (see `kdvfs gpu list`), or a --profile "
                         "whose header names it")
    spec = get_gpu(gpu)
    if prof is not None:  # as optimize, simulate and compare refuse it: an h200 profile planned as an rtx3080ti's, exit 0
        from kdvfs.identity import check_card

        check_card(prof.gpu, spec.name)
        from kdvfs.cli.common import check_profile_clocks

        check_profile_clocks(prof)  # as optimize's: a header edited to gpu=h100 planned an h200 profile's 2201 MHz
    if a.anchors and prof is not None:
        raise InputError(f"--anchors {a.anchors!r} adapts the kernel model to your card, and --profile "
                         f"{a.profile!r} already holds the powers the plan uses: give one or the other (build the "
                         "profile with `kdvfs profile build --anchors`)")
    from kdvfs.cli.anchor import anchor_card

    spec, _, anchor = anchor_card(spec, a.anchors, a.anchor_params)  # unchanged without --anchors
    from kdvfs.cli.anchor import profile_card

    # built with --anchors: the limiter check's idle card is that card too (said below, on stdout)
    spec, prof_card = profile_card(spec, prof, f"--profile {a.profile!r}", say=False)
    if prof is None:  # built from the kernel model of spec, from this trace's times
        from kdvfs.cli.common import note_other_card

        note_other_card(t, spec)
    sw = SwitchModel.from_latency(a.switch_latency) if a.switch_latency is not None else None
    from simulator.analyze_limiter import LimiterJudge, limiter_check_rows

    judge = LimiterJudge.for_card(t, spec, prof, a.mechanism, sw or spec.switch)
    with stage_progress(err, "analyze") as prog:
        # each slack once, smallest first: `--slack 1 1` repeated every row, and a boundary schedule refused under the
        # limiter falls back to a smaller slack's accepted one only if that slack came earlier (`--slack 5 1` and
        # `--slack 1 5` could give two answers for 5 %)
        doc, schedules = analyze(t, spec, prof, sorted(set(a.slack or DEFAULT_SLACKS_PCT)), a.mechanism, sw, not a.no_kernel_switch_aware,
                                 progress=None if prog is None else (lambda what, n, tot: prog(what, n / tot)),
                                 accept=None if judge is None else judge.within)
    if anchor is not None:  # in analysis.json and report.md, not only on the screen: the numbers are this card's
        doc["card_anchor"] = anchor.to_dict()
    if prof_card is not None:  # a profile built with --anchors: its powers are that card's
        doc["profile_card"] = prof_card.to_dict()
    lim_rows = limiter_check_rows(judge, schedules, doc["rows"])
    if lim_rows:
        doc["limiter_check"] = lim_rows
    folder = Path(a.output or f"kdvfs-analysis-{t.name}")
    paths = write_report(doc, schedules, folder)
    doc["output"] = {k: str(v) for k, v in paths.items()}
    if not a.profile and Path(a.trace).is_file() and _is_kineto(Path(a.trace)):  # the model reads the work from shapes
        from kdvfs.cli.common import shapes_note

        shapes_note(t, err)  # once the work is done: a refused command stays one line
    from kdvfs.cli.common import overlap_note

    overlap_note(t, err)
    if a.json:
        print_json(doc)
        return 0
    c = out(a)
    c.print(f"[bold]{t.name}[/bold] on {spec.name}: {doc['trace']['instances']} instances, switch latency "
            f"{1e3 * doc['switch_model']['latency_s']:.3g} ms, profile from the {doc['profile']}")
    if anchor is not None:
        from kdvfs.cli.anchor import card_line

        c.print("Card: " + card_line(anchor), markup=False)
    if prof_card is not None:
        from kdvfs.cli.anchor import card_line

        c.print("Card: the profile was built (`profile build --anchors`) for " + card_line(prof_card), markup=False)
    c.print(table(f"per iteration, against auto clocks (each kernel throttled on its own: "
                  f"{1e3 * doc['auto']['time_s']:.4g} ms)", ["slack", "policy", "time %", "energy %", "switches"],
                  [[f"{r['slack_pct']:g} %", r["policy"] + (f" ({r['mechanism']})" if r["policy"] == "naive" else ""),
                    signed_pct(r["time_change_pct"], 2), signed_pct(r["energy_change_pct"], 2), r["switches"]]
                   for r in doc["rows"] if r["policy"] != "naive" or r["mechanism"] == a.mechanism]))
    c.print(f"'{IDEAL}' assumes a clock switch costs nothing. Report: {paths['report']}")
    for note in (coarse_boundaries_note(doc), switch_queue_note(doc), low_clock_note(doc)):
        if note:
            c.print(note)
    if lim_rows:
        from kdvfs.analyze import limiter_caution

        c.print(limiter_caution(lim_rows, spec.name))
    return 0


def cmd_results(a) -> int:
    from kdvfs.results import render_results

    root = Path(a.root)
    if not (root / "validation").is_dir():  # else it wrote the prose with no numbers, and --check blamed the file
        raise InputError(f"--root {str(root)!r} has no validation/ folder, so there are no results to write: run from "
                         "the repository checkout or give --root PATH_TO_CHECKOUT")
    text = render_results(root)
    target = Path(a.output) if a.output else root / "docs" / "results.md"
    if a.check:
        have = target.read_text() if target.exists() else ""
        if have != text:
            raise InputError(f"{target} is not what the files under validation/ give; regenerate it with `kdvfs results`")
        out(a).print(f"{target} is up to date")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    out(a).print(f"wrote {target}")
    return 0


def register(sub, j) -> None:
    sp = j(sub.add_parser("analyze", help="a trace (PyTorch profiler or kdvfs) to an answer: savings at several "
                                          "slacks, under the card's switch latency, report and figures",
                          ))
    sp.add_argument("trace", help="a PyTorch profiler trace (.json/.json.gz), a kdvfs trace file or a bundled name")
    sp.add_argument("--gpu", help="the card to plan for (default: the one named in --profile's header)")
    sp.add_argument("--profile", help="a measured or fitted profile (default: built from the kernel model)")
    from kdvfs.cli.anchor import add_anchor_args

    add_anchor_args(sp, "; not with --profile")
    # extend, not store: `--slack 1 --slack 5` kept only 5 (whatif and limiter whatif take --slack repeated); no
    # default list here, which extend would add to
    sp.add_argument("--slack", type=float, nargs="+", action="extend", default=None,
                    help="tolerated slowdowns, percent (`--slack 1 5` or `--slack 1 --slack 5`; default 0 1 2 5)")
    sp.add_argument("--mechanism", choices=["sync", "callback", "predictive"], default="predictive",
                    help="switch mechanism of the switch-aware plans (predictive: writes issued off the training "
                         f"thread, as the runtime does; sync: every switch also stalls the GPU a fixed "
                         f"{MECHANISM_OVERHEADS})")
    sp.add_argument("--switch-latency", type=float, help="total switch latency in seconds, split like the card's preset into host call and transition (default: the card's)")
    sp.add_argument("--step", choices=["last", "all"], default="last",
                    help="with ProfilerStep annotations: the last step, or all steps averaged")
    sp.add_argument("--no-kernel-switch-aware", action="store_true",
                    help="skip the kernel-level switch-aware plan (the slowest part on long traces)")
    sp.add_argument("-o", "--output", help="output folder (default: kdvfs-analysis-TRACE)")
    sp.set_defaults(fn=cmd_analyze)

    sp = sub.add_parser("results", help="write docs/results.md from the result files under validation/")
    sp.add_argument("--root", default=".", help="the repository checkout")
    sp.add_argument("-o", "--output", help="file to write (default: ROOT/docs/results.md)")
    sp.add_argument("--check", action="store_true", help="only check that the file is up to date (exit 2 if not)")
    sp.set_defaults(fn=cmd_results)
