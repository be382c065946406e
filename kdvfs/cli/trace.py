"""Verbs ``trace show|import`` and ``record``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kdvfs.cli.common import out
from kdvfs.console import print_json, table
from kdvfs.errors import InputError

__all__ = ["register"]

def describe_trace(t) -> str:
    """`` — MODEL on GPU; batch B × seq S`` with only the parts the trace knows (never "None")."""
    parts = []
    what = " on ".join(x for x in (t.model, t.gpu) if x)
    if what:
        parts.append(what)
    if t.batch_size is not None or t.seq_len is not None:
        parts.append(" × ".join(x for x in (f"batch {t.batch_size}" if t.batch_size is not None else "",
                                            f"seq {t.seq_len}" if t.seq_len is not None else "") if x))
    return (" — " + "; ".join(parts)) if parts else ""


def cmd_trace_show(a) -> int:
    from kdvfs.bundled import bundled_trace_names

    if a.list or not a.trace:
        names = bundled_trace_names()
        if a.json:
            print_json({"bundled": names})
        else:
            out(a).print("bundled traces: " + ", ".join(names))
        return 0
    import sys

    from kdvfs.cli.analyze import load_any_trace
    from kdvfs.console import make_console

    t = load_any_trace(a.trace, err=make_console(sys.stderr))  # a profiler trace too, imported in memory (as analyze)
    s = t.summary()
    from kdvfs.worktable import kernel_work_rows, work_source_time_share

    if not 0 <= a.kernels <= 100000:
        raise InputError(f"--kernels {a.kernels} must be a number of kernels from 0 to 100000; give e.g. --kernels 20")
    s["work_source_time_share"] = work_source_time_share(t)
    rows = kernel_work_rows(t, a.kernels) if a.kernels else []
    if a.kernels:
        s["kernels_by_time"] = rows
    if a.json:
        print_json(s)
        return 0
    c = out(a)
    c.print(f"[bold]{t.name}[/bold]" + describe_trace(t))
    c.print(f"source: {t.source}")
    if t.notes:
        c.print(f"notes: {t.notes}")
    c.print(table("segments", ["segment", "pass", "repeat", "kernels", "time (s)"],
                  [[g["name"], g["pass"], g["repeat"], g["kernels"], g["time_s"]] for g in s["segments"]]))
    c.print(table("time share by category", ["category", "share"],
                  [[k, f"{100 * v:.1f} %"] for k, v in s["category_time_share"].items()]))
    c.print(table("time share by where the work (FLOPs, bytes) came from", ["source", "share"],
                  [[k, f"{100 * v:.1f} %"] for k, v in s["work_source_time_share"].items()]))
    if rows:
        def rate(v):
            return "" if v is None else f"{v:.3g}"

        c.print(table(f"the {len(rows)} kernels with the most time, their work and the rates it implies (compare with "
                      "the card's bandwidth and peak)",
                      ["kernel", "op", "× iter", "time (µs)", "share", "GFLOP", "MB", "TB/s", "TFLOP/s", "work from"],
                      [[r["key"], r["op"] or "", r["repeat"], f"{1e6 * r['time_s']:.4g}", f"{100 * r['time_share']:.1f} %",
                        "" if r["flops"] is None else f"{r['flops'] / 1e9:.4g}",
                        "" if r["bytes"] is None else f"{r['bytes'] / 1e6:.4g}", rate(r["tbytes_per_s"]),
                        rate(r["tflops_per_s"]), r["work_source"] or ""] for r in rows]))
    e = f", {s['total_energy_j']:.1f} J" if s["total_energy_j"] else ""
    per_layer = f" ({s['kernels_per_layer']} per repeated block)" if s["kernels_per_layer"] else ""
    c.print(f"{s['kernels']} kernels{per_layer}, {s['instances']} instances, {s['total_time_s']:.4g} s per iteration{e}")
    return 0


def cmd_trace_import(a) -> int:
    from kdvfs.importers import import_kineto, import_spaan_csv
    from kdvfs.trace import save_trace

    if len(a.file) > 1:
        from kdvfs.cli.multi import import_ranks_verb

        return import_ranks_verb(a)
    if getattr(a, "work_from", None):
        raise InputError("--work-from is for several ranks (one shape-recorded file per rank); for one trace, record "
                         "it with record_shapes=True")
    if getattr(a, "gpus_per_node", None) is not None:  # was ignored, even at 0
        raise InputError(f"--gpus-per-node {a.gpus_per_node} is for several ranks (one file per rank, `kdvfs trace import "
                         "r0.json.gz r1.json.gz …`); one file is one GPU's trace: drop --gpus-per-node")
    src = Path(a.file[0])
    if not src.exists():
        raise InputError(f"file {str(src)!r} does not exist; check the path")
    if src.suffix == ".csv":
        if a.repeat:
            raise InputError(f"--repeat applies to PyTorch profiler traces; the kernel table {str(src)!r} carries its own "
                             "repeat counts — drop --repeat")
        t = import_spaan_csv(src, name=a.name or "gpt3xl-llmc-rtx3080ti")
        info: dict[str, Any] = {"labelled": True, "assigned_time_share": 1.0}
    else:
        reps = {}
        for r in a.repeat or []:
            k, _, v = r.partition("=")
            if not v.isdigit() or int(v) < 1:
                raise InputError(f"--repeat {r!r} must look like SEGMENT=N with N ≥ 1, e.g. forward_layer=24")
            reps[k] = int(v)
        import sys

        from kdvfs.cli.common import stage_progress
        from kdvfs.console import make_console

        with stage_progress(make_console(sys.stderr), "import") as prog:
            imp = import_kineto(src, name=a.name, repeats=reps, step=a.step, progress=prog)
        t = imp.trace
        info = {"labelled": imp.labelled, "assigned_time_share": imp.assigned_time_share, "pass_time_s": imp.pass_time_s,
                "structure": imp.structure, "profiler_steps": imp.steps, "steps_used": imp.steps_used,
                "streams": imp.streams, "busy_union_s": imp.busy_union_s, "overlap_share": imp.overlap_share}
    save_trace(t, a.output)
    if src.suffix != ".csv":  # after the output is written: a refused -o stays one line
        from kdvfs.cli.common import overlap_note, shapes_note

        shapes_note(t)
        overlap_note(t)
    doc = dict(t.summary(), output=str(a.output), **info)
    if a.json:
        print_json(doc)
    else:
        c = out(a)
        c.print(f"wrote {a.output}: {doc['kernels']} kernels, {doc['instances']} instances, "
                f"{doc['total_time_s']:.4g} s; forward/backward/optimizer assigned to "
                f"{100 * info['assigned_time_share']:.1f} % of GPU time")
        rep = [g for g in doc["segments"] if g["repeat"] > 1 and g["kernels"] > 1]
        if rep:
            src_txt = {"modules": "the module hierarchy", "sequence": "the kernel sequence", "labels": "the labels"}
            c.print(f"repeated blocks (from {src_txt.get(str(info.get('structure')), 'the labels')}): "
                    + ", ".join(f"{g['name']} × {g['repeat']} ({g['kernels']} kernels)" for g in rep))
        from kdvfs.importers import group_notes_of

        for n in group_notes_of(t):  # why the layers did not fold (SqueezeBERT: 104 segments, no word)
            c.print(n, markup=False)
    return 0


def cmd_record(a) -> int:
    from hw_backend.record import record

    imp = record(a.output, precision=a.precision, batch=a.batch, seq=a.seq, warmup=a.warmup)
    doc = dict(imp.trace.summary(), output=str(a.output))
    print_json(doc) if a.json else out(a).print(f"recorded {doc['kernels']} kernels to {a.output}")
    return 0


def register(sub, j) -> None:
    tr = sub.add_parser("trace", help="show or import traces").add_subparsers(dest="trace_cmd", required=True)
    sp = j(tr.add_parser("show", help="summary of a trace file or bundled name"))
    sp.add_argument("trace", nargs="?")
    sp.add_argument("--list", action="store_true", help="list bundled traces")
    sp.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="also list the N kernels with the most time: FLOPs, bytes and the TB/s and TFLOP/s they imply")
    sp.set_defaults(fn=cmd_trace_show)
    sp = j(tr.add_parser("import", help="import a PyTorch profiler trace (.json/.json.gz) or the study's CSV"))
    sp.add_argument("file", nargs="+", help="one file, or one Kineto file per rank of a distributed step")
    sp.add_argument("-o", "--output", required=True)
    sp.add_argument("--gpus-per-node", type=int, help="several ranks: GPUs per node of the machine they ran on")
    sp.add_argument("--work-from", action="append", metavar="FILE",
                    help="several ranks: a step of the same run recorded with op shapes (record_shapes=True), one "
                         "per rank (repeat; matched to its rank by its distributedInfo, else taken in rank order): "
                         "each rank's kernels take their FLOPs and bytes from it, their timing from the files given "
                         "first")
    sp.add_argument("--name")
    sp.add_argument("--repeat", action="append",
                    help="SEGMENT=N: repeat count of a segment named by the recorder's kdvfs: labels (e.g. "
                         "forward_layer=24); repeats in other traces are found automatically")
    sp.add_argument("--step", choices=["last", "all"], default="last",
                    help="with ProfilerStep annotations: the last step, or every step averaged into one iteration")
    sp.set_defaults(fn=cmd_trace_import)

    sp = j(sub.add_parser("record", help="record the GPT-3-style block on this GPU (needs the torch extra)"))
    sp.add_argument("-o", "--output", required=True)
    sp.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    sp.add_argument("--batch", type=int, default=8)
    sp.add_argument("--seq", type=int, default=2048)
    sp.add_argument("--warmup", type=int, default=5)
    sp.set_defaults(fn=cmd_record)
