"""The observe-only sweep over two H200s (one Ray actor per GPU) against the single-H200 sweep of the same trace.

    python -m scripts.ray_sweep_compare validation/ray/h200x2_sweep_auto.csv validation/h200/h200_sweep_auto.csv \
        [-o validation/ray/h200x2_sweep_compare.json]

With one setting (auto) and two GPUs the sweep deals the workload's units (stages) round-robin: unit i was measured
on GPU i mod 2 (``hw_backend.multisweep``). Per unit: time, power and energy of one pass of the stage (kernel rows
summed; power energy-weighted) in each file, and their ratio; then the ratios' mean per GPU, which shows a card that
draws more power for the same work. The single-H200 sweep ran on another lease, another card.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def per_unit(path: Path) -> dict[str, dict]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(x for x in f if not x.startswith("#")))
    out: dict[str, dict] = {}
    for r in rows:
        u = out.setdefault(r["unit"], {"time_s": 0.0, "energy_j": 0.0, "kernels": 0, "core_mhz": []})
        u["time_s"] += float(r["time_s"])
        u["energy_j"] += float(r["energy_j"])
        u["kernels"] += 1
        u["core_mhz"].append(float(r["core_actual_mhz"]))
    for u in out.values():
        u["power_w"] = u["energy_j"] / u["time_s"]
        u["core_mhz"] = sum(u["core_mhz"]) / len(u["core_mhz"])
    return out


def compare(two: Path, one: Path, trace: str = "gpt3xl-torch-h200-bf16", gpus: int = 2) -> dict:
    from kdvfs.bundled import load_trace_by_name
    from kdvfs.trace import stages_of

    order: list[str] = []
    for s in stages_of(load_trace_by_name(trace)):
        if s not in order:
            order.append(s)
    a, b = per_unit(two), per_unit(one)
    units = []
    for i, name in enumerate(order):
        if name not in a or name not in b:
            continue
        units.append({"unit": name, "gpu": i % gpus, "kernels": a[name]["kernels"],
                      "time_s": a[name]["time_s"], "power_w": a[name]["power_w"], "energy_j": a[name]["energy_j"],
                      "core_mhz": a[name]["core_mhz"],
                      "single_time_s": b[name]["time_s"], "single_power_w": b[name]["power_w"],
                      "single_energy_j": b[name]["energy_j"], "single_core_mhz": b[name]["core_mhz"],
                      "time_ratio": a[name]["time_s"] / b[name]["time_s"],
                      "power_ratio": a[name]["power_w"] / b[name]["power_w"],
                      "energy_ratio": a[name]["energy_j"] / b[name]["energy_j"]})
    by_gpu = {}
    for g in range(gpus):
        mine = [u for u in units if u["gpu"] == g]
        if mine:
            by_gpu[g] = {k: sum(u[k] for u in mine) / len(mine) for k in ("time_ratio", "power_ratio", "energy_ratio")}
            by_gpu[g]["units"] = len(mine)
    return {"command": f"python -m scripts.ray_sweep_compare {two} {one}", "trace": trace, "units": units,
            "by_gpu": by_gpu}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("two")
    ap.add_argument("one")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = compare(Path(a.two), Path(a.one))
    for u in doc["units"]:
        print(f"GPU {u['gpu']} {u['unit']:10s} {1e3 * u['time_s']:8.3f} ms {u['power_w']:6.1f} W "
              f"({u['core_mhz']:.0f} MHz) | single H200 {1e3 * u['single_time_s']:8.3f} ms {u['single_power_w']:6.1f} W "
              f"| ratio time {u['time_ratio']:.3f} power {u['power_ratio']:.3f} energy {u['energy_ratio']:.3f}")
    for g, d in doc["by_gpu"].items():
        print(f"GPU {g}: {d['units']} units, mean ratio time {d['time_ratio']:.3f}, power {d['power_ratio']:.3f}, "
              f"energy {d['energy_ratio']:.3f}")
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
