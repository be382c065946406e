"""Summary of the runtime validation on the H200 (no-op writes) beside the simulator's predictions.

    python scripts/hf_runtime_summary.py    # reads validation/h200/runtime/runtime-noop.json, writes summary.json

Measured (on the H200, `scripts/hf_gpt2_step.py runtime`): boundaries hit in order, switches per step against the
plan, late switches, step time with and without the runtime. Predicted (here, the simulator's fast path with the
schedule's own switch model, predictive mechanism): the time the schedule's switches would cost if the writes were
real, relative to the same schedule with free switching.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdvfs.gpus import get_gpu  # noqa: E402
from kdvfs.model import default_params  # noqa: E402
from kdvfs.profile import build_profile  # noqa: E402
from kdvfs.runtime_plan import plan_for  # noqa: E402
from kdvfs.schedule import load_schedule  # noqa: E402
from kdvfs.switching import SwitchCosts  # noqa: E402
from kdvfs.trace import load_trace  # noqa: E402

D = ROOT / "validation/h200/runtime"


def main() -> int:
    from simulator import SimConfig, simulate

    run = json.loads((D / "runtime-noop.json").read_text())
    tr = load_trace(D / "hf-gpt2-h200.trace.json")
    g = get_gpu("h200")
    prof = build_profile(tr, g, default_params(tr, g))
    out = {"device": run.get("device"), "model": run["model"], "batch": run["batch"], "seq": run["seq"],
           "torch": run["torch"], "clocks_before_mhz": run.get("clocks_before_mhz"),
           "clocks_after_mhz": run.get("clocks_after_mhz"), "schedules": {}}
    for name, r in run["schedules"].items():
        s = load_schedule(D / name)
        plan = plan_for(tr, s)
        first, last = plan.regions[0], plan.regions[-1]
        wrap = int((first.core_mhz, first.mem_mhz) != (last.core_mhz, last.mem_mhz))
        recs = r["records"]
        sw = s.switch_plan.switch  # host call and transition as planned, no spread
        cfg = SimConfig(mechanism="predictive", switch=sw, costs=SwitchCosts(idle_power_w=g.idle_power_w))
        sim = simulate(tr, prof, s, g, cfg, path="fast")
        free = s.predicted.ideal_time_s
        delays = [d for x in recs for d in x["write_delay_s"]]
        per_round = len(recs) // 3 if len(recs) % 3 == 0 else len(recs)
        out["schedules"][name] = {
            "switch_model_latency_s": sw.total_s, "regions_per_step": len(plan.regions),
            "plan_switches_per_step": plan.switches, "wrap_around_switch": wrap,
            "expected_switches_steady_step": plan.switches + wrap,
            "expected_switches_first_step_of_a_runtime": plan.switches + 1,
            "observed_switches_per_step": sorted({x["switches"] for x in recs}),
            "steps_with_expected_count": sum(
                x["switches"] == (plan.switches + 1 if i % per_round == 0 else plan.switches + wrap)
                for i, x in enumerate(recs)),
            "steps": len(recs), "all_boundaries_hit_in_order": r["all_boundaries_hit_in_order"],
            "late_switches_per_step_mean": statistics.mean(r["late_per_step"]),
            "late_switches_per_step_max": max(r["late_per_step"]),
            "boundary_to_write_done_s_median": statistics.median(delays),
            "measured": {"baseline_step_s_median": r["baseline_step_s_median"],
                         "runtime_step_s_median": r["runtime_step_s_median"], "overhead_pct": r["overhead_pct"]},
            "predicted": {"noop_writes_gpu_time_pct": 0.0,
                          "real_writes_switch_time_pct_vs_free_switching": 100 * (sim.time_s / free - 1),
                          "schedule_time_change_pct_vs_auto": s.predicted.time_change_pct,
                          "schedule_energy_change_pct_vs_auto": s.predicted.energy_change_pct},
        }
    (D / "summary.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
