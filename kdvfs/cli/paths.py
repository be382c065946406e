"""The command line's check of every verb's paths before any work: an output never names one of the verb's inputs,
a figure has a suffix matplotlib writes, a results folder is not a file. It knows the verbs' argparse destinations,
so it lives beside them (``kdvfs/cli/__init__.py`` calls it once for every verb).
"""

from __future__ import annotations

import os
from pathlib import Path

from kdvfs.errors import InputError

__all__ = ["figure_beside", "refuse_other_kinds", "refuse_outputs_over_inputs"]


# Options that name a file a verb reads, and options that name a file it writes, by argparse destination. An output
# that is one of the inputs would replace a measurement or a recorded trace with the result (`trace import X -o X`,
# `profile build --trace T -o T`, `simulate --timeline SCHEDULE` all did, with exit 0).
# (calibrate-h200's --data and --check, and validate-steps' folder, have their own checks with their own messages.)
INPUT_DESTS = ("file", "trace", "profile", "schedule", "sweep", "table", "files", "fit", "replay",
               "characterization", "evidence", "work_from", "measured_collectives",
               # the card's anchor run and card-anchor's other files of the lease: `profile build --anchors A -o A`
               # and `card-anchor L --also C -o C` replaced a measurement with the result, exit 0
               "anchors", "also")
OWN_INPUT_CHECKS = ("validate-steps", "calibrate-h200")
OUTPUT_DESTS = ("output", "png", "plot", "timeline", "scaling_png", "md")
# What matplotlib writes (a figure path with another suffix failed with a traceback after the work was done).
FIGURE_DESTS = ("png", "plot", "scaling_png")
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")


# Outputs that are folders (the verb writes several files into them): a file there failed only after the work, with
# "File exists (…); check the paths and free memory/disk".
FOLDER_OUTPUTS = {("analyze", "output"), ("reproduce", "output"), ("demo", "out")}  # profile calibrate checks its own


# What each output writes, in words, and the kinds of file it may replace (``kdvfs.filekind``): its own, by the verb's
# function and the option's destination. A file of another known kind (a profile, a trace, a schedule, a profiler
# trace, a measurement, a figure) is refused unless --force; a file of no known kind is replaced as before. An output
# not listed writes a result of no kdvfs kind (a CSV, a JSON report, markdown).
OUTPUT_KINDS = {
    # several files import as one multi-rank trace (kdvfs-ranks/1)
    ("cmd_trace_import", "output"): ("a kdvfs trace", {"kdvfs-trace/1", "kdvfs-trace/2", "kdvfs-ranks/1"}),
    ("cmd_record", "output"): ("a kdvfs trace", {"kdvfs-trace/1", "kdvfs-trace/2"}),
    ("cmd_profile_build", "output"): ("a kdvfs profile", {"kdvfs-profile/1"}),
    ("cmd_profile_fit", "output"): ("a kdvfs profile", {"kdvfs-profile/1"}),
    ("cmd_optimize", "output"): ("a kdvfs schedule", {"kdvfs-schedule/1"}),
    ("cmd_simulate", "timeline"): ("a Chrome trace (the simulated timeline)", {"chrome-trace"}),
    ("cmd_sweep", "output"): ("a kdvfs sweep", {"kdvfs-sweep/1"}),
    ("cmd_characterize", "output"): ("a characterisation", {"kdvfs-characterization/1"}),
    ("cmd_card_anchor", "output"): ("a card-anchor report", {"kdvfs-card-anchor/1", "kdvfs-card-anchor-check/1"}),
}
_WRITES = {"output": "its results", "md": "markdown tables", "out": "its results (JSON)"}
# Outputs that replace nothing but their own format, known or not: their verb's stricter check says so
# (``kdvfs.cli.characterize._refuse_foreign``, with the same fix).
STRICT_OUTPUTS = {("cmd_calibrate_h200", "output")}


def refuse_other_kinds(args: object) -> None:
    """Each output of ``args`` that names an existing file of another kind than the verb writes is refused with one
    message naming the file, its kind and the fix (another path, or ``--force``): one check for every verb."""
    from kdvfs.filekind import FIGURE, refuse_other_kind

    fn = getattr(getattr(args, "fn", None), "__name__", "")
    force = bool(getattr(args, "force", False))
    for d in (*OUTPUT_DESTS, "out"):
        v = getattr(args, d, None)
        if not isinstance(v, (str, Path)) or not str(v) or (getattr(args, "cmd", None), d) in FOLDER_OUTPUTS \
                or (fn, d) in STRICT_OUTPUTS:
            continue
        if d in FIGURE_DESTS:
            writes, own = "a figure", {FIGURE}
        else:
            writes, own = OUTPUT_KINDS.get((fn, d), (_WRITES.get(d, "its results"), set()))
        refuse_other_kind(v, _option(d), writes, own, force)


def _option(dest: str) -> str:
    return "-o" if dest == "output" else "--" + dest.replace("_", "-")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.is_file() and b.is_file() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_outputs_over_inputs(args: object) -> None:
    """Refuse, before any work, an output option that names a file the same command reads, and a figure path with a
    suffix matplotlib cannot write (``InputError`` naming both options and the fix)."""
    ins: list[tuple[str, Path]] = []
    for d in INPUT_DESTS:
        v = getattr(args, d, None)
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(x, (str, Path)) and str(x):
                ins.append((d, Path(x)))
    for d in ("output", "out"):
        v = getattr(args, d, None)
        if (getattr(args, "cmd", None), d) in FOLDER_OUTPUTS and isinstance(v, (str, Path)) and Path(v).exists() \
                and not Path(v).is_dir():
            raise InputError(f"{_option(d)} {str(v)!r} is a file, but this command writes a folder of results there; "
                             "give a folder path (it is created if missing)")
    outs: list[tuple[str, Path]] = []
    for d in OUTPUT_DESTS:
        v = getattr(args, d, None)
        if not isinstance(v, (str, Path)) or not str(v):
            continue
        o = Path(v)
        for di, i in ins:
            if _same_file(o, i):
                eg = o.with_name("out-" + o.name)
                if d in FIGURE_DESTS and eg.suffix.lower() not in FIGURE_SUFFIXES:  # a name the figure check takes
                    eg = eg.with_name(eg.name.split(".")[0] + ".png")
                raise InputError(f"{_option(d)} {str(o)!r} is a file this command reads (its {di.replace('_', ' ')} "
                                 f"input); writing there would replace it with the result: give a new file name (e.g. {_option(d)} "
                                 f"{str(eg)!r})")
        # after the input check (whose message names the input), and for an existing file too: `frontier -o f.csv
        # --png f.csv` with f.csv already there wrote the CSV, then died in matplotlib with a traceback (the verbs
        # that check their own inputs keep an existing file for that check, whose message names the input)
        if d in FIGURE_DESTS and o.suffix and o.suffix.lower() not in FIGURE_SUFFIXES and not (
                o.is_file() and getattr(args, "cmd", None) in OWN_INPUT_CHECKS):
            raise InputError(f"{_option(d)} {str(o)!r}: a figure is written as {', '.join(FIGURE_SUFFIXES)}, not "
                             f"{o.suffix!r}; give e.g. {_option(d)} {str(o.with_suffix('.png'))!r}")
        for do, p in outs:  # two outputs of one command in one file: the second replaces the first
            if os.path.abspath(p) == os.path.abspath(o) or _same_file(p, o):
                raise InputError(f"{_option(do)} and {_option(d)} both name {str(o)!r}; the second would replace the "
                                 f"first: give each its own file (e.g. {_option(d)} {str(o.with_name('out-' + o.name))!r})")
        outs.append((d, o))
    if getattr(args, "cmd", None) != "validate-steps":  # it checks its own inputs first, then calls this itself
        refuse_other_kinds(args)


def figure_beside(output: str | None, png: str | None) -> Path | None:
    """The figure a verb writes with its CSV: ``--png``, else the CSV's path with the suffix ``.png``; None when
    neither is given. Refuses ``-o X.png``, whose figure would replace the CSV just written (`whatif -o w.png` and
    `frontier -o f.png` left a PNG and no CSV, exit 0)."""
    if png:
        return Path(png)
    if not output:
        return None
    fig = Path(output).with_suffix(".png")
    if fig == Path(output):
        raise InputError(f"-o {output!r}: the CSV goes there and the figure beside it as {str(fig)!r}, the same file, so "
                         f"the figure would replace the CSV; give -o {str(fig.with_suffix('.csv'))!r}, or name the "
                         "figure with --png")
    return fig
