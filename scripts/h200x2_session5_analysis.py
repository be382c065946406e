"""Session 5's two-H200 run, read from its log, and what it says about the rank-0 energy miss.

    python -m scripts.h200x2_session5_analysis validation/h200x2/session5/log.txt validation/h200x2 \
        -o validation/h200x2/session5/analysis.json

The run (``scripts/h200x2_session5.sh``) measured the DDP step twice, with rank 0 on the first card (``ddp01``) and on
the second (``ddp10``, ``CUDA_VISIBLE_DEVICES=1,0``), each with an idle window and the collective alone. Both DDP
stages then hung in their last window (a count bug, fixed since) and were stopped by their timeout, so their
``measurements.json`` and traces were never written; every window's result was already in the log, read here from the
per-rank lines (``[rank R] LABEL: … J per step, … W``, from the NVML energy counter).

It reports, per card: the step's energy with and without gradient sync in both rank orders; the card's power right
after work with nothing running (``idle``), with only all-reduces running (``coll_transfer``), and rank 0's while its
all-reduce mostly waits for the other rank spinning in a sleep kernel (``coll_wait``). Then it replays session 4's
recorded step (the traces in SESSION4_DIR, the same model, batch and machine layout) with the model as shipped and
with the collective's power taken from these windows (its increment over the card's idle-after-work power, on top
of the model's idle), against session 4's and session 5's measured energies. Nothing is fitted to a step energy.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STEP = re.compile(r"\[rank (\d)\] (\w+): (\d+) steps in ([\d.]+) s: ([\d.]+) ms, ([\d.]+) J per step, (\d+) W")
REP = re.compile(r"\[rank (\d)\] (\w+): (\d+) in ([\d.]+) s, ([\d.]+) ms each, (\d+) W")
# which card each rank ran on (PCI bus id), by stage: CUDA_VISIBLE_DEVICES unset, then 1,0 (the log's nvidia-smi
# lines give the two cards' bus ids: GPU 0 00:06.0, GPU 1 00:07.0)
CARDS = {"ddp01": {0: "00:06.0", 1: "00:07.0"}, "ddp10": {0: "00:07.0", 1: "00:06.0"}}


def parse(log: str) -> list[dict]:
    rows, stage = [], None
    for line in log.splitlines():
        if line.startswith("== stage "):
            stage = line.split()[2]
            continue
        if stage not in CARDS:
            continue
        for m in STEP.finditer(line):
            r = int(m[1])
            rows.append({"stage": stage, "rank": r, "card": CARDS[stage][r], "label": m[2], "steps": int(m[3]),
                         "time_s": float(m[4]), "step_time_s": float(m[5]) / 1e3, "step_energy_j": float(m[6]),
                         "mean_power_w": float(m[7])})
        for m in REP.finditer(line):
            r = int(m[1])
            rows.append({"stage": stage, "rank": r, "card": CARDS[stage][r], "label": m[2], "repetitions": int(m[3]),
                         "time_s": float(m[4]), "per_repetition_s": float(m[5]) / 1e3, "mean_power_w": float(m[6])})
    return rows


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def replay(session4: Path, coll: dict | None) -> list[float]:
    """Session 4's recorded step replayed; ``coll``: per rank (session 4's rank = card) the collective's transfer
    and wait increments over idle, added to the model's idle power."""
    import numpy as np

    from kdvfs.gpus import get_gpu
    from kdvfs.multirank import load_multitrace
    from simulator.ranks import build_graph, rank_powers, replay_ranks

    mt = load_multitrace(session4 / "ranks.trace.json.gz")
    spec = get_gpu("h200")
    g = build_graph(mt)
    powers = rank_powers(mt, spec)
    if coll is None:
        return list(replay_ranks(mt, spec, graph=g, powers=powers).per_gpu_energy_j)
    out = []
    for r in range(mt.world_size):  # one replay per card's increments; keep that rank's energy
        ps = [p.copy() for p in powers]
        for q, tq in enumerate(mt.ranks):
            is_c = np.array([tq.kernels[i].category == "collective" for i in tq.instances()])
            ps[q] = np.where(is_c, spec.idle_power_w + coll[q]["transfer_w"], ps[q])
        res = replay_ranks(mt, spec, graph=g, powers=ps, wait_power_w=spec.idle_power_w + coll[r]["wait_w"])
        out.append(res.per_gpu_energy_j[r])
    return out


def analyse(log_path: Path, session4: Path) -> dict:
    rows = parse(log_path.read_text())
    cards = sorted({r["card"] for r in rows})
    per_card = {}
    for c in cards:
        mine = [r for r in rows if r["card"] == c]
        per_card[c] = {
            "ddp_step_energy_j": _mean(r["step_energy_j"] for r in mine if r["label"].startswith("ddp")),
            "ddp_step_energy_by_order_j": {s: _mean(r["step_energy_j"] for r in mine
                                                    if r["stage"] == s and r["label"].startswith("ddp"))
                                           for s in CARDS},
            "no_sync_step_energy_j": _mean(r["step_energy_j"] for r in mine if r["label"] == "no_sync"),
            "idle_after_work_w": _mean(r["mean_power_w"] for r in mine if r["label"] == "idle"),
            "coll_transfer_w": _mean(r["mean_power_w"] for r in mine if r["label"] == "coll_transfer"),
            # only rank 0's coll_wait is the waiting side (the other rank spins in a sleep kernel)
            "coll_wait_w": _mean(r["mean_power_w"] for r in mine if r["label"] == "coll_wait" and r["rank"] == 0),
        }
    a, b = cards
    spread = {k: 100 * (per_card[b][k] / per_card[a][k] - 1) for k in ("ddp_step_energy_j", "no_sync_step_energy_j")}
    # the collective's own power, as increments over the same card's idle-after-work power
    inc = {}
    for c in cards:
        d = per_card[c]
        w = d["coll_wait_w"] if d["coll_wait_w"] is not None else per_card[a]["coll_wait_w"]
        ref = per_card[a] if d["coll_wait_w"] is None else d
        inc[c] = {"transfer_w": d["coll_transfer_w"] - d["idle_after_work_w"],
                  "wait_w": max(0.0, w - ref["idle_after_work_w"])}
    s4 = json.loads((session4 / "comparison.json").read_text())
    s4_meas = [r["measured_step_energy_j"] for r in s4["ranks"]]
    s4_cards = ["00:06.0", "00:07.0"]  # session 4: rank r on GPU r
    shipped = replay(session4, None)
    measured_coll = replay(session4, [inc[c] for c in s4_cards])
    s5_meas = [per_card[c]["ddp_step_energy_j"] for c in s4_cards]
    rows_out = []
    for r, c in enumerate(s4_cards):
        rows_out.append({"session4_rank": r, "card": c, "measured_session4_j": s4_meas[r],
                         "measured_session5_j": s5_meas[r], "simulated_shipped_j": shipped[r],
                         "simulated_measured_collective_power_j": measured_coll[r],
                         "error_shipped_vs_session4_pct": 100 * (shipped[r] / s4_meas[r] - 1),
                         "error_measured_collective_vs_session4_pct": 100 * (measured_coll[r] / s4_meas[r] - 1),
                         "error_shipped_vs_session5_pct": 100 * (shipped[r] / s5_meas[r] - 1),
                         "error_measured_collective_vs_session5_pct": 100 * (measured_coll[r] / s5_meas[r] - 1)})
    return {"command": f"python -m scripts.h200x2_session5_analysis {log_path} {session4}", "windows": rows,
            "per_card": per_card, "second_card_over_first_pct": spread, "collective_increments_w": inc,
            "replay_session4_step": rows_out}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("session4")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = analyse(Path(a.log), Path(a.session4))
    for c, d in doc["per_card"].items():
        print(f"card {c}: DDP {d['ddp_step_energy_j']:.2f} J/step (by order {d['ddp_step_energy_by_order_j']}), "
              f"sync off {d['no_sync_step_energy_j']:.2f} J; idle after work {d['idle_after_work_w']:.0f} W, "
              f"all-reduces alone {d['coll_transfer_w']:.0f} W, waiting {d['coll_wait_w']}")
    print("second card over first:", {k: round(v, 2) for k, v in doc["second_card_over_first_pct"].items()})
    print("collective increments over idle-after-work:", doc["collective_increments_w"])
    for r in doc["replay_session4_step"]:
        print(f"rank {r['session4_rank']} ({r['card']}): measured {r['measured_session4_j']:.2f} J (session 4), "
              f"{r['measured_session5_j']:.2f} J (session 5); simulated {r['simulated_shipped_j']:.2f} J "
              f"({r['error_shipped_vs_session4_pct']:+.2f} %), with the measured collective power "
              f"{r['simulated_measured_collective_power_j']:.2f} J ({r['error_measured_collective_vs_session4_pct']:+.2f} %)")
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
