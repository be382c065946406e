"""The H200 model's fidelity before and after session 5 (issue 12): zoo kernels per class and real training steps.

Reads the stored fits and step checks (``validation/h200/fidelity/before/`` = main at a6a2ddc; the current
``validation/h200/characterization/fit.json`` and ``validation/h200/steps_check.json``) and writes
``validation/h200/fidelity/summary.json`` and the markdown tables printed. Usage: ``python -m scripts.h200_fidelity_report``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "validation/h200/fidelity"


def _classes(fit: dict) -> dict:
    # the class of a zoo kernel: GEMMs by math, then the category; entries of the session-5 sets by role
    from hw_backend.zoo import full_zoo

    zoo = {k.name: k.category for k in full_zoo()}
    out: dict = defaultdict(list)
    for o in fit["fit"]["per_kernel"]:
        n = o["name"]
        cat = o.get("category") or zoo.get(n, "")
        if n.startswith("duty_"):
            c = "duty (burst below the cap)"
        elif "onset" in n:
            c = "burst onset (step responses)"
        elif o.get("busy", 1.0) < 1.0:
            c = "launch-bound"
        elif n.startswith(("gemm_fp32", "gemm_tf32")):
            c = "gemm fp32/tf32"
        elif n.startswith("gemm") or cat == "gemm":
            c = "gemm 16-bit"
        elif n.startswith("sdpa") or cat == "attention":
            c = "attention"
        elif "graph" in n:
            c = "graph replay (L2 working sets)"
        else:
            c = {"elementwise": "elementwise", "reduction": "reduction/softmax", "norm": "norm", "copy": "copy/cast/fill",
                 "optimizer": "optimizer"}.get(cat, cat)
        out[c].append(o)
    return out


def _row(os: list) -> dict:
    n = len(os)
    return {"kernels": n, "mean_power_error_pct": round(sum(o["power_error_pct"] for o in os) / n, 2),
            "mean_abs_power_error_pct": round(sum(abs(o["power_error_pct"]) for o in os) / n, 2),
            "mean_abs_clock_error_pct": round(sum(abs(o["clock_error_pct"]) for o in os) / n, 2),
            "meet_both": sum(o["meets_both"] for o in os)}


def main() -> int:
    import argparse

    argparse.ArgumentParser(description="rewrites validation/h200/fidelity/summary.json from the stored fit and step checks, and prints the tables (no options; run from anywhere).").parse_args()
    before = json.loads((OUT / "before/fit.json").read_text())
    after = json.loads((ROOT / "validation/h200/characterization/fit.json").read_text())
    sb = json.loads((OUT / "before/steps_check.json").read_text())
    sa = json.loads((ROOT / "validation/h200/steps_check.json").read_text())
    cb, ca = _classes(before), _classes(after)
    classes = {c: {"before": _row(cb[c]) if c in cb else None, "after": _row(ca[c])} for c in ca}
    keys = ("kernels", "meet_clock", "meet_power", "meet_both")
    zoo = {"before": {"all": {k: before["fit"][k] for k in keys}, "heldout": {k: before["heldout"]["test"][k] for k in keys}},
           "after": {"all": {k: after["fit"][k] for k in keys}, "first_file": {k: after["fit_first_file"][k] for k in keys},
                     "heldout": {k: after["heldout"]["test"][k] for k in keys}}}

    gpu_t = {st["model"]: st["step_time_gpu_median_s"]
             for st in json.loads((ROOT / "validation/h200/steps/steps.json").read_text())["steps"] if "error" not in st}

    def steps(doc):
        out = {}
        for r in doc["steps"]:
            if "error" not in r:
                continue
            e = r["error"]
            lim_t = r["predicted"]["limiter"]["time_s"]
            lim = r["predicted"]["limiter"]
            gap_s = r["predicted"].get("limiter_with_gaps", {}).get("gap_s", 0.0)
            implied = (r["measured"]["energy_j"] - gap_s * (doc["gap_power_w"] or 0.0)) / lim["time_s"]
            out[r["model"]] = {"energy_pct": round(e["limiter_with_gaps"]["energy_pct"], 2),
                               "kernel_power_predicted_w": round(lim["energy_j"] / lim["time_s"], 1),
                               "kernel_power_implied_w": round(implied, 1),
                               "median_clock_pct": round(e["limiter_with_gaps"]["median_clock_pct"], 2),
                               "kernel_time_vs_gpu_time_pct": round(100 * (lim_t / gpu_t[r["model"]] - 1), 2),
                               "isolated_with_gaps_energy_pct": round(e["isolated_with_gaps"]["energy_pct"], 2)}
        return {"gap_power_w": doc["gap_power_w"], "met": doc["met"], "steps": out}

    doc = {"zoo": zoo, "classes": classes, "steps": {"before": steps(sb), "after": steps(sa)}}
    (OUT / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("| class | kernels | mean power error % before | after | mean abs power error % before | after | both targets before | after |")
    print("|---|---|---|---|---|---|---|---|")
    for c, v in classes.items():
        b, a = v["before"], v["after"]
        print(f"| {c} | {a['kernels']} | {b['mean_power_error_pct'] if b else '–'} | {a['mean_power_error_pct']} | "
              f"{b['mean_abs_power_error_pct'] if b else '–'} | {a['mean_abs_power_error_pct']} | "
              f"{str(b['meet_both']) + '/' + str(b['kernels']) if b else '–'} | {a['meet_both']}/{a['kernels']} |")
    print()
    print("| step | energy % before | after | median clock % before | after | kernels' time under the limiter vs the GPU time per step (CUDA events) %, before | after | kernels' average power predicted (W) | implied by the measurement with gaps at the gap power (W) |")
    print("|---|---|---|---|---|---|---|---|---|")
    B, A = doc["steps"]["before"]["steps"], doc["steps"]["after"]["steps"]
    for m, a in A.items():
        b = B.get(m)
        print(f"| {m} | {b['energy_pct'] if b else '–'} | {a['energy_pct']} | {b['median_clock_pct'] if b else '–'} | "
              f"{a['median_clock_pct']} | {b['kernel_time_vs_gpu_time_pct'] if b else '–'} | {a['kernel_time_vs_gpu_time_pct']} | "
              f"{a['kernel_power_predicted_w']} | {a['kernel_power_implied_w']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
