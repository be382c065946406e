"""Importers: PyTorch profiler (Kineto) Chrome traces and the Spaan et al. 2026 per-kernel table.

Kineto traces: GPU kernels, memcpy and memset become ``Kernel`` values in stream (start-time) order. Segments come
from the recorder's ``record_function("kdvfs:<segment>")`` labels when present. A foreign trace without them gets each
kernel's pass from the CPU op that launched it: correlation id → launching runtime call → the CPU ops that enclose it
on its thread (its ancestors); an autograd engine frame or a ``*Backward*`` op means backward, an optimizer frame
means optimizer, anything else inside the step means forward.
"""

from __future__ import annotations

import bisect
import csv
import logging
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdvfs.errors import FormatError
from kdvfs.trace import Kernel, Segment, Trace, read_json_document
from kdvfs.work import index_ops, kernel_work

__all__ = ["KinetoImport", "categorize", "import_kineto", "import_spaan_csv", "LABEL_PREFIX"]

log = logging.getLogger(__name__)

LABEL_PREFIX = "kdvfs:"
OP_PREFIX = "kdvfs.op:"

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
_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
_BACKWARD = re.compile(r"autograd::engine|Backward|backward", re.I)
_OPTIMIZER = re.compile(r"Optimizer\.|optimizer|\.step#|_multi_tensor_adam|_fused_adam|adamw?\b|zero_grad", re.I)


@dataclass(frozen=True, slots=True)
class KinetoImport:
    """A trace imported from a Kineto file, with how its passes were assigned.

    Attributes:
        trace: the imported trace.
        labelled: whether the recorder's ``kdvfs:`` labels set the segments.
        assigned_time_share: share of GPU kernel time given forward, backward or optimizer (1.0 when labelled).
        pass_time_s: GPU time per pass.
    """

    trace: Trace
    labelled: bool
    assigned_time_share: float
    pass_time_s: dict[str, float]


def _containing(intervals: Sequence[tuple[float, float, str]], starts: list[float], t: float) -> list[str]:
    """Names of the intervals (sorted by start) that contain time ``t``, outermost first."""
    hi = bisect.bisect_right(starts, t)
    out = [(s, -(e - s), n) for s, e, n in intervals[:hi] if e >= t]
    return [n for _, _, n in sorted(out)]


def import_kineto(path: str | Path, name: str | None = None, repeats: Mapping[str, int] | None = None,
                  step: str = "last", meta: Mapping[str, Any] | None = None) -> KinetoImport:
    """Import a PyTorch profiler Chrome trace (``.json`` or ``.json.gz``).

    Args:
        path: the file.
        name: trace name (default: the file's stem).
        repeats: repeat count per segment name (the recorder uses 24 for layer segments).
        step: with ``ProfilerStep#N`` annotations, ``"last"`` imports the last step only (warm-up excluded),
            ``"all"`` everything.
        meta: trace metadata (model, batch_size, seq_len, gpu, source, licence, notes).
    """
    path = Path(path)
    doc = read_json_document(path, "PyTorch profiler trace")
    events = doc.get("traceEvents") if isinstance(doc, Mapping) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise FormatError(f"{str(path)!r} has no 'traceEvents' list: it is not a PyTorch profiler (Chrome) trace")
    gpu, runtime, cpu_ops, labels, steps, stages = [], {}, defaultdict(list), [], [], []
    for ev in events:
        if not isinstance(ev, Mapping) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat", "")
        args = ev.get("args") or {}
        if cat in _GPU_CATS:
            gpu.append(ev)
        elif cat in ("cuda_runtime", "cuda_driver", "Runtime", "Driver"):
            if "correlation" in args:
                runtime[args["correlation"]] = ev
        elif cat in ("cpu_op", "user_annotation", "python_function", "Operator"):
            nm = str(ev.get("name", ""))
            ts, dur = float(ev.get("ts", 0)), float(ev.get("dur", 0))
            if nm.startswith(LABEL_PREFIX):
                labels.append((ts, ts + dur, nm[len(LABEL_PREFIX):]))
            elif nm.startswith(OP_PREFIX):
                stages.append((ts, ts + dur, nm[len(OP_PREFIX):]))
            elif nm.startswith("ProfilerStep#"):
                steps.append((ts, ts + dur, nm))
            else:
                cpu_ops[(ev.get("pid"), ev.get("tid"))].append((ts, ts + dur, nm))
    if not gpu:
        raise FormatError(
            f"{str(path)!r} holds no GPU kernels, memcpy or memset events: record it with a CUDA device and "
            "ProfilerActivity.CUDA enabled (or use `kdvfs record`)"
        )
    for ev in gpu:
        d = ev.get("dur")
        if not isinstance(d, (int, float)) or d <= 0:
            raise FormatError(
                f"{str(path)!r}: GPU event {ev.get('name')!r} at ts={ev.get('ts')} has duration {d!r}; durations must be "
                "positive — the trace is damaged, record it again"
            )
    gpu.sort(key=lambda e: (float(e["ts"]), e.get("args", {}).get("stream", 0)))

    def launch_ts(ev: Mapping[str, Any]) -> tuple[float | None, Any]:
        rt = runtime.get((ev.get("args") or {}).get("correlation"))
        if rt is None:
            return None, None
        return float(rt["ts"]), (rt.get("pid"), rt.get("tid"))

    # keep the last profiler step (warm-up steps excluded) when steps are annotated
    if steps and step == "last":
        s0, s1, _ = max(steps)
        kept = []
        for ev in gpu:
            lt, _ = launch_ts(ev)
            if lt is not None and s0 <= lt <= s1:
                kept.append(ev)
        if kept:
            gpu = kept
    labels.sort()
    label_starts = [s for s, _, _ in labels]
    stages.sort()
    stage_starts = [s for s, _, _ in stages]
    for v in cpu_ops.values():
        v.sort()
    op_starts = {k: [s for s, _, _ in v] for k, v in cpu_ops.items()}

    assigned: list[tuple[str, Mapping[str, Any], str | None]] = []  # (segment or pass, event, op)
    for ev in gpu:
        lt, thread = launch_ts(ev)
        op = None
        seg = None
        if lt is not None and thread in cpu_ops:
            anc = _containing(cpu_ops[thread], op_starts[thread], lt)
            op = next((a for a in reversed(anc) if a.startswith("aten::")), anc[-1] if anc else None)
        else:
            anc = []
        if labels and lt is not None:
            lab = _containing(labels, label_starts, lt)
            seg = lab[-1] if lab else None
        if stages and lt is not None:
            st = _containing(stages, stage_starts, lt)
            if st:
                op = f"stage:{st[-1]}"
        if seg is None and not labels:
            if any(_OPTIMIZER.search(a) for a in anc):
                seg = "optimizer"
            elif any(_BACKWARD.search(a) for a in anc) or (anc and thread is not None and _is_autograd_thread(cpu_ops[thread])):
                seg = "backward"
            elif anc:
                seg = "forward"
        assigned.append((seg or "unassigned", ev, op))

    # FLOPs and bytes of each kernel from its op's shapes, else its name and grid (kdvfs.work)
    worked = kernel_work([_kernel_from_event(ev, op) for _, ev, op in assigned], [ev for _, ev, _ in assigned],
                         index_ops(events), backward=[seg.startswith("backward") for seg, _, _ in assigned])
    segs: list[tuple[str, list[Kernel]]] = []
    for (seg, _ev, _op), k in zip(assigned, worked):
        if segs and segs[-1][0] == seg:
            segs[-1][1].append(k)
        else:
            segs.append((seg, [k]))
    # make segment names unique: forward, backward, forward_2, …
    seen: dict[str, int] = defaultdict(int)
    out = []
    repeats = dict(repeats or {})
    for seg, ks in segs:
        seen[seg] += 1
        nm = seg if seen[seg] == 1 else f"{seg}_{seen[seg]}"
        out.append(Segment(name=nm, kernels=tuple(ks), repeat=int(repeats.get(seg, 1)), pass_name=_pass_of(seg)))
    meta = dict(meta or {})
    trace = Trace(
        name=name or path.name.split(".")[0], segments=tuple(out), model=str(meta.get("model", "")),
        batch_size=meta.get("batch_size"), seq_len=meta.get("seq_len"), gpu=str(meta.get("gpu", "")),
        source=str(meta.get("source", f"PyTorch profiler trace {path.name}")), licence=str(meta.get("licence", "")),
        notes=str(meta.get("notes", "")),
    )
    pass_time: dict[str, float] = defaultdict(float)
    for s in trace.segments:
        pass_time[s.pass_name if s.name != "unassigned" else "unassigned"] += s.time_s
    total = sum(pass_time.values())
    share = sum(v for p, v in pass_time.items() if p in ("forward", "backward", "optimizer")) / total
    return KinetoImport(trace=trace, labelled=bool(labels), assigned_time_share=share, pass_time_s=dict(pass_time))


def _is_autograd_thread(ops: Sequence[tuple[float, float, str]]) -> bool:
    return any(n.startswith("autograd::engine") for _, _, n in ops[:200])


def _pass_of(seg: str) -> str:
    base = seg.split("_")[0]
    if seg.startswith("optimizer") or base in ("optimizer", "zero"):
        return "optimizer"
    if "backward" in seg:
        return "backward"
    if seg.startswith(("forward", "embedding", "loss")):
        return "forward"
    return "other"


def _kernel_from_event(ev: Mapping[str, Any], op: str | None) -> Kernel:
    args = ev.get("args") or {}
    nm = str(ev.get("name", "kernel"))
    cat = ev.get("cat", "")
    if cat in ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset"):
        category = "copy"
    else:
        category = categorize(nm)
    grid = tuple(int(x) for x in args["grid"]) if isinstance(args.get("grid"), list) else None
    block = tuple(int(x) for x in args["block"]) if isinstance(args.get("block"), list) else None
    nbytes = args.get("bytes") if isinstance(args.get("bytes"), (int, float)) else None
    return Kernel(name=nm, category=category, time_s=float(ev["dur"]) * 1e-6, grid=grid, block=block,
                  stream=args.get("stream") if isinstance(args.get("stream"), int) else None, op=op,
                  bytes=float(nbytes) if nbytes else None)
