"""The H200 fit's data: characterisation files read and normalised into the rows the fit and its checks use.

A row is one measured zoo entry (a ``kernels`` record of a ``kdvfs-characterization/1`` document) with what the fit
needs beside the measurement: its ``role``, ``busy`` share, the work by today's estimates (``zoo_rows``), the launch
geometry (``sm_fraction``, ``occupancy``) and, with the thermal gap model, the gap power at its temperature
(``prepared_rows``). What the zoo's entries are comes from ``kdvfs.zoo_source`` (plain data, handed in as ``zoo``;
None: the zoo of ``hw_backend``, read through that seam). The fit itself is ``kdvfs.h200_fit``; the fit's document
and the checks are ``kdvfs.calibrate_h200``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kdvfs.errors import InputError
from kdvfs.work import math_class, writes_constant
from kdvfs.zoo_source import ZooEntry, ZooSource, read_characterization, zoo_source

__all__ = ["CONCURRENT_MIN", "DEFAULT_DATA", "DEFAULT_GAP_MODEL", "GAP_MODELS", "LAUNCH_BOUND_BUSY", "busy_fraction", "constant_write",
           "gap_power", "gap_thermal", "kernel_rows", "kernel_time_s", "load_rows", "onset_rows", "period_s",
           "prepared_rows", "row_role", "warm_gap_power", "zoo_concurrency", "zoo_direct_convolution", "zoo_rows", "zoo_strided_copy",
           "zoo_sm_fraction"]


def _defs(zoo: ZooSource | None) -> Mapping[str, ZooEntry]:
    return (zoo if zoo is not None else zoo_source()).entries


LAUNCH_BOUND_BUSY = 0.7
"""A zoo entry whose CUDA kernels (profiler device time, one invocation) fill less than this share of its measured
time per invocation is launch-bound: the GPU waits on the host between its kernels."""


def row_role(r: dict, zoo: ZooSource | None = None) -> str:
    """``kernel``, ``gap`` or ``launch`` (``hw_backend.zoo.ZooKernel.role``): from the record, else from the
    zoo's definition of that name (files written before the record carried it)."""
    if "role" in r:
        return r["role"]
    k = _defs(zoo).get(r["name"])
    return k.role if k is not None else "kernel"


def busy_fraction(r: dict, zoo: ZooSource | None = None) -> float:
    """The share of a zoo entry's time per invocation its GPU kernels fill: the profiler's device time of one
    invocation over the measured time, where that is below ``LAUNCH_BOUND_BUSY``; else 1 (the profiler ran once at
    the boost clock, so for a throttled kernel the ratio says nothing). CUDA-graph replays are busy throughout."""
    if r.get("graph") or _graph_of(r, zoo) or r.get("role") in ("gap", "duty"):
        return 1.0
    ck = [c for c in r.get("cuda_kernels") or [] if isinstance(c, dict)]
    if len(ck) >= 20 and not str(ck[-1].get("name", "")).startswith("(+"):
        return 1.0  # files before session 5 kept only the first 20 kernels' times: the sum is not the invocation's
    us = sum(float(c.get("us") or 0.0) for c in ck)
    b = us * 1e-6 / float(r["time_s"]) if us > 0 else 1.0
    return float(us * 1e-6 / period_s(r)) if b < LAUNCH_BOUND_BUSY else 1.0


def period_s(r: dict) -> float:
    """The time per invocation the entry's energy is averaged over: the window over the invocations
    (``time_mean_s``; ``power_w`` is the window's energy over that same span). ``time_s`` is the median wait for one
    invocation, which leaves out the host's own time between invocations (energy-counter and clock reads, the loop):
    for an entry that idles between launches, that time is GPU idle too."""
    return float(r.get("time_mean_s") or r["time_s"])


def kernel_time_s(r: dict) -> float:
    """The GPU time of one invocation's kernels: the whole median time for an entry busy throughout, the busy share
    of the period otherwise."""
    b = float(r.get("busy", 1.0))
    return float(r["time_s"]) if b >= 1.0 else b * period_s(r)


def _graph_of(r: dict, zoo: ZooSource | None = None) -> int:
    g = r.get("graph")
    if g is None:
        k = _defs(zoo).get(r["name"])
        g = k.graph if k is not None else 0
    return int(g or 0)


def zoo_rows(doc: dict, zoo: ZooSource | None = None) -> list[dict]:
    """The measured zoo kernels of a characterisation document (skipped ones left out), each with ``role``,
    ``busy`` (``busy_fraction``) and ``ws_bytes`` (the bytes one launch touches: a graph replay's bytes / launches)."""
    zoo = zoo if zoo is not None else zoo_source()
    defs = zoo.entries
    rows = []
    untimed = []  # duty entries without burst timing (a fake campaign records none)
    for k in doc.get("kernels", []):
        if "skipped" in k:
            continue
        _check_kernel_times(k)
        r = dict(k, role=row_role(k, zoo))
        z = defs.get(k["name"])
        # the work from the entry's shape by today's estimates (kdvfs.work), as a trace's kernels get theirs on
        # every import; the file's own numbers are kept beside
        if z is not None and z.op != "idle" and (z.flops, z.bytes) != (r["flops"], r["bytes"]):
            r.update(flops=z.flops, bytes=z.bytes, recorded_flops=r["flops"], recorded_bytes=r["bytes"])
        if z is not None and z.op in ("conv2d", "conv2d_bwd"):
            # cuDNN picks a convolution's kernels by shape (with or without layout conversions, partial gradients):
            # the kernels this entry ran, priced as the importer prices a traced op's (kdvfs.work_conv, session 13)
            from kdvfs.work_conv import recorded_conv_work

            w = recorded_conv_work(z.op, r.get("shape") or (), str(r.get("dtype")), r.get("launch_grids"))
            if w is not None:
                g0 = max(1, _graph_of(r, zoo))
                r.setdefault("recorded_flops", r["flops"])
                r.setdefault("recorded_bytes", r["bytes"])
                r.update(flops=w.flops * g0, bytes=w.bytes * g0)
        if z is not None and z.tensor is not None and r.get("dtype") and r.get("category"):
            # where the arithmetic runs, from the entry's definition: a GEMM-category entry is not always on tensor
            # cores (the grouped convolution's forward runs cuDNN's convolve_sgemm engines, kdvfs.work.simt_by_name)
            r["math"] = math_class(r["category"], r["dtype"], z.tensor)
        g = max(1, _graph_of(r, zoo))
        r["ws_bytes"] = float(r["bytes"]) / g
        r["constant_write"] = constant_write(r)
        conc = zoo_concurrency(r)
        r["sm_fraction"] = min(1.0, zoo_sm_fraction(r) * conc)
        r["dot_product"] = zoo_direct_convolution(r)
        r["strided"] = zoo_strided_copy(r)
        r["occupancy"] = min(1.0, zoo_sm_fraction(r, occupancy=True) * conc)
        r["busy"] = busy_fraction(r, zoo) if r["role"] != "gap" else 0.0
        if r["role"] == "duty":  # a burst, then idle: the burst ran at the clock read, below the cap's window
            if not r.get("burst_time_s"):
                untimed.append(r["name"])
                continue  # no burst timing recorded: the busy share is unknown
            if not r.get("time_mean_s"):  # the median wait would leave the host's time out of the period (item 8)
                raise InputError(f"duty entry {r['name']!r} has no 'time_mean_s' (the measured window over its "
                                 "invocations), which its busy share needs; re-measure it with `kdvfs characterize` "
                                 "or remove the entry")
            r["busy"] = min(1.0, float(r["burst_time_s"]) / period_s(r))
            r["uncapped"] = True
        rows.append(r)
    if not rows:
        why = (f"; its {len(untimed)} duty entr{'y' if len(untimed) == 1 else 'ies'} ({', '.join(untimed[:3])}"
               f"{', …' if len(untimed) > 3 else ''}) have no 'burst_time_s' (the burst's timed GPU time, which a duty "
               "entry's busy share needs: `kdvfs characterize --backend nvml` records it, the fake backend does not)"
               if untimed else "; run `kdvfs characterize` first")
        raise InputError(f"the characterisation file holds no measured zoo kernel that can be predicted{why}")
    return rows


def constant_write(r: dict) -> bool:
    """Whether a zoo entry's GPU kernels only write a repeated value (``kdvfs.work.writes_constant`` of each kernel
    the profiler recorded for it, as a trace's kernels are judged by their names)."""
    names = [str(c.get("name", "")) for c in r.get("cuda_kernels") or [] if isinstance(c, dict)
             and not str(c.get("name", "")).startswith("(+")]
    return bool(names) and all(writes_constant(n) for n in names)


def zoo_sm_fraction(r: dict, sms: int = 132, occupancy: bool = False) -> float:
    """The share of the SMs a zoo entry's kernels keep busy (``kdvfs.occupancy.sm_fraction``), averaged over its
    CUDA kernels by their profiled time, from the launch grids the campaign recorded (``launch_grids``: each kernel
    of one un-graphed launch with its ``grid``, ``block`` and ``us``; ``characterization8.json.gz`` on), else a
    ``grid`` beside each profiled kernel. A kernel without a recorded grid counts as all SMs busy, the model's
    fallback for any kernel without a grid. For the earlier zoo files that is right without the record: their elementwise, reduction,
    norm and copy entries cover ≥ 1 Mi elements or rows (ATen's launches take at most 4096 elements or one row per
    block, so ≥ 256 blocks), their GEMMs and attention ≥ 132 output tiles of ≤ 256 × 256; the exceptions are the
    1024³ GEMMs (16–64 tiles by cuBLAS's choice of tile, which the files do not record), left at the fallback.
    ``occupancy=True``: the share of resident-thread slots instead (``kdvfs.occupancy.thread_occupancy``); the
    earlier files' entries other than GEMMs and attention (the only ones it applies to) launch ≥ 2048 blocks of
    128 threads, ≥ 97 % of the slots, the fallback's full card, by ATen's launch rules: its vectorised elementwise
    kernels take 128 threads × 8 16-bit or 4 32-bit elements a block (aten/src/ATen/native/cuda/CUDALoops.cuh,
    ``num_threads()`` and ``vec_size``), its LayerNorm and RMS norm one row a block of 32 × 4 threads
    (layer_norm_kernel.cu, ``vectorized_layer_norm_kernel``), its short-row softmax a few rows a block of 32 × 4
    (PersistentSoftmax.cuh) — the session-8 file records the same (an add over 512 Ki bf16 elements: 512 blocks of
    128; a LayerNorm over 512 rows: 512 blocks of 32 × 4) — and those entries cover ≥ 2 Mi elements or ≥ 16384
    rows."""
    from kdvfs.occupancy import sm_fraction, thread_occupancy

    ck = [c for c in r.get("launch_grids") or [] if isinstance(c, dict) and c.get("grid")]
    if not ck:
        ck = [c for c in r.get("cuda_kernels") or [] if isinstance(c, dict)
              and not str(c.get("name", "")).startswith("(+")]
    us = np.array([float(c.get("us") or 0.0) for c in ck])
    def one(c):
        return thread_occupancy(c.get("grid"), c.get("block"), sms) if occupancy else sm_fraction(c.get("grid"), None, sms)

    fr = np.array([1.0 if (f := one(c)) is None else f for c in ck])
    if not len(ck) or us.sum() <= 0:
        return 1.0
    return float(us @ fr / us.sum())


CONCURRENT_MIN = 1.5
"""A zoo entry whose profiled kernels (one invocation) sum to more than this many times its measured time ran kernels
side by side (``zoo_concurrency``). Entries whose kernels run one after another read at most 1.14 over the 243 measured
entries with profiled kernels (the profiled launch runs at the boost clock, a capped window's at a lower one);
characterization14's grouped convolutions read 2.5–4.9 (cuDNN's eight streams)."""


def _check_kernel_times(k: dict) -> None:
    """The profiled kernels' times (``cuda_kernels``' and ``launch_grids``' ``us``) are numbers of microseconds ≥ 0:
    the rows' busy share, SM share, concurrency and convolution test sum them, and a damaged one ("abc") ended
    ``card-anchor``, ``calibrate-h200`` and ``validate-steps --anchors`` in a traceback."""
    import math

    for field in ("cuda_kernels", "launch_grids"):
        for c in k.get(field) or []:
            v = c.get("us") if isinstance(c, dict) else None
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"characterisation entry {k.get('name')!r}: a kernel of its {field} has us = {v!r}; "
                                 "it must be a number of microseconds ≥ 0 (the profiled kernel's time) — the file is "
                                 "damaged: fix or drop that kernel, or measure the entry again")


def zoo_concurrency(r: dict) -> float:
    """How many of a zoo entry's kernels ran at once, on average: their profiled time (``cuda_kernels``, the rest's
    ``(+N more)`` line included) over the entry's measured time per invocation, where that exceeds
    ``CONCURRENT_MIN``, else 1. Its SM share (``zoo_sm_fraction``, time-weighted over kernels that each keep their own
    grid's SMs busy) is that many times larger, as a trace's concurrent kernels' (``kdvfs.trace.Kernel.concurrency``)."""
    if r.get("graph") or r.get("role") in ("gap", "duty"):
        return 1.0
    us = sum(float(c.get("us") or 0.0) for c in r.get("cuda_kernels") or [] if isinstance(c, dict))
    t = float(r.get("time_s") or 0.0)
    c = us * 1e-6 / t if t > 0 else 1.0
    return c if c > CONCURRENT_MIN else 1.0


def zoo_direct_convolution(r: dict) -> bool:
    """Whether most of a zoo entry's profiled kernel time is direct convolutions on the CUDA cores
    (``kdvfs.occupancy.direct_convolution`` of each kernel's name, as a trace's kernels are judged)."""
    from kdvfs.occupancy import direct_convolution

    ck = [c for c in r.get("cuda_kernels") or [] if isinstance(c, dict)]
    tot = sum(float(c.get("us") or 0.0) for c in ck)
    conv = sum(float(c.get("us") or 0.0) for c in ck if direct_convolution(str(c.get("name", ""))))
    return tot > 0 and conv > 0.5 * tot


def zoo_strided_copy(r: dict) -> bool:
    """Whether most of a zoo entry's profiled kernel time is copies between layouts (``kdvfs.access.strided_copy``
    of each kernel's name, as a trace's kernels are judged). A graph replay's list ends with a summary entry,
    ``(+N more)``, of the same launches: it is left out of both sums."""
    from kdvfs.access import strided_copy

    ck = [c for c in r.get("cuda_kernels") or [] if isinstance(c, dict) and not str(c.get("name", "")).startswith("(+")]
    tot = sum(float(c.get("us") or 0.0) for c in ck)
    hit = sum(float(c.get("us") or 0.0) for c in ck if strided_copy(str(c.get("name", ""))))
    return tot > 0 and hit > 0.5 * tot


def gap_power(rows: list[dict]) -> float | None:
    """The GPU's power between kernels (host gaps, idle): the median energy-counter power of the ``gap`` entries."""
    g = [r["power_w"] for r in rows if r["role"] == "gap"]
    return float(np.median(g)) if g else None


def kernel_rows(rows: list[dict]) -> list[dict]:
    """The rows the kernel model is fitted and checked on: everything but the ``gap`` entries."""
    return [r for r in rows if r["role"] != "gap"]



def onset_rows(docs: list[dict], onset_s: float = 0.2, *, zoo: ZooSource | None = None) -> list[dict]:
    """The probe GEMM at the top clock, above the cap, from the step responses: its power is the highest
    instantaneous power read in the first ``onset_s`` of each heavy burst that follows another load (the limiter
    lets the first tens of milliseconds run at the top clock; NVML's field lags, so the peak, not the first reading),
    the median over bursts. Zoo kernels alone all sit at the cap, where power pins their FLOP rate but not how power
    grows with the clock: this row is what sets the voltage curve's slope."""
    peaks, tref = [], []
    for doc in docs:
        for sr in doc.get("step_responses", []):
            pi = np.array(sr.get("power_instant") or [], dtype=float).reshape(-1, 2)
            if not len(pi) or not sr.get("probe", {}).get("time_at_max_clock_s"):
                continue
            tref.append(float(sr["probe"]["time_at_max_clock_s"]))
            ph = sr["phases"]
            for j, p in enumerate(ph):
                if p["load"] == "heavy" and j > 0 and ph[j - 1]["load"] != "heavy":
                    w = pi[(pi[:, 0] >= p["start_s"]) & (pi[:, 0] < p["start_s"] + onset_s), 1]
                    if len(w):
                        peaks.append(float(w.max()))
    if not peaks:
        return []
    w = (zoo if zoo is not None else zoo_source()).probe
    return [{"name": "probe_gemm_bf16_4096_onset", "category": "gemm", "dtype": "bf16", "flops": w.flops,
             "bytes": w.bytes, "ws_bytes": w.bytes, "time_s": float(np.median(tref)), "sm_mhz_median": 1980.0,
             "power_w": float(np.median(peaks)), "role": "kernel", "busy": 1.0, "uncapped": True,
             "onsets": len(peaks), "file": "step_responses"}]



def load_rows(data, *, zoo: ZooSource | None = None) -> tuple[list[dict], list[dict], list[str], list[dict]]:
    """(kernel rows, gap rows, file names, documents) of one or more characterisation files, in file then zoo order; a name
    measured twice keeps its first measurement, unless the later one is a duty entry measured by session 8's method
    (``method`` ``duty-chunks``: bursts and gaps back to back, the energy counter read between 0.5 s chunks), which
    replaces an earlier one measured the old way (an energy-counter read, ~3 ms on the H200, every few invocations
    idled the GPU inside the period) at the earlier one's position."""
    paths = [data] if isinstance(data, (str, Path)) else list(data)
    if not paths:
        raise InputError("calibrate-h200: give at least one characterisation file")
    rows: list[dict] = []
    at: dict[str, int] = {}
    docs = []
    for p in paths:
        doc = read_characterization(p)
        docs.append(doc)
        try:
            got = zoo_rows(doc, zoo)
        except InputError as e:  # the entry's file, where several are read
            raise InputError(f"{str(p)!r}: {e}") from None
        for r in got:
            if r["name"] not in at:
                at[r["name"]] = len(rows)
                rows.append(dict(r, file=Path(p).name))
            elif r.get("method") == "duty-chunks" and rows[at[r["name"]]].get("method") != "duty-chunks":
                rows[at[r["name"]]] = dict(r, file=Path(p).name)
    return kernel_rows(rows), [r for r in rows if r["role"] == "gap"], [str(p) for p in paths], docs


DEFAULT_DATA = tuple(f"validation/h200/characterization/characterization{i}.json.gz"
                     for i in ("", "2", "3", "4", "5", "6", "8", "10", "11"))
"""The characterisation files ``kdvfs calibrate-h200`` fits by default (relative to the repository root): the first
zoo (session 4), the cache-gaps, step-shapes and duty sets (session 5), the top-clock and attention sets (session 7), the
small-kernel set with launch grids (session 8) and every duty entry measured again the probe's way (session 8,
``characterization10``: its rows replace the same entries of files 4–6 in place, and add the held-duty entries; see
``load_rows``) and the set measured on a warm card right after training steps (session 9, ``characterization11``:
gap entries as the card cools, warm repeats of two graph replays, duty entries with 50 and 200 µs gaps). Not
``characterization7.json.gz`` (the held-duty set measured the old way: the measuring loop's
energy-counter reads, ~3 ms each, idled the GPU a quarter of each period) nor ``characterization9.json.gz`` (the same
entries in 50 ms chunks, a first try); ``kdvfs calibrate-h200 --check`` reports them."""


GAP_MODELS = ("median", "thermal")
"""How the fit prices the GPU idle (a duty or launch-bound entry's idle share, a step's host gaps): ``median``, the
median power of the zoo's ``gap`` entries (sessions 5–8); ``thermal``, the gap entries' power as a line in the
card's temperature (``kdvfs.thermal``), each zoo entry's idle share at its own recorded temperature."""
DEFAULT_GAP_MODEL = "thermal"
"""The bundled model's (session 9), chosen by the zoo's held-out split on the nine default files with the bundled
structure: median 37 of 62, thermal 39 (validation/h200/thermal/variants_zoo.json, every structure refitted with
both)."""


def prepared_rows(data, gap_model: str = DEFAULT_GAP_MODEL, *,
                  zoo: ZooSource | None = None) -> tuple[list[dict], float | None, list[str], list[dict]]:
    """(the rows fitted and checked, the gap power, file names, documents): every kernel row of ``data``; the gap
    power from the ``gap`` entries (``gap_power``; with ``gap_model`` ``thermal`` each row also carries
    ``gap_power_w``, the gap power at its temperature, and the one returned is ``warm_gap_power``).

    The probe's burst-onset row (``onset_rows``) is not fitted, only reported (``onset_check``): it is NVML's
    instantaneous power, which averages over its own window and lags a burst's onset (815 W read for the 4096³ GEMM
    at 1980 MHz), while the duty entries time the same GEMM at 1980 MHz in bursts and read the energy counter (their
    energy, less the gaps at the gap power, gives 920–980 W per burst). The duty entries set the voltage curve's slope."""
    rows, gaps, paths, docs = load_rows(data, zoo=zoo)
    if gap_model == "thermal" and gaps:
        th = gap_thermal(rows, gaps)
        rows = [dict(r, gap_power_w=float(th.gap_power_w(r["temperature_c"])))
                if isinstance(r.get("temperature_c"), (int, float)) else r for r in rows]
        return rows, warm_gap_power(th, rows), paths, docs
    return rows, (gap_power(gaps) if gaps else None), paths, docs


def gap_thermal(rows: list[dict], gaps: list[dict]):
    """The thermal gap model (``kdvfs.thermal.ThermalModel``) of the zoo: the gap entries' power against their
    temperature, and the operating point through every entry's (power, temperature)."""
    from kdvfs.thermal import ThermalModel, fit_gap_line, fit_operating_point

    g0, ref, k = fit_gap_line(gaps)
    amb, r = fit_operating_point(rows + gaps)
    return ThermalModel(gap_ref_w=g0, ref_c=ref, gap_w_per_c=k, ambient_c=amb, c_per_w=r)


def warm_gap_power(th, rows: list[dict]) -> float:
    """One gap power for uses without an operating point (the DDP replay, ``--gap-power`` defaults): the thermal
    model's at the median temperature of the zoo's kernels."""
    t = [float(r["temperature_c"]) for r in rows if isinstance(r.get("temperature_c"), (int, float))]
    return float(th.gap_power_w(float(np.median(t)) if t else th.ref_c))

