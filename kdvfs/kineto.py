"""Reading PyTorch profiler (Kineto) Chrome traces in one streaming pass, and resolving what launched each kernel.

``read_kineto`` decodes the file event by event (``json.JSONDecoder.raw_decode`` over a sliding buffer, gzip streamed),
so memory holds compact records, never the whole document: GPU events, runtime launches by correlation id, and per
thread the CPU intervals that matter (``cpu_op``, annotations, ``nn.Module`` frames). ``resolve`` then walks each
thread's intervals and the kernels' launch times together, once, in time order (a sweep with a stack of open
intervals), giving every kernel its ancestors in O((ops + kernels) · depth): the launching op and its input shapes,
the pass (forward, backward, optimizer), the module chain, and for backward kernels the module of the forward op they
differentiate (the autograd ``Sequence number`` links them).
"""

from __future__ import annotations

import bisect
import gzip
import json
import logging
import math
import re
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kdvfs.errors import FormatError

__all__ = ["GpuEvent", "KinetoRaw", "Resolved", "crossed_module_ranges", "read_kineto", "resolve"]

log = logging.getLogger(__name__)

LABEL_PREFIX = "kdvfs:"
OP_PREFIX = "kdvfs.op:"
MODULE_PREFIX = "kdvfs.module:"
"""A ``record_function`` range named ``kdvfs.module:<Class>_<n>`` is a module frame, as ``nn.Module: <Class>_<n>`` is
with ``with_stack=True``: ``kdvfs measure-steps`` marks its models' modules so (``hw_backend.module_ranges``) without
the Python stacks, which would multiply the trace's size."""
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})
COPY_CATS = frozenset({"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})
_RUNTIME = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
_CPU = frozenset({"cpu_op", "user_annotation", "Operator"})
_BACKWARD = re.compile(r"autograd::engine|Backward|backward", re.I)
_OPTIMIZER = re.compile(r"Optimizer\.|optimizer|\.step#|_multi_tensor_adam|_fused_adam|adamw?\b|zero_grad", re.I)
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_CHUNK = 1 << 22

_SHAPE_ARGS = ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")

# interval kinds
OP, MODULE = 0, 1


@dataclass(frozen=True, slots=True)
class GpuEvent:
    """One GPU kernel, memcpy or memset as recorded.

    Attributes:
        ts_us, dur_us: start and duration, microseconds.
        name: kernel name; cat: the event's category.
        stream: CUDA stream; grid, block: launch configuration; nbytes: bytes of a memcpy/memset.
        correlation: the runtime call that launched it.
        external_id: the profiler's ``External id``: the CPU op (with ``record_shapes=True``, its shapes) that
            launched it.
    """

    ts_us: float
    dur_us: float
    name: str
    cat: str
    stream: int | None
    grid: tuple[int, ...] | None
    block: tuple[int, ...] | None
    nbytes: float | None
    correlation: Any
    external_id: Any = None


@dataclass
class KinetoRaw:
    """What one pass over the file keeps (an engine's working state, not a value).

    Attributes:
        meta: top-level fields other than ``traceEvents`` (``deviceProperties``, versions).
        gpu: GPU events in file order.
        launches: correlation id → (launch time µs, thread key).
        threads: thread key → intervals ``(start µs, end µs, kind, name, input dims, sequence number, is backward op)``.
        steps: ``ProfilerStep#N`` intervals ``(start, end, name)``.
        labels, stages: the recorder's ``kdvfs:`` segment and ``kdvfs.op:`` stage intervals (any thread: the backward
            runs on autograd's thread inside a label opened on the main thread).
        events: events read.
        labelled: whether the recorder's ``kdvfs:`` labels are present.
        embedding_dims: input shapes of the first ``aten::embedding`` (the token ids' ``[batch, seq]``).
        ops: recorded ops with input shapes, by external id.
        unmatched: Chrome "B"/"E" duration events without their pair (in words), ignored.
    """

    meta: dict[str, Any] = field(default_factory=dict)
    gpu: list[GpuEvent] = field(default_factory=list)
    launches: dict[Any, tuple[float, Any]] = field(default_factory=dict)
    threads: dict[Any, list[tuple]] = field(default_factory=dict)
    steps: list[tuple[float, float, str]] = field(default_factory=list)
    labels: list[tuple[float, float, str]] = field(default_factory=list)
    stages: list[tuple[float, float, str]] = field(default_factory=list)
    events: int = 0
    labelled: bool = False
    embedding_dims: str | None = None
    ops: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)


def _open_text(path: Path):
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


class _Stream:
    """Values of a JSON text decoded one at a time from a sliding buffer."""

    def __init__(self, f) -> None:
        self.f = f
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dec = json.JSONDecoder()
        self.consumed = 0

    def _fill(self) -> None:
        chunk = self.f.read(_CHUNK)
        if not chunk:
            self.eof = True
        self.consumed += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def peek(self) -> str:
        while True:
            m = _WS.match(self.buf, self.pos)
            assert m is not None  # the pattern matches the empty string
            self.pos = m.end()
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos] if self.pos < len(self.buf) else ""
            self._fill()

    def take(self, ch: str) -> None:
        if self.peek() != ch:
            got = self.peek() or "end of file"
            raise json.JSONDecodeError(f"expected {ch!r}, found {got!r}", self.buf, self.pos)
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                v, end = self.dec.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                self._fill()
                continue
            if end >= len(self.buf) and not self.eof:  # a number may continue in the next chunk
                self._fill()
                continue
            self.pos = end
            return v


def _read(stream: _Stream, on_event: Callable[[Any], None], meta: dict[str, Any]) -> None:
    first = stream.peek()
    if first == "[":  # the Chrome trace array form
        _read_array(stream, on_event)
        return
    stream.take("{")
    if stream.peek() == "}":
        return
    while True:
        key = stream.value()
        stream.take(":")
        if key == "traceEvents" and stream.peek() == "[":
            _read_array(stream, on_event)
            meta["_has_events"] = True
        else:
            meta[key] = stream.value()
        nxt = stream.peek()
        if nxt == ",":
            stream.pos += 1
            continue
        stream.take("}")
        return


def _read_array(stream: _Stream, on_event: Callable[[Any], None]) -> None:
    stream.take("[")
    if stream.peek() == "]":
        stream.pos += 1
        return
    dec = stream.dec.raw_decode
    sep = _SEP.match
    while True:
        # fast path: decode straight from the buffer; the slow path refills it (once per chunk)
        try:
            v, end = dec(stream.buf, stream.pos)
            if end >= len(stream.buf) and not stream.eof:
                raise json.JSONDecodeError("value may continue in the next chunk", stream.buf, end)
            stream.pos = end
        except json.JSONDecodeError:
            v = stream.value()
        on_event(v)
        m = sep(stream.buf, stream.pos)
        if m is not None and m.end() < len(stream.buf):
            stream.pos = m.end()
            continue
        nxt = stream.peek()
        if nxt == ",":
            stream.pos += 1
            stream.peek()
            continue
        stream.take("]")
        return


def _tuple_or_none(v: Any) -> tuple[int, ...] | None:
    return tuple(int(x) for x in v) if isinstance(v, list) else None


def read_kineto(path: str | Path, progress: Callable[[int], None] | None = None) -> KinetoRaw:
    """One streaming pass over a Kineto trace (``.json`` or ``.json.gz``); ``progress(bytes_read)`` now and then."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"PyTorch profiler trace file {str(path)!r} does not exist; check the path")
    raw = KinetoRaw()
    threads = raw.threads
    dims_intern: dict[str, str] = {}

    open_b: dict[Any, list[dict]] = {}  # a thread's "B" events not yet closed by their "E", innermost last

    def on_event(ev: Any) -> None:
        raw.events += 1
        if type(ev) is not dict:
            return
        ph = ev.get("ph")
        if ph == "X":
            on_complete(ev)
        elif ph in ("B", "E"):
            # Chrome's duration events: a "B" and the next "E" of its thread make one complete event (Kineto writes
            # "X" only; other tools and merged exports write pairs, which were dropped without a word)
            key = (ev.get("pid"), ev.get("tid"))
            ts = ev.get("ts", 0)
            if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts):
                _bad_ts(path, ev)
            if ph == "B":
                open_b.setdefault(key, []).append(ev)
                return
            st = open_b.get(key)
            if not st:
                raw.unmatched.append(_event_words(ev, "an 'E' without its 'B'"))
                return
            b = st.pop()
            args = {**(b.get("args") or {}), **(ev.get("args") or {})}
            on_complete({**b, "ph": "X", "dur": float(ts) - float(b.get("ts", 0)), "args": args})

    def on_complete(ev: dict) -> None:
        cat = ev.get("cat", "")
        if cat in GPU_CATS:
            a = ev.get("args") or {}
            d = ev.get("dur")
            if not isinstance(d, (int, float)) or isinstance(d, bool) or not 0 < d < math.inf:
                raise FormatError(
                    f"{str(path)!r}: GPU event {str(ev.get('name'))[:120]!r} at ts={ev.get('ts')} has duration {d!r}; durations "
                    "must be positive — the trace is damaged, record it again")
            ts = float(ev.get("ts", 0))
            if not math.isfinite(ts):  # a NaN start sorted anywhere: the step's structure was lost, exit 0
                _bad_ts(path, ev)
            nb = a.get("bytes")
            raw.gpu.append(GpuEvent(
                ts, float(d), sys.intern(str(ev.get("name", "kernel"))), cat,
                a.get("stream") if isinstance(a.get("stream"), int) else None, _tuple_or_none(a.get("grid")),
                _tuple_or_none(a.get("block")), float(nb) if isinstance(nb, (int, float)) and nb else None,
                a.get("correlation"), a.get("External id")))
            if progress is not None and len(raw.gpu) % 20000 == 0:
                progress(stream.consumed + stream.pos)
            return
        if cat in _RUNTIME:
            a = ev.get("args") or {}
            if "correlation" in a:
                ts = float(ev.get("ts", 0))
                if not math.isfinite(ts):
                    _bad_ts(path, ev)
                raw.launches[a["correlation"]] = (ts, (ev.get("pid"), ev.get("tid")))
            return
        nm = ev.get("name", "")
        if cat in _CPU:
            nm = str(nm)
            ts = float(ev.get("ts", 0))
            end = ts + float(ev.get("dur", 0))
            if not math.isfinite(end):  # NaN or infinite start or duration: the interval would enclose anything
                _bad_ts(path, ev)
            _bad_dur(path, ev, nm.startswith(MODULE_PREFIX))
            key = (ev.get("pid"), ev.get("tid"))
            if nm.startswith(LABEL_PREFIX):
                raw.labelled = True
                raw.labels.append((ts, end, nm[len(LABEL_PREFIX):]))
                return
            if nm.startswith(MODULE_PREFIX):
                threads.setdefault(key, []).append((ts, end, MODULE, sys.intern(nm[len(MODULE_PREFIX):]), None, None,
                                                    False))
                return
            if nm.startswith(OP_PREFIX):
                raw.stages.append((ts, end, nm[len(OP_PREFIX):]))
                return
            if nm.startswith("ProfilerStep#"):
                raw.steps.append((ts, end, nm))
                return
            else:
                a = ev.get("args") or {}
                dims = a.get("Input Dims")
                if dims is not None:
                    r = repr(dims)
                    dims = dims_intern.setdefault(r, r)
                if dims is not None and "External id" in a:
                    # ops with recorded shapes, by the id their kernels carry (kdvfs.work reads their FLOPs and bytes)
                    raw.ops.setdefault(a["External id"], []).append(
                        {"name": nm, "ts": ts, "dur": end - ts, "args": {k: a[k] for k in _SHAPE_ARGS if k in a}})
                seq = a.get("Sequence number")
                # backward ops name the forward thread they differentiate (≠ 0); forward ops say 0
                iv = (ts, end, OP, sys.intern(nm), dims, seq, bool(a.get("Fwd thread id")))
                if raw.embedding_dims is None and nm == "aten::embedding":
                    raw.embedding_dims = dims
            lst = threads.get(key)
            if lst is None:
                lst = threads[key] = []
            lst.append(iv)
        elif cat == "python_function":
            nm = str(nm)
            if nm.startswith("nn.Module: "):
                ts = float(ev.get("ts", 0))
                end = ts + float(ev.get("dur", 0))
                if not math.isfinite(end):
                    _bad_ts(path, ev)
                _bad_dur(path, ev, True)
                key = (ev.get("pid"), ev.get("tid"))
                threads.setdefault(key, []).append((ts, end, MODULE, sys.intern(nm[11:]), None, None, False))
            elif "backward" in nm or _OPTIMIZER.search(nm):
                ts = float(ev.get("ts", 0))
                end = ts + float(ev.get("dur", 0))
                if not math.isfinite(end):
                    _bad_ts(path, ev)
                threads.setdefault((ev.get("pid"), ev.get("tid")), []).append(
                    (ts, end, OP, sys.intern(nm), None, None, False))

    if Path(path).is_dir():
        raise FormatError(f"PyTorch profiler trace file {str(path)!r} is a directory; give the path of the trace file "
                          "(a .json or .json.gz the profiler exported)")
    try:
        with _open_text(path) as f:
            stream = _Stream(f)
            _read(stream, on_event, raw.meta)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise FormatError(f"PyTorch profiler trace file {str(path)!r} is not readable gzip/JSON ({e}); the file may be "
                          "truncated — re-export it") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"PyTorch profiler trace file {str(path)!r} is not UTF-8 text ({e}); is it the right file?") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"PyTorch profiler trace file {str(path)!r} is not valid JSON (near byte "
                          f"{stream.consumed + e.pos}: {e.msg}); the file may be truncated — re-export it") from None
    if not raw.meta.pop("_has_events", False) and not raw.events:
        fmt = raw.meta.get("format")
        if isinstance(fmt, str) and fmt.startswith("kdvfs-"):  # a kdvfs file given to `trace import`: say what it is
            raise FormatError(f"{str(path)!r} is a kdvfs file ({fmt}), not a PyTorch profiler (Chrome) trace: "
                              + ("a kdvfs trace is read as it is — give it to the verbs directly (`kdvfs trace show "
                                 "FILE`, `kdvfs analyze FILE`)" if fmt.startswith("kdvfs-trace/") else
                                 "`trace import` reads the profiler's .json(.gz) export"))
        raise FormatError(f"{str(path)!r} has no 'traceEvents' list: it is not a PyTorch profiler (Chrome) trace")
    raw.unmatched += [_event_words(b, "a 'B' never closed by an 'E'") for st in open_b.values() for b in st]
    if raw.unmatched:  # said, not dropped silently: an interval never closed encloses nothing here
        log.warning("%s: %d Chrome duration event(s) without their pair ignored, e.g. %s", path, len(raw.unmatched),
                    "; ".join(raw.unmatched[:3]))
    _refuse_duplicated_events(path, raw.gpu)
    if progress is not None:
        progress(stream.consumed + stream.pos)
    return raw


def _event_words(ev: dict, what: str) -> str:
    """An event in words for a message: its name, category, thread and start."""
    return (f"{what}: {str(ev.get('name'))[:120]!r} ({ev.get('cat')}, pid {ev.get('pid')} tid {ev.get('tid')}, "
            f"ts={ev.get('ts')!r})")


def _bad_ts(path: Path, ev: dict) -> None:
    raise FormatError(f"{str(path)!r}: event {str(ev.get('name'))[:120]!r} ({ev.get('cat')}) has start ts="
                      f"{ev.get('ts')!r} and duration {ev.get('dur')!r}; both must be finite numbers of microseconds — "
                      "the trace is damaged, record or export it again")


def _bad_dur(path: Path, ev: dict, module: bool) -> None:
    """A CPU interval ending before it starts (negative ``dur``), or a module frame without a duration, is damage:
    imported, the range enclosed nothing and the layers' structure changed silently (``forward.Layer × 4`` became
    ``forward.Layer``, ``forward#2``, ``forward.Layer#2 × 2``), exit 0."""
    d = ev.get("dur")
    if (d is None and module) or (d is not None and float(d) < 0):
        raise FormatError(f"{str(path)!r}: event {str(ev.get('name'))[:120]!r} ({ev.get('cat')}) at ts={ev.get('ts')!r} "
                          f"has duration {d!r}; a {'module range' if module else 'CPU event'} needs a duration ≥ 0 "
                          "microseconds — the trace is damaged, record or export it again")


def crossed_module_ranges(threads: dict[Any, list[tuple]]) -> tuple[int, str]:
    """How many module frames cross another of their thread (start inside it, end after it), and the first such pair
    by name. Frames of one thread nest (a module's forward holds its children's); ``kdvfs.module:`` ranges opened
    and closed out of order (a hook left unclosed, two exports merged) give layers that are not the model's."""
    n, first = 0, ""
    for ivs in threads.values():
        mods = sorted((iv for iv in ivs if iv[2] == MODULE), key=lambda x: (x[0], -x[1]))
        stack: list[tuple] = []
        for iv in mods:
            while stack and stack[-1][1] <= iv[0]:
                stack.pop()
            if stack and iv[1] > stack[-1][1]:
                n += 1
                first = first or f"{iv[3]} crosses {stack[-1][3]}"
                continue
            stack.append(iv)
    return n, first


def _refuse_duplicated_events(path: Path, gpu: list[GpuEvent]) -> None:
    """One stream runs one kernel at a time, so two GPU events with the same name, stream, start and duration are one
    event written twice (two exports merged into one file): imported, every such kernel counted twice, and a step
    with each event doubled read as twice as long, exit 0. Real steps overlap by at most a few µs (programmatic
    dependent launch), never at the same start."""
    import numpy as np

    n = len(gpu)
    if n < 2:
        return
    ts = np.fromiter((g.ts_us for g in gpu), float, n)
    dur = np.fromiter((g.dur_us for g in gpu), float, n)
    st = np.fromiter((-1 if g.stream is None else g.stream for g in gpu), np.int64, n)
    o = np.lexsort((dur, ts, st))
    same = (np.diff(st[o]) == 0) & (np.diff(ts[o]) == 0) & (np.diff(dur[o]) == 0)
    dup = [(int(o[i]), int(o[i + 1])) for i in np.flatnonzero(same) if gpu[o[i]].name == gpu[o[i + 1]].name]
    if dup:
        e = gpu[dup[0][0]]
        raise FormatError(f"{str(path)!r}: {len(dup)} GPU events appear twice (same name, stream, start and duration), "
                          f"e.g. {e.name[:120]!r} at ts={e.ts_us}: one stream runs one kernel at a time, so the file "
                          "holds duplicated events (two exports merged?); record the step again, or keep one copy of "
                          "each event")


@dataclass(frozen=True, slots=True)
class Resolved:
    """What launched one GPU event.

    Attributes:
        pass_name: ``forward``, ``backward``, ``optimizer`` or None (nothing on the CPU encloses the launch).
        op: the launching op (innermost ``aten::`` op, or the recorder's stage), when known.
        input_dims: the launching op's input shapes (``record_shapes=True``), as text, when known.
        label: the recorder's ``kdvfs:`` segment label, when present.
        modules: the module chain (outermost first) of the forward op — for backward kernels, of the forward op they
            differentiate.
        step: index of the ``ProfilerStep`` that launched it (−1: none).
    """

    pass_name: str | None
    op: str | None
    input_dims: str | None
    label: str | None
    modules: tuple[str, ...]
    step: int


def resolve(raw: KinetoRaw) -> list[Resolved]:
    """Ancestors of every GPU event's launch, by one sweep per thread (see the module docstring)."""
    n = len(raw.gpu)
    queries: dict[Any, list[tuple[float, int]]] = {}
    launch_t: list[float | None] = [None] * n
    for i, ev in enumerate(raw.gpu):
        lt = raw.launches.get(ev.correlation)
        if lt is None:
            continue
        launch_t[i] = lt[0]
        queries.setdefault(lt[1], []).append((lt[0], i))
    flags: dict[str, tuple[bool, bool]] = {}

    def flag(nm: str) -> tuple[bool, bool]:
        f = flags.get(nm)
        if f is None:
            f = flags[nm] = (bool(_OPTIMIZER.search(nm)), bool(_BACKWARD.search(nm)))
        return f

    seq_modules: dict[int, tuple[str, ...]] = {}
    found: list[tuple | None] = [None] * n
    pending_bwd: list[tuple[int, int]] = []
    # forward threads first: backward kernels look up the module chains recorded there
    order = sorted(raw.threads, key=lambda k: _is_autograd(raw.threads[k]))
    for key in order:
        ivs = raw.threads[key]
        ivs.sort(key=lambda x: (x[0], -x[1]))
        autograd = _is_autograd(ivs)
        qs = sorted(queries.get(key, ()))
        stack: list[tuple] = []
        mods: list[str] = []
        j = 0
        m = len(ivs)

        for t, qi in qs:
            while j < m and ivs[j][0] <= t:
                _push(ivs[j], stack, mods, seq_modules)
                j += 1
            while stack and stack[-1][1] < t:
                if stack.pop()[2] == MODULE:
                    mods.pop()
            anc = [iv for iv in stack if iv[1] >= t]
            opt = bwd = False
            op = dims = None
            bseq = None
            chain = tuple(iv[3] for iv in anc if iv[2] == MODULE)
            for iv in anc:
                kind = iv[2]
                if kind == OP:
                    o, b = flag(iv[3])
                    opt |= o
                    bwd |= b
                    if iv[3].startswith("aten::") or op is None:
                        op, dims = iv[3], iv[4]
                    if iv[6] and iv[5] is not None:
                        bseq = iv[5]
            if opt:
                p = "optimizer"
            elif bwd or (anc and autograd):
                p = "backward"
            elif anc:
                p = "forward"
            else:
                p = None
            found[qi] = (p, op, dims, chain)
            if p == "backward" and bseq is not None:
                pending_bwd.append((qi, bseq))
        while j < m:  # forward ops after the last launch still name their modules for the backward
            _push(ivs[j], stack, mods, seq_modules)
            j += 1
    bwd_chain = {qi: seq_modules.get(s, ()) for qi, s in pending_bwd}
    labels = _innermost(raw.labels, launch_t)
    stages = _innermost(raw.stages, launch_t)
    steps = sorted(raw.steps)
    out = []
    starts = [s for s, _, _ in steps]
    for i in range(n):
        f = found[i]
        st = -1
        lt_i = launch_t[i]
        if steps and lt_i is not None:
            k = bisect.bisect_right(starts, lt_i) - 1
            if k >= 0 and lt_i <= steps[k][1]:
                st = k
        if f is None:
            out.append(Resolved(None, None, None, labels[i], (), st))
            continue
        p, op, dims, chain = f
        if p == "backward":
            chain = bwd_chain.get(i, ())
        if stages[i] is not None:
            op = f"stage:{stages[i]}"
        out.append(Resolved(p, op, dims, labels[i], chain, st))
    return out


def _innermost(intervals: list[tuple[float, float, str]], times: list[float | None]) -> list[str | None]:
    """For each time, the name of the innermost (latest-opened) interval containing it; one sweep."""
    out: list[str | None] = [None] * len(times)
    if not intervals:
        return out
    ivs = sorted(intervals, key=lambda x: (x[0], -x[1]))
    qs = sorted((t, i) for i, t in enumerate(times) if t is not None)
    stack: list[tuple[float, float, str]] = []
    j = 0
    for t, i in qs:
        while j < len(ivs) and ivs[j][0] <= t:
            stack.append(ivs[j])
            j += 1
        while stack and stack[-1][1] < t:
            stack.pop()
        for iv in reversed(stack):
            if iv[1] >= t:
                out[i] = iv[2]
                break
    return out


def _push(iv: tuple, stack: list[tuple], mods: list[str], seq_modules: dict[int, tuple[str, ...]]) -> None:
    """Open interval ``iv`` (closing those that ended before it); a forward op records its module chain."""
    while stack and stack[-1][1] < iv[0]:
        if stack.pop()[2] == MODULE:
            mods.pop()
    stack.append(iv)
    if iv[2] == MODULE:
        mods.append(iv[3])
    elif iv[2] == OP and iv[5] is not None and not iv[6] and mods:
        seq_modules.setdefault(iv[5], tuple(mods))


def _is_autograd(ivs: list[tuple]) -> bool:
    return any(iv[3].startswith("autograd::engine") for iv in ivs[:200])
