"""The ``kdvfs`` command: ``main(argv) -> int``; each verb is a small function calling the library.

Exit status: 0 success, 2 bad input or a hardware refusal (one clear message, no traceback), 130 interrupted.
One module per group of verbs, each with a ``register(sub, j)``; ``common`` holds what they share.
``simulator`` and ``hw_backend`` are imported lazily, inside the verbs only.
"""

from __future__ import annotations

import argparse
import logging
import sys

from kdvfs.cli import analyze, anchor, catalog, characterize, hw, limiter, multi, optimize, sim, summarize, trace
from kdvfs.cli.common import MECHANISM_OVERHEADS
from kdvfs.errors import KdvfsError

__all__ = ["build_parser", "main"]

# Help for options whose verb gave none, by destination: one wording for one option across every command.
_HELP = {
    "trace": "kdvfs trace file or bundled name (`kdvfs trace show --list`; import a PyTorch profiler trace with "
             "`kdvfs trace import`)",
    "file": "the file to import: a PyTorch profiler trace (.json, .json.gz) or the study's kernel table (.csv)",
    "output": "file to write",
    "name": "name of the new trace (default: the file's stem)",
    "profile": "profile file or bundled name (default: the trace's bundled profile, else built from the kernel model)",
    "gpu": "the card, a catalog name (`kdvfs gpu list`)",
    "schedule": "schedule file (`kdvfs optimize -o`, `kdvfs analyze`)",
    "objective": "waste: least energy within the time bound; edp/ed2p: energy × time(²); energy: least energy",
    "granularity": "one setting per run (static), per pass, or per kernel",
    "scope": "global: one time bound on the whole iteration; local: each kernel keeps its own",
    "solver": "fast Lagrangian hull solver, or the exact MILP (HiGHS)",
    "mechanism": "how a switch is issued: sync (host waits; every switch also stalls the GPU a fixed "
                 f"{MECHANISM_OVERHEADS}), callback (in-stream host function), predictive (issued early off the "
                 "critical path)",
    "switch_model": "borrow a preset's switch model",
    "switch_latency": "total switch latency in seconds (overrides the card's)",
    "seed": "random seed",
    "gpus": "number of GPUs",
    "parallel": "parallelism across GPUs",
    "path": "simulator path: the vectorised fast path, the simpy engine, or auto",
    "policy": "policies to compare (repeatable)",
    "slack": "tolerated slowdown in percent",
    "png": "figure file (default: beside the output, .png)",
    "scope_frontier": "",
    "slack_min": "smallest tolerated slowdown, percent",
    "slack_max": "largest tolerated slowdown, percent",
    "slack_step": "step between slowdowns, percent",
    "study": "the study to reproduce (spaan2026)",
    "sweep": "sweep CSV (`kdvfs sweep -o`)",
    "trace_name": "name of the trace the sweep measured",
    "train_points": "clock settings per kernel used for fitting (the rest test it)",
    "precision": "numeric precision of the recorded block",
    "batch": "sequences per step",
    "seq": "tokens per sequence",
    "warmup": "warm-up (steps for record; seconds for sweep/validate)",
    "repeats": "measurement repeats per point",
    "backend": "nvml (a real card; observe-only unless --allow-clock-control) or fake (the fake device)",
    "mode": "isolated (each kernel alone, the study's case) or live (switching between kernels)",
    "executor": "local, serial, ray or ray://HOST:PORT",
    "out": "output folder",
}


class _Formatter(argparse.HelpFormatter):
    """Shows each option's default unless its help already says it, or there is none to show (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        h = action.help or ""
        d = action.default
        if ("default" in h or d is None or d is False or d is argparse.SUPPRESS or not action.option_strings
                or isinstance(action, argparse._VersionAction)):
            return h
        return f"{h} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Every (sub)parser shows defaults in its help (subparsers inherit the parser class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["formatter_class"] = _Formatter
        super().__init__(*args, **kwargs)


def _fill_help(parser: argparse.ArgumentParser) -> None:
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sp in act.choices.values():
                _fill_help(sp)
        elif not act.help and act.dest in _HELP and _HELP[act.dest]:
            act.help = _HELP[act.dest]


_MODULES = (trace, analyze, catalog, optimize, sim, hw, multi, characterize, limiter, summarize, anchor)
"""The verb modules, in the order ``kdvfs --help`` lists their verbs."""

_MODULE_OF = {"trace": trace, "record": trace, "analyze": analyze, "results": analyze, "gpu": catalog,
              "profile": catalog, "optimize": optimize, "frontier": optimize, "reproduce": optimize,
              "compare": optimize, "simulate": sim, "whatif": sim, "demo": sim, "sweep": hw, "validate": hw,
              "reset-clocks": hw, "simulate-ranks": multi, "characterize": characterize,
              "measure-steps": characterize, "calibrate-h200": characterize, "limiter": limiter,
              "validate-steps": limiter, "summarize": summarize, "card-anchor": anchor}
"""Which module registers each verb: where the command line names one, only that module's verbs are registered
(building all ~300 options costs a short command ~3 % of its time). A verb missing here is found by registering the
modules in order (``tests/test_cli_lazy.py`` holds the entries right)."""


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command's parser. With ``verb``, only the module that registers it is registered (that verb's command lines
    parse, fail and show help exactly as with every module: a verb's options, messages and usage are its own
    subparser's); a verb no module registers, or None, gives the full parser."""
    from kdvfs import __version__

    p = _Parser(prog="kdvfs", description="Kernel-level DVFS for LLM training.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    p.add_argument("--version", action="version", version=f"kdvfs {__version__}")
    # every verb in the usage line, as the full parser lists them, also where only one module is registered (an
    # error the top parser reports, e.g. an option the verb lacks, shows that usage)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{" + ",".join(_MODULE_OF) + "}")

    def j(sp):
        sp.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
        # every verb: an output that names an existing file of another kind (a profile, a trace, a schedule, a
        # measurement) is refused without it (kdvfs.cli.paths.refuse_other_kinds)
        sp.add_argument("--force", action="store_true",
                        help="replace an existing output file even where it is of another kind (a profile, a trace, "
                             "a schedule, a measurement)")
        return sp

    hint = _MODULE_OF.get(verb) if verb is not None else None
    order = _MODULES if hint is None else (hint,) + tuple(m for m in _MODULES if m is not hint)
    for m in order:
        m.register(sub, j)
        if verb is not None and verb in sub.choices:
            break
    else:
        if hint is not None:  # the verb is no module's: the full parser, in its order, for the message naming the verbs
            return build_parser()
    _fill_help(p)
    return p


def _verb_of(argv: list[str]) -> str | None:
    """The verb a command line names, where it is plain: the first word, after nothing but ``-v``/``--verbose``."""
    for arg in argv:
        if arg not in ("-v", "--verbose"):
            return None if arg.startswith("-") else arg
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_verb_of(sys.argv[1:] if argv is None else list(argv)))
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import signal
    import threading

    # an interrupted verb may ignore further SIGINTs while it ends its workers (kdvfs.cli.sim._no_second_interrupt):
    # the caller's handler is back once main returns (a notebook or a test calling main keeps its Ctrl-C)
    sigint = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    try:
        from kdvfs.cli.paths import refuse_outputs_over_inputs

        refuse_outputs_over_inputs(a)  # every verb: an output never replaces an input, checked before any work
        from kdvfs.cli.common import check_seed

        check_seed(a)
        from kdvfs.cli.flags import check_numeric_flags

        check_numeric_flags(a)  # every verb: a bad numeric flag is said before anything is loaded
        return int(a.fn(a) or 0)
    except KdvfsError as e:
        print(f"kdvfs: error: {e}", file=sys.stderr)
        return 2
    except (OSError, MemoryError) as e:
        # last resort: readers and writers translate their own failures; this keeps any that slip through to one line
        logging.getLogger(__name__).debug("unexpected", exc_info=True)
        what = f"{e.strerror} ({e.filename})" if isinstance(e, OSError) and e.strerror else type(e).__name__
        print(f"kdvfs: error: {what}; check the paths and free memory/disk (run with -v for details)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kdvfs: interrupted", file=sys.stderr)
        return 130
    finally:
        if sigint is not None:
            signal.signal(signal.SIGINT, sigint)


if __name__ == "__main__":
    raise SystemExit(main())

