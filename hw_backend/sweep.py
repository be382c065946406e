"""``sweep``: characterise kernels at clock settings on a GPU (real or fake), the study's way, resumably.

Per setting (settings outermost, so clocks change once per setting): lock the clocks (only with clock control
allowed; ``auto`` = the driver's defaults), then per kernel unit: warm-up, an energy-counter-aligned window of at least
``max(window_s, 20 counter steps)``, ``repeats`` times. Each row is appended and flushed as soon as it is measured, so
a sweep killed at any point and run again continues where it stopped with no row lost or doubled: resume is keyed by
(kernel, setting, repeat) for every kernel of a unit, and a half-written last line is dropped. The clocks are restored
on every exit path that can be caught (``ClockGuard``); a SIGKILL leaves a marker (``hw_backend.safety``).

The output starts with ``# kdvfs-sweep/1 gpu=NAME trace=NAME trace_sha=HEX``: an existing file that is not a sweep, or
is a sweep of another trace or card, is refused before anything is written (the file is left untouched), and the file
is locked (``fcntl``) for as long as the sweep writes it, so a second writer is refused.

Sparse mode measures a few settings per kernel, then, round by round, the settings that ``kdvfs.fit.sparse_next``
asks for (a pure function of the measurements so far: fit, solve, each kernel's chosen setting if it is new); this
module only measures.
"""

from __future__ import annotations

import csv
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path

from hw_backend.base import ClockGuard
from hw_backend.measure import measure_window
from hw_backend.safety import OutputLock
from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.profile import fmt_clock, parse_clock

__all__ = ["FIELDS", "FORMAT", "MAX_REPEATS", "check_output", "check_sweep_args", "done_rows", "parse_settings",
           "run_sweep", "sparse_sweep"]

log = logging.getLogger(__name__)

FIELDS = ["kernel", "core_mhz", "mem_mhz", "repeat", "time_s", "power_w", "energy_j", "core_actual_mhz",
          "temperature_c", "window_s", "iterations", "unit"]
FORMAT = "kdvfs-sweep/1"
MAX_REPEATS = 1000
"""More repeats per setting than any study needs (the study took 1); the bound keeps a typo from planning 10⁹ rows."""


def check_sweep_args(*, window_s: float, warmup_s: float, repeats: int, min_steps: int) -> None:
    """Every range a sweep relies on, checked before any work (``InputError`` naming the option and the fix)."""
    import math

    def bad(opt, v, rule, fix):
        raise InputError(f"{opt} {v!r} {rule}; {fix}")

    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        bad("--repeats", repeats, f"must be a whole number in 1–{MAX_REPEATS}", "give e.g. --repeats 1")
    for opt, v, lo in (("--window", window_s, 0.0), ("--warmup", warmup_s, 0.0)):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo or v > 3600:
            bad(opt, v, "must be a number of seconds in [0, 3600]", f"give e.g. {opt} 5")
    if window_s <= 0:
        bad("--window", window_s, "must be > 0 s", "give e.g. --window 5")
    if not isinstance(min_steps, int) or isinstance(min_steps, bool) or not 1 <= min_steps <= 10_000:
        bad("--min-steps", min_steps, "must be a whole number in 1–10000", "give e.g. --min-steps 20")


def _identity(spec: GpuSpec, workload) -> dict[str, str]:
    from kdvfs.identity import trace_sha

    tr = getattr(workload, "trace", None)
    return {"gpu": spec.name, "trace": tr.name if tr is not None else "", "trace_sha": trace_sha(tr) if tr is not None else ""}


def _header(ident: dict[str, str]) -> str:
    return f"# {FORMAT} " + " ".join(f"{k}={v or '-'}" for k, v in ident.items()) + "\n" + ",".join(FIELDS) + "\n"


def check_output(path: Path, spec: GpuSpec, workload) -> None:
    """Refuse an output that is a directory, not a kdvfs sweep, or a sweep of another trace or card (untouched)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"output {str(path)!r} is a directory; give a file path with -o (e.g. {str(path / 'sweep.csv')!r})")
    if not path.exists() or path.stat().st_size == 0:
        if not path.parent.is_dir():
            raise InputError(f"output directory {str(path.parent)!r} does not exist; create it or give another -o")
        if not os.access(path.parent, os.W_OK):
            raise InputError(f"output directory {str(path.parent)!r} is not writable; give another -o")
        return
    if not os.access(path, os.W_OK):
        raise InputError(f"output {str(path)!r} is not writable; give another -o")
    with path.open("rb") as f:
        head = f.read(4096).decode("utf-8", "replace").split("\n")
    meta: dict[str, str] = {}
    while head and head[0].startswith("#"):
        for w in head.pop(0)[1:].split():
            k, _, v = w.partition("=")
            meta[k] = "" if v == "-" else v
    first = head[0].strip() if head else ""
    if first != ",".join(FIELDS) or (meta and FORMAT not in meta):
        raise InputError(
            f"output {str(path)!r} exists and is not a kdvfs sweep (its first line is {first[:60]!r}); it was left "
            "untouched — give a new file name with -o, or the sweep file to resume")
    ident = _identity(spec, workload)
    for k in ("gpu", "trace", "trace_sha"):
        if meta.get(k) and ident[k] and meta[k] != ident[k]:
            raise InputError(
                f"output {str(path)!r} is a sweep of {k.replace('_sha', ' kernels')} {meta[k]!r}, not {ident[k]!r}: "
                "resuming would mix two sweeps; it was left untouched — give a new file name with -o")


def _data_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith("#")]


def parse_settings(text: str, spec: GpuSpec) -> list[tuple[int, int]]:
    """``study`` (the study's 66), ``all`` (every supported pair), or ``CORE:MEM,CORE:MEM`` (``auto`` allowed)."""
    if text == "all":
        return spec.settings()
    if text == "study":
        from kdvfs.calibrate import study_settings

        quirks = dict(spec.mem_max_core_mhz)
        out = []
        for c, m in study_settings():
            if m in spec.mem_clocks_mhz or m == AUTO:
                if m in quirks and (c == AUTO or c > quirks[m]):
                    continue
                if c == AUTO or c in spec.core_clocks_mhz:
                    out.append((c, m))
        return out
    out = []
    for part in text.split(","):
        core_txt, _, mem_txt = part.strip().partition(":")
        try:
            st = (parse_clock(core_txt, "core"), parse_clock(mem_txt or "auto", "mem"))
        except FormatError as e:  # '1980/3201' read "core '1980/3201' is not a number", without the form
            raise InputError(f"--settings {text!r}: {e}; each setting is CORE:MEM in MHz or auto, comma-separated "
                             "(e.g. 1980:3201,auto:auto), or study, or all") from None
        spec.check_setting(*st)
        out.append(st)
    if not out:
        raise InputError("--settings is empty; give study, all or CORE:MEM,…")
    return out


def done_rows(path: Path) -> set[tuple[str, int, int, int]]:
    """(kernel, core, mem, repeat) already in the file; repairs a half-written last line (call under the lock, after
    ``check_output``)."""
    if not path.exists():
        return set()
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(cut)
        log.warning("dropped a half-written last line of %s", path)
        raw = raw[:cut]
    out = set()
    for i, r in enumerate(csv.DictReader(_data_lines(raw.decode("utf-8", "replace"))), start=2):
        try:
            out.add((r["kernel"], parse_clock(r["core_mhz"]), parse_clock(r["mem_mhz"]), int(r["repeat"])))
        except (FormatError, KeyError, TypeError, ValueError) as e:
            raise FormatError(f"sweep {str(path)!r} data row {i}: {e}; fix or drop that row, then resume") from None
    return out


def _append(path: Path, row: dict, header: str) -> None:
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        if new:
            f.write(header)
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writerow(row)
        f.flush()
        os.fsync(f.fileno())


def run_sweep(backend, workload, spec: GpuSpec, settings: list[tuple[int, int]], out: str | Path, *,
              window_s: float = 5.0, warmup_s: float = 1.0, repeats: int = 1, allow_clock_control: bool = False,
              min_steps: int = 20, progress: Callable[[int, int], None] | None = None,
              only: dict[str, list[tuple[int, int]]] | None = None) -> Path:
    """Measure every workload unit at every setting into ``out`` (appending; resumable).

    ``only`` restricts which settings each unit is measured at (sparse mode).
    """
    out = Path(out)
    check_sweep_args(window_s=window_s, warmup_s=warmup_s, repeats=repeats, min_steps=min_steps)
    if any(st != (AUTO, AUTO) for st in settings) and not allow_clock_control:
        raise InputError("this sweep changes clocks: pass --allow-clock-control (on a card you may change), or sweep "
                         "only auto:auto in observe-only mode")
    check_output(out, spec, workload)
    with OutputLock(out):
        return _run_locked(backend, workload, spec, settings, out, window_s=window_s, warmup_s=warmup_s,
                           repeats=repeats, min_steps=min_steps, progress=progress, only=only)


def _run_locked(backend, workload, spec, settings, out: Path, *, window_s, warmup_s, repeats, min_steps, progress,
                only) -> Path:
    header = _header(_identity(spec, workload))
    done = done_rows(out)
    units = workload.units()
    # a unit is done when every one of its kernels has its row: a sweep killed between a unit's rows redoes the unit
    # and writes only the rows that are missing
    todo = [(st, u, r) for st in settings for u in units for r in range(repeats)
            if (not only or st in only.get(u.name, ())) and any((k, st[0], st[1], r) not in done for k in u.keys)]
    total = len(todo)
    with ClockGuard(backend) as guard:
        current = None
        for n, (st, u, r) in enumerate(todo):
            if st != current:
                if st == (AUTO, AUTO):
                    if guard.changed:
                        guard.restore()
                else:
                    guard.set(*st)
                current = st
            est = max(workload.unit_time_estimate_s(u), 1e-6)
            b = max(1, int(0.02 / est))  # units per synchronisation: ~20 ms of work
            w = measure_window(functools.partial(workload.run_unit, u, b), workload.sync, backend, window_s=window_s,
                               warmup_s=warmup_s, batch=1, min_steps=min_steps, clock=workload.clock)
            temp = backend.temperature_c() if hasattr(backend, "temperature_c") else None
            per_t = w.time_s / w.iterations / b
            per_e = w.energy_j / w.iterations / b
            for key, share in zip(u.keys, u.shares):
                if (key, st[0], st[1], r) in done:
                    continue
                _append(out, {"kernel": key, "core_mhz": fmt_clock(st[0]), "mem_mhz": fmt_clock(st[1]), "repeat": r,
                              "time_s": f"{per_t * share:.6e}", "power_w": f"{w.power_w:.3f}",
                              "energy_j": f"{per_e * share:.6e}",
                              "core_actual_mhz": f"{0.5 * (w.core_mhz_min + w.core_mhz_max):.0f}",
                              "temperature_c": "" if temp is None else f"{temp:.0f}", "window_s": f"{w.time_s:.3f}",
                              "iterations": w.iterations, "unit": u.name}, header)
            if progress:
                progress(n + 1, total)
    return out


def sparse_sweep(backend, workload, spec: GpuSpec, settings: list[tuple[int, int]], out: str | Path, *,
                 first: int = 2, rounds: int = 2, **kw) -> dict:
    """Measure auto and ``first`` probe settings per kernel (``kdvfs.fit.sparse_probes``), then, up to ``rounds``
    times, the settings ``kdvfs.fit.sparse_next`` chooses from the measurements so far (each kernel's setting in the
    global strict-waste optimum of the fitted model, if it is new). Returns the number of measurements."""
    check_sweep_args(window_s=kw.get("window_s", 5.0), warmup_s=kw.get("warmup_s", 1.0), repeats=kw.get("repeats", 1),
                     min_steps=kw.get("min_steps", 20))
    check_output(Path(out), spec, workload)
    with OutputLock(out):  # one lock across the rounds: nobody writes between a round's read and its measurements
        return _sparse_locked(backend, workload, spec, settings, out, first=first, rounds=rounds, **kw)


def _sparse_locked(backend, workload, spec: GpuSpec, settings, out, *, first: int, rounds: int, **kw) -> dict:
    from kdvfs.fit import read_sweep, sparse_next, sparse_probes

    run_sweep(backend, workload, spec, sparse_probes(spec, settings, first), out, only=None, **kw)
    units = [(u.name, u.keys[0]) for u in workload.units()]
    trace = getattr(workload, "trace", None)
    repeats = dict(zip(trace.kernel_keys, trace.repeats.tolist())) if trace is not None else None
    for _ in range(rounds):
        only = sparse_next(read_sweep(out), spec, settings, units, repeats)
        if not only:
            break
        extra = sorted({s for v in only.values() for s in v}, key=lambda s: (s[1], s[0]))
        run_sweep(backend, workload, spec, extra, out, only=only, **kw)
    n_meas = sum(len(ps) for ps in read_sweep(out, min_points=1).points.values())
    return {"measured_settings": n_meas, "units": len(units)}
