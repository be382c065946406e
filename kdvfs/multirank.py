"""Multi-rank traces: one PyTorch profiler (Kineto) file per rank of a distributed step, imported into one multi-GPU
trace (``kdvfs-ranks/1``).

Each rank's file goes through the single-file importer (``kdvfs.importers.import_kineto``); on top of it this module
keeps what a dependency graph across streams and ranks needs and a per-rank trace drops: for every kernel instance its
recorded start, its launch time on the host (from the launching runtime call's correlation id) and its CUDA stream.
Ranks are identified by the ``distributedInfo`` record PyTorch writes into each file (rank, world size, backend), or
by the files' order when it is missing.

Checks, each with one clear message: a rank missing or given twice, files from runs of different sizes (world
sizes), ranks of different models (their compute kernels differ), ranks with different numbers of collectives (not
the same step), and a world size the card layout cannot hold (more ranks per node than GPUs per node).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.errors import FormatError, InputError
from kdvfs.importers import import_kineto, trace_stem
from kdvfs.trace import Trace, read_json_document, trace_from_dict, trace_to_dict

__all__ = ["FORMAT", "RankTiming", "MultiTrace", "import_ranks", "load_multitrace", "save_multitrace"]

log = logging.getLogger(__name__)

FORMAT = "kdvfs-ranks/1"
# ranks whose compute kernels differ by more than this share of instances are not the same model
MAX_KERNEL_MISMATCH = 0.05
# the latest start of one step over the ranks after the first (s): ranks start a step together, within the
# clocks' disagreement across hosts; files recorded minutes apart are from different runs
MAX_RANK_START_GAP_S = 60.0


@dataclass(frozen=True, slots=True)
class RankTiming:
    """Recorded timing of one rank's kernel instances (``trace.instances()`` order), seconds from the rank's first
    kernel start.

    Attributes:
        start_s: when each instance started on the GPU.
        launch_s: when the host launched it (NaN where the trace has no launching runtime call).
        stream: CUDA stream of each instance (-1 where unknown).
        dur_s: each instance's recorded duration, or None (older files: the trace's kernel times, which hold a
            repeated segment's mean over its repeats).
    """

    start_s: np.ndarray
    launch_s: np.ndarray
    stream: np.ndarray
    dur_s: np.ndarray | None = None


@dataclass(frozen=True)
class MultiTrace:
    """One distributed training step: a trace and its recorded timing per rank.

    Attributes:
        name: identifier.
        ranks: per rank (index = rank), its imported trace.
        timing: per rank, its recorded timing.
        backend: the distributed backend (``nccl``) when the files say.
        gpus_per_node: GPUs per node the run had (ranks are packed onto nodes in order).
    """

    name: str
    ranks: tuple[Trace, ...]
    timing: tuple[RankTiming, ...]
    backend: str = ""
    gpus_per_node: int | None = None

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def durations_s(self, r: int) -> np.ndarray:
        """Rank ``r``'s instance durations as recorded (the trace's kernel times where the file has none)."""
        tm = self.timing[r]
        if tm.dur_s is not None:
            return tm.dur_s
        t = self.ranks[r]
        return np.array([t.kernels[i].time_s for i in t.instances()])

    def summary(self) -> dict[str, Any]:
        rows = []
        for r, (t, tm) in enumerate(zip(self.ranks, self.timing)):
            ks = [t.kernels[i] for i in t.instances()]
            dur = self.durations_s(r)
            coll = np.array([k.category == "collective" for k in ks])
            span = float((tm.start_s + dur).max() - tm.start_s.min())
            rows.append({"rank": r, "instances": len(ks), "span_s": span, "kernel_time_s": float(dur.sum()),
                         "collective_time_s": float(dur[coll].sum()), "collectives": int(coll.sum()),
                         "streams": sorted({int(s) for s in tm.stream})})
        return {"name": self.name, "world_size": self.world_size, "backend": self.backend, "ranks": rows}


def _dist_info(doc: Any) -> Mapping[str, Any]:
    info = doc.get("distributedInfo") if isinstance(doc, Mapping) else None
    return info if isinstance(info, Mapping) else {}


def _runtime_launches(doc: Any) -> dict[Any, float]:
    """Each runtime call's start (µs) by correlation id."""
    events = (doc.get("traceEvents") if isinstance(doc, Mapping) else doc) or []
    runtime: dict[Any, float] = {}
    for ev in events:
        if not isinstance(ev, Mapping) or ev.get("ph") != "X":
            continue
        args = ev.get("args") or {}
        if ev.get("cat", "") in ("cuda_runtime", "cuda_driver", "Runtime", "Driver") and "correlation" in args:
            runtime[args["correlation"]] = float(ev.get("ts", 0))
    return runtime


def _timing(doc: Any, imp: Any, where: str) -> RankTiming:
    """Each of the trace's instances (event order) with its recorded start, duration, launch and stream.

    The importer hands back the GPU event of every instance of the kept step (``instance_events``); the trace's own
    kernel times cannot be matched to the file, since a repeated segment holds each kernel's mean over its repeats."""
    trace = imp.trace
    runtime = _runtime_launches(doc)
    inst = [trace.kernels[i] for i in trace.instances()]
    evs = list(getattr(imp, "instance_events", ()) or ())
    if len(evs) != len(inst) or any(e.name != k.name for e, k in zip(evs, inst)):
        raise FormatError(f"{where}: the importer did not keep one recorded event per kernel instance (profiler "
                          "steps averaged?); import each rank's last step (--step last)")
    st = np.array([e.ts_us for e in evs], dtype=float) * 1e-6
    t0 = st.min()
    launch = np.array([runtime.get(e.correlation, np.nan) for e in evs], dtype=float) * 1e-6
    stream = np.array([int(e.stream) if isinstance(e.stream, int) else -1 for e in evs], dtype=np.int64)
    dur = np.array([e.dur_us for e in evs], dtype=float) * 1e-6
    return RankTiming(st - t0, launch - t0, stream, dur)


def import_ranks(paths: Sequence[str | Path], name: str | None = None, step: str = "last",
                 gpus_per_node: int | None = None, meta: Mapping[str, Any] | None = None,
                 work_from: Sequence[str | Path] | None = None) -> MultiTrace:
    """Import one Kineto file per rank into one multi-GPU trace.

    Args:
        paths: the files, one per rank (any order when they carry ``distributedInfo``; else rank = position).
        name: the multi-trace's name (default: the first file's stem).
        step: as in ``import_kineto``: ``last`` keeps the last profiler step.
        gpus_per_node: GPUs per node of the machine the step ran on; a world size that needs more ranks on a node
            than it has GPUs is refused.
        meta: trace metadata passed to each rank's import.
        work_from: optionally one more file per rank, in rank order: a step of the same run recorded with op shapes
            (``record_shapes=True``), whose kernels' FLOPs and bytes each rank's kernels take
            (``kdvfs.importers.transfer_work``). Recording shapes costs host time, which stretches a launch-bound
            step; so the timing can come from a step recorded without them and the work from one recorded with them.
    """
    if not paths:
        raise InputError("give one PyTorch profiler trace per rank (e.g. rank0.json.gz rank1.json.gz)")
    docs = []
    for p in paths:
        p = Path(p)
        docs.append((p, read_json_document(p, "PyTorch profiler trace")))
    infos = [_dist_info(d) for _, d in docs]
    has = [("rank" in i and "world_size" in i) for i in infos]
    if any(has) and not all(has):
        missing = [str(p) for (p, _), h in zip(docs, has) if not h]
        raise InputError(f"{', '.join(missing)}: no distributedInfo (rank, world size) unlike the other files; give "
                         "traces of one distributed run, recorded the same way")
    if all(has):
        worlds = {int(i["world_size"]) for i in infos}
        if len(worlds) > 1:
            raise InputError(f"the files come from runs of different sizes (world sizes {sorted(worlds)}); give the "
                             "traces of one run")
        world = worlds.pop()
        by_rank: dict[int, tuple[Path, Any]] = {}
        for (p, d), i in zip(docs, infos):
            r = int(i["rank"])
            if r in by_rank:
                raise InputError(f"rank {r} is given twice ({by_rank[r][0]} and {p}); give one file per rank")
            by_rank[r] = (p, d)
        missing_r = sorted(set(range(world)) - set(by_rank))
        if missing_r:
            raise InputError(f"the run had {world} ranks but the trace of rank(s) {missing_r} is missing; give all "
                             f"{world} files (one per rank)")
        ordered = [by_rank[r] for r in range(world)]
        backend = str(infos[0].get("backend", ""))
    else:
        ordered = docs
        world = len(docs)
        backend = ""
    if gpus_per_node is not None:
        if not isinstance(gpus_per_node, int) or gpus_per_node < 1:
            raise InputError(f"GPUs per node must be an integer ≥ 1, got {gpus_per_node!r}")
        if world > gpus_per_node and world % gpus_per_node:
            raise InputError(f"{world} ranks cannot be laid out on nodes of {gpus_per_node} GPUs (a world size above "
                             "one node must be a multiple of the GPUs per node); check --gpus-per-node")
    _refuse_same_files([p for p, _ in ordered])
    if work_from is not None and len(work_from) != len(ordered):
        raise InputError(f"{len(work_from)} shape-recorded file(s) for {len(ordered)} ranks; give one per rank, in rank "
                         "order")
    if work_from is not None:
        work_from = _order_twins([Path(w) for w in work_from], [p for p, _ in ordered], world)
    traces, timings, starts = [], [], []
    for r, (p, d) in enumerate(ordered):
        imp = import_kineto(p, name=f"{name or p.name.split('.')[0]}.rank{r}", step=step, meta=meta)
        timings.append(_timing(d, imp, f"rank {r} ({p})"))
        starts.append(_wall_start_s(d, imp))
        tr = imp.trace
        if work_from is not None:
            from kdvfs.importers import transfer_work

            shaped = import_kineto(work_from[r], name=f"{tr.name}.shapes", step=step, meta=meta).trace
            try:
                tr = transfer_work(tr, shaped)
            except InputError as e:
                raise InputError(f"rank {r}: {e} ({p} and {work_from[r]})") from None
        traces.append(tr)
    _check_same_step(traces, [str(p) for p, _ in ordered])
    _check_same_time(starts, [str(p) for p, _ in ordered])
    return MultiTrace(name or trace_stem(ordered[0][0]), tuple(traces), tuple(timings), backend,
                      gpus_per_node)


def _wall_start_s(doc: Any, imp: Any) -> float | None:
    """The kept step's first kernel start in wall-clock seconds, where the file says its time base
    (``baseTimeNanoseconds``, written by recent PyTorch; its event times are microseconds after it); else None."""
    base = doc.get("baseTimeNanoseconds") if isinstance(doc, Mapping) else None
    evs = list(getattr(imp, "instance_events", ()) or ())
    if not isinstance(base, (int, float)) or not evs:
        return None
    return float(base) * 1e-9 + min(e.ts_us for e in evs) * 1e-6


def _check_same_time(starts: Sequence[float | None], where: Sequence[str]) -> None:
    """The ranks of one step start it within moments of each other (clocks of one host, or NTP-synchronised
    hosts); files whose kept steps started minutes apart come from different runs or steps."""
    known = [s for s in starts if s is not None]
    if len(starts) < 2 or len(known) < len(starts):
        return
    gap = max(known) - min(known)
    if gap > MAX_RANK_START_GAP_S:
        first, last = where[known.index(min(known))], where[known.index(max(known))]
        raise InputError(f"the ranks' recorded steps started {gap:.0f} s apart ({first} first, {last} last; at most "
                         f"{MAX_RANK_START_GAP_S:.0f} s for one step): the files come from different runs or steps; "
                         "give the traces one run wrote for one step")


def _refuse_same_files(paths: Sequence[Path]) -> None:
    """Two ranks read from one file (or two identical files) are one rank given twice; files without
    ``distributedInfo`` cannot be told apart otherwise."""
    import hashlib

    seen: dict[str, Path] = {}
    for p in paths:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        if digest in seen:
            raise InputError(f"{seen[digest]} and {p} are the same recording (identical contents); give one file per "
                             "rank, each rank's own trace")
        seen[digest] = p


def _order_twins(twins: Sequence[Path], timing: Sequence[Path], world: int) -> list[Path]:
    """The shape-recorded twins in rank order: by their ``distributedInfo`` where they carry it (a twin given in the
    wrong position is matched to its own rank), else as given. Refused: a twin recorded without op shapes (it would
    give no work), a twin that is its rank's timing file itself, twins of another world size or a rank given twice."""
    docs = [read_json_document(t, "shape-recorded PyTorch profiler trace (--work-from)") for t in twins]
    timing_res = {Path(p).resolve(): p for p in timing}
    for t, d in zip(twins, docs):
        if t.resolve() in timing_res:
            raise InputError(f"--work-from {t}: it is a timing file itself; give a second step of the same run "
                             "recorded with op shapes (record_shapes=True), e.g. rank0.shapes.kineto.json.gz")
        if not _has_shapes(d):
            raise InputError(f"--work-from {t}: recorded without op shapes (no 'record_shapes' flag and no 'Input "
                             "Dims' on any op), so it cannot give the kernels' work; record the twin step with "
                             "torch.profiler.profile(record_shapes=True)")
    infos = [_dist_info(d) for d in docs]
    if not all("rank" in i and "world_size" in i for i in infos):
        return list(twins)
    worlds = {int(i["world_size"]) for i in infos}
    if worlds != {world}:
        raise InputError(f"--work-from: the shape-recorded files come from a run of world size {sorted(worlds)}, the "
                         f"timing files from one of {world}; give the twins of the same run")
    by_rank: dict[int, Path] = {}
    for t, i in zip(twins, infos):
        r = int(i["rank"])
        if r in by_rank:
            raise InputError(f"--work-from: rank {r} is given twice ({by_rank[r]} and {t}); give one shape-recorded "
                             "file per rank")
        by_rank[r] = t
    if [by_rank[r] for r in range(len(twins))] != list(twins):
        log.info("--work-from files matched to ranks by their distributedInfo: %s",
                    ", ".join(f"rank {r}: {by_rank[r]}" for r in sorted(by_rank)))
    return [by_rank[r] for r in range(len(twins))]


def _has_shapes(doc: Any) -> bool:
    if isinstance(doc, Mapping) and doc.get("record_shapes"):
        return True
    events = (doc.get("traceEvents") if isinstance(doc, Mapping) else doc) or []
    return any(isinstance(e, Mapping) and isinstance(e.get("args"), Mapping) and "Input Dims" in e["args"]
               for e in events)


def _check_same_step(traces: Sequence[Trace], where: Sequence[str]) -> None:
    def names(t: Trace, coll: bool) -> Counter:
        return Counter(k.name for k in (t.kernels[i] for i in t.instances()) if (k.category == "collective") == coll)

    ref_c, ref_n = names(traces[0], False), names(traces[0], True)
    for t, w in zip(traces[1:], where[1:]):
        c = names(t, False)
        diff = sum(((c - ref_c) + (ref_c - c)).values())
        if diff > MAX_KERNEL_MISMATCH * max(sum(ref_c.values()), 1):
            raise InputError(f"{w}: its compute kernels differ from rank 0's ({where[0]}) in {diff} of "
                             f"{sum(ref_c.values())} instances: the ranks come from different models or steps; give "
                             "the traces of one step of one run")
        n = names(t, True)
        if sum(n.values()) != sum(ref_n.values()):
            raise InputError(f"{w}: {sum(n.values())} collective kernels against {sum(ref_n.values())} on rank 0: not "
                             "the same step; record all ranks with the same profiler schedule")
    if len(traces) > 1 and not sum(ref_n.values()):
        raise InputError(f"none of the {len(traces)} files has a collective (NCCL) kernel, so nothing ties them into "
                         "one distributed step; give the traces of one step of a data- or tensor-parallel run (its "
                         "all-reduces recorded), or import each file on its own")


def save_multitrace(mt: MultiTrace, path: str | Path) -> Path:
    """Write the ``kdvfs-ranks/1`` document (gzipped when the name ends in ``.gz``)."""
    import gzip
    import json

    path = Path(path)
    doc = {"format": FORMAT, "name": mt.name, "backend": mt.backend, "gpus_per_node": mt.gpus_per_node,
           "ranks": [{"rank": r, "trace": trace_to_dict(t),
                      "timing": {"start_s": tm.start_s.tolist(),
                                 "launch_s": [None if np.isnan(x) else x for x in tm.launch_s.tolist()],
                                 "stream": tm.stream.tolist(),
                                 **({} if tm.dur_s is None else {"dur_s": tm.dur_s.tolist()})}}
                     for r, (t, tm) in enumerate(zip(mt.ranks, mt.timing))]}
    text = json.dumps(doc) + "\n"
    data = gzip.compress(text.encode(), mtime=0) if path.suffix == ".gz" else text.encode()
    from kdvfs.fileio import write_atomic

    return write_atomic(path, data, "multi-rank trace")


def load_multitrace(path: str | Path) -> MultiTrace:
    doc = read_json_document(Path(path), "multi-rank trace")
    where = f"multi-rank trace {str(path)!r}"
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise FormatError(f"{where}: not a {FORMAT} document; make one with `kdvfs trace import r0.json r1.json …`")
    traces, timings = [], []
    ranks = doc.get("ranks") or []
    if not isinstance(ranks, list):
        raise FormatError(f"{where}: 'ranks' must be a list (one entry per rank); re-make the file with `kdvfs trace "
                          "import r0.json r1.json …`")
    for pos, rd in enumerate(ranks):
        if not (isinstance(rd, Mapping) and isinstance(rd.get("trace"), Mapping)
                and isinstance(rd.get("timing"), Mapping)):
            raise FormatError(f"{where}: ranks[{pos}] needs a 'trace' and a 'timing' object; re-make the file with "
                              "`kdvfs trace import r0.json r1.json …`")
        if rd.get("rank", pos) != pos:
            raise FormatError(f"{where}: ranks[{pos}] says rank {rd.get('rank')!r}; the ranks must be 0, 1, … in "
                              "order; re-make the file with `kdvfs trace import`")
        t = trace_from_dict(rd["trace"], where=f"{where} rank {pos}")
        tm = rd["timing"]
        n = len(t.instances())
        if not all(isinstance(tm.get(k), list) and len(tm[k]) == n for k in ("start_s", "launch_s", "stream")):
            raise FormatError(f"{where}: rank {pos}: timing arrays must have one entry per instance ({n})")
        if "dur_s" in tm and not (isinstance(tm["dur_s"], list) and len(tm["dur_s"]) == n):
            raise FormatError(f"{where}: rank {pos}: dur_s must have one entry per instance ({n})")
        try:
            timing = RankTiming(np.array(tm["start_s"], dtype=float),
                                np.array([np.nan if x is None else x for x in tm["launch_s"]], dtype=float),
                                np.array(tm["stream"], dtype=np.int64),
                                np.array(tm["dur_s"], dtype=float) if "dur_s" in tm else None)
        except (TypeError, ValueError):
            raise FormatError(f"{where}: rank {pos}: timing values must be numbers (launch_s may hold null); re-make "
                              "the file with `kdvfs trace import`") from None
        if not np.all(np.isfinite(timing.start_s)) or (timing.dur_s is not None and not (
                np.all(np.isfinite(timing.dur_s)) and np.all(timing.dur_s >= 0))):
            raise FormatError(f"{where}: rank {pos}: start_s must be finite and dur_s finite and ≥ 0 seconds; re-make "
                              "the file with `kdvfs trace import`")
        traces.append(t)
        timings.append(timing)
    if not traces:
        raise FormatError(f"{where}: no ranks")
    return MultiTrace(str(doc.get("name", "")), tuple(traces), tuple(timings), str(doc.get("backend", "")),
                      doc.get("gpus_per_node"))
