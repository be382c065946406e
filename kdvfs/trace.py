"""Traces of training iterations: ``Kernel``, ``Segment``, ``Trace`` and the ``kdvfs-trace/1`` file format.

A trace is the executed sequence of one training iteration, compressed: a segment is an ordered run of kernels with a
``repeat`` count (a transformer layer's forward runs 24 times). ``Trace.instances()`` unrolls it. The file format is
documented in ``docs/trace-format.md``.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.errors import FormatError, InputError

__all__ = [
    "CATEGORIES",
    "FORMAT",
    "PASSES",
    "Kernel",
    "Segment",
    "Trace",
    "load_trace",
    "save_trace",
    "stages_of",
    "trace_from_dict",
    "trace_to_dict",
]

FORMAT = "kdvfs-trace/1"
FORMAT_CONCURRENT = "kdvfs-trace/2"
"""The format of a trace with a kernel's ``concurrency``: the same document, under a version that a kdvfs older than
the field refuses ("newer than this kdvfs understands; upgrade kdvfs") instead of reading it without the field and
pricing those kernels as if each ran alone. A trace without it stays ``FORMAT``; both are read."""
FORMATS = (FORMAT, FORMAT_CONCURRENT)
MAX_INSTANCES = 5_000_000
"""Kernel instances per iteration beyond any real training step (GPT-3 XL: ~2 000); larger repeat counts are typos,
and unrolling them would exhaust memory (every optimiser and the simulator hold per-instance arrays)."""
# One kernel longer than an hour is a damaged duration (a Kineto `dur` of 1e15 µs was imported, and `analyze` then
# simulated its limiter for days of wall time); the bound also keeps every simulation of a trace finite.
MAX_KERNEL_TIME_S = 3600.0


def _short(name: str, n: int = 120) -> str:
    """A kernel name cut for a message (C++ template names run to thousands of characters)."""
    return name if len(name) <= n else name[:n] + "…"


CATEGORIES = ("gemm", "attention", "norm", "elementwise", "reduction", "copy", "optimizer", "collective", "other")
PASSES = ("forward", "backward", "optimizer", "other")


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel of a trace.

    Attributes:
        name: kernel (or published) name.
        category: one of ``CATEGORIES``.
        time_s: duration of one invocation at the capture clocks, seconds.
        energy_j: energy of one invocation at the capture clocks, joules, when it was measured.
        flops: floating-point operations of one invocation, when known.
        bytes: bytes moved through device memory by one invocation, when known.
        grid: CUDA grid dimensions, when known.
        block: CUDA block dimensions, when known.
        stream: CUDA stream id at capture, when known.
        op: the framework op that launched it (e.g. ``aten::addmm``), when known.
        dtype: the arithmetic's dtype (``bf16``, ``fp16``, ``fp32``, ``tf32``), when known.
        math: where the arithmetic runs (``kdvfs.work.math_class``: tensor16, tf32, fp8, simt), when known.
        work_source: how ``flops``/``bytes`` were obtained: ``shapes`` (op input shapes), ``name`` (kernel name and
            launch grid), ``category`` (not estimated: the model uses category priors), or ``None`` (given).
        concurrency: for a kernel its op ran beside others of its own on several streams (cuDNN's grouped
            convolutions), its duration over its share of the wall time (≥ 1): ``time_s`` is that share, and the SMs
            busy while it ran are its grid's times this (``kdvfs.kernelwork.concurrent_wall_share``); ``None``: alone.
    """

    name: str
    category: str
    time_s: float
    energy_j: float | None = None
    flops: float | None = None
    bytes: float | None = None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    stream: int | None = None
    op: str | None = None
    dtype: str | None = None
    math: str | None = None
    work_source: str | None = None
    concurrency: float | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise FormatError(
                f"kernel {self.name!r}: category {self.category!r} is not one of {', '.join(CATEGORIES)}; "
                "use 'other' for kernels that fit none"
            )
        if (not isinstance(self.time_s, (int, float)) or not math.isfinite(self.time_s) or self.time_s <= 0
                or self.time_s > MAX_KERNEL_TIME_S):
            raise FormatError(
                f"kernel {_short(self.name)!r}: time_s must be a positive number of seconds up to {MAX_KERNEL_TIME_S:g} "
                f"(one kernel of a training step), got {self.time_s!r}; drop the kernel or give its measured duration"
            )
        if self.energy_j is not None and (not isinstance(self.energy_j, (int, float)) or isinstance(self.energy_j, bool)
                                          or not math.isfinite(self.energy_j) or self.energy_j < 0):
            raise FormatError(f"kernel {self.name!r}: energy_j must be ≥ 0 J, got {self.energy_j!r}; omit it if unknown")
        if self.concurrency is not None and (not isinstance(self.concurrency, (int, float))
                                             or isinstance(self.concurrency, bool)
                                             or not math.isfinite(self.concurrency) or self.concurrency < 1):
            raise FormatError(f"kernel {self.name!r}: concurrency must be a number ≥ 1 (its duration over its share of "
                              f"the wall time), got {self.concurrency!r}; omit it for a kernel that ran alone")


@dataclass(frozen=True, slots=True)
class Segment:
    """An ordered run of kernels executed ``repeat`` times in a row.

    Attributes:
        name: unique within the trace (``forward_layer``).
        kernels: the kernels in execution order.
        repeat: how many times the run executes (≥ 1).
        pass_name: which part of the iteration it belongs to: ``forward``, ``backward``, ``optimizer`` or ``other``.
    """

    name: str
    kernels: tuple[Kernel, ...]
    repeat: int = 1
    pass_name: str = "other"

    def __post_init__(self) -> None:
        if not self.kernels:
            raise FormatError(f"segment {self.name!r} has no kernels; remove it or add its kernels")
        if not isinstance(self.repeat, int) or self.repeat < 1:
            raise FormatError(f"segment {self.name!r}: repeat must be an integer ≥ 1, got {self.repeat!r}")
        if self.pass_name not in PASSES:
            raise FormatError(f"segment {self.name!r}: pass {self.pass_name!r} is not one of {', '.join(PASSES)}")

    @property
    def time_s(self) -> float:
        """Time of one repetition at the capture clocks, seconds."""
        return float(sum(k.time_s for k in self.kernels))


@dataclass(frozen=True, slots=True)
class Trace:
    """One training iteration as segments in execution order, plus where it came from.

    Attributes:
        name: short identifier (``gpt3xl-llmc-rtx3080ti``).
        segments: segments in execution order.
        model: the model trained (``GPT-3 XL``).
        batch_size: sequences per step.
        seq_len: tokens per sequence.
        gpu: the GPU it was captured on.
        capture_core_mhz: core clock at capture; ``None`` means the driver's own choice (auto).
        capture_mem_mhz: memory clock at capture; ``None`` means auto.
        source: who measured it, how.
        licence: licence of the data.
        notes: anything else (precision, software versions).
    """

    name: str
    segments: tuple[Segment, ...]
    model: str = ""
    batch_size: int | None = None
    seq_len: int | None = None
    gpu: str = ""
    capture_core_mhz: int | None = None
    capture_mem_mhz: int | None = None
    source: str = ""
    licence: str = ""
    notes: str = ""
    # not an init field: dataclasses.replace() then starts a fresh cache instead of carrying the old trace's views
    _cache: dict = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        if not self.segments:
            raise FormatError(f"trace {self.name!r} has no segments; a trace needs at least one kernel")
        names = [s.name for s in self.segments]
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        dup = sorted(n for n, c in counts.items() if c > 1)
        if dup:
            raise FormatError(f"trace {self.name!r}: segment names must be unique, repeated: {', '.join(dup)}")
        n_inst = sum(s.repeat * len(s.kernels) for s in self.segments)
        if n_inst > MAX_INSTANCES:
            raise FormatError(
                f"trace {self.name!r} unrolls to {n_inst} kernel instances per iteration, more than {MAX_INSTANCES} "
                "(a GPT-3 XL iteration has ~2 000); check the segments' repeat counts")

    # ------------------------------------------------------------------ views
    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """Distinct kernels (each segment's kernels once), in segment order."""
        if "kernels" not in self._cache:
            self._cache["kernels"] = tuple(k for s in self.segments for k in s.kernels)
        return self._cache["kernels"]

    @property
    def kernel_keys(self) -> tuple[str, ...]:
        """Stable identifiers ``segment.index`` of ``kernels``; profiles and schedules refer to these."""
        if "keys" not in self._cache:
            self._cache["keys"] = tuple(f"{s.name}.{i}" for s in self.segments for i in range(len(s.kernels)))
        return self._cache["keys"]

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """The name of each distinct kernel (cached: the simulator labels timelines with them on every run)."""
        if "names" not in self._cache:
            self._cache["names"] = tuple(k.name for k in self.kernels)
        return self._cache["names"]

    @property
    def kernel_segment(self) -> np.ndarray:
        """Segment index of each distinct kernel."""
        return np.repeat(np.arange(len(self.segments)), [len(s.kernels) for s in self.segments])

    @property
    def repeats(self) -> np.ndarray:
        """How many instances each distinct kernel has in one iteration."""
        return np.repeat([s.repeat for s in self.segments], [len(s.kernels) for s in self.segments]).astype(np.int64)

    def instances(self) -> np.ndarray:
        """Indices into ``kernels`` of every executed kernel instance, in execution order."""
        if "inst" not in self._cache:
            parts = []
            start = 0
            for s in self.segments:
                idx = np.arange(start, start + len(s.kernels))
                parts.append(np.tile(idx, s.repeat))
                start += len(s.kernels)
            arr = np.concatenate(parts).astype(np.int64)
            arr.setflags(write=False)
            self._cache["inst"] = arr
        return self._cache["inst"]

    def instance_segments(self) -> np.ndarray:
        """Segment index of every executed instance."""
        if "inst_seg" not in self._cache:
            arr = self.kernel_segment[self.instances()]
            arr.setflags(write=False)
            self._cache["inst_seg"] = arr
        return self._cache["inst_seg"]

    def segment_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """Start index and segment of each block of consecutive instances of one segment (cached: the simulator's
        fast path sums per block on every run)."""
        if "blocks" not in self._cache:
            seg = self.instance_segments()
            starts = np.concatenate([[0], np.flatnonzero(np.diff(seg)) + 1])
            block_seg = seg[starts]
            starts.setflags(write=False)
            block_seg.setflags(write=False)
            self._cache["blocks"] = (starts, block_seg)
        return self._cache["blocks"]

    @property
    def times_s(self) -> np.ndarray:
        """Capture time of each distinct kernel, seconds."""
        return np.array([k.time_s for k in self.kernels], dtype=float)

    @property
    def total_time_s(self) -> float:
        """Time of one iteration at the capture clocks, seconds."""
        return float(np.dot(self.times_s, self.repeats))

    @property
    def total_energy_j(self) -> float | None:
        """Energy of one iteration at the capture clocks, when every kernel carries one."""
        energies = [k.energy_j for k in self.kernels]
        if any(e is None for e in energies):
            return None
        return float(np.dot(np.array(energies, dtype=float), self.repeats))

    def kernel_index(self, key: str) -> int:
        try:
            return self.kernel_keys.index(key)
        except ValueError:
            raise FormatError(f"trace {self.name!r} has no kernel {key!r}; keys look like {self.kernel_keys[0]!r}") from None

    def summary(self) -> dict[str, Any]:
        """What ``kdvfs trace show --json`` prints."""
        rep = self.repeats
        t = self.times_s
        cat_time: dict[str, float] = {}
        for k, r in zip(self.kernels, rep):
            cat_time[k.category] = cat_time.get(k.category, 0.0) + k.time_s * r
        total = self.total_time_s
        layer = max(self.segments, key=lambda s: (s.repeat, len(s.kernels)))
        energy = self.total_energy_j
        return {
            "name": self.name,
            "model": self.model,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "gpu": self.gpu,
            "capture_core_mhz": self.capture_core_mhz,
            "capture_mem_mhz": self.capture_mem_mhz,
            "source": self.source,
            "licence": self.licence,
            "kernels": len(t),
            "instances": int(rep.sum()),
            "kernels_per_layer": len(layer.kernels) if layer.repeat > 1 else None,
            "total_time_s": total,
            "total_energy_j": energy,
            "segments": [
                {"name": s.name, "pass": s.pass_name, "repeat": s.repeat, "kernels": len(s.kernels),
                 "time_s": s.time_s * s.repeat, "time_per_repeat_s": s.time_s}
                for s in self.segments
            ],
            "category_time_share": {c: v / total for c, v in sorted(cat_time.items(), key=lambda kv: -kv[1])},
        }


# ---------------------------------------------------------------------- file format
_KERNEL_FIELDS = ("name", "category", "time_s", "energy_j", "flops", "bytes", "grid", "block", "stream", "op", "dtype",
                  "math", "work_source", "concurrency")


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The ``kdvfs-trace/1`` document of a trace (``kdvfs-trace/2`` where a kernel has ``concurrency``)."""
    def kernel(k: Kernel) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for f in _KERNEL_FIELDS:
            v = getattr(k, f)
            if v is not None:
                d[f] = list(v) if isinstance(v, tuple) else v
        return d

    return {
        "format": FORMAT_CONCURRENT if any(k.concurrency is not None for k in trace.kernels) else FORMAT,
        "name": trace.name,
        "model": trace.model,
        "batch_size": trace.batch_size,
        "seq_len": trace.seq_len,
        "gpu": trace.gpu,
        "capture_clocks": {"core_mhz": trace.capture_core_mhz, "mem_mhz": trace.capture_mem_mhz},
        "source": trace.source,
        "licence": trace.licence,
        "notes": trace.notes,
        "segments": [
            {"name": s.name, "pass": s.pass_name, "repeat": s.repeat, "kernels": [kernel(k) for k in s.kernels]}
            for s in trace.segments
        ],
    }


def _need(d: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in d:
        raise FormatError(f"{where}: missing field {key!r}; see docs/trace-format.md")
    v = d[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise FormatError(f"{where}: field {key!r} has the wrong type ({type(v).__name__}: {str(v)[:80]!r}); "
                          "see docs/trace-format.md")
    return v


def _opt(d: dict, key: str, kind, where: str) -> None:
    """An optional field: None or of ``kind`` (bool never counts as a number); numbers must be finite."""
    v = d.get(key)
    if v is None:
        return
    if not isinstance(v, kind) or isinstance(v, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise FormatError(f"{where}: field {key!r} must be {names} or absent, got {type(v).__name__} {v!r}; "
                          "see docs/trace-format.md")
    if isinstance(v, (int, float)):
        d[key] = _float(v, key, where) if isinstance(v, float) or not isinstance(kind, type) else v


def _float(v, key: str, where: str) -> float:
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise FormatError(f"{where}: field {key!r} is {v!r}; it must be a finite number — see docs/trace-format.md")
    return f


def trace_from_dict(doc: Mapping[str, Any], where: str = "trace") -> Trace:
    """Validate a ``kdvfs-trace/1`` document and build the trace."""
    if not isinstance(doc, Mapping):
        raise FormatError(f"{where}: expected a JSON object at the top level, got {type(doc).__name__}")
    fmt = doc.get("format")
    if fmt not in FORMATS:
        if isinstance(fmt, str) and fmt.startswith("kdvfs-trace/"):
            raise FormatError(
                f"{where}: format {fmt!r} is newer than this kdvfs understands ({', '.join(FORMATS)}); upgrade kdvfs "
                "(pip install -U kdvfs) or re-export the trace"
            )
        if fmt == "kdvfs-ranks/1":  # a multi-rank trace holds one kdvfs trace per rank; only its own verb reads it
            raise FormatError(f"{where}: a multi-rank trace (kdvfs-ranks/1, one trace per rank); replay it with "
                              "`kdvfs simulate-ranks --trace FILE --gpu GPU`, or import one rank's file on its own "
                              "(`kdvfs trace import rank0.json.gz -o OUT.json`) for this verb")
        if fmt is None and ("traceEvents" in doc or "schemaVersion" in doc):
            # "format is None, expected 'kdvfs-trace/1'" told a new user with a profiler trace little
            raise FormatError(f"{where} is a PyTorch profiler (Chrome) trace, not a kdvfs trace: import it with `kdvfs "
                              "trace import FILE -o OUT.json` and give OUT.json here (`kdvfs analyze FILE` and `kdvfs "
                              "trace show FILE` read it directly)")
        raise FormatError(
            f"{where}: not a kdvfs trace (\"format\" is {fmt!r}, expected {' or '.join(map(repr, FORMATS))}); "
            "to read a PyTorch profiler trace use `kdvfs trace import FILE -o OUT.json`"
        )
    segs = []
    unknown: set[str] = set()
    for si, sd in enumerate(_need(doc, "segments", where, list)):
        sw = f"{where}: segment {si}"
        if not isinstance(sd, Mapping):
            raise FormatError(f"{sw}: expected an object")
        kernels = []
        for ki, kd in enumerate(_need(sd, "kernels", sw, list)):
            kw = f"{sw} kernel {ki}"
            if not isinstance(kd, Mapping):
                raise FormatError(f"{kw}: expected an object")
            if "time_s" not in kd or kd["time_s"] is None:
                raise FormatError(f"{kw}: missing duration 'time_s'; every kernel needs its measured time in seconds")
            extra = {f: kd.get(f) for f in _KERNEL_FIELDS[3:]}
            unknown.update(f for f in kd if f not in _KERNEL_FIELDS)
            for f in ("energy_j", "flops", "bytes", "concurrency"):
                _opt(extra, f, (int, float), kw)
            _opt(extra, "stream", int, kw)
            _opt(extra, "op", str, kw)
            for f in ("grid", "block"):
                v = extra[f]
                if v is not None:
                    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                        raise FormatError(f"{kw}: field {f!r} must be a list of whole numbers (CUDA dimensions), got "
                                          f"{v!r}; see docs/trace-format.md")
                    extra[f] = tuple(v)
            try:
                kernels.append(Kernel(
                    name=str(_need(kd, "name", kw, str)), category=str(kd.get("category", "other")),
                    time_s=_float(_need(kd, "time_s", kw, (int, float)), "time_s", kw), **extra,
                ))
            except FormatError as e:
                raise FormatError(f"{kw}: {e}") from None
        segs.append(Segment(
            name=str(_need(sd, "name", sw, str)), kernels=tuple(kernels),
            repeat=int(_need(sd, "repeat", sw, int)), pass_name=str(sd.get("pass", "other")),
        ))
    if unknown:  # a newer kdvfs's field read by this one would be dropped without a word (as `concurrency` was)
        logging.getLogger(__name__).warning(
            "%s: kernel field(s) %s are unknown to this kdvfs and are ignored; the file was written by a newer kdvfs "
            "(upgrade kdvfs) or edited by hand (see docs/trace-format.md)", where, ", ".join(map(repr, sorted(unknown))))
    clocks = doc.get("capture_clocks") or {}
    if not isinstance(clocks, Mapping):
        raise FormatError(f"{where}: field 'capture_clocks' must be an object {{\"core_mhz\": …, \"mem_mhz\": …}}, got "
                          f"{type(clocks).__name__} {clocks!r}; see docs/trace-format.md")
    top = {k: doc.get(k) for k in ("batch_size", "seq_len")}
    for k in top:
        _opt(top, k, int, where)
    cl = {k: clocks.get(k) for k in ("core_mhz", "mem_mhz")}
    for k in cl:
        _opt(cl, k, int, f"{where}: capture_clocks")
    return Trace(
        name=str(doc.get("name", "")), segments=tuple(segs), model=str(doc.get("model", "")),
        batch_size=top["batch_size"], seq_len=top["seq_len"], gpu=str(doc.get("gpu", "")),
        capture_core_mhz=cl["core_mhz"], capture_mem_mhz=cl["mem_mhz"],
        source=str(doc.get("source", "")), licence=str(doc.get("licence", "")), notes=str(doc.get("notes", "")),
    )


def read_json_document(path: Path, what: str) -> Any:
    """Read a JSON file, gzipped when its name ends in ``.gz``, with one clear error for every way it can fail."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"{what} file {str(path)!r} does not exist; check the path")
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8"))
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise FormatError(f"{what} file {str(path)!r} is not readable gzip/JSON ({e}); the file may be truncated — re-export it") from None
    except IsADirectoryError:
        raise FormatError(f"{what} file {str(path)!r} is a directory; give the path of the file") from None
    except OSError as e:
        raise FormatError(f"{what} file {str(path)!r} cannot be read ({e.strerror or e}); check the path and its "
                          "permissions") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{what} file {str(path)!r} is not UTF-8 text ({e}); is it the right file?") from None
    except RecursionError:
        raise FormatError(f"{what} file {str(path)!r} nests JSON too deeply to be a {what}; is it the right file?") from None
    except json.JSONDecodeError as e:
        if e.doc.strip() and e.pos == len(e.doc) - len(e.doc.lstrip()):
            # not JSON from its first character (a profile CSV given as a schedule or trace): not a truncation
            head = e.doc.lstrip().splitlines()[0][:40]
            kind = " (a kdvfs profile CSV: give it with --profile)" if head.startswith("# kdvfs-profile/") else ""
            raise FormatError(f"{what} file {str(path)!r} is not JSON: it begins with {head!r}{kind}; give the "
                              f"{what} file (JSON) there") from None
        raise FormatError(
            f"{what} file {str(path)!r} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file may be truncated — re-export it"
        ) from None
    except ValueError as e:  # e.g. an integer literal beyond Python's digit limit
        raise FormatError(f"{what} file {str(path)!r} holds a value JSON cannot represent here ({e}); re-export it") from None


def load_trace(path: str | Path) -> Trace:
    """Load and validate a ``kdvfs-trace/1`` file (plain or ``.gz``)."""
    return trace_from_dict(read_json_document(Path(path), "trace"), where=f"trace file {str(path)!r}")


def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write a trace; gzipped when the name ends in ``.gz``. Written atomically (temp file + rename)."""
    path = Path(path)
    text = json.dumps(trace_to_dict(trace), indent=1, sort_keys=False) + "\n"
    data = gzip.compress(text.encode(), mtime=0) if path.suffix == ".gz" else text.encode()
    from kdvfs.fileio import write_atomic

    return write_atomic(path, data, "trace output")


def segments_from_pairs(pairs: Iterable[tuple[str, str, int, list[Kernel]]]) -> tuple[Segment, ...]:
    """Build segments from ``(name, pass, repeat, kernels)`` tuples."""
    return tuple(Segment(name=n, pass_name=p, repeat=r, kernels=tuple(ks)) for n, p, r, ks in pairs)


def stages_of(trace: Trace) -> list[str]:
    """The workload stage of every trace kernel (the ``stage:<name>`` op labels of ``kdvfs record``). Glue kernels
    launched between two stages (a gradient sum) count with the stage before them; a kernel no stage launched at all
    means the trace was not recorded by kdvfs."""
    out: list[str] = []
    for key, k in zip(trace.kernel_keys, trace.kernels):
        op = k.op or ""
        if op.startswith("stage:"):
            out.append(op[6:])
        elif out:  # (out's first entry came from a stage label: the trace has stages)
            out.append(out[-1])
        else:
            raise InputError(
                f"trace kernel {key!r} ({k.name[:60]}) was not recorded by `kdvfs record`, so no workload stage "
                "replays it; record the trace with `kdvfs record` on this GPU, or validate on the fake backend")
    return out
