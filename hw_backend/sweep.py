"""``sweep``: characterise kernels at clock settings on a GPU (real or fake), the study's way, resumably.

Per setting (settings outermost, so clocks change once per setting): lock the clocks (only with clock control
allowed; ``auto`` = the driver's defaults), then per kernel unit: warm-up, an energy-counter-aligned window of at least
``max(window_s, 20 counter steps)``, ``repeats`` times. Each row is appended and flushed as soon as it is measured, so
a sweep killed at any point and run again continues where it stopped with no row lost or doubled (a half-written last
line is dropped). The clocks are restored on every exit path (``ClockGuard``).

Sparse mode measures a few settings per kernel, fits the model, and then measures only the settings around each
kernel's predicted optimum.
"""

from __future__ import annotations

import csv
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hw_backend.base import ClockGuard
from hw_backend.measure import measure_window
from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.profile import fmt_clock, parse_clock

__all__ = ["FIELDS", "run_sweep", "sparse_sweep", "done_rows", "parse_settings"]

log = logging.getLogger(__name__)

FIELDS = ["kernel", "core_mhz", "mem_mhz", "repeat", "time_s", "power_w", "energy_j", "core_actual_mhz",
          "temperature_c", "window_s", "iterations", "unit"]


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
        st = (parse_clock(core_txt, "core"), parse_clock(mem_txt or "auto", "mem"))
        spec.check_setting(*st)
        out.append(st)
    if not out:
        raise InputError("--settings is empty; give study, all or CORE:MEM,…")
    return out


def done_rows(path: Path) -> set[tuple[str, int, int, int]]:
    """(kernel, core, mem, repeat) already in the file; repairs a half-written last line."""
    if not path.exists():
        return set()
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(cut)
        log.warning("dropped a half-written last line of %s", path)
    with path.open(newline="") as f:
        return {(r["kernel"], parse_clock(r["core_mhz"]), parse_clock(r["mem_mhz"]), int(r["repeat"]))
                for r in csv.DictReader(f)}


def _append(path: Path, row: dict) -> None:
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        if new:
            w.writeheader()
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
    if any(st != (AUTO, AUTO) for st in settings) and not allow_clock_control:
        raise InputError("this sweep changes clocks: pass --allow-clock-control (on a card you may change), or sweep "
                         "only auto:auto in observe-only mode")
    done = done_rows(out)
    units = workload.units()
    todo = [(st, u, r) for st in settings for u in units for r in range(repeats)
            if (not only or st in only.get(u.name, ())) and (u.keys[0], st[0], st[1], r) not in done]
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
                _append(out, {"kernel": key, "core_mhz": fmt_clock(st[0]), "mem_mhz": fmt_clock(st[1]), "repeat": r,
                              "time_s": f"{per_t * share:.6e}", "power_w": f"{w.power_w:.3f}",
                              "energy_j": f"{per_e * share:.6e}",
                              "core_actual_mhz": f"{0.5 * (w.core_mhz_min + w.core_mhz_max):.0f}",
                              "temperature_c": "" if temp is None else f"{temp:.0f}", "window_s": f"{w.time_s:.3f}",
                              "iterations": w.iterations, "unit": u.name})
            if progress:
                progress(n + 1, total)
    return out


def _probes(spec: GpuSpec, settings: list[tuple[int, int]], first: int) -> list[tuple[int, int]]:
    """Settings that show a kernel's core and memory sensitivity: auto, a lower core clock at the highest memory
    clock, a lower memory clock at a high core clock, then more spread over the grid if asked."""
    grid = [s for s in settings if s != (AUTO, AUTO)]
    mems = sorted({m for _, m in grid if m != AUTO})
    cores = sorted({c for c, _ in grid if c != AUTO})
    out = [(AUTO, AUTO)] if (AUTO, AUTO) in settings else []

    def nearest(c, m):
        cand = [s for s in grid if s[1] == m] or grid
        return min(cand, key=lambda s: abs((s[0] or spec.boost_core_mhz) - c))

    if cores and mems:
        out.append(nearest(0.55 * spec.boost_core_mhz, mems[-1]))
        if len(mems) > 1:
            hi = [m for m in mems if spec.bandwidth_gbs(np.array(m)) > 0.3 * spec.mem_bandwidth_gbs[-1]]
            out.append(nearest(spec.boost_core_mhz, hi[0] if hi else mems[-2]))
    explicit = sorted(grid, key=lambda s: (s[1], s[0]))
    for i in np.linspace(0, len(explicit) - 1, max(first - 2, 0) + 2).round().astype(int)[1:-1]:
        if len(out) >= first + 1:
            break
        if explicit[i] not in out:
            out.append(explicit[i])
    return list(dict.fromkeys(out))[: first + 1]


def sparse_sweep(backend, workload, spec: GpuSpec, settings: list[tuple[int, int]], out: str | Path, *,
                 first: int = 2, rounds: int = 2, **kw) -> dict:
    """Measure auto and ``first`` probe settings per kernel, fit the model, solve the global strict-waste problem on
    the fitted profile, and measure each kernel's chosen setting if it is new; repeat ``rounds`` times.
    Returns the number of measurements."""
    from kdvfs.fit import fit_params, read_sweep
    from kdvfs.model import evaluate
    from kdvfs.optimize.knapsack import solve_fast

    probes = _probes(spec, settings, first)
    run_sweep(backend, workload, spec, probes, out, only=None, **kw)
    units = workload.units()
    reps = {u.name: 1 for u in units}
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    for _ in range(rounds):
        sw = read_sweep(out)
        _, params = fit_params(sw, spec)
        ev = evaluate(spec, params, c, m)
        key_idx = {k: i for i, k in enumerate(params.keys)}
        idx = [key_idx[u.keys[0]] for u in units]
        T, E = ev.time_s[idx], ev.energy_j[idx]
        r = np.array([reps[u.name] for u in units])
        if hasattr(workload, "trace"):
            rep_of = dict(zip(workload.trace.kernel_keys, workload.trace.repeats.tolist()))
            r = np.array([rep_of.get(u.keys[0], 1) for u in units])
        ia = settings.index((AUTO, AUTO)) if (AUTO, AUTO) in settings else int(np.argmax(c))
        alloc = solve_fast(T, E, r, float(r @ T[:, ia]))
        done = {(k, cc, mm) for k, ps in read_sweep(out, min_points=1).points.items() for p in ps
                for cc, mm in [(p.core_mhz, p.mem_mhz)]}
        only: dict[str, list[tuple[int, int]]] = {}
        for u, cnt in zip(units, alloc.counts):
            s = max(cnt, key=cnt.__getitem__)
            st = settings[s]
            if (u.keys[0], st[0], st[1]) not in done:
                only[u.name] = [st]
        if not only:
            break
        extra = sorted({s for v in only.values() for s in v}, key=lambda s: (s[1], s[0]))
        run_sweep(backend, workload, spec, extra, out, only=only, **kw)
    n_meas = sum(len(ps) for ps in read_sweep(out, min_points=1).points.values())
    return {"measured_settings": n_meas, "units": len(units)}

