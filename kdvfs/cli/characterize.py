"""Command-line verbs of the observe-only characterisation: ``characterize`` (the kernel zoo and the limiter's step
responses) and ``measure-steps`` (real training steps: energy, time and clock per step, with a recorded trace).

Both only read the card (``NvmlBackend(observe_only=True)``); ``--allow-clock-control`` is refused. ``--backend fake``
runs ``characterize`` on ``hw_backend.fake.FakeNvml`` without torch (CI).
"""

from __future__ import annotations

import math
import shlex
import sys

from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["register"]


def _refuse_control(a) -> None:
    if getattr(a, "allow_clock_control", False):
        raise InputError(f"{a.cmd} only observes the card: --allow-clock-control is refused here (the driver's own "
                         "clocks are what it measures); drop the flag")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


MAX_WINDOW_S = 3600.0


def _check_windows(a) -> None:
    """A measured window and a warm-up must be finite, the window positive: NaN ran a zero-length window, whose power
    read above the card's limit."""
    for name in ("window", "warmup"):
        v = getattr(a, name, None)
        if v is not None and (not math.isfinite(v) or v < 0 or (name == "window" and v <= 0)):
            raise InputError(f"--{name} {v!r} must be a {'positive' if name == 'window' else 'non-negative'} number of "
                             f"seconds; e.g. --{name} {5 if name == 'window' else 1}")
        if v is not None and v > MAX_WINDOW_S:  # a typo (1e9) would hold a real card for years per entry
            raise InputError(f"--{name} {v!r} s is more than an hour per zoo entry ({MAX_WINDOW_S:.0f} s at most); "
                             f"give seconds, e.g. --{name} {5 if name == 'window' else 1}")


# Sets whose entries only mean what their names say when measured in order, from the start, in one run: the heat
# entries warm the card for the "warm"/"hot" entries after them, and a "cool" entry needs a card idle beforehand.
ORDERED_SETS = ("thermal", "warm-cool")


def _refuse_resume_out_of_order(a, zoo) -> None:
    """A rerun resumes after the entries its file holds; for an ordered set that measured the rest on a card that
    had cooled (or not) since the interruption, under the names "warm" and "hot". ``--only`` chooses on purpose."""
    from pathlib import Path

    from hw_backend.characterize import load_characterization

    if a.set not in ORDERED_SETS or a.only is not None or not Path(a.output).is_file():
        return
    try:
        done = {k.get("name") for k in load_characterization(a.output)["kernels"]}
    except Exception:  # noqa: BLE001 - an unreadable file is the campaign's to report, with its own message
        return
    have = [k.name for k in zoo if k.name in done]
    left = [k.name for k in zoo if k.name not in done]
    if have and left:
        raise InputError(f"-o {a.output!r} already holds {len(have)} of the {len(zoo)} entries of --set {a.set}, "
                         f"which is measured in order from its start (its heat entries warm the card for the entries "
                         f"after them), so resuming would measure {left[0]} and the rest on a card whose temperature "
                         "no longer fits their names; give a new -o file to run the set again from its start, or "
                         "--only NAMES to measure chosen entries on purpose")


def cmd_characterize(a) -> int:
    from hw_backend.characterize import ZOO_SETS, Executor, FakeZoo, characterize, full_zoo
    from hw_backend.nvml import NvmlBackend

    _refuse_control(a)
    _check_windows(a)
    if not (math.isfinite(a.step_scale) and a.step_scale > 0):  # 0 ran step responses without a single probe
        raise InputError(f"--step-scale {a.step_scale!r} must be a positive number (1 = the campaign's phase lengths); "
                         "e.g. --step-scale 0.1, or --no-steps to skip the step responses")
    zoo = full_zoo() if a.set == "all" else ZOO_SETS[a.set]()
    if a.only is not None:
        want = [s.strip() for s in a.only.split(",") if s.strip()]
        if not want:
            raise InputError(f"--only {a.only!r} names no kernel; give comma-separated zoo names "
                             "(`kdvfs characterize --list` names them) or leave --only out")
        known = {k.name for k in zoo}
        bad = [w for w in want if w not in known]
        if bad:  # the sets not in `all` (thermal, warm-cool, conv) are not listed by a plain --list either: name the set
            holds = sorted({nm for nm, fn in ZOO_SETS.items() if bad[0] in {k.name for k in fn()}})
            where = (f"; {bad[0]} is in --set {' and --set '.join(holds)}" if holds else
                     f"; no --set holds {bad[0]}")
            raise InputError(f"--only: {', '.join(bad)} not in the zoo of --set {a.set}{where}; `kdvfs characterize "
                             f"--set {a.set} --list` names its entries")
        zoo = tuple(k for k in zoo if k.name in want)
    if a.list:
        rows = [[k.name, k.category, k.dtype, "x".join(map(str, k.shape)), f"{k.work.flops:.3g}", f"{k.work.bytes:.3g}"]
                for k in zoo]
        make_console().print(table("characterisation zoo", ["kernel", "category", "dtype", "shape", "FLOPs", "bytes"], rows))
        return 0
    if a.output is None:
        raise InputError("characterize: give -o/--output FILE.json for the results")
    from kdvfs.fileio import check_output_path

    check_output_path(a.output, "characterisation output", make_parents=True)  # before measuring, not after
    _refuse_resume_out_of_order(a, zoo)
    if a.backend == "fake":
        from hw_backend.fake import FakeNvml
        from kdvfs.gpus import get_gpu

        spec = get_gpu(a.gpu)
        fake = (FakeNvml.from_characterization(a.replay, spec) if a.replay else FakeNvml(spec, seed=a.seed))
        be = NvmlBackend(fake, observe_only=True)
        ex: Executor = FakeZoo(fake, zoo, reject=[s for s in (a.fake_reject or "").split(",") if s])
        threaded = False
    else:
        from hw_backend.zoo_torch import TorchZoo

        be = NvmlBackend(observe_only=True)
        ex = TorchZoo(a.device)
        threaded = True
    cmd = "kdvfs " + " ".join(shlex.quote(x) for x in sys.argv[1:]) if a.command is None else a.command
    doc = characterize(be, ex, a.output, zoo=zoo, window_s=a.window, warmup_s=a.warmup, steps=not a.no_steps,
                       step_scale=a.step_scale, command=cmd, progress=None if a.json else _say,
                       threaded_sampler=threaded,
                       # the loop gives up on a window after max_s (60 s by default): `--window 100` measured 60 s
                       # windows in a file whose window_s said 100, with only a log line per entry
                       max_s=max(60.0, 2.0 * a.window))
    if a.json:
        print_json({"output": a.output, "kernels": len(doc["kernels"]), "step_responses": len(doc["step_responses"])})
        return 0
    rows = [[k["name"], f"{k['time_s'] * 1e3:.4f}", f"{k['power_w']:.1f}", f"{k['sm_mhz_median']:.0f}",
             f"{k['sm_mhz_p10']:.0f}-{k['sm_mhz_p90']:.0f}"] if "skipped" not in k else [k["name"], "skipped", "", "", ""]
            for k in doc["kernels"]]
    make_console().print(table(f"characterisation ({be.name})", ["kernel", "ms", "W", "SM MHz", "p10-p90"], rows))
    return 0


def cmd_steps(a) -> int:
    from hw_backend.nvml import NvmlBackend
    from hw_backend.steps import MODELS, measure_steps, parse_model

    _refuse_control(a)
    _check_windows(a)
    if a.models is not None and not a.models.strip(" ,"):
        raise InputError(f"--models {a.models!r} names no model; give comma-separated names (e.g. llama-0.5b,"
                         "bert-large-b8) or leave --models out to measure all")
    models = [m.strip() for m in a.models.split(",")] if a.models else list(MODELS)
    seen: dict[tuple, str] = {}
    for m in models:
        if not m:
            raise InputError(f"--models {a.models!r} has an empty name between commas; remove the extra comma")
        try:
            key = parse_model(m)
        except InputError as e:
            raise InputError(f"--models: {e}") from None
        if key in seen:  # one measurement per model: its trace file and steps.json row are named after it
            raise InputError(f"--models names the same model twice ({seen[key]!r} and {m!r}); give each once")
        seen[key] = m
    be = NvmlBackend(observe_only=True)
    cmd = "kdvfs " + " ".join(shlex.quote(x) for x in sys.argv[1:]) if a.command is None else a.command
    doc = measure_steps(be, a.output, models=models, window_s=a.window, warmup_s=a.warmup, small=a.small, command=cmd,
                        progress=_say)
    if a.json:
        print_json(doc)
        return 0
    rows = [[s["model"], f"{s['step_time_s'] * 1e3:.2f}", f"{s['step_energy_j']:.3f}", f"{s['power_w']:.1f}",
             f"{s['sm_mhz_median']:.0f}"] if "error" not in s else [s["model"], "error", "", "", ""] for s in doc["steps"]]
    make_console().print(table("training steps", ["model", "ms/step", "J/step", "W", "SM MHz"], rows))
    return 0


def cmd_calibrate_h200(a) -> int:
    import json
    from pathlib import Path

    from kdvfs.bundled import bundled_dir
    from kdvfs.calibrate_h200 import DEFAULT_DATA, run_h200_fit
    from kdvfs.gpus import H200_FIT_FILE

    cmd = "kdvfs " + " ".join(shlex.quote(x) for x in sys.argv[1:]) if a.command is None else a.command
    if a.check:
        return _check_h200(a, cmd)
    if not a.data and not all(Path(f).is_file() for f in DEFAULT_DATA):
        raise InputError(f"calibrate-h200: the default data ({DEFAULT_DATA[0]} and its siblings) is relative to a kdvfs "
                         f"checkout and is not under {str(Path.cwd())!r}; run from the repository root or give --data FILE")
    from kdvfs.fileio import check_output_path, write_atomic

    output = a.output or _DEFAULT_FIT_OUTPUT
    check_output_path(output, "fit output", make_parents=True)  # before the fit, not after it
    _refuse_foreign(output, "kdvfs-h200-fit/1", "fit output", "a fit", getattr(a, "force", False))
    doc = run_h200_fit(a.data or list(DEFAULT_DATA), command=cmd,
                       **({"structure": a.structure} if a.structure is not None else {}),
                       **({"gap_model": a.gap_model} if a.gap_model is not None else {}))
    text = json.dumps(doc, indent=1) + "\n"
    outs = [Path(output)] + ([] if a.no_bundle else [bundled_dir() / H200_FIT_FILE])
    for o in outs:  # whole or not at all: a fit cut short would break the h200 preset
        write_atomic(o, text.encode(), "fit output", make_parents=True)
    if a.json:
        print_json({k: v for k, v in doc.items() if k != "heldout"} | {"written": [str(o) for o in outs]})
        return 0
    c = make_console()
    c.print(_zoo_table("H200 fit: each zoo kernel alone at the card's own clocks", doc["fit"]["per_kernel"]))
    f, h = doc["fit"], doc["heldout"]
    c.print(f"all {f['kernels']} fitted: clock within 5 % for {f['meet_clock']}, power within 3 % for "
            f"{f['meet_power']}, both for {f['meet_both']}; held out ({h['split']}): test {h['test']['meet_both']}/"
            f"{h['test']['kernels']} both (clock {h['test']['meet_clock']}, power {h['test']['meet_power']}); "
            f"written: {', '.join(map(str, outs))}")
    return 0


def _check_h200(a, cmd: str) -> int:
    """``calibrate-h200 --check FIT``: the stored fit against ``--data`` files, nothing fitted or bundled."""
    import json

    from kdvfs.calibrate_h200 import check_h200_fit
    from kdvfs.limiter_fit import load_json

    if not a.data:
        raise InputError("calibrate-h200 --check: give the characterisation file(s) to check the fit against with "
                         "--data FILE (e.g. --data validation/h200/characterization/characterization5.json.gz)")
    if a.output is not None:  # the check writes only where asked, never over a fit or a characterisation
        from kdvfs.fileio import check_output_path

        check_output_path(a.output, "check output", make_parents=True)
        _refuse_foreign(a.output, "kdvfs-h200-fit-check/1", "check output", "a check report", getattr(a, "force", False))
    doc = check_h200_fit(load_json(a.check), a.data, command=cmd, where=f"--check {a.check!r}")
    if a.output is not None:
        from kdvfs.fileio import write_atomic

        write_atomic(a.output, (json.dumps(doc, indent=1) + "\n").encode(), "check output")
    if a.json:
        print_json(doc)
        return 0
    c = make_console()
    ch = doc["check"]
    c.print(_zoo_table(f"the fit of {a.check} against {', '.join(doc['data'])}", ch["per_kernel"], mark_misses=True))
    seen = f" (already in the fit: {', '.join(doc['files_in_fit'])})" if doc["files_in_fit"] else " (held out)"
    c.print(f"{ch['kernels']} kernels{seen}: clock within {doc['targets']['clock_pct']:g} % for {ch['meet_clock']}, "
            f"power within {doc['targets']['power_pct']:g} % for {ch['meet_power']}, both for {ch['meet_both']}")
    return 0


_DEFAULT_FIT_OUTPUT = "validation/h200/characterization/fit.json"


def _zoo_table(title: str, per_kernel: list[dict], mark_misses: bool = False):
    """The per-kernel table of a fit or a check: measured and predicted clock and power, their errors (``miss`` after
    a kernel outside both targets, for a check)."""
    rows = [[r["name"], f"{r['measured_sm_mhz']:.0f}", f"{r['predicted_sm_mhz']:.0f}", f"{r['clock_error_pct']:+.1f}",
             f"{r['measured_power_w']:.1f}", f"{r['predicted_power_w']:.1f}", f"{r['power_error_pct']:+.1f}"
             + ("" if r["meets_both"] or not mark_misses else " miss")] for r in per_kernel]
    return table(title, ["kernel", "MHz meas.", "MHz pred.", "%", "W meas.", "W pred.", "%"], rows)


def _refuse_foreign(path, fmt: str, what: str, kind: str, force: bool = False) -> None:
    """Refuse to write over an existing file that is not itself ``fmt`` (a measurement, a fit, the bundled fit the
    h200 preset reads): the command's result replaces only an earlier result of its own kind (``force``: any file;
    a file of another known kind is refused before, for every verb, by ``kdvfs.cli.paths.refuse_other_kinds``)."""
    from pathlib import Path

    from kdvfs.limiter_fit import load_json

    p = Path(path)
    if force or not p.is_file() or p.stat().st_size == 0:
        return
    try:
        doc = load_json(p)
        got = doc.get("format") if isinstance(doc, dict) else None
    except InputError:
        got = None
    if got != fmt:
        raise InputError(f"{what} {str(p)!r} exists and is not {kind} (its format is {got!r}, not {fmt!r}); it is "
                         "left as it is: give a new file name, or add --force to replace it")


def register(sub, j) -> None:
    sp = j(sub.add_parser("characterize", help="observe-only kernel zoo and power-limiter step responses"))
    sp.add_argument("--backend", choices=["nvml", "fake"], default="nvml")
    sp.add_argument("--gpu", default="h200", help="fake backend: the preset it simulates")
    sp.add_argument("--replay", help="fake backend: replay a characterisation file's clocks and power")
    sp.add_argument("-o", "--output", help="results JSON (rewritten after every kernel; a rerun resumes the same "
                                            "campaign: same card, driver, --window and --warmup; .gz is gzipped)")
    sp.add_argument("--window", type=float, default=5.0, help="measured window per kernel, seconds (default 5)")
    sp.add_argument("--warmup", type=float, default=1.0, help="warm-up per kernel, seconds (default 1)")
    sp.add_argument("--set", choices=["all", "base", "cache-gaps", "step-shapes", "duty", "top-clock",
                                                "attention", "held-duty", "small", "thermal", "warm-cool", "conv",
                                                "anchor", "tiny-grid", "tiny-grid2", "step-ops", "light-ops2", "copies",
                                                "light-ops3", "light-ops4"],
                    default="all",
                    help="which zoo: base (the first 38 kernels), cache-gaps (L2 working sets, launch-bound and host-gap "
                         "power, idle), step-shapes (kernels at real training steps' shapes), duty (heavy kernels in "
                         "bursts below the cap; vocabulary GEMMs), top-clock (the steps' GEMM and attention shapes in "
                         "bursts below the cap; memory kernels by direction), attention (causal and full attention at head dims 64 "
                         "and 128 in bursts below the cap), held-duty (GEMM bursts the limiter holds between the cap's clock and the "
                         "top clock), small (CUDA-graph replays of small kernels that keep few SMs busy, with their "
                         "launch grids), thermal (host-gap power and small kernels on a warm card "
                         "as it cools, short gaps after bursts; run it right after real steps; not in all), warm-cool (the same kernels on a cool and a hot die, tiny kernels "
                         "launched one by one, gap lengths after a burst; on a card idle for 30 s; not in all), conv "
                         "(batch norm, depthwise convolutions, SiLU, pooling at the convolutional steps' shapes; not in "
                         "all), tiny-grid (tensor-core kernels of few blocks: wav2vec 2.0's grouped convolution, small GEMMs; not in "
                         "all), tiny-grid2 (more of them at other shapes: few-tile GEMMs, batched small GEMMs, a depthwise "
                         "and a grouped convolution at small batch, three tiny-grid repeats; not in all), step-ops (the ops of "
                         "steps12 no other set has, at its shapes: bilinear upsampling, spatial log-softmax, pooling, "
                         "group norm, col2im, 1 × 1 convolutions; not in all), light-ops2 (the step-ops set's ops again at other shapes "
                         "and dtypes; not in all), copies (strided copies: batched and 2-D transposes, channels-last "
                         "copies; a grouped 1 × 1 convolution; not in all), light-ops3 (spatial log-softmax and its backward, row "
                         "softmax and 1 × 1 convolutions at other shapes and dtypes; not in all), light-ops4 (strided copies "
                         "whose waste stays in L2, bf16 spatial log-softmax at 150 classes, 1 × 1 convolution "
                         "backwards, at new shapes; not in all), anchor (eight entries of the other sets, about a minute: the card's own constants for `--anchors`; add --no-steps to skip the step responses, ~15 s more on a card and minutes on the fake; not in "
                         "all) or all (default: %(default)s)")
    sp.add_argument("--only", help="comma-separated zoo kernel names")
    sp.add_argument("--list", action="store_true", help="list the zoo and exit")
    sp.add_argument("--no-steps", action="store_true", help="skip the step responses")
    sp.add_argument("--step-scale", type=float, default=1.0, help="scale the step responses' phase lengths")
    sp.add_argument("--device", default="cuda", help="nvml backend: torch device (cpu = dry run of the code path)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--allow-clock-control", action="store_true", help="refused: characterize only observes")
    sp.add_argument("--fake-reject", help=_hidden())
    sp.add_argument("--command", help=_hidden())
    sp.set_defaults(fn=cmd_characterize)

    sp = j(sub.add_parser("measure-steps", help="observe-only: real training steps' energy, time and clock"))
    sp.add_argument("-o", "--output", required=True, help="folder for steps.json and the recorded traces")
    sp.add_argument("--models", help="comma-separated (default: all); a name with -b<N> runs it at batch N per GPU "
                                      "(e.g. llama-0.5b-b2)")
    sp.add_argument("--window", type=float, default=10.0, help="measured window per model, seconds (default 10)")
    sp.add_argument("--warmup", type=float, default=2.0, help="seconds of steps before each window (default 2)")
    sp.add_argument("--small", action="store_true", help="tiny models (a quick run of the code path; still "
                                                                  "reads NVML, so it needs the driver)")
    sp.add_argument("--allow-clock-control", action="store_true", help="refused: measure-steps only observes")
    sp.add_argument("--command", help=_hidden())
    sp.set_defaults(fn=cmd_steps)

    sp = j(sub.add_parser("calibrate-h200", help="fit the H200's constants to a characterisation (and bundle the fit)"))
    sp.add_argument("--data", action="append",
                    help="a characterisation file to fit to (repeatable; default: "
                         "validation/h200/characterization/characterization.json.gz, characterization2 … 6, 8, 10 and 11.json.gz)")
    sp.add_argument("-o", "--output",
                    help=f"file to write (default: {_DEFAULT_FIT_OUTPUT}; with --check, the check's report, written only "
                         "if given); an existing file is replaced only if it is a result of the same kind")
    sp.add_argument("--no-bundle", action="store_true", help="do not write traces/h200.fit.json (the preset's source)")
    sp.add_argument("--check", metavar="FIT",
                    help="fit nothing: predict the --data files with this stored fit (e.g. "
                         "validation/h200/characterization/fit.json) and report each kernel against the targets")
    # the names of kdvfs.calibrate_h200.STRUCTURES (not imported here: the CLI starts without the fit's imports)
    sp.add_argument("--structure",
                    help="the model structure fitted: components of kdvfs.calibrate_h200.STRUCTURES joined by '+' "
                         "(default: the bundled model's, kdvfs.calibrate_h200.DEFAULT_STRUCTURE; none: the session-7 "
                         "model's). warp-occupancy fits occ_exp, the base activity scaling with the share of "
                         "resident-thread slots a launch fills; conv-dot prices direct convolutions' SIMT FLOPs as a "
                         "GEMM's on the CUDA cores (the bundled model has both); occupancy-rate-floor keeps a kernel's "
                         "base at its achieved share of its roofline at least; it, sm-occupancy, issue-rate and "
                         "tensor-rate were tried and not kept (validation/h200/fidelity/README.md, session 8)")
    sp.add_argument("--gap-model", choices=("median", "thermal"),
                    help="how the GPU idle is priced (kdvfs.calibrate_h200.GAP_MODELS; default DEFAULT_GAP_MODEL): "
                         "median, the median power of the zoo's gap entries; thermal, the gap entries' power as a "
                         "line in the card's temperature, with the temperature a step holds from its average power "
                         "(kdvfs.thermal)")
    sp.add_argument("--command", help=_hidden())
    sp.set_defaults(fn=cmd_calibrate_h200)


def _hidden():
    import argparse

    return argparse.SUPPRESS
