"""Importers: PyTorch profiler (Kineto) Chrome traces and the Spaan et al. 2026 per-kernel table.

Kineto traces (read in one streaming pass by ``kdvfs.kineto``): GPU kernels, memcpy and memset become ``Kernel``
values in stream (start-time) order. Segments come from the recorder's ``record_function("kdvfs:<segment>")`` labels
when present. A foreign trace gets each kernel's pass from the CPU ops that enclose its launch (an autograd engine frame
or a ``*Backward*`` op means backward, an optimizer frame optimizer, anything else inside the step forward) and its
structure from ``kdvfs.structure``: repeated module instances (``with_stack=True``) or repeated kernel sequences become
one segment with a repeat count; back-to-back launches of one kernel become one kernel with a count.
"""

from __future__ import annotations

import ast
import csv
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.errors import FormatError, InputError, KdvfsError
from kdvfs.kernelwork import concurrent_wall_share, kernel_work
from kdvfs.kineto import (
    COPY_CATS,
    LABEL_PREFIX,
    OP_PREFIX,
    GpuEvent,
    Resolved,
    crossed_module_ranges,
    read_kineto,
    resolve,
)
from kdvfs.structure import find_blocks, merge_units, unit_class, unit_group_repeat
from kdvfs.trace import PASSES, Kernel, Segment, Trace

__all__ = ["KinetoImport", "LABEL_PREFIX", "OP_PREFIX", "busy_overlap", "categorize", "import_kineto",
           "import_spaan_csv", "kernel_from_event", "overlap_note_of", "trace_stem", "transfer_work"]

log = logging.getLogger(__name__)


# Order matters: the first rule that matches wins (flash-attention kernels also contain "gemm"-like words).
_CATEGORY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("collective", re.compile(r"nccl|all_?reduce|reduce_?scatter|all_?gather|broadcast", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|attn|mha_", re.I)),
    # "lamb" must not match the "lambda" in every templated PyTorch kernel name
    ("optimizer", re.compile(r"adam|multi_tensor|\bsgd|\blamb\b|optimizer|fused_adam", re.I)),
    ("norm", re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|gammabeta|\bnorm", re.I)),
    ("gemm", re.compile(r"gemm|gemv|cutlass|cublas|xmma|nvjet|wgmma|matmul|^sm\d+_|ampere_|volta_|turing_|hopper_|\bmm\b|dot_", re.I)),
    ("copy", re.compile(r"memcpy|memset|copy|permute|transpose|cat_|concat|index|gather|scatter|embedding|unfold", re.I)),
    ("reduction", re.compile(r"reduce|softmax|sum|mean|max_|argmax|nll|cross_entropy|norm_kernel|bias reduce", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|gelu|relu|silu|tanh|add|mul|div|dropout|fill|bias|residual|"
                               r"where|pow|sqrt|exp|sigmoid|clamp|cast|_to_copy|neg|wte|wpe", re.I)),
)


def categorize(name: str) -> str:
    """Category of a kernel from its name (one of ``kdvfs.trace.CATEGORIES``)."""
    for cat, pat in _CATEGORY_RULES:
        if pat.search(name):
            return cat
    return "other"


# ---------------------------------------------------------------------- Spaan et al. table
_SPAAN_SEGMENTS = (  # (segment, pass, repeat) in execution order, from the table's README
    ("embedding", "forward", 1),
    ("forward_layer", "forward", 24),
    ("loss", "forward", 1),
    ("backward_layer", "backward", 24),
    ("embedding_backward", "backward", 1),
)
_SPAAN_CATEGORY = {"GEMM": "gemm", "Permute": "copy"}


def _malformed(what: str):
    """Decorator: a reader's stray ``ValueError``/``TypeError``/``KeyError``… on a malformed file becomes one
    ``FormatError`` naming the file (its own ``KdvfsError``s pass through unchanged)."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def inner(path, *a, **k):
            try:
                return fn(path, *a, **k)
            except KdvfsError:
                raise
            except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError) as e:
                raise FormatError(f"{str(path)!r} is not a well-formed {what} ({type(e).__name__}: {str(e)[:200]}); "
                                  "re-export it, or check the fields it names") from None
        return inner
    return wrap


@_malformed("kernel table (Spaan et al. CSV)")
def import_spaan_csv(path: str | Path, name: str = "gpt3xl-llmc-rtx3080ti") -> Trace:
    """The study's 46 kernels as a trace (times and energies at auto clocks on an RTX 3080 Ti)."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise FormatError(f"cannot read {str(path)!r}: {e}") from None
    need = {"kernel_id", "name", "category", "segment", "repeat", "time_auto_s", "energy_auto_j"}
    if not rows or not need <= set(rows[0]):
        raise FormatError(f"{str(path)!r} is not the Spaan et al. kernel table: it needs columns {', '.join(sorted(need))}")
    by_seg: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: int(r["kernel_id"])):
        by_seg[r["segment"]].append(r)
    segs = []
    for seg, pname, rep in _SPAAN_SEGMENTS:
        ks = []
        for r in by_seg.pop(seg, []):
            if int(r["repeat"]) != rep:
                raise FormatError(f"{str(path)!r}: kernel {r['kernel_id']} of {seg} has repeat {r['repeat']}, expected {rep}")
            cat = _SPAAN_CATEGORY.get(r["category"]) or categorize(r["name"])
            ks.append(Kernel(name=f"{r['kernel_id']}:{r['name']}", category=cat, time_s=float(r["time_auto_s"]),
                             energy_j=float(r["energy_auto_j"])))
        if ks:
            segs.append(Segment(name=seg, kernels=tuple(ks), repeat=rep, pass_name=pname))
    if by_seg:
        raise FormatError(f"{str(path)!r}: unknown segments {sorted(by_seg)}; expected {[s[0] for s in _SPAAN_SEGMENTS]}")
    return Trace(
        name=name, segments=tuple(segs), model="GPT-3 XL (1.3B), llm.c", batch_size=40, seq_len=1024,
        gpu="NVIDIA GeForce RTX 3080 Ti", capture_core_mhz=None, capture_mem_mhz=None,
        source=("Spaan, Chen, Varbanescu, 'Reducing Compute Waste in LLMs through Kernel-Level DVFS', arXiv:2601.08539 "
                "(2026), Table 1 and Figure 5: per-kernel time and energy at auto clocks; one layer measured and "
                "multiplied by 24"),
        licence="CC BY 4.0 (the paper's licence)",
        notes="times and energies of one invocation at the driver's own clocks (auto)",
    )


# ---------------------------------------------------------------------- Kineto
@dataclass(frozen=True, slots=True)
class KinetoImport:
    """A trace imported from a Kineto file, with how its passes and structure were found.

    Attributes:
        trace: the imported trace.
        labelled: whether the recorder's ``kdvfs:`` labels set the segments.
        assigned_time_share: share of GPU kernel time given forward, backward or optimizer (1.0 when labelled).
        pass_time_s: GPU time per pass.
        structure: how repeats were found: ``labels``, ``modules`` (the module hierarchy) or ``sequence`` (period
            detection on the kernel sequence).
        steps: profiler steps in the file; steps_used: how many went into the trace (averaged).
        events: events read from the file.
        instance_events: the recorded GPU event of each of the trace's kernel instances (``trace.instances()``
            order) when one profiler step is kept; empty when steps were averaged. The trace's repeated segments
            hold each kernel's mean over its repeats; these keep every instance's own start, duration and stream
            (the multi-rank import needs them).
        busy_union_s: the time the GPU ran at least one kernel of the kept step (overlapping kernels counted once).
        overlap_share: how much the kept step's kernel times, summed, exceed ``busy_union_s`` (0: one kernel at a
            time), after the kernels one op ran side by side took their share of the wall time
            (``kdvfs.kernelwork.concurrent_wall_share``; wav2vec 2.0's grouped convolution: +48 % of raw durations,
            ~0 after). kdvfs runs a trace's kernels one after another, so what is left here (kernels of different
            ops side by side) makes a step predicted slower and costlier by up to this share.
        streams: the CUDA streams the kept step's kernels ran on.
    """

    trace: Trace
    labelled: bool
    assigned_time_share: float
    pass_time_s: dict[str, float]
    structure: str = "sequence"
    steps: int = 0
    steps_used: int = 1
    events: int = 0
    instance_events: tuple = ()
    busy_union_s: float = 0.0
    overlap_share: float = 0.0
    streams: int = 1


OVERLAP_NOTE_HEAD = "kernels on"  # the note's first words, as stored in the trace's notes (``overlap_note``)
OVERLAP_NOTE_SHARE = 0.01
"""Kernels overlapping by more than this share of the busy time get a note (regnet's 5 streams overlap 0.5–0.7 %)."""


def overlap_note_of(trace: Trace) -> str | None:
    """The note ``import_kineto`` left in ``trace.notes`` where the step's kernels overlap on several streams."""
    return next((n.strip() for n in str(trace.notes or "").split("; ") if n.strip().startswith(OVERLAP_NOTE_HEAD)
                 and "streams overlap" in n), None)


GROUP_NOTE_MARK = "module instances repeat unfolded"  # in the note ``import_kineto`` leaves (``group_notes_of``)


def group_notes_of(trace: Trace) -> list[str]:
    """The notes ``import_kineto`` left where a group of module instances repeats unfolded (a layer run without
    hooks: ``kdvfs.structure.unit_group_repeat``), one per pass."""
    return [n.strip() for n in str(trace.notes or "").split("; ") if GROUP_NOTE_MARK in n]


def busy_overlap(events) -> tuple[float, float, int]:
    """(summed duration, union of the intervals, streams) of GPU events, seconds: the union is the time at least one
    of them ran."""
    ev = sorted((e.ts_us, e.ts_us + e.dur_us) for e in events)
    total = sum(b - a for a, b in ev)
    union = 0.0
    cs = ce = None
    for a, b in ev:
        if ce is None or a > ce:
            if ce is not None and cs is not None:
                union += ce - cs
            cs, ce = a, b
        else:
            ce = max(ce, b)
    if ce is not None and cs is not None:
        union += ce - cs
    return 1e-6 * total, 1e-6 * union, len({e.stream for e in events})


def trace_stem(path: str | Path) -> str:
    """A trace's default name: its file name without the profiler's suffixes (``llama-0.5b.kineto.json.gz`` →
    ``llama-0.5b``; a dot inside the name stays)."""
    n = Path(path).name
    for suf in (".gz", ".json", ".kineto", ".pt.trace", ".trace"):
        if n.endswith(suf) and len(n) > len(suf):
            n = n[: -len(suf)]
    return n


def kernel_from_event(ev: GpuEvent, op: str | None, input_dims: str | None, time_s: float) -> Kernel:
    """The one place a GPU event becomes a ``Kernel``: its name, launch configuration and the launching op with its
    input shapes (``input_dims``, the profiler's ``Input Dims`` as text) are all at hand here."""
    category = "copy" if ev.cat in COPY_CATS else categorize(ev.name)
    return Kernel(name=ev.name, category=category, time_s=time_s, grid=ev.grid, block=ev.block, stream=ev.stream,
                  op=op, bytes=ev.nbytes)


@_malformed("PyTorch profiler trace")
def import_kineto(path: str | Path, name: str | None = None, repeats: Mapping[str, int] | None = None,
                  step: str = "last", meta: Mapping[str, Any] | None = None,
                  progress: Callable[[str, float], None] | None = None) -> KinetoImport:
    """Import a PyTorch profiler Chrome trace (``.json`` or ``.json.gz``), finding its repeated structure.

    Args:
        path: the file.
        name: trace name (default: the file's stem).
        repeats: repeat count per segment name, for the recorder's labelled segments (``forward_layer=24``).
        step: with ``ProfilerStep#N`` annotations, ``"last"`` imports the last step only (warm-up excluded),
            ``"all"`` every step, averaged into one iteration (steps whose kernel sequence differs from the most common
            one, such as a warm-up step, are left out and counted).
        meta: trace metadata (model, batch_size, seq_len, gpu, source, licence, notes); what is not given is read from
            the trace where it says (the device's name, batch and sequence from the embedding's input shape).
        progress: ``progress(stage, fraction)`` now and then.
    """
    path = Path(path)
    size = max(path.stat().st_size, 1) if path.exists() else 1
    raw = read_kineto(path, None if progress is None else (lambda b: progress("read", min(1.0, b / size))))
    if not raw.gpu:
        raise FormatError(
            f"{str(path)!r} holds no GPU kernels, memcpy or memset events: record it with a CUDA device and "
            "ProfilerActivity.CUDA enabled (or use `kdvfs record`)"
        )
    order = sorted(range(len(raw.gpu)), key=lambda i: (raw.gpu[i].ts_us, raw.gpu[i].stream or 0))
    gpu = [raw.gpu[i] for i in order]
    raw.gpu = gpu
    res = resolve(raw)
    if progress is not None:
        progress("resolve", 1.0)
    n_steps = len(raw.steps)
    idx = list(range(len(gpu)))
    steps_used = 1
    if n_steps:
        in_step = [i for i in idx if res[i].step >= 0]
        if in_step:
            last = max(res[i].step for i in in_step)
            idx = [i for i in in_step if res[i].step == last] if step == "last" else in_step
    labelled = raw.labelled
    keys = _keys(gpu, res, idx)
    groups = [idx]
    if step == "all" and n_steps > 1:
        groups, steps_used = _modal_steps(idx, res, keys)
    first = groups[0]
    t_us = np.array([gpu[i].dur_us for i in first], dtype=float)
    if len(groups) > 1:
        t_us = np.mean([[gpu[i].dur_us for i in g] for g in groups], axis=0)
    k_first = np.array([keys[i] for i in first], dtype=np.int64)
    worked = _with_work(raw, gpu, res, first, t_us)
    # kernels one op ran side by side on several streams (cuDNN's grouped convolutions) take their share of the wall
    # time, not their durations summed; their work stays as split by duration above (concurrent_wall_share)
    wall = np.array(concurrent_wall_share([gpu[i].ts_us for i in first], [gpu[i].dur_us for i in first],
                                          [gpu[i].stream for i in first], [gpu[i].external_id for i in first]))
    if (wall != 1.0).any():
        t_us = t_us * wall
        worked = [k if r == 1.0 else replace(k, time_s=float(t) * 1e-6, concurrency=max(1.0, 1.0 / r))
                  for k, r, t in zip(worked, wall, t_us)]
    if labelled:
        segs = _labelled_segments(worked, res, first, t_us, repeats or {})
        structure = "labels"
        unfolded: list[tuple[str, tuple[tuple[str, ...], int]]] = []
    else:
        segs, structure, unfolded = _found_segments(worked, res, first, t_us, k_first, repeats or {})
    unknown = sorted(set(repeats or {}) - {s.name for s in segs})
    if unknown:
        raise InputError(f"--repeat names segment(s) {', '.join(map(repr, unknown))} that {str(path)!r} does not have; "
                         f"its segments: {', '.join(s.name for s in segs)}")
    meta = dict(meta or {})
    dev = _device_name(raw.meta)
    batch, seq = _batch_seq(raw.embedding_dims)
    notes = [str(meta.get("notes", ""))] if meta.get("notes") else []
    if raw.unmatched:  # kept in the trace too: `trace show` says it after the import's warning has scrolled away
        notes.append(f"{len(raw.unmatched)} Chrome duration event(s) without their pair ignored (first: "
                     f"{raw.unmatched[0]})")
    if n_steps:
        notes.append(f"{n_steps} profiler step(s) in the file; "
                     + (f"{steps_used} averaged" if step == "all" else "the last one kept"))
    notes.append(f"structure from {'the recorder labels' if structure == 'labels' else 'the module hierarchy' if structure == 'modules' else 'period detection on the kernel sequence'}")
    for p, (classes, count) in unfolded:  # 104 segments where the user expected 12 layers, and no word why
        notes.append(f"{p}: {GROUP_NOTE_MARK} × {count}, a group of {len(classes)} ({', '.join(classes)}) with "
                     "identical kernels, each instance its own segment: the module holding them ran without module "
                     "hooks (called as `layer.forward(...)`), so its sub-modules are the boundaries a runtime can see")
    crossed, example = crossed_module_ranges(raw.threads)
    if crossed and structure == "modules":  # the layers read from them are not the model's, and nothing said so
        notes.append(f"{crossed} module range(s) cross another of their thread instead of nesting in it ({example}): "
                     "the file's module frames are damaged (an unclosed kdvfs.module: range?), so the layers found "
                     "may not be the model's; record the step again")
        log.warning("%s: %s", path.name, notes[-1])
    _, union, streams = busy_overlap([gpu[i] for i in first])  # the union; the sum is taken after the shares below
    # what the wall-time shares above leave: overlap between kernels of different ops, which kdvfs still runs one
    # after another (within one op it is taken out; wav2vec 2.0's grouped convolution: +48 % before, ~0 after)
    summed = 1e-6 * float(np.sum([gpu[i].dur_us for i in first] * wall))
    overlap = summed / union - 1.0 if union > 0 else 0.0
    if overlap > OVERLAP_NOTE_SHARE:
        notes.append(f"{OVERLAP_NOTE_HEAD} {streams} streams overlap: their times sum to {100 * overlap:.0f} % more than the "
                     f"{union:.4g} s the GPU was busy (kernels of different ops side by side; those of one op take "
                     "their share of the wall time), and kdvfs runs a trace's kernels one after another, so the "
                     "step's predicted time and energy read high by up to that much")
    trace = Trace(
        name=name or trace_stem(path), segments=tuple(segs), model=str(meta.get("model", "")),
        batch_size=meta.get("batch_size", batch), seq_len=meta.get("seq_len", seq), gpu=str(meta.get("gpu") or dev),
        source=str(meta.get("source", f"PyTorch profiler trace {path.name}")), licence=str(meta.get("licence", "")),
        notes="; ".join(notes),
    )
    pass_time: dict[str, float] = defaultdict(float)
    for s in trace.segments:
        pass_time["unassigned" if s.name.startswith("unassigned") else s.pass_name] += s.time_s * s.repeat
    total = sum(pass_time.values())
    share = 1.0 if labelled else sum(v for p, v in pass_time.items() if p in ("forward", "backward", "optimizer")) / total
    log.info("imported %s: %d GPU events, %d segments (%s)", path.name, len(first), len(segs), structure)
    return KinetoImport(trace=trace, labelled=labelled, assigned_time_share=share, pass_time_s=dict(pass_time),
                        structure=structure, steps=n_steps, steps_used=steps_used, events=raw.events,
                        instance_events=tuple(gpu[i] for i in first) if len(groups) == 1 else (),
                        busy_union_s=union, overlap_share=max(overlap, 0.0), streams=streams)


def _keys(gpu: list[GpuEvent], res: list[Resolved], idx: list[int]) -> dict[int, int]:
    """Equal keys = the same kernel: name, launch configuration, launching op and its input shapes."""
    table: dict[tuple, int] = {}
    return {i: table.setdefault((gpu[i].name, gpu[i].grid, gpu[i].block, gpu[i].nbytes, res[i].op, res[i].input_dims),
                                len(table)) for i in idx}


def _modal_steps(idx: list[int], res: list[Resolved], keys: dict[int, int]) -> tuple[list[list[int]], int]:
    by_step: dict[int, list[int]] = defaultdict(list)
    for i in idx:
        by_step[res[i].step].append(i)
    sig: dict[tuple, list[int]] = defaultdict(list)
    for st, ii in by_step.items():
        sig[tuple(keys[i] for i in ii)].append(st)
    best = max(sig.values(), key=lambda v: (len(v), -v[0]))
    left = len(by_step) - len(best)
    if left:
        log.warning("%d of %d profiler steps launch a different kernel sequence (warm-up?) and are left out",
                    left, len(by_step))
    return [by_step[s] for s in sorted(best)], len(best)


def _with_work(raw, gpu: list[GpuEvent], res: list[Resolved], first: list[int], t_us: np.ndarray) -> list[Kernel]:
    """The kernels of the kept step, in order, with FLOPs and bytes from their launching op's recorded shapes, else
    their name and grid, else left to the category (``kdvfs.work``; ``work_source`` says which)."""
    ks = [kernel_from_event(gpu[i], res[i].op, res[i].input_dims, float(t_us[j]) * 1e-6) for j, i in enumerate(first)]
    ops = raw.ops
    for v in ops.values():
        v.sort(key=lambda e: (e["ts"], -e["dur"]))  # innermost op last
    events = [{"args": {"External id": gpu[i].external_id}} for i in first]
    return kernel_work(ks, events, ops, backward=[res[i].pass_name == "backward" for i in first])


def _labelled_segments(worked, res, first, t_us, repeats) -> list[Segment]:
    runs: list[tuple[str, list[Kernel]]] = []
    for j, i in enumerate(first):
        seg = res[i].label or "unassigned"
        k = worked[j]
        if runs and runs[-1][0] == seg:
            runs[-1][1].append(k)
        else:
            runs.append((seg, [k]))
    seen: dict[str, int] = defaultdict(int)
    out = []
    for seg, ks in runs:
        seen[seg] += 1
        nm = seg if seen[seg] == 1 else f"{seg}_{seen[seg]}"
        out.append(Segment(name=nm, kernels=tuple(ks), repeat=int(repeats.get(seg, 1)), pass_name=_pass_of(seg)))
    return out


def _units(res: list[Resolved], first: list[int]) -> list[str | None] | None:
    """Each kernel's module instance at the depth where a module class repeats most among siblings, or None."""
    sib: dict[tuple[int, str, str], set[str]] = defaultdict(set)
    for i in first:
        ch = res[i].modules
        for d in range(1, len(ch)):
            sib[(d, ch[d - 1], unit_class(ch[d]))].add(ch[d])
    if not sib:
        return None
    (depth, _, _), inst = max(sib.items(), key=lambda kv: (len(kv[1]), -kv[0][0]))
    if len(inst) < 2:
        return None
    units = [res[i].modules[depth] if len(res[i].modules) > depth else None for i in first]
    passes = [res[i].pass_name for i in first]
    # kernels with no module between two kernels of the same unit (autograd bookkeeping) belong to it
    nxt: list[str | None] = [None] * len(units)
    cur = None
    for j in range(len(units) - 1, -1, -1):
        if units[j] is not None:
            cur = units[j]
        if j + 1 < len(units) and passes[j + 1] != passes[j]:
            cur = units[j]
        nxt[j] = cur
    prev = None
    for j in range(len(units)):
        if j and passes[j] != passes[j - 1]:
            prev = None
        if units[j] is None and prev is not None and nxt[j] == prev:
            units[j] = prev
        prev = units[j] if units[j] is not None else prev
    return units


def _found_segments(worked, res, first, t_us, keys, repeats) -> tuple[list[Segment], str, list]:
    """The segments, how the structure was found, and per pass a group of module instances that repeats unfolded
    (``kdvfs.structure.unit_group_repeat``: ``(pass, (classes, count))``)."""
    passes = [res[i].pass_name or "unassigned" for i in first]
    units = _units(res, first)
    structure = "modules" if units is not None else "sequence"
    groups: list[tuple[str, tuple[tuple[str, ...], int]]] = []
    segs: list[Segment] = []
    seen: dict[str, int] = defaultdict(int)
    j = 0
    n = len(first)
    while j < n:
        e = j + 1
        while e < n and passes[e] == passes[j]:
            e += 1
        blocks = (merge_units(keys[j:e], units[j:e]) if units is not None else find_blocks(keys[j:e]))
        p = passes[j]
        grp = unit_group_repeat(keys[j:e], blocks) if units is not None else None
        if grp is not None:
            groups.append((p, grp))
        for b in blocks:
            s0 = j + b.start
            base = f"{p}.{b.unit}" if b.unit else (p if b.count == 1 else f"{p}.repeat")
            seen[base] += 1
            nm = base if seen[base] == 1 else f"{base}#{seen[base]}"
            ks = []
            for q in range(b.period):
                pos = s0 + q + b.period * np.arange(b.count)
                ks.append(replace(worked[s0 + q], time_s=float(t_us[pos].mean()) * 1e-6))
            segs.append(Segment(name=nm, kernels=tuple(ks), repeat=int(repeats.get(nm, b.count)),
                                pass_name=p if p in PASSES else "other"))
        j = e
    return segs, structure, groups


def _device_name(meta: Mapping[str, Any]) -> str:
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], Mapping):
        return str(props[0].get("name", ""))
    return ""


def _batch_seq(dims_text: str | None) -> tuple[int | None, int | None]:
    """Batch and sequence length from the token embedding's index shape ``[batch, seq]``, when recorded."""
    if not dims_text:
        return None, None
    try:
        dims = ast.literal_eval(dims_text)
    except (ValueError, SyntaxError):
        return None, None
    if isinstance(dims, list) and len(dims) > 1 and isinstance(dims[1], list) and len(dims[1]) == 2:
        return int(dims[1][0]), int(dims[1][1])
    return None, None


def _pass_of(seg: str) -> str:
    base = seg.split("_")[0]
    if seg.startswith("optimizer") or base in ("optimizer", "zero"):
        return "optimizer"
    if "backward" in seg:
        return "backward"
    if seg.startswith(("forward", "embedding", "loss")):
        return "forward"
    return "other"


def transfer_work(trace, shaped):
    """``trace`` with the work (FLOPs, bytes, dtype, math, source) of ``shaped``, a recording of the same workload
    with op shapes. The kernels are matched one to one by occurrence of each (launching op, name): the k-th launch of
    a kernel takes the work of its k-th launch there, so kernels of different streams (a collective beside the backward
    pass), which can start in another order in another step, still find their twin; each (op, name) must occur equally
    often in both (else ``InputError``)."""
    from collections import defaultdict

    from kdvfs.trace import Segment

    a, b = trace.kernels, shaped.kernels
    by_key: defaultdict = defaultdict(list)
    for y in b:
        by_key[(y.op, y.name)].append(y)
    count: defaultdict = defaultdict(int)
    for x in a:
        count[(x.op, x.name)] += 1
    if len(a) != len(b) or any(len(by_key.get(key, [])) != n for key, n in count.items()):
        raise InputError(f"trace {trace.name!r} and {shaped.name!r} do not launch the same kernels; record the "
                         "shaped trace from the same workload, torch and card")
    twins = {key: iter(ys) for key, ys in by_key.items()}
    it = (next(twins[(x.op, x.name)]) for x in a)
    segs = tuple(Segment(s.name, tuple(replace(k, flops=w.flops, bytes=w.bytes, dtype=w.dtype, math=w.math,
                                               work_source=w.work_source) for k, w in zip(s.kernels, it)),
                         s.repeat, s.pass_name) for s in trace.segments)
    return replace(trace, segments=segs,
                   notes=(trace.notes + "; " if trace.notes else "") + f"FLOPs/bytes from op shapes of {shaped.name}")
