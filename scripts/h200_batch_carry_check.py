"""Held-out check of carrying a schedule to another batch size (``kdvfs simulate --batch``) on the H200 steps.

Five models were recorded on the H200 at two per-GPU batch sizes (``validation/h200/steps``: the small-batch ``-b<N>``
steps and the same models at their own batch sizes). For each pair this imports both traces, builds the model profile
of each (``kdvfs profile build --gpu h200``), and compares, at the large batch:

- auto carried from the small trace (each kernel scaled by its work, ``kdvfs.scaling``) against the model on the
  large trace itself: what the carrying adds to the kernel model's own error;
- the 1 % slack kernel-level schedule (free switching) chosen on the small trace and carried, against the one chosen
  on the large trace: the saving a user would be told from the small trace, beside the one the large trace gives.

Both sides use the same kernel model (isolated throttling, no limiter: ``simulate --batch`` carries without it), so
the difference is the carrying alone. Nothing is fitted. ``python -m scripts.h200_batch_carry_check [-o FILE]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PAIRS = (("pythia-410m-b4", "pythia-410m"), ("mistral-0.4b-b2", "mistral-0.4b"), ("llama-0.5b-b2", "llama-0.5b"),
         ("bert-large-b8", "bert-large"), ("gpt2-medium-b4", "gpt2-medium"))
SLACK_PCT = 1.0


def check(root: Path) -> dict:
    from kdvfs.gpus import SwitchModel, get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params
    from kdvfs.optimize import allocate_schedule, optimize
    from kdvfs.optimize.problem import Problem
    from kdvfs.profile import build_profile
    from kdvfs.switching import SwitchCosts
    from simulator.carried import simulate_carried
    from simulator.engine import SimConfig

    spec = get_gpu("h200")
    free = SimConfig(mechanism="sync", switch=SwitchModel(0.0, 0.0), costs=SwitchCosts(0.0, 0.0, spec.idle_power_w))
    steps = root / "validation/h200/steps"

    def problem(name):
        t = import_kineto(steps / f"{name}.kineto.json.gz", name=name).trace
        return Problem(t, build_profile(t, spec, default_params(t, spec)))

    rows = []
    for small, large in PAIRS:
        ps, pl = problem(small), problem(large)
        batch = pl.trace.batch_size
        auto_c = simulate_carried(ps, spec, allocate_schedule(ps, "static", auto=True), free, batch, path="fast")
        ideal_s = optimize(ps, "waste", SLACK_PCT, "kernel", "global")
        ideal_l = optimize(pl, "waste", SLACK_PCT, "kernel", "global")
        carried = simulate_carried(ps, spec, ideal_s, free, batch, path="fast")
        assert ideal_l.predicted is not None
        rows.append({
            "small": small, "large": large, "batch_small": ps.trace.batch_size, "batch_large": batch,
            "auto_time_carried_vs_model_pct": 100 * (auto_c["auto_time_s"] / pl.auto_time_s - 1),
            "auto_energy_carried_vs_model_pct": 100 * (auto_c["auto_energy_j"] / pl.auto_energy_j - 1),
            "recorded_kernel_time_large_s": float(pl.trace.repeats @ pl.trace.times_s),
            "model_auto_time_large_s": pl.auto_time_s,
            "ideal_carried_time_pct": carried["time_change_pct"], "ideal_carried_energy_pct": carried["energy_change_pct"],
            "ideal_own_time_pct": ideal_l.predicted.time_change_pct,
            "ideal_own_energy_pct": ideal_l.predicted.energy_change_pct,
        })
    return {"gpu": spec.name, "slack_pct": SLACK_PCT, "command": "python -m scripts.h200_batch_carry_check",
            "note": "same kernel model on both sides (isolated throttling, no limiter); nothing fitted", "pairs": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/user-findings6/batch_carry.json")
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    doc = check(root)
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    for r in doc["pairs"]:
        print(f"{r['small']} -> batch {r['batch_large']}: auto time {r['auto_time_carried_vs_model_pct']:+.1f} %, "
              f"energy {r['auto_energy_carried_vs_model_pct']:+.1f} % vs the model on {r['large']}; 1 % ideal carried "
              f"{r['ideal_carried_time_pct']:+.2f} % time / {r['ideal_carried_energy_pct']:+.1f} % energy, on its own "
              f"trace {r['ideal_own_time_pct']:+.2f} % / {r['ideal_own_energy_pct']:+.1f} %")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
