"""Observe-only characterisation of a GPU: a zoo of kernels across arithmetic intensity, each alone, and step
responses of the driver's power limiter read from the durations of a fixed compute-bound probe GEMM.

Nothing here changes a clock, limit or mode: the backend must be observe-only (``characterize`` refuses one that is
not). For each zoo kernel: a short warm-up, then a window of at least ``window_s`` opened and closed at energy-counter
steps, running the kernel in synchronised batches of ~15 ms; after each batch the SM and memory clocks and power are
read (every ~15 ms), and CUDA events give the batch's GPU time. The energy counter is read in a thread of its own
(``CounterWatch``; ~3 ms a read on the H200), which times its steps, so the loop never waits on it. Recorded per kernel: median time per invocation,
energy per invocation (counter difference / invocations), average power, SM clock median / p10 / p90, temperature.

Step responses: the probe (a bf16 4096³ GEMM; compute-bound, so its duration ∝ 1/f) is timed with CUDA events for
every launch; ``clock = f_ref · t_ref / t`` with ``t_ref`` the probe's duration at the top clock (the 2nd percentile
of its durations in the sparse phase after idle, where the card is far below its cap). Phases: idle → heavy
(probes back to back), heavy → light (a memory-bound kernel with a sparse probe every ~5 ms), and square waves.
An NVML thread samples clock and power every ~10 ms meanwhile.

Results go to a JSON file (``kdvfs-characterization/1``) rewritten after every zoo kernel, so nothing measured is
lost and a rerun resumes after the last finished entry. Execution is injected: ``TorchZoo`` on a CUDA device (torch
imported there only), ``FakeZoo`` on ``hw_backend.fake.FakeNvml`` (no torch) for tests and demos.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hw_backend.nvml import machine_identity, refuse_other_card
from hw_backend.sampling import (  # noqa: F401 — Sampler and CounterWatch, re-exported where they were
    COUNTER_READ_PERIOD_S,
    CounterWatch,
    Sampler,
    counter_window,
    instant_power_reader,
)
from hw_backend.zoo import (  # noqa: F401 — the zoo's names, re-exported where they were
    LIGHT,
    PROBE,
    ZOO_SETS,
    ZooKernel,
    cache_gap_zoo,
    default_zoo,
    duty_zoo,
    full_zoo,
    step_shape_zoo,
)
from kdvfs.errors import FormatError, InputError, ObserveOnlyError
from kdvfs.fileio import write_atomic
from kdvfs.profile import MAX_CLOCK_MHZ
from kdvfs.work import math_class

__all__ = [
    "FORMAT", "ZOO_SETS", "cache_gap_zoo", "duty_zoo", "step_shape_zoo", "full_zoo", "FakeZoo", "Sampler", "reference_probe", "SkipKernel", "ZooKernel", "characterize", "default_zoo", "load_characterization",
    "PROBE",
]

log = logging.getLogger(__name__)

FORMAT = "kdvfs-characterization/1"


class SkipKernel(Exception):
    """The card rejected a zoo kernel (out of memory, unsupported dtype); the reason is recorded."""


class Executor(Protocol):
    """Runs zoo kernels: real (``TorchZoo``) or simulated (``FakeZoo``)."""

    def prepare(self, k: ZooKernel) -> None: ...

    def launch(self, n: int) -> Any: ...

    def wait(self, handle: Any) -> float: ...

    def release(self) -> None: ...

    def kernels_launched(self) -> list[dict]: ...

    def now_s(self) -> float: ...

    def sleep(self, s: float) -> None: ...

    def probe_plan(self, phases: Sequence[tuple[str, float]], sample: Callable[[], None]) -> dict: ...

    def run_for(self, seconds: float, tick: Callable[[], None] | None = None) -> tuple[float, int]:
        """Run invocations of the prepared entry back to back, each waited for, until ``seconds`` have passed;
        returns (seconds taken, invocations). ``tick``: called after every invocation (the fake's counter reads)."""
        ...


# ---------------------------------------------------------------------- the measurement
def _pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else float("nan")


def _measure_kernel(ex: Executor, be, k: ZooKernel, *, window_s: float, warmup_s: float, threaded: bool,
                    batch_s: float = 0.02, max_s: float = 60.0) -> dict:
    """One zoo kernel alone. Batches of ~``batch_s`` are kept one ahead on the GPU (no idle gaps); the window opens
    and closes at energy-counter steps seen after a batch completes, and counts the invocations completed between."""
    if k.role == "duty":
        return _measure_duty(ex, be, k, window_s=window_s, warmup_s=warmup_s, threaded=threaded, max_s=max_s)
    ex.prepare(k)
    try:
        launched = ex.kernels_launched()
        ex.wait(ex.launch(1))
        t = ex.wait(ex.launch(3)) / 3
        n = max(1, min(100_000, int(batch_s / max(t, 1e-7))))
        start = ex.now_s()
        pending = [ex.launch(n)]

        def step() -> tuple[float, int]:  # the next batch enqueued before the previous one is waited for
            nxt = ex.launch(n)
            per_inv = ex.wait(pending[0]) / n
            pending[0] = nxt
            return per_inv, n

        while ex.now_s() - start < warmup_s:
            step()

        win = counter_window(be, k, ex.now_s, step, Sampler(be, ex.now_s, threaded=threaded),
                              CounterWatch(be, ex.now_s, threaded=threaded), start=start, window_s=window_s, max_s=max_s)
        ex.wait(pending[0])
        extra = ex.extra_record() if hasattr(ex, "extra_record") else {}
        temp = be.temperature_c() if hasattr(be, "temperature_c") else None
    finally:
        ex.release()
    return _record(k, win, n, temp, launched, extra)


# A duty entry's burst-then-gap loop runs in chunks of this length between energy-counter reads, so the host adds no
# time between a burst and its gap beyond the loop itself. Session 7's probes: reading NVML every few invocations
# idled the GPU a quarter of each held period (the entries read 70–73 % busy where the same bursts are 90 %); session
# 8 found 50 ms chunks still lost ~10 % of the span between chunks, ~3 ms per energy-counter read.
DUTY_CHUNK_S = 0.5
DUTY_SAMPLE_PERIOD_S = 0.0003


def _measure_duty(ex: Executor, be, k: ZooKernel, *, window_s: float, warmup_s: float, threaded: bool,
                  max_s: float) -> dict:
    """A duty entry (a burst of ``graph`` launches, then ``gap_s`` spun on the host) measured as session 7's held-burst
    probe did: the executor runs bursts and gaps back to back for ``DUTY_CHUNK_S`` at a time (``run_for``); the
    energy counter is read only between chunks (the window opens and closes at counter steps), and a thread reads
    the SM clock alone every 0.3 ms (``clocks_only``), so the limiter sees the entry's own duty cycle."""
    ex.prepare(k)
    try:
        launched = ex.kernels_launched()
        start = ex.now_s()
        ex.run_for(warmup_s)

        watch = CounterWatch(be, ex.now_s, threaded=threaded)
        tick = None if threaded else watch.read  # the fake: read the counter after every invocation

        def step() -> tuple[float, int]:
            dt, c = ex.run_for(DUTY_CHUNK_S, tick)
            return (dt / c if c else 0.0), c

        sampler = Sampler(be, ex.now_s, threaded=threaded, period_s=DUTY_SAMPLE_PERIOD_S, clocks_only=True)
        win = counter_window(be, k, ex.now_s, step, sampler, watch, start=start, window_s=window_s, max_s=max_s)
        extra = ex.extra_record() if hasattr(ex, "extra_record") else {}
        temp = be.temperature_c() if hasattr(be, "temperature_c") else None
    finally:
        ex.release()
    return {**_record(k, win, 1, temp, launched, extra), "method": "duty-chunks"}


def _record(k: ZooKernel, win: dict, n: int, temp: float | None, launched: list[dict], extra: dict) -> dict:
    """One zoo entry's record from its window (``_counter_window``): power is the counter's energy over the span
    between its steps; time per invocation (mean) from the units of work that overlap that span; energy per
    invocation is their product."""
    w = k.work
    rows, per, iters, span = win["rows"], win["per"], win["iters"], win["span"]
    power_w = win["energy"] / span
    t_mean = win["busy_s"] / iters
    clocks = [r[1] for r in rows]
    inst = [r[4] for r in rows if r[4] is not None]
    pw = [r[3] for r in rows if r[3] == r[3]]  # NaN where only clocks were read
    med = float(statistics.median(per))
    return {
        "name": k.name, "category": k.category, "op": k.op, "dtype": k.dtype, "shape": list(k.shape),
        "causal": k.causal, "graph": k.graph, "gap_s": k.gap_s, "role": k.role, "flops": w.flops, "bytes": w.bytes,
        "time_s": med, "time_mean_s": t_mean, "time_p10_s": _pct(per, 10), "time_p90_s": _pct(per, 90),
        "energy_j": power_w * t_mean, "power_w": power_w, "power_nvml_w_median": _pct(pw, 50) if pw else None,
        "power_instant_w_median": _pct(inst, 50) if inst else None,
        "power_instant_w_p10": _pct(inst, 10) if inst else None, "power_instant_w_p90": _pct(inst, 90) if inst else None,
        "sm_mhz_median": _pct(clocks, 50), "sm_mhz_p10": _pct(clocks, 10), "sm_mhz_p90": _pct(clocks, 90),
        "sm_mhz_mean": float(np.mean(clocks)) if clocks else float("nan"),
        "mem_mhz": int(statistics.median([r[2] for r in rows])), "window_s": span, "window_edge_s": win["edge_s"],
        "invocations": iters, "batch": n,
        "clock_samples": len(rows), "temperature_c": temp,
        "achieved_tflops": w.flops / med / 1e12, "achieved_gbs": w.bytes / med / 1e9,
        "cuda_kernels": launched, **extra,
    }


def _step_phases() -> list[tuple[str, list[tuple[str, float]]]]:
    """(name, phases): each phase (load, seconds) with load idle | heavy | light | probe-only."""
    sq_fast = [("heavy", 0.1), ("light", 0.1)] * 10
    sq_slow = [("heavy", 0.5), ("light", 0.5)] * 4
    return [
        ("idle_to_heavy", [("idle", 1.5), ("probe-only", 0.3), ("heavy", 2.0)]),
        ("heavy_to_light", [("heavy", 2.0), ("light", 2.0)]),
        ("square_200ms", [("idle", 0.5)] + sq_fast),
        ("square_1s", [("idle", 0.5)] + sq_slow),
    ]


def _step_response(ex: Executor, be, name: str, phases: list[tuple[str, float]], sample_period_s: float,
                   threaded: bool) -> dict:
    with Sampler(be, ex.now_s, threaded=threaded, period_s=sample_period_s) as smp:
        res = ex.probe_plan(phases, smp.tick)
    off = res.pop("host_ref_s", smp.t0) - smp.t0  # samples and probes share the ref event's origin
    rows = smp.rows
    out = {"name": name, **res,
           "nvml_clock": [[round(r[0] - off, 5), r[1]] for r in rows],
           "power": [[round(r[0] - off, 5), r[3]] for r in rows]}
    if any(r[4] is not None for r in rows):
        out["power_instant"] = [[round(r[0] - off, 5), r[4]] for r in rows if r[4] is not None]
    return out


def _finish_probe(name: str, raw: list[tuple[float, float]], phases_out: list[dict], f_ref_mhz: float) -> dict:
    """The probe's raw durations and phases; the clock series is filled in by ``reference_probe`` once every step
    response is in (one reference duration for all of them)."""
    pw = PROBE.work
    return {
        "probe": {"name": PROBE.name, "flops": pw.flops, "time_at_max_clock_s": None, "max_clock_mhz": f_ref_mhz},
        "phases": phases_out,
        "clock": [],
        "probe_durations": [[round(t, 6), d] for t, d in raw],
    }


def reference_probe(doc: dict, percentile: float = 1.0) -> dict:
    """Convert every step response's probe durations to clocks, ``f = f_max · t_ref / t``, with one reference
    ``t_ref``: the ``percentile``-th percentile of the probe's durations pooled over all step responses. The first
    probes of a heavy burst after light load run at the top clock (the card is far below its cap then), so the
    shortest durations are the top clock's; a sparse probe right after idle is not a reference (the clock is still
    ramping up from the idle 345 MHz). Returns ``doc`` updated in place."""
    srs = [s for s in doc.get("step_responses", []) if "probe_durations" in s]
    pooled = [d for s in srs for _, d in s["probe_durations"]]
    if not pooled:
        return doc
    t_ref = _pct(pooled, percentile)
    for s in srs:
        f = s["probe"]["max_clock_mhz"]
        s["probe"]["time_at_max_clock_s"] = t_ref
        s["probe"]["reference"] = (f"{percentile:g}th percentile of the probe's durations pooled over all step "
                                   "responses (the top clock's duration)")
        # a probe that took over 2.5× the reference waited inside its own event pair (the host fell behind and the
        # GPU idled between the events): no clock reading
        s["clock"] = [[t, round(f * t_ref / d, 1)] for t, d in s["probe_durations"] if d <= 2.5 * t_ref]
    return doc


# ---------------------------------------------------------------------- the campaign
def _atomic_write(path: Path, doc: dict) -> None:
    data = (json.dumps(doc, indent=1) + "\n").encode()
    if path.suffix == ".gz":  # a file named .gz is gzip (mtime 0: same document, same bytes)
        data = gzip.compress(data, mtime=0)
    write_atomic(path, data, "characterisation file")


def load_characterization(path: str | Path) -> dict:
    """Read a characterisation file, checking its format."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError, zlib.error) as e:  # EOFError, zlib.error: a truncated or corrupt .gz
        raise FormatError(f"cannot read characterisation file {str(path)!r}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        from kdvfs.filekind import PROFILER, describe, kind_of

        kind = kind_of(path)  # a profiler trace given for --anchors was "its 'format' is None"
        what = (describe(kind) if kind == PROFILER else
                f"its 'format' is {doc.get('format') if isinstance(doc, dict) else None!r}")
        raise FormatError(f"{str(path)!r} is not a {FORMAT} file ({what}); write one with `kdvfs characterize`")
    kernels = doc.get("kernels", [])
    if not isinstance(kernels, list):
        raise FormatError(f"{str(path)!r}: 'kernels' must be a list of measured entries, got {type(kernels).__name__}; "
                          "write the file with `kdvfs characterize`")
    for i, k in enumerate(kernels):
        if not isinstance(k, dict):
            raise FormatError(f"{str(path)!r}: kernel {i} must be an object, got {k!r:.60}")
        if "skipped" in k:
            continue
        for key in ("name", "time_s", "power_w", "sm_mhz_median"):
            if key not in k:
                raise FormatError(f"{str(path)!r}: kernel {i} ({k.get('name')!r}) lacks {key!r}")
        # the fit divides by these: each a positive number where present (time_mean_s, burst_time_s: later files)
        for key in ("time_s", "power_w", "sm_mhz_median", "time_mean_s", "burst_time_s"):
            v = k.get(key, 1.0)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
                raise FormatError(f"{str(path)!r}: kernel {i} ({k.get('name')!r}): {key!r} must be a positive number, "
                                  f"got {v!r}; re-measure it with `kdvfs characterize` or remove the entry")
        # damage, not a measurement: an anchor at sm_mhz_median 1e9 was fitted (core and memory scales fell to 1)
        for key, top, unit in (("sm_mhz_median", MAX_CLOCK_MHZ, "MHz"), ("power_w", MAX_POWER_W, "W")):
            if k[key] > top:
                raise FormatError(f"{str(path)!r}: kernel {i} ({k.get('name')!r}): {key!r} is {k[key]!r} {unit}, over "
                                  f"the {top:g} {unit} no GPU reaches; the file is damaged: re-measure it with `kdvfs "
                                  "characterize` or remove the entry")
    return doc


MAX_POWER_W = 10_000.0
"""No GPU board draws 10 kW: a larger power in a characterisation file is damage."""


IDLE_SETTLE_S = 3.0
"""Seconds the card idles after the campaign before ``idle_after`` is read: three of NVML's ~1 s power averages."""


def characterize(be, ex: Executor, out: str | Path, *, zoo: Sequence[ZooKernel] | None = None, window_s: float = 5.0,
                 warmup_s: float = 1.0, steps: bool = True, step_scale: float = 1.0, command: str = "",
                 progress: Callable[[str], None] | None = None, threaded_sampler: bool = True,
                 max_clock_mhz: float = 1980.0, extra: dict | None = None, max_s: float = 60.0) -> dict:
    """Run the campaign and write ``out`` after every entry (resumes entries already in ``out``).

    Args:
        be: an observe-only backend (``NvmlBackend(observe_only=True)`` or over ``FakeNvml``).
        ex: the executor (``TorchZoo`` or ``FakeZoo``).
        out: the JSON file.
        zoo: the kernels (default ``full_zoo()``: both sets).
        window_s, warmup_s: per kernel, the measured window (≥ 5 s for the campaign) and the warm-up before it.
        steps: also run the step responses; ``step_scale`` scales their phase lengths (tests use short ones).
        threaded_sampler: sample NVML in a thread during step responses (real cards); else at each probe (fake).
        max_clock_mhz: the clock a probe at its reference duration runs at (the card's top clock).
        max_s: per kernel, give up waiting for the energy counter (or closing the window) after this long.
    """
    if not getattr(be, "observe_only", False):
        raise ObserveOnlyError("characterize only observes: give it an observe-only backend (without "
                               "--allow-clock-control); it never changes a clock, limit or mode")
    if window_s <= 0 or warmup_s < 0:
        raise InputError(f"characterize: window must be > 0 s and warm-up ≥ 0 s, got {window_s}, {warmup_s}")
    zoo = tuple(full_zoo() if zoo is None else zoo)
    names = [k.name for k in zoo]
    if len(set(names)) != len(names):
        raise InputError("characterize: zoo kernel names must be unique")
    out = Path(out)
    say = progress or (lambda s: None)
    caps = be.capabilities()
    doc: dict[str, Any]
    if out.exists():
        doc = load_characterization(out)
        _check_resume(out, doc, be, window_s, warmup_s)
        say(f"resuming {out}: {len(doc['kernels'])} zoo entries already measured")
    else:
        doc = {"format": FORMAT, "gpu": be.name, "driver": _driver(be), "power_limit_w": caps.power_limit_w,
               "command": command, "window_s": window_s, "warmup_s": warmup_s, **machine_identity(be), "kernels": [],
               "step_responses": []}
        if extra:
            doc.update(extra)
        doc["idle"] = {"power_w": be.power_mw() / 1000.0, "clocks_mhz": list(be.clocks_mhz()),
                       "temperature_c": be.temperature_c() if hasattr(be, "temperature_c") else None}
    done = {k["name"] for k in doc["kernels"]}
    n_before = (len(doc["kernels"]), len(doc["step_responses"]))
    for i, k in enumerate(zoo):
        if k.name in done:
            continue
        t0 = time.perf_counter()
        try:
            rec = _measure_kernel(ex, be, k, window_s=window_s, warmup_s=warmup_s, threaded=threaded_sampler, max_s=max_s)
        except SkipKernel as e:
            rec = {"name": k.name, "category": k.category, "dtype": k.dtype, "shape": list(k.shape), "skipped": str(e)}
            log.warning("zoo kernel %s skipped: %s", k.name, e)
        doc["kernels"].append(rec)
        _atomic_write(out, doc)
        if "skipped" in rec:
            say(f"[{i + 1}/{len(zoo)}] {k.name}: skipped ({rec['skipped']})")
        else:
            say(f"[{i + 1}/{len(zoo)}] {k.name}: {rec['time_s'] * 1e3:.4f} ms {rec['power_w']:.1f} W "
                f"SM {rec['sm_mhz_median']:.0f} ({rec['sm_mhz_p10']:.0f}-{rec['sm_mhz_p90']:.0f}) MHz "
                f"{rec['achieved_tflops']:.1f} TFLOP/s {rec['achieved_gbs']:.0f} GB/s [{time.perf_counter() - t0:.1f} s]")
    if steps:
        have = {s["name"] for s in doc["step_responses"]}
        for name, phases in _step_phases():
            if name in have:
                continue
            ph = [(load, d * step_scale) for load, d in phases]
            try:
                ex.prepare(PROBE)
                sr = _step_response(ex, be, name, ph, 0.01, threaded_sampler)
            except SkipKernel as e:
                sr = {"name": name, "skipped": str(e)}
            finally:
                ex.release()
            if "skipped" not in sr:
                sr.update(_finish_probe(name, sr.pop("raw"), sr.pop("phases_out"), max_clock_mhz))
                d = [x for _, x in sr["probe_durations"]]
                say(f"step response {name}: {len(d)} probes, {min(d) * 1e3:.4f}-{max(d) * 1e3:.4f} ms")
            doc["step_responses"].append(sr)
            reference_probe(doc)
            _atomic_write(out, doc)
    if out.exists() and (len(doc["kernels"]), len(doc["step_responses"])) == n_before:
        say(f"{out}: every entry asked for is already measured; the file is left as it is")
        return doc  # nothing new: the idle reading after the campaign stays the campaign's
    # NVML's power is an average over the last second or so: read right after the last entry it was that entry's
    # power (every committed campaign's idle_after tracked its last entry: 699 W after a GELU, 423 W after AdamW), so
    # the card idles IDLE_SETTLE_S first (the fake's sleep advances its own clock only)
    ex.sleep(IDLE_SETTLE_S)
    doc["idle_after"] = {"power_w": be.power_mw() / 1000.0, "clocks_mhz": list(be.clocks_mhz()),
                         "settle_s": IDLE_SETTLE_S}
    _atomic_write(out, doc)
    return doc


def _check_resume(out: Path, doc: dict, be, window_s: float, warmup_s: float) -> None:
    """Resume only the same campaign: entries of another card, driver or window in one file would be fitted as one
    measurement (a fake run resumed into a real card's file would add the fake's numbers to it without a word)."""
    refuse_other_card(out, doc, be, "a campaign")  # another H200 (a killed anchor run resumed in the next lease)
    now = {"gpu": be.name, "driver": _driver(be), "window_s": window_s, "warmup_s": warmup_s}
    for key, v in now.items():
        had = doc.get(key)
        same = (had == v) if key in ("gpu", "driver") else (isinstance(had, (int, float)) and abs(had - v) < 1e-9)
        if had is not None and not same:
            raise InputError(f"{str(out)!r} holds a campaign with {key} {had!r}; this run has {key} {v!r}, so its "
                             "entries cannot be added to that file (resuming continues the same campaign); give a "
                             "new -o file, or the same --window/--warmup on the same card and driver")


def _driver(be) -> str:
    fn = getattr(be.nvml, "nvmlSystemGetDriverVersion", None) if hasattr(be, "nvml") else None
    try:
        v = fn() if fn else ""
    except Exception:  # noqa: BLE001 — the driver version is provenance only
        v = ""
    return v.decode() if isinstance(v, bytes) else str(v)


# ---------------------------------------------------------------------- executors
class FakeZoo:
    """Zoo kernels on a ``FakeNvml`` device: each kernel's time and power come from the kernel model of the fake's
    preset with activity from its FLOPs and bytes (``kdvfs.model.params_from_work``); no torch."""

    def __init__(self, fake, zoo: Sequence[ZooKernel] | None = None, *, reject: Sequence[str] = ()) -> None:
        from kdvfs.model import params_from_work

        self.fake = fake
        self.zoo = tuple(full_zoo() if zoo is None else zoo) + (PROBE, LIGHT)
        self.index = {k.name: i for i, k in enumerate(self.zoo)}
        self.reject = set(reject)
        ws = [k.work for k in self.zoo]
        # nominal times at the boost clock from the work at 70 % of the peak rate / bandwidth (the fake needs a time)
        maths = [math_class(k.category, k.dtype, w.tensor) for k, w in zip(self.zoo, ws)]
        t = [max(w.flops / (0.7 * fake.spec.peak_flops(m)), w.bytes / (0.8e9 * fake.spec.mem_bandwidth_gbs[-1]), 2e-6)
             for w, m in zip(ws, maths)]
        fake.params = params_from_work(fake.spec, [w.flops for w in ws], [w.bytes for w in ws], maths,
                                       [k.category for k in self.zoo], [k.name for k in self.zoo], t,
                                       core_mhz=[fake.spec.boost_core_mhz] * len(ws))
        self.cur: int | None = None

    def prepare(self, k: ZooKernel) -> None:
        if k.name in self.reject:
            raise SkipKernel(f"CUDA out of memory allocating {k.name} (simulated)")
        self.cur = self.index[k.name]

    def launch(self, n: int) -> float:
        assert self.cur is not None
        k = self.zoo[self.cur]
        if k.name in self.fake.replay:
            return self.fake.run_recorded(k.name, n)
        if k.gap_s <= 0:
            return self.fake.run_kernel(self.cur, n)  # simulated: runs at once; the handle is its duration
        t = 0.0
        for _ in range(n):  # the host's wait after each launch: the fake idles
            t += self.fake.run_kernel(self.cur, 1) if k.op != "idle" else 0.0
            self.fake.idle(k.gap_s)
            t += k.gap_s
        return t

    def wait(self, handle: float) -> float:
        return handle

    def run_for(self, seconds: float, tick: Callable[[], None] | None = None) -> tuple[float, int]:
        t0, n = self.fake.now_s, 0
        while self.fake.now_s - t0 < seconds:
            self.launch(1)
            n += 1
            if tick is not None:
                tick()
        return self.fake.now_s - t0, n

    def release(self) -> None:
        self.cur = None

    def kernels_launched(self) -> list[dict]:
        return [{"name": self.zoo[self.cur].name if self.cur is not None else "", "us": None}]

    def now_s(self) -> float:
        return self.fake.now_s

    def sleep(self, s: float) -> None:
        self.fake.idle(s)

    def probe_plan(self, phases: Sequence[tuple[str, float]], sample: Callable[[], None]) -> dict:
        t0 = self.fake.now_s
        raw, out = [], []
        p, light = self.index[PROBE.name], self.index[LIGHT.name]
        for load, dur in phases:
            s = self.fake.now_s - t0
            end = s + dur
            while self.fake.now_s - t0 < end:
                if load == "idle":
                    self.fake.idle(0.01)
                elif load in ("heavy", "probe-only"):
                    st = self.fake.now_s - t0
                    d = self.fake.run_kernel(p, 1)
                    raw.append((st, d))
                    if load == "probe-only":
                        self.fake.idle(0.005)
                else:
                    self.fake.run_kernel(light, 3)
                    st = self.fake.now_s - t0
                    raw.append((st, self.fake.run_kernel(p, 1)))
                sample()
            out.append({"start_s": s, "end_s": self.fake.now_s - t0, "load": load,
                        "kernel": {"heavy": PROBE.name, "probe-only": PROBE.name, "light": LIGHT.name}.get(load)})
        return {"raw": raw, "phases_out": out, "host_ref_s": t0}
