"""Helpers shared by the command-line verbs: loading traces and profiles, the switch model, CSV output, progress."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from kdvfs.console import make_console
from kdvfs.errors import InputError

__all__ = ["MECHANISM_OVERHEADS", "SETTINGS_HELP", "add_limiter_arg", "check_profile_clocks", "check_seed", "default_profile", "limiter_of", "load_profile_ref", "low_clock_caution", "overlap_note", "shapes_note", "load_trace", "note_other_card", "out", "problem",
           "PROGRESS_EVERY_S", "PlainProgress", "profile_gpu", "progress", "stage_progress", "switch_model", "write_csv"]

MECHANISM_OVERHEADS = ("163 µs for the host synchronisation and relaunch, measured on the H200, whatever the switch "
                       "latency or card; callback: a fixed 110 µs; docs/design-notes.md, 'Shared switch semantics'")
"""``kdvfs.switching.SwitchCosts``' defaults in words (not imported: the parser stays light; a test holds them equal)."""


def out(args=None):
    return make_console()


def load_trace(ref: str):
    from kdvfs.bundled import load_trace_by_name

    return load_trace_by_name(ref)


def load_profile_ref(ref: str):
    from kdvfs.bundled import resolve_profile_path
    from kdvfs.profile import load_profile

    return load_profile(resolve_profile_path(ref))


def low_clock_caution(pb, card: str | None, schedules, subject: str = "this schedule runs", err=None) -> None:
    """Print on stderr (``err``) the caution that ``schedules`` (one, or an iterable: the largest share counts) run much
    of the iteration below half the card's boost clock on rows the profile took from the kernel model, where the model
    extrapolates (``kdvfs.analyze.schedule_low_clock_note``). The one helper of `optimize`, `compare` and `frontier`;
    nothing without a card, or when the share is small. ``schedules`` may be a generator: it is not run then."""
    if not card:
        return
    import sys

    from kdvfs.analyze import schedule_low_clock_note
    from kdvfs.gpus import get_gpu

    note = schedule_low_clock_note(pb, schedules, get_gpu(card), subject)
    if note:
        (err or make_console(sys.stderr)).print(note, markup=False)


SHAPES_NOTE_BELOW = 0.5
"""Share of the step's GPU time with work from input shapes below which `trace import` and `analyze` say so."""


def shapes_note(trace, err=None) -> bool:
    """Say on stderr when less than half the step's GPU time has its work (FLOPs, bytes) from the ops' input shapes:
    a trace recorded without ``record_shapes=True`` imports and analyses without a word, its work guessed from kernel
    names (the ViT step of leaseA without shapes: −15.5 % at 1 % slack on the H200 against −17.7 % with them). Returns
    whether it said so."""
    import sys

    from kdvfs.worktable import work_source_time_share

    share = work_source_time_share(trace).get("shapes", 0.0)
    if share >= SHAPES_NOTE_BELOW:
        return False
    (err or make_console(sys.stderr)).print(
        f"note: only {100 * share:.0f} % of the step's GPU time has its work (FLOPs, bytes) from input shapes; the "
        "rest is estimated from kernel names, so the kernel model's clock response there is rougher. Record with "
        "`record_shapes=True` (README, step 1); `kdvfs trace show` lists where the work came from", markup=False)
    return True


def overlap_note(trace, err=None) -> bool:
    """Say on stderr when the trace's kernels of different ops overlapped on several streams
    (``kdvfs.importers.overlap_note_of``; one op's side-by-side kernels take their share of the wall time and are not
    counted). Returns whether it said so."""
    import sys

    from kdvfs.importers import overlap_note_of

    note = overlap_note_of(trace)
    if note is None:
        return False
    (err or make_console(sys.stderr)).print(f"note: trace {trace.name!r}: {note}", markup=False)
    return True


def write_csv(rows: list[dict], path: str | Path) -> Path:
    """Rows as CSV, written atomically (``kdvfs.fileio``); missing parent folders are created."""
    import io

    from kdvfs.fileio import write_atomic

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return write_atomic(path, buf.getvalue().encode(), "CSV output", make_parents=True)


def problem(a):
    """The trace and its profile: ``--profile``, else the trace's bundled profile, else — with ``--gpu`` — built from
    the kernel model in memory (never written out)."""
    from kdvfs.optimize import Problem
    from kdvfs.passweep import restrict_settings

    t = load_trace(a.trace)
    gpu = getattr(a, "gpu", None)
    if a.profile:
        prof = load_profile_ref(a.profile)
    else:
        from kdvfs.profile import load_profile

        found = default_profile(t, a.trace, gpu)
        prof = found if not isinstance(found, Path) else load_profile(found)
    if gpu and prof.gpu:
        from kdvfs.gpus import get_gpu
        from kdvfs.identity import check_card

        check_card(get_gpu(prof.gpu).name, get_gpu(gpu).name)
    check_profile_clocks(prof)
    return Problem(t, restrict_settings(prof, getattr(a, "settings", None) or "all"))


def note_other_card(t, spec) -> bool:
    """Say on stderr when a trace recorded on one card is modelled as another: the kernel model takes the recorded
    kernel times as ``spec``'s own at its top clock, so the savings describe a card with the recorded card's speed and
    ``spec``'s clocks and power, not ``spec`` itself. Returns whether it said so."""
    import re
    import sys

    rec = getattr(t, "gpu", None)
    if not isinstance(rec, str) or not rec or spec.name in re.sub(r"[\s_-]", "", rec.lower()):
        return False
    make_console(sys.stderr).print(
        f"note: trace {t.name!r} was recorded on {rec!r}; the model takes its kernel times as {spec.name}'s "
        f"({spec.full_name}), so these numbers are not a prediction for {spec.name}: record the step on that card, "
        f"or give --gpu for the card it was recorded on", markup=False)
    return True


def default_profile(t, trace_arg: str, gpu: str | None):
    """The profile a verb uses without ``--profile``: the trace's bundled profile (its path), else — with ``gpu`` —
    one built from the kernel model (a ``Profile`` in memory); else one message naming both ways."""
    from kdvfs.bundled import default_profile_path

    try:
        return default_profile_path(t)
    except InputError:
        if not gpu:
            raise InputError(f"trace {t.name!r} has no bundled profile: give --gpu NAME to build one from the kernel "
                             f"model in memory, or build one with `kdvfs profile build --trace {trace_arg} --gpu GPU -o "
                             "P.csv` (or fit one from a sweep with `kdvfs profile fit`) and pass --profile P.csv") from None
    from kdvfs.gpus import get_gpu
    from kdvfs.model import default_params
    from kdvfs.profile import build_profile

    spec = get_gpu(gpu)
    note_other_card(t, spec)
    return build_profile(t, spec, default_params(t, spec))


SETTINGS_HELP = ("clock settings to choose from: all (the profile's, the card's full grid) or study (the 66 of "
                 "Spaan et al. 2026, to compare with the paper on its own grid)")


def check_profile_clocks(prof) -> None:
    """A profile of a catalog card may only hold settings the card supports: a schedule built from any other would
    be written and then refused by the card (or the validator) only later."""
    from kdvfs.gpus import PRESETS, get_gpu

    if not prof.gpu or prof.gpu.lower() not in PRESETS:
        return
    spec = get_gpu(prof.gpu)
    for c, m in prof.settings:
        try:
            spec.check_setting(c, m)
        except InputError as e:
            raise InputError(f"profile for {prof.gpu} holds a setting the card lacks: {e}; rebuild the profile with "
                             f"`kdvfs profile build --gpu {prof.gpu}` or drop those rows") from None


def check_seed(a) -> None:
    """``--seed`` is a non-negative whole number: numpy's generators refuse a negative one, and characterize, sweep,
    validate (fake backend) and simulate ended in its traceback (``expected non-negative integer``), exit 1."""
    seed = getattr(a, "seed", None)
    if seed is not None and seed < 0:
        raise InputError(f"--seed {seed} must be a whole number ≥ 0 (the random generator's seed); e.g. --seed 0")


def switch_model(a, gpu_name: str | None):
    from kdvfs.gpus import SwitchModel, get_gpu

    preset = getattr(a, "switch_model", None)
    if getattr(a, "switch_latency", None) is not None:
        # split into host call and transition as the card's own preset is (the what-if grid does the same), so a
        # latency equal to the card's total gives the card's numbers; 25 % host call without a card
        base = None
        for nm in (preset, gpu_name):
            if nm:
                try:
                    base = get_gpu(nm).switch
                    break
                except InputError:
                    pass
        return base.scaled_to(a.switch_latency) if base is not None else SwitchModel.from_latency(a.switch_latency)
    name = preset or gpu_name
    if not name:
        raise InputError("give --gpu, --switch-model PRESET or --switch-latency SECONDS")
    if preset:
        from kdvfs.gpus import PRESETS

        try:
            get_gpu(preset)
        except InputError:
            raise InputError(f"--switch-model {preset!r} is not a preset whose switch model can be borrowed; known: "
                             f"{', '.join(PRESETS)} (or give --switch-latency SECONDS)") from None
    return get_gpu(name).switch


PROGRESS_EVERY_S = 10.0
"""Off a terminal, long work logs one progress line to stderr at most this often (none for work shorter than this)."""


class PlainProgress:
    """Progress for a stderr that is not a terminal (a log file, a pipe, CI): one line ``LABEL: done/total (pct),
    N s elapsed`` at most every ``PROGRESS_EVERY_S`` seconds, on stderr, never on stdout; nothing when the work ends
    sooner. The subset of rich's ``Progress`` the verbs use (``add_task``, ``advance``, ``update``), plus ``stage``
    (a stage name and a fraction, for ``stage_progress``). ``clock`` is injectable for tests."""

    def __init__(self, label: str, total: float | None = None, clock=None, stream=None) -> None:
        import time

        self.label, self.total = label, total
        self.clock = clock or time.monotonic
        self.stream = stream
        self.done = 0.0
        self.fraction = False  # ``stage`` reports a fraction of 1, not a count
        self.t0 = self.last = self.clock()

    def __enter__(self) -> PlainProgress:
        self.t0 = self.last = self.clock()
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        self.total = total if total is not None else self.total
        return 0

    def advance(self, task: int, n: float = 1) -> None:  # noqa: ARG002 — one task
        self.done += n
        self._maybe_say()

    def update(self, task: int, completed: float | None = None, description: str | None = None,  # noqa: ARG002
               total: float | None = None, **_: Any) -> None:
        if total is not None:
            self.total = total
        if completed is not None:
            self.done = completed
        self._maybe_say(description)

    def stage(self, stage: str, fraction: float) -> None:
        self.total, self.done, self.fraction = 1.0, fraction, True
        self._maybe_say(stage)

    def _maybe_say(self, what: str | None = None) -> None:
        now = self.clock()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        import sys

        head = f"{self.label}: {what}" if what else self.label
        if self.fraction:
            body = f"{100 * self.done:.0f} %"
        elif self.total:
            body = f"{self.done:g}/{self.total:g} ({100 * self.done / self.total:.0f} %)"
        else:
            body = f"{self.done:g} done"
        print(f"{head}: {body}, {now - self.t0:.0f} s elapsed", file=self.stream or sys.stderr, flush=True)


def progress(console, total: int, label: str):  # noqa: ARG001 — progress always goes to stderr
    """A progress bar on stderr (stdout stays clean for ``--json``) when stderr is a terminal; else ``PlainProgress``
    (a line at most every ``PROGRESS_EVERY_S`` s)."""
    import sys

    err = make_console(sys.stderr)
    if not err.is_terminal:
        return PlainProgress(label, total)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err,
                    transient=True)


def profile_gpu(ref: str) -> str:
    """The card named in a profile's ``# kdvfs-profile/1 gpu=NAME`` header line ('' when none)."""
    import gzip

    from kdvfs.bundled import resolve_profile_path

    path = resolve_profile_path(ref)
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rt") if gz else path.open()) as f:
        first = f.readline()
    if first.startswith("#"):
        for word in first[1:].split():
            if word.startswith("gpu="):
                return "" if word[4:] == "-" else word[4:]
    return ""


class stage_progress:  # noqa: N801 — used like a function: `with stage_progress(err, "import") as prog`
    """A rich progress bar on stderr as ``progress(stage, fraction)``; where ``console`` is not a terminal, a
    ``PlainProgress`` line at most every ``PROGRESS_EVERY_S`` s; ``None`` (no progress) where it is ``None``."""

    def __init__(self, console, label: str) -> None:
        self.console, self.label = console, label
        self.bar: Any = None  # a rich Progress while open (rich is imported only on a terminal)

    def __enter__(self):
        if self.console is None:
            return None
        if not self.console.is_terminal:
            return PlainProgress(self.label).stage
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=self.console,
                            transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task(self.label, total=1.0)

        def update(stage: str, fraction: float) -> None:
            self.bar.update(self.task, description=f"{self.label}: {stage}", completed=fraction)

        return update

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def add_limiter_arg(sp) -> None:
    sp.add_argument("--limiter", choices=["auto", "on", "off"], default="auto",
                    help="the card's windowed power limiter (auto: on for cards whose preset has a fitted limiter, "
                         "e.g. h200; off: each kernel throttled on its own, as before)")


def limiter_of(a, spec, can: bool = True, why: str = "the power limiter is simulated for one GPU without a governor lag"):
    """The limiter model to simulate with, or None: ``--limiter auto`` uses the preset's where it has one and the
    run allows it (``can``: one GPU, no governor lag); ``on`` insists."""
    from kdvfs.limiter import limiter_for

    mode = getattr(a, "limiter", "off")
    if mode == "off":
        return None
    lim = limiter_for(spec)
    if mode == "on" and lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit --bundle`, or "
                         "use --limiter off")
    if mode == "on" and not can:
        raise InputError(f"{why}; use --limiter off")
    return lim if can else None


def signed_pct(v: float, digits: int) -> str:
    """``+1.234``; a value that rounds to zero prints ``+0.000``, never ``-0.000`` (read as faster than auto)."""
    return f"{0.0 if abs(v) < 0.5 * 10 ** -digits else v:+.{digits}f}"
