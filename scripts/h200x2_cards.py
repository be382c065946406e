"""Per card, not per rank: the DDP runs of ``scripts/h200x2_ddp.py`` laid side by side by the GPU each rank ran on.

    python -m scripts.h200x2_cards RUN_DIR [RUN_DIR ...] [-o cards.json]

Each RUN_DIR holds ``measurements.json`` and the ranks' Kineto files. For every rank of every run: the card (PCI bus
id), its measured DDP step energy and power, the same step with gradient sync off (no collective), and where the run
had ``--extra``: the card's idle power and the collective alone (transferring; and rank 0's waiting). Beside them the
replay of the run's own traces (``scripts/h200x2_compare.py``'s simulation, written to the run's comparison.json),
so a rank's miss can be read against its card. Nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def cards(runs: list[Path], gpu: str = "h200") -> dict:
    from simulator.summaries import h200x2_comparison, measured_collective_powers

    def compare(run, gpu, measured_collectives=False):
        return h200x2_comparison(run, gpu, measured_collectives=measured_collectives)

    rows = []
    for run in runs:
        meas = json.loads((run / "measurements.json").read_text())
        comp = compare(run, gpu)
        comp_m = compare(run, gpu, measured_collectives=True) if measured_collective_powers(meas, 0.0) else None
        for m in sorted(meas["ranks"], key=lambda x: x["rank"]):
            r = m["rank"]
            c = comp["ranks"][r]
            w = m["windows"]
            row = {"run": run.name, "rank": r, "card": m["static"].get("pci_bus_id"),
                   "cuda_visible_devices": m.get("cuda_visible_devices", meas.get("cuda_visible_devices")),
                   "step_time_s": _mean(x["step_time_s"] for x in w),
                   "step_energy_j": _mean(x["step_energy_j"] for x in w),
                   "power_w": _mean(x["mean_power_w"] for x in w),
                   "sm_mhz": _mean(x.get("mean_sm_mhz", float("nan")) for x in w),
                   "min_sm_mhz": min(x.get("min_sm_mhz", 0) for x in w),
                   "max_temp_c": max(x.get("max_temp_c", 0) for x in w),
                   "no_sync_step_energy_j": m["no_sync"]["step_energy_j"],
                   "no_sync_step_time_s": m["no_sync"]["step_time_s"],
                   "no_sync_power_w": m["no_sync"]["mean_power_w"],
                   "simulated_step_energy_j": c["simulated_step_energy_j"],
                   "energy_error_pct": c["energy_error_pct"], "time_error_pct": c["time_error_pct"],
                   "trace_collective_s": c["trace_collective_share"] * c["simulated_step_time_s"]}
            if comp_m:
                row["simulated_measured_collectives_step_energy_j"] = comp_m["ranks"][r]["simulated_step_energy_j"]
                row["measured_collectives_energy_error_pct"] = comp_m["ranks"][r]["energy_error_pct"]
            for k in ("idle", "coll_transfer", "coll_wait"):
                if k in m:
                    row[f"{k}_power_w"] = m[k]["mean_power_w"]
                    row[f"{k}_per_repetition_s"] = m[k]["per_repetition_s"]
            rows.append(row)
    by_card: dict[str, dict] = {}
    for row in rows:
        d = by_card.setdefault(row["card"], {"runs": []})
        d["runs"].append(f"{row['run']} rank {row['rank']}")
    for card, d in by_card.items():
        mine = [x for x in rows if x["card"] == card]
        d["no_sync_step_energy_j"] = _mean(x["no_sync_step_energy_j"] for x in mine)
        d["ddp_step_energy_j"] = _mean(x["step_energy_j"] for x in mine)
    return {"command": "python -m scripts.h200x2_cards " + " ".join(str(r) for r in runs), "gpu": gpu, "rows": rows,
            "by_card": by_card}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = cards([Path(r) for r in a.runs], a.gpu)
    for x in doc["rows"]:
        extra = "".join(f", {k[:-8]} {x[k]:.0f} W" for k in ("idle_power_w", "coll_transfer_power_w",
                                                              "coll_wait_power_w") if k in x)
        print(f"{x['run']} rank {x['rank']} on {x['card']}: DDP {x['step_energy_j']:.2f} J/step "
              f"({x['power_w']:.0f} W, SM {x['sm_mhz']:.0f} MHz, min {x['min_sm_mhz']}, {x['max_temp_c']} °C), "
              f"sync off {x['no_sync_step_energy_j']:.2f} J; simulated {x['simulated_step_energy_j']:.2f} J "
              f"({x['energy_error_pct']:+.2f} %)"
              + (f", with the measured collective powers {x['simulated_measured_collectives_step_energy_j']:.2f} J "
                 f"({x['measured_collectives_energy_error_pct']:+.2f} %)" if "measured_collectives_energy_error_pct" in x
                 else "") + extra)
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
