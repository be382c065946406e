"""Measured against simulated: the DDP step recorded and measured by ``scripts/h200x2_ddp.py`` on two H200s.

    python scripts/h200x2_compare.py validation/h200x2 [--gpu h200]

Reads ``measurements.json`` and ``rank*.kineto.json.gz`` from the folder, imports the ranks into one multi-GPU trace
(``ranks.trace.json.gz``, written beside them), replays it through the dependency graph (``simulator.ranks``) with
each kernel's power from the card's kernel model (category, anchored to each kernel's recorded time; nothing fitted
to these measurements), and writes ``comparison.json``: per GPU the measured step time and energy (mean of the DDP
windows) against the simulated ones, and the share of the step spent in communication (from the trace: collective
kernels running, and exposed — with no compute kernel beside them; from the measurement: the DDP step against the
same step with gradient sync off).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measured_collective_powers(meas: dict, idle_w: float) -> dict | None:
    """The collective alone, measured in the same run (``--extra``), as the model's idle power ``idle_w`` plus the
    increment over the card's idle-after-work power: while transferring (mean over the ranks) and rank 0's while
    mostly waiting; or None."""
    rs = meas["ranks"]
    if not all("coll_transfer" in r and "coll_wait" in r and "idle" in r for r in rs):
        return None
    r0 = next(r for r in rs if r["rank"] == 0)
    tr = sum(r["coll_transfer"]["mean_power_w"] - r["idle"]["mean_power_w"] for r in rs) / len(rs)
    wait = max(0.0, r0["coll_wait"]["mean_power_w"] - r0["idle"]["mean_power_w"])
    return {"transfer_power_w": idle_w + tr, "wait_power_w": idle_w + wait}


def compare(folder: Path, gpu: str = "h200", measured_collectives: bool = False) -> dict:
    """Measured against simulated. ``measured_collectives``: charge the NCCL kernels at the collective-alone powers
    measured in the same run (transfer; waiting) instead of the kernel model's collective category."""
    import numpy as np

    from kdvfs.gpus import get_gpu
    from kdvfs.multirank import import_ranks, save_multitrace
    from simulator.ranks import build_graph, rank_powers, replay_ranks

    meas = json.loads((folder / "measurements.json").read_text())
    files = sorted(folder.glob("rank*.kineto.json.gz"))
    mt = import_ranks(files, name="gpt2-ddp-h200x2")
    save_multitrace(mt, folder / "ranks.trace.json.gz")
    spec = get_gpu(gpu)
    g = build_graph(mt)
    coll = measured_collective_powers(meas, spec.idle_power_w) if measured_collectives else None
    if measured_collectives and coll is None:
        raise SystemExit(f"{folder}: no collective-alone windows (run h200x2_ddp.py with --extra)")
    powers = rank_powers(mt, spec)
    if coll:
        for r, t in enumerate(mt.ranks):
            is_c = np.array([t.kernels[i].category == "collective" for i in t.instances()])
            powers[r] = np.where(is_c, coll["transfer_power_w"], powers[r])
    sim = replay_ranks(mt, spec, graph=g, powers=powers, wait_power_w=coll["wait_power_w"] if coll else None)
    summ = mt.summary()
    rows = []
    for r, m in enumerate(sorted(meas["ranks"], key=lambda x: x["rank"])):
        ddp = [w for w in m["windows"]]
        t_meas = float(np.mean([w["step_time_s"] for w in ddp]))
        e_meas = float(np.mean([w["step_energy_j"] for w in ddp]))
        ns = m["no_sync"]
        rows.append({
            "rank": r,
            "measured_step_time_s": t_meas, "measured_step_energy_j": e_meas,
            "measured_step_time_sd_s": float(np.std([w["step_time_s"] for w in ddp], ddof=1)) if len(ddp) > 1 else 0.0,
            "measured_step_energy_sd_j": float(np.std([w["step_energy_j"] for w in ddp], ddof=1)) if len(ddp) > 1 else 0.0,
            "windows": len(ddp), "window_s": [w["time_s"] for w in ddp], "steps_per_window": ddp[0]["steps"],
            "measured_mean_power_w": float(np.mean([w["mean_power_w"] for w in ddp])),
            "measured_mean_sm_mhz": float(np.mean([w.get("mean_sm_mhz", np.nan) for w in ddp])),
            "simulated_step_time_s": sim.time_s, "simulated_step_energy_j": sim.per_gpu_energy_j[r],
            "time_error_pct": 100 * (sim.time_s / t_meas - 1),
            "energy_error_pct": 100 * (sim.per_gpu_energy_j[r] / e_meas - 1),
            "trace_span_s": summ["ranks"][r]["span_s"], "trace_kernel_time_s": summ["ranks"][r]["kernel_time_s"],
            "trace_collective_share": sim.collective_time_s[r] / sim.time_s,
            "trace_exposed_collective_share": sim.exposed_collective_s[r] / sim.time_s,
            "measured_no_sync_step_time_s": ns["step_time_s"], "measured_no_sync_step_energy_j": ns["step_energy_j"],
            "measured_communication_cost_share": 1 - ns["step_time_s"] / t_meas,
            "collectives": summ["ranks"][r]["collectives"],
        })
    doc = {"gpu": gpu, "graph_edges": sim.edges, "collective_powers": coll or "kernel model (collective category)",
           "power_cap_w": spec.cap_w, "model": meas.get("model"), "torch": meas.get("torch"),
           "nccl": meas.get("nccl"), "ranks": rows,
           "targets": {"time_within_5pct": all(abs(x["time_error_pct"]) <= 5 for x in rows),
                       "energy_within_5pct": all(abs(x["energy_error_pct"]) <= 5 for x in rows)},
           "command": "python scripts/h200x2_compare.py " + str(folder)}
    name = "comparison_measured_collectives.json" if measured_collectives else "comparison.json"
    doc["command"] += " --measured-collectives" if measured_collectives else ""
    (folder / name).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--measured-collectives", action="store_true",
                    help="NCCL kernels at the collective-alone powers measured in the same run (--extra windows)")
    a = ap.parse_args()
    doc = compare(Path(a.folder), a.gpu, a.measured_collectives)
    for r in doc["ranks"]:
        print(f"rank {r['rank']}: step {1e3 * r['measured_step_time_s']:.2f} ms measured, "
              f"{1e3 * r['simulated_step_time_s']:.2f} ms simulated ({r['time_error_pct']:+.2f} %); "
              f"{r['measured_step_energy_j']:.2f} J measured, {r['simulated_step_energy_j']:.2f} J simulated "
              f"({r['energy_error_pct']:+.2f} %); communication {100 * r['trace_collective_share']:.1f} % of the step "
              f"({100 * r['trace_exposed_collective_share']:.1f} % exposed); sync off saves "
              f"{100 * r['measured_communication_cost_share']:.1f} %")
    print(json.dumps(doc["targets"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
