"""Summaries computed from the measurement files under ``validation/`` (``kdvfs summarize``).

Each function reads what was measured on a card, sets it beside what the model or the simulator predicts, and returns
the summary document; every number in it, prose included, is computed from the files (nothing typed by hand).

- :func:`h200_summary` — the observe-only H200 session: the step measured against its stages isolated and summed,
  per-kernel values, and the per-switch cost of live no-op switching (``validation/h200/summary.json``).
- :func:`hf_runtime_summary` — the runtime on the recorded GPT-2 step with no-op writes, beside the simulator
  (``validation/h200/runtime/summary.json``).
- :func:`h200x2_comparison` — the DDP step on two H200s against the multi-rank replay
  (``validation/h200x2/comparison.json``).

They live in ``simulator`` (beside ``stepcheck``) because they replay the simulator; ``kdvfs`` imports the simulator
only from the command line.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.errors import FormatError, InputError

__all__ = ["h200_summary", "h200x2_comparison", "hf_runtime_summary", "write_summary"]


def _load(path: Path) -> Any:
    from kdvfs.trace import read_json_document

    return read_json_document(path, "measurement")  # its messages say "measurement file '…'"


def write_summary(doc: dict, path: str | Path) -> Path:
    """Write ``doc`` as indented JSON (the layout of the summaries kept under validation/)."""
    from kdvfs.fileio import write_atomic

    return write_atomic(Path(path), (json.dumps(doc, indent=1) + "\n").encode(), "summary")


def _window_s(command: str, default: float = 5.0) -> float:
    """The ``--window`` the measurement command was run with (the recording script's default when absent)."""
    import shlex

    words = shlex.split(command)
    return float(words[words.index("--window") + 1]) if "--window" in words[:-1] else default


def _energy_explanation(stages: dict, step: dict, cap_w: float, carry: dict | None) -> dict:
    """What the data say about the energy gap (the time is predicted, the energy is not)."""
    top = sorted(stages.items(), key=lambda kv: -kv[1]["power_w"])[:2]  # the stages nearest the cap, alone
    alone = ", ".join(f"{k} {v['power_w']:.0f} W at {v['core_mhz_min']}-{v['core_mhz_max']} MHz" for k, v in top)
    out = {
        "limiter": (f"Alone, the GEMM stages hit the {cap_w:.0f} W cap and throttled ({alone}); the whole step "
                    f"averaged {step['power_w']:.0f} W with the SM clock at {step['core_mhz_min']}-"
                    f"{step['core_mhz_max']} MHz. The limiter acts on averaged power, so inside the mixed step the "
                    "GEMMs run closer to the top clock, where each operation costs more energy, than they do alone. "
                    "Isolated replays under-count that."),
    }
    if carry:
        ratios = {k: v["energy_ratio_in_pair_vs_alone"] for k, v in carry["pairs"].items()}
        before, after = carry["step_before"]["energy_per_iter_j"], carry["step_after"]["energy_per_iter_j"]
        between = 100 * ((before + after) / 2 / step["energy_per_iter_j"] - 1)
        within = 100 * abs(after / before - 1)
        heavy = carry["heavy_alone"]
        out["carry_over_refuted"] = (
            "A second observe-only session (scripts/h200_carryover.py, carryover.json) tested whether a light stage "
            "costs more right after a heavy one: it costs less (energy in the pair / alone: "
            + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()) + ").")
        out["session_variation"] = (
            f"The same step measured {step['energy_per_iter_j']:.2f} J in the first session and "
            f"{before:.2f} / {after:.2f} J (before / after) in the second, on another lease of the card; fwd.fc1 alone "
            f"ran at {heavy['power_w']:.0f} W and {heavy['core_mhz_min']}-{heavy['core_mhz_max']} MHz there. Between "
            f"sessions the card's state moves energy by {between:+.1f} %; within a session the before/after steps "
            f"agree within {within:.1f} %.")
    return out


def h200_summary(folder: str | Path, trace_path: str | Path) -> dict:
    """The observe-only H200 session in ``folder`` (``h200_measurements.json``, optional ``carryover.json``) with the
    bf16 trace recorded in it.

    Isolated and summed (the study's assumption): each stage replayed alone at the card's own clocks, the stages'
    per-iteration time and energy summed, against the whole step measured the same way. Per-kernel values split a
    stage by each kernel's share of its recorded kernel time. Live no-op switching at the step's stage boundaries:
    the extra time and energy per boundary against the simulator's stall for the same mechanism at the card's idle
    power.
    """
    from kdvfs.gpus import SwitchModel, get_gpu
    from kdvfs.switching import SwitchCosts
    from kdvfs.trace import load_trace, stages_of

    folder = Path(folder)
    m = _load(folder / "h200_measurements.json")
    cpath = folder / "carryover.json"
    carry = _load(cpath) if cpath.exists() else None
    trace = load_trace(trace_path)
    st = m["stages"]
    pred_t = sum(v["time_per_iter_s"] for v in st.values())
    pred_e = sum(v["energy_per_iter_j"] for v in st.values())
    step = m["step"]
    busy = sum(s.time_s for s in trace.segments)  # one layer's recorded kernel time (repeats not applied)
    stage_of = stages_of(trace)
    stage_time: dict[str, float] = {}
    for k, sname in zip(trace.kernels, stage_of):
        stage_time[sname] = stage_time.get(sname, 0.0) + k.time_s
    per_kernel = []
    for key, sname, k in zip(trace.kernel_keys, stage_of, trace.kernels):
        share = k.time_s / stage_time[sname]
        per_kernel.append({"kernel": key, "name": k.name[:80], "stage": sname, "share_of_stage": share,
                           "time_s": st[sname]["time_per_iter_s"] * share,
                           "energy_j": st[sname]["energy_per_iter_j"] * share, "recorded_kernel_time_s": k.time_s})
    live = m["live_noop"]
    base = live["none"]
    spec = get_gpu("h200")
    costs = SwitchCosts.for_gpu(spec)  # the simulator's no-op write: a stall of the mechanism's overhead at idle power
    mech = {}
    for name in ("sync", "callback"):
        if "error" in live.get(name, {"error": 1}):
            continue
        n = live[name]["boundaries_per_step"]
        stall = costs.stall_s(name, SwitchModel(0.0, 0.0))
        mech[name] = {"measured_extra_time_per_switch_s": (live[name]["time_per_iter_s"] - base["time_per_iter_s"]) / n,
                      "measured_extra_energy_per_switch_j": (live[name]["energy_per_iter_j"] - base["energy_per_iter_j"]) / n,
                      "simulated_extra_time_per_switch_s": stall,
                      "simulated_extra_energy_per_switch_j": stall * costs.idle_power_w,
                      "note": "the simulator's overhead constants (kdvfs.switching.SwitchCosts) were set from this "
                              "measurement, so time agrees by construction; energy is the check"}
    return {
        "command": "on the lent H200: python scripts/h200_observe.py OUT --window 5 and python "
                   "scripts/h200_carryover.py OUT --window 5 (both observe-only); here: kdvfs summarize h200",
        "card": m["card"],
        "torch": m["torch"],
        "window_s": _window_s(m.get("command", "")),
        "measured_step_time_s": step["time_per_iter_s"],
        "measured_step_energy_j": step["energy_per_iter_j"],
        "measured_step_power_w": step["power_w"],
        "predicted_step_time_s": pred_t,
        "predicted_step_energy_j": pred_e,
        "time_error_pct": 100 * (pred_t / step["time_per_iter_s"] - 1),
        "energy_error_pct": 100 * (pred_e / step["energy_per_iter_j"] - 1),
        "recorded_kernel_busy_time_per_step_s": busy,
        "note": ("The step is launch-bound: the recorded kernels are busy for "
                 f"{1e3 * busy:.2f} ms of each {1e3 * step['time_per_iter_s']:.2f} ms step (stage-by-stage autograd in "
                 "eager PyTorch leaves the GPU idle between launches). Each isolated stage replay carries the same host "
                 "gaps, so summing isolated stages predicts the step; summing kernel durations alone would not."),
        "energy_explanation": _energy_explanation(st, step, float(m["card"]["power_limit_w"]), carry),
        "stages": {k: {"time_s": v["time_per_iter_s"], "energy_j": v["energy_per_iter_j"], "power_w": v["power_w"],
                       "core_mhz": [v["core_mhz_min"], v["core_mhz_max"]], "window_s": v["time_s"],
                       "counter_steps": v["counter_steps"]} for k, v in st.items()},
        "kernels": per_kernel,
        "live_noop_switching": {"boundaries_per_step": base["boundaries_per_step"], "baseline": base,
                                "sync": live.get("sync"), "callback": live.get("callback"), "per_switch": mech},
    }


def hf_runtime_summary(folder: str | Path) -> dict:
    """The runtime validation in ``folder`` (``runtime-noop.json``, the imported trace and the schedules it ran).

    Measured on the H200: boundaries hit in order, switches per step against the plan, late switches, step time with
    and without the runtime. Predicted (the simulator's fast path with each schedule's own switch model, predictive
    mechanism): the time its switches would cost if the writes were real, against free switching.
    """
    from kdvfs.gpus import SwitchModel, get_gpu
    from kdvfs.model import default_params
    from kdvfs.profile import build_profile
    from kdvfs.runtime_plan import plan_for
    from kdvfs.schedule import load_schedule
    from kdvfs.switching import SwitchCosts
    from kdvfs.trace import load_trace
    from simulator import SimConfig, simulate

    folder = Path(folder)
    run = _load(folder / "runtime-noop.json")
    tr = load_trace(folder / "hf-gpt2-h200.trace.json")
    g = get_gpu("h200")
    prof = build_profile(tr, g, default_params(tr, g))
    out: dict[str, Any] = {
        "device": run.get("device"), "model": run["model"], "batch": run["batch"], "seq": run["seq"],
        "torch": run["torch"], "clocks_before_mhz": run.get("clocks_before_mhz"),
        "clocks_after_mhz": run.get("clocks_after_mhz"), "schedules": {}}
    for name, r in run["schedules"].items():
        s = load_schedule(folder / name)
        if s.switch_plan is None or s.predicted is None or s.predicted.ideal_time_s is None:
            raise FormatError(f"{folder / name}: not a boundary schedule with its switch plan and free-switching "
                              "prediction; write it again with `python -m scripts.hf_runtime_inputs`")
        plan = plan_for(tr, s)
        first, last = plan.regions[0], plan.regions[-1]
        wrap = int((first.core_mhz, first.mem_mhz) != (last.core_mhz, last.mem_mhz))
        recs = r["records"]
        sw = s.switch_plan.switch  # host call and transition as planned, no spread
        cfg = SimConfig(mechanism="predictive", switch=sw, costs=SwitchCosts(idle_power_w=g.idle_power_w))
        sim = simulate(tr, prof, s, g, cfg, path="fast")
        # free switching on the same profile (not the prediction stored in the schedule, which a later refit of the
        # card's model leaves behind): the switches' own cost, never negative
        free = simulate(tr, prof, s, g, SimConfig(mechanism="predictive", switch=SwitchModel(0.0, 0.0),
                                                  costs=SwitchCosts(idle_power_w=g.idle_power_w)), path="fast")
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
                          "real_writes_switch_time_pct_vs_free_switching": 100 * (sim.time_s / free.time_s - 1),
                          "schedule_time_change_pct_vs_auto": s.predicted.time_change_pct,
                          "schedule_energy_change_pct_vs_auto": s.predicted.energy_change_pct},
        }
    return out


def measured_collective_powers(meas: dict, idle_w: float) -> dict | None:
    """The collective alone, measured in the same run (``h200x2_ddp --extra``), as the model's idle power ``idle_w``
    plus the increment over the card's idle-after-work power: while transferring (mean over the ranks) and rank 0's
    while mostly waiting; None when the run has no such windows."""
    rs = meas["ranks"]
    if not all("coll_transfer" in r and "coll_wait" in r and "idle" in r for r in rs):
        return None
    r0 = next(r for r in rs if r["rank"] == 0)
    tr = sum(r["coll_transfer"]["mean_power_w"] - r["idle"]["mean_power_w"] for r in rs) / len(rs)
    wait = max(0.0, r0["coll_wait"]["mean_power_w"] - r0["idle"]["mean_power_w"])
    return {"transfer_power_w": idle_w + tr, "wait_power_w": idle_w + wait}


def _check_ddp_measurements(meas: Any, path: Path) -> None:
    """``measurements.json`` as ``scripts.h200x2_ddp`` writes it: per rank, its DDP windows (step time and energy)
    and the window without gradient sync; refused in one line naming what is missing, not a KeyError."""
    def need(obj: Any, keys: tuple[str, ...], where: str) -> None:
        if not isinstance(obj, dict):
            raise FormatError(f"{path}: {where} is not a JSON object; give the measurements.json that "
                              "`python -m scripts.h200x2_ddp` wrote")
        miss = [k for k in keys if k not in obj]
        if miss:
            raise FormatError(f"{path}: {where} has no {', '.join(repr(k) for k in miss)}; give the measurements.json "
                              "that `python -m scripts.h200x2_ddp` wrote")

    need(meas, ("ranks",), "the document")
    if not isinstance(meas["ranks"], list) or not meas["ranks"]:
        raise FormatError(f"{path}: 'ranks' must be a non-empty list (one entry per rank); the run wrote no rank's "
                          "measurements")
    for i, r in enumerate(meas["ranks"]):
        need(r, ("rank", "windows", "no_sync"), f"ranks[{i}]")
        if not isinstance(r["windows"], list) or not r["windows"]:
            raise FormatError(f"{path}: rank {r['rank']} has no DDP measurement window ('windows' is empty); the "
                              "run stopped before measuring; record it again")
        for j, w in enumerate(r["windows"]):
            need(w, ("step_time_s", "step_energy_j", "time_s", "steps", "mean_power_w"),
                 f"rank {r['rank']}'s windows[{j}]")
        need(r["no_sync"], ("step_time_s", "step_energy_j"), f"rank {r['rank']}'s no_sync window")


def h200x2_comparison(folder: str | Path, gpu: str = "h200", command: str = "",
                      measured_collectives: bool = False, limiter: bool | None = None,
                      ranks_trace: str | Path | None = None) -> dict:
    """The DDP step measured on two GPUs (``measurements.json``, ``rank*.kineto.json.gz`` in ``folder``) against the
    multi-rank replay (``simulator.ranks``), each kernel's power from the card's model (nothing fitted to these
    measurements). Writes the imported multi-rank trace to ``ranks_trace`` (default: ``ranks.trace.json.gz`` beside
    the files).
    ``measured_collectives``: the NCCL kernels at the collective-alone powers measured in the same run (transfer;
    waiting) instead of the kernel model's collective category. ``limiter``: replay under the card's windowed power
    limiter (``simulator.ranks.rank_powers(limiter=True)``, no instantaneous cap) rather than each kernel throttled
    alone; ``None`` (the default): where the card has a fitted limiter. The other replay is reported beside it."""
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import limiter_for
    from kdvfs.multirank import import_ranks, save_multitrace
    from simulator.ranks import build_graph, rank_powers, replay_ranks

    folder = Path(folder)
    meas = _load(folder / "measurements.json")
    _check_ddp_measurements(meas, folder / "measurements.json")
    files = sorted(f for f in folder.glob("rank*.kineto.json.gz") if not f.name.endswith(".shapes.kineto.json.gz"))
    if not files:
        raise InputError(f"{folder}: no rank*.kineto.json.gz (one PyTorch profiler trace per rank, as "
                         "`python -m scripts.h200x2_ddp` writes them beside measurements.json); give the run's folder")
    twins = [f.with_name(f.name.replace(".kineto.json.gz", ".shapes.kineto.json.gz")) for f in files]
    have = [t.exists() for t in twins]
    if any(have) and not all(have):
        raise InputError(f"{folder}: shape-recorded twins for some ranks only (missing: "
                         f"{', '.join(t.name for t, h in zip(twins, have) if not h)}); restore them, or remove every "
                         "rank*.shapes.kineto.json.gz to take the work from the timing traces themselves")
    # the timing from steps recorded without op shapes, the work from their shape-recorded twins where the run has them
    mt = import_ranks(files, name="gpt2-ddp-h200x2", work_from=twins if all(have) else None)
    measured = sorted(int(m["rank"]) for m in meas["ranks"])
    if measured != list(range(mt.world_size)):
        raise InputError(f"{folder}: measurements.json holds ranks {measured}, the traces {mt.world_size} ranks "
                         f"(0…{mt.world_size - 1}); give the folder of one run, its measurements and traces together")
    save_multitrace(mt, Path(ranks_trace) if ranks_trace is not None else folder / "ranks.trace.json.gz")
    spec = get_gpu(gpu)
    coll = measured_collective_powers(meas, spec.idle_power_w) if measured_collectives else None
    if measured_collectives and coll is None:
        raise FormatError(f"{folder}: no collective-alone windows (record with `python -m scripts.h200x2_ddp --extra`); "
                          "drop --measured-collectives")
    use_lim = (limiter_for(spec) is not None) if limiter is None else limiter
    graph = build_graph(mt)

    def replay(lim: bool):
        powers = rank_powers(mt, spec, limiter=lim)
        if coll:
            for r, t in enumerate(mt.ranks):
                is_c = np.array([t.kernels[i].category == "collective" for i in t.instances()])
                powers[r] = np.where(is_c, coll["transfer_power_w"], powers[r])
        return replay_ranks(mt, spec, graph=graph, powers=powers, wait_power_w=coll["wait_power_w"] if coll else None,
                            cap_w=float("inf") if lim else None)

    sim = replay(use_lim)
    other = replay(not use_lim) if limiter_for(spec) is not None else None
    summ = mt.summary()
    rows = []
    for r, m in enumerate(sorted(meas["ranks"], key=lambda x: x["rank"])):
        ddp = list(m["windows"])
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
            **({f"{'isolated' if use_lim else 'limiter'}_energy_error_pct":
                100 * (other.per_gpu_energy_j[r] / e_meas - 1)} if other is not None else {}),
            "trace_span_s": summ["ranks"][r]["span_s"], "trace_kernel_time_s": summ["ranks"][r]["kernel_time_s"],
            "trace_collective_share": sim.collective_time_s[r] / sim.time_s,
            "trace_exposed_collective_share": sim.exposed_collective_s[r] / sim.time_s,
            "measured_no_sync_step_time_s": ns["step_time_s"], "measured_no_sync_step_energy_j": ns["step_energy_j"],
            "measured_communication_cost_share": 1 - ns["step_time_s"] / t_meas,
            "collectives": summ["ranks"][r]["collectives"],
        })
    return {"gpu": gpu, "graph_edges": sim.edges, "collective_powers": coll or "kernel model (collective category)",
            "replay": "under the card's windowed power limiter (steady ceiling per rank, no instantaneous cap)"
                      if use_lim else "each kernel throttled alone at the cap",
            "power_cap_w": spec.cap_w, "model": meas.get("model"), "torch": meas.get("torch"),
            "nccl": meas.get("nccl"), "ranks": rows,
            "targets": {"time_within_5pct": all(abs(x["time_error_pct"]) <= 5 for x in rows),
                        "energy_within_5pct": all(abs(x["energy_error_pct"]) <= 5 for x in rows)},
            "command": command or f"kdvfs summarize h200x2 {folder}"}
