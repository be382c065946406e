"""Verbs for several GPUs from their own traces: ``trace import r0 r1 …`` (several files) and ``simulate-ranks``."""

from __future__ import annotations

from kdvfs.cli.common import add_limiter_arg, limiter_of, out
from kdvfs.console import print_json, table
from kdvfs.errors import InputError

__all__ = ["import_ranks_verb", "register"]


def import_ranks_verb(a) -> int:
    """``kdvfs trace import r0.json r1.json … -o multi.json``: one multi-GPU trace (``kdvfs-ranks/1``)."""
    from kdvfs.multirank import import_ranks, save_multitrace

    if a.repeat:
        raise InputError("--repeat applies to one file; a multi-rank import keeps every kernel as recorded")
    from kdvfs.fileio import check_output_path

    check_output_path(a.output, "output (-o)")  # before the import, which takes seconds per rank
    mt = import_ranks(a.file, name=a.name, step=a.step, gpus_per_node=a.gpus_per_node,
                      work_from=getattr(a, "work_from", None))
    save_multitrace(mt, a.output)
    doc = dict(mt.summary(), output=str(a.output))
    if a.json:
        print_json(doc)
        return 0
    out(a).print(table(f"wrote {a.output}: {mt.world_size} ranks ({mt.backend or 'backend not recorded'})",
                       ["rank", "instances", "span (s)", "kernel time (s)", "collectives", "collective time (s)"],
                       [[r["rank"], r["instances"], f"{r['span_s']:.6g}", f"{r['kernel_time_s']:.6g}",
                         r["collectives"], f"{r['collective_time_s']:.6g}"] for r in doc["ranks"]]))
    return 0


def cmd_simulate_ranks(a) -> int:
    """Replay a multi-rank trace through its dependency graph at the recorded clocks (``simulator.ranks``)."""
    from kdvfs.gpus import get_gpu
    from kdvfs.multirank import load_multitrace
    from simulator.ranks import build_graph, rank_powers, replay_ranks

    mt = load_multitrace(a.trace)
    spec = get_gpu(a.gpu)
    from kdvfs.cli.common import note_other_card

    note_other_card(mt.ranks[0], spec)  # as analyze says it: H200 ranks replayed as rtx3080ti's, without a word
    g = build_graph(mt)
    wait = a.collective_wait_power
    if wait is not None and not (wait >= 0 and wait < float("inf")):
        raise InputError(f"--collective-wait-power {wait!r} must be a power in watts ≥ 0 (e.g. the card's power "
                         "measured while a collective waits); leave it out to charge the whole kernel at its own power")
    lim = limiter_of(a, spec)
    powers = rank_powers(mt, spec, limiter=lim is not None)
    r = replay_ranks(mt, spec, graph=g, powers=powers, wait_power_w=wait, cap_w=float("inf") if lim is not None else None)
    doc = dict(r.to_dict(), trace=a.trace, gpu=spec.name, world_size=mt.world_size,
               limiter="windowed limiter, steady ceiling per rank" if lim is not None else "each kernel alone at the cap",
               collective_share=[c / r.time_s for c in r.collective_time_s],
               exposed_collective_share=[c / r.time_s for c in r.exposed_collective_s])
    if a.json:
        print_json(doc)
        return 0
    out(a).print(table(f"{mt.name}: {mt.world_size} ranks replayed from their traces on {spec.name} "
                       f"(graph edges {r.edges}); step {r.time_s:.6g} s; power: {doc['limiter']}",
                       ["rank", "span (s)", "energy (J)", "busy (s)", "collective (s)", "exposed collective (s)"],
                       [[i, f"{r.per_gpu_time_s[i]:.6g}", f"{r.per_gpu_energy_j[i]:.6g}", f"{r.per_gpu_busy_s[i]:.6g}",
                         f"{r.collective_time_s[i]:.6g}", f"{r.exposed_collective_s[i]:.6g}"]
                        for i in range(mt.world_size)]))
    return 0


def register(sub, j) -> None:
    sp = j(sub.add_parser("simulate-ranks", help="replay a multi-rank trace (one Kineto file per rank, imported) "
                                                 "through its dependency graph across streams and ranks"))
    sp.add_argument("--trace", required=True, help="a kdvfs-ranks/1 file from `kdvfs trace import r0 r1 … -o F`")
    sp.add_argument("--gpu", required=True, help="the card (its kernel model gives each kernel's power)")
    sp.add_argument("--collective-wait-power", type=float, metavar="W",
                    help="charge a collective kernel at W watts while it waits for the other ranks (its transfer at "
                         "its own power); default: its own power throughout")
    add_limiter_arg(sp)
    sp.set_defaults(fn=cmd_simulate_ranks)
