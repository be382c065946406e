"""Several GPUs from their recorded traces: the dependency graph across streams and ranks, replayed.

The graph (``networkx.DiGraph``) is built from a multi-rank trace (``kdvfs.multirank``), not from model constants:

- **stream order**: each kernel instance follows the previous one on its rank's stream;
- **compute → communication**: a collective kernel waits for the work its host thread had launched on the rank's
  other streams before launching it (PyTorch records an event on the compute stream and the communication stream
  waits on it): an edge from the last kernel of each other stream launched before the collective;
- **communication → compute**: a kernel that started late for no reason on its own stream, right after a kernel of
  another stream ended (within ``WAIT_TOL_S``), waited for it (DDP's wait for the last gradient bucket before the
  optimizer): an edge between them;
- **across ranks**: the k-th collective of every rank is one collective; it ends when the last rank has arrived plus
  its transfer time (the shortest recorded duration of it over the ranks: the last to arrive waits least).

Whatever recorded delay the edges do not explain (the host launching late, Python between kernels) is kept as a
fixed gap before the kernel. A replay at the recorded durations therefore reproduces the recorded span; a schedule
changes each kernel's duration by its profile ratio ``T[setting] / T[auto]`` (collective transfers are link-bound
and keep theirs), and the graph decides what moves.

Energy per GPU: power integrated over the rank's step, each running kernel adding its power above idle
(``P_idle + Σ (P_k − P_idle)``: a collective overlapping a GEMM adds its own increment), never above the card's cap
(the power limiter holds the board there, whatever runs at once), idle power in gaps, and the rank idles at idle
power until the slowest rank finishes. A collective can be charged at a separate waiting power from its arrival
until the last rank arrives (``wait_power_w``), its own power over the transfer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import networkx as nx
import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import GpuSpec
from kdvfs.multirank import MultiTrace

__all__ = ["WAIT_TOL_S", "RankResult", "build_graph", "replay_ranks", "rank_powers"]

log = logging.getLogger(__name__)

WAIT_TOL_S = 20e-6
LATE_S = 2e-6


@dataclass(frozen=True, slots=True)
class RankResult:
    """A replayed distributed step.

    Attributes:
        time_s: the step (first kernel start to the last end over all ranks).
        per_gpu_time_s: each rank's own span.
        per_gpu_energy_j: each rank's energy over the whole step (idle until the slowest rank ends).
        per_gpu_busy_s: time with at least one kernel running, per rank.
        collective_time_s: time with a collective kernel running, per rank.
        exposed_collective_s: time with a collective running and no other kernel, per rank.
        edges: edge counts by kind (stream, launch, wait, rank).
    """

    time_s: float
    per_gpu_time_s: tuple[float, ...]
    per_gpu_energy_j: tuple[float, ...]
    per_gpu_busy_s: tuple[float, ...]
    collective_time_s: tuple[float, ...]
    exposed_collective_s: tuple[float, ...]
    edges: dict

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "per_gpu_time_s": list(self.per_gpu_time_s),
                "per_gpu_energy_j": list(self.per_gpu_energy_j), "per_gpu_busy_s": list(self.per_gpu_busy_s),
                "collective_time_s": list(self.collective_time_s),
                "exposed_collective_s": list(self.exposed_collective_s), "edges": self.edges}


def _inst(mt: MultiTrace, r: int):
    t = mt.ranks[r]
    return [t.kernels[i] for i in t.instances()]


def build_graph(mt: MultiTrace) -> nx.DiGraph:
    """Nodes ``(rank, instance)`` with ``dur`` (recorded), ``gap`` (unexplained recorded delay) and ``coll`` (index of
    the collective, or -1); edges with ``kind``. Collectives of the same index share ``coll``."""
    g = nx.DiGraph()
    counts = {"stream": 0, "launch": 0, "wait": 0, "rank": 0}
    for r in range(mt.world_size):
        ks = _inst(mt, r)
        tm = mt.timing[r]
        st = tm.start_s
        dur = mt.durations_s(r)
        end = st + dur
        ci = 0
        last_on: dict[int, int] = {}
        order = np.argsort(st, kind="stable")
        launched: dict[int, list[int]] = {}
        for i in order.tolist():
            s = int(tm.stream[i])
            coll = -1
            if ks[i].category == "collective":
                coll, ci = ci, ci + 1
            g.add_node((r, i), dur=float(dur[i]), coll=coll, rank=r, cat=ks[i].category, start=float(st[i]))
            if s in last_on:
                g.add_edge((r, last_on[s]), (r, i), kind="stream")
                counts["stream"] += 1
            if coll >= 0 and not np.isnan(tm.launch_s[i]):
                for s2, lst in launched.items():
                    if s2 == s:
                        continue
                    before = [j for j in lst if tm.launch_s[j] < tm.launch_s[i]]
                    if before:
                        g.add_edge((r, before[-1]), (r, i), kind="launch")
                        counts["launch"] += 1
            elif coll < 0:
                pe = end[last_on[s]] if s in last_on else -np.inf
                if st[i] > pe + LATE_S:
                    # waited on another stream? the kernel of another stream that ended last before this one started
                    cands = [j for s2, j in last_on.items() if s2 != s and end[j] <= st[i] + 1e-9
                             and st[i] - end[j] <= WAIT_TOL_S and end[j] > pe]
                    if cands:
                        j = max(cands, key=lambda j: end[j])
                        g.add_edge((r, j), (r, i), kind="wait")
                        counts["wait"] += 1
            last_on[s] = i
            launched.setdefault(s, []).append(i)
        for i in range(len(ks)):
            preds = [end[p[1]] for p in g.predecessors((r, i))]
            ready = max(preds) if preds else 0.0
            g.nodes[(r, i)]["gap"] = max(0.0, float(st[i] - ready))
    n_coll = {r: sum(1 for k in _inst(mt, r) if k.category == "collective") for r in range(mt.world_size)}
    if len(set(n_coll.values())) > 1:
        raise InputError(f"ranks have different numbers of collective kernels {n_coll}: not one step of one run")
    counts["rank"] = n_coll.get(0, 0) * max(mt.world_size - 1, 0)
    g.graph["edges"] = counts
    return g


def rank_powers(mt: MultiTrace, spec: GpuSpec, limiter: bool = False) -> list[np.ndarray]:
    """Each instance's power at the card's own clocks, from the kernel model of its category, FLOPs and bytes, with
    each kernel's time anchored to its recorded duration (``kdvfs.model.default_params``): each kernel throttled on its
    own at the cap.

    ``limiter`` (on a card with a fitted power limiter, ``kdvfs.limiter.limiter_for``): instead, as
    ``kdvfs validate-steps`` does for one GPU, every kernel of a rank runs at the limiter's steady ceiling for that
    rank's recorded step, and its duration is anchored there. The step's average power is the gap power
    (``kdvfs.limiter.gap_power_for``) plus each kernel's power above it over the rank's recorded span, so kernels that
    overlap (a collective beside the backward pass) add their increments, and the span's idle time draws the gap
    power. Replay such powers without the concurrent cap (``replay_ranks(cap_w=inf)``): the limiter holds a windowed
    average, not each instant."""
    from kdvfs.gpus import AUTO
    from kdvfs.limiter import CeilingTables, anchor_to_limiter, gap_power_for, limiter_for
    from kdvfs.model import default_params, evaluate

    lim = limiter_for(spec) if limiter else None
    if limiter and lim is None:
        raise InputError(f"{spec.name} has no fitted power limiter; replay each kernel throttled alone instead (--limiter off)")
    gap_w = gap_power_for(spec) if lim is not None else None
    spans = [r["span_s"] for r in mt.summary()["ranks"]] if lim is not None else []
    out = []
    for r, t in enumerate(mt.ranks):
        p = default_params(t, spec)
        if lim is None:
            ev = evaluate(spec, p, np.array([0]), np.array([0]))
            out.append(ev.power_w[:, 0][t.instances()])
            continue
        # the span less the kernels' summed time: negative where kernels overlap (their increments above the gap
        # power add), positive where the rank idles
        rest = spans[r] - float(t.repeats @ t.times_s)
        pa, f = anchor_to_limiter(spec, p, t.times_s, t.repeats, lim, (rest, gap_w or 0.0))
        pw = CeilingTables.from_params(spec, pa, [(AUTO, AUTO)]).at(f)[1][:, 0]
        out.append(pw[t.instances()])
    return out


def replay_ranks(mt: MultiTrace, spec: GpuSpec, powers: list[np.ndarray] | None = None,
                 time_factor: list[np.ndarray] | None = None, graph: nx.DiGraph | None = None,
                 cap_w: float | None = None, wait_power_w: float | None = None) -> RankResult:
    """Replay the graph: every kernel starts when its predecessors (and, for a collective, every rank) are ready.

    Args:
        powers: per rank, each instance's power (default ``rank_powers``).
        time_factor: per rank, each instance's duration relative to the recording (default 1: the recorded clocks).
        cap_w: the most the card draws with several kernels running at once (default ``spec.cap_w``, the power the
            limiter holds; ``inf``: no limit). Each kernel's own power is capped by the kernel model; a collective
            overlapping a GEMM would otherwise add its increment above the board's limit.
        wait_power_w: the power of a collective kernel while it waits for the other ranks (from its arrival until
            the last rank arrives; its transfer is charged at its own power); default: its own power throughout.
    """
    g = graph if graph is not None else build_graph(mt)
    powers = powers if powers is not None else rank_powers(mt, spec)
    n = mt.world_size
    start: dict = {}
    end: dict = {}
    coll_nodes: dict[int, list] = {}
    for node, d in g.nodes(data=True):
        if d["coll"] >= 0:
            coll_nodes.setdefault(d["coll"], []).append(node)
    transfer = {c: min(g.nodes[v]["dur"] for v in vs) for c, vs in coll_nodes.items()}
    # a collective group acts as one node: condense each group, then go in topological order
    h = nx.DiGraph()
    key = {v: (("c", g.nodes[v]["coll"]) if g.nodes[v]["coll"] >= 0 else v) for v in g.nodes}
    h.add_nodes_from(set(key.values()))
    h.add_edges_from((key[a], key[b]) for a, b in g.edges if key[a] != key[b])
    if not nx.is_directed_acyclic_graph(h):
        raise InputError("the ranks' collectives are not in the same order on every rank (the dependency graph has a "
                         "cycle); record all ranks of one step")

    def dur(v) -> float:
        f = 1.0 if time_factor is None else float(time_factor[v[0]][v[1]])
        return g.nodes[v]["dur"] * f

    def ready(v) -> float:
        ps = [end[p] for p in g.predecessors(v)]
        return (max(ps) if ps else 0.0) + g.nodes[v]["gap"]

    for u in nx.topological_sort(h):
        if isinstance(u, tuple) and u and u[0] == "c":
            vs = coll_nodes[u[1]]
            arr = {v: ready(v) for v in vs}
            done = max(arr.values()) + transfer[u[1]]
            for v in vs:
                start[v], end[v] = arr[v], done
        else:
            start[u] = ready(u)
            end[u] = start[u] + dur(u)
    t_end = max(end.values())
    spans, energies, busy, coll_t, exposed = [], [], [], [], []
    idle = spec.idle_power_w
    cap = spec.cap_w if cap_w is None else float(cap_w)
    for r in range(n):
        vs = [v for v in g.nodes if v[0] == r]
        s = np.array([start[v] for v in vs])
        e = np.array([end[v] for v in vs])
        p = np.array([powers[r][v[1]] for v in vs])
        is_c = np.array([g.nodes[v]["coll"] >= 0 for v in vs])
        t0 = 0.0
        spans.append(float(e.max() - t0))
        if wait_power_w is not None and is_c.any():
            # a collective's wait (arrival → transfer start) as its own interval at the waiting power
            tr = np.array([transfer[g.nodes[v]["coll"]] if g.nodes[v]["coll"] >= 0 else 0.0 for v in vs])
            ws = is_c & (e - tr > s)
            split = e - tr
            s = np.concatenate([np.where(ws, split, s), s[ws]])
            e = np.concatenate([e, split[ws]])
            p = np.concatenate([p, np.full(int(ws.sum()), float(wait_power_w))])
            is_c = np.concatenate([is_c, np.ones(int(ws.sum()), bool)])
        # sweep line over kernel starts and ends
        ev_t = np.concatenate([s, e])
        ev_p = np.concatenate([p - idle, -(p - idle)])
        ev_c = np.concatenate([is_c.astype(int), -is_c.astype(int)])
        ev_k = np.concatenate([np.ones(len(s), int), -np.ones(len(s), int)])
        o = np.argsort(ev_t, kind="stable")
        ev_t, ev_p, ev_c, ev_k = ev_t[o], ev_p[o], ev_c[o], ev_k[o]
        dt = np.diff(np.concatenate([ev_t, [t_end]]))
        level_p = np.cumsum(ev_p)
        level_c = np.cumsum(ev_c)
        level_k = np.cumsum(ev_k)
        energy = idle * t_end + float(np.sum(np.clip(level_p, 0, max(cap - idle, 0.0)) * dt))
        energies.append(energy)
        busy.append(float(np.sum(dt[level_k > 0])))
        coll_t.append(float(np.sum(dt[level_c > 0])))
        exposed.append(float(np.sum(dt[(level_c > 0) & (level_k == level_c)])))
    return RankResult(float(t_end), tuple(spans), tuple(energies), tuple(busy), tuple(coll_t), tuple(exposed),
                      dict(g.graph.get("edges", {})))
