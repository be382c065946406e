"""The H200 experiments' analyses: measurement files and logs of device sessions beside the model and the simulator.

Each function reads what a session wrote and returns the document its script writes (``scripts/``: the scripts are
argument parsing and one call); ``*_lines`` give the lines they print. Nothing is fitted to these measurements.

- :func:`session5_analysis` — session 5's two-H200 run, read from its log, and session 4's step replayed with the
  collective powers it measured (``validation/h200x2/session5/analysis.json``).
- :func:`card_comparison` — DDP runs laid side by side by the card each rank ran on.
- :func:`batch_carry_check` — carrying a schedule to another batch size on the H200 steps
  (``validation/user-findings6/batch_carry.json``).
- :func:`ray_sweep_comparison` — the sweep over two H200s against the single-H200 sweep
  (``validation/ray/h200x2_sweep_compare.json``).
- :func:`fidelity_summary` — the H200 model's fidelity before and after session 5 (``validation/h200/fidelity``).
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

__all__ = ["batch_carry_check", "batch_carry_lines", "card_comparison", "card_lines", "fidelity_lines",
           "fidelity_summary", "parse_session5_log", "ray_sweep_comparison", "ray_sweep_lines", "session5_analysis",
           "session5_lines"]


# ---------------------------------------------------------------------- session 5 (two H200s, from its log)
_S5_STEP = re.compile(r"\[rank (\d)\] (\w+): (\d+) steps in ([\d.]+) s: ([\d.]+) ms, ([\d.]+) J per step, (\d+) W")
_S5_REP = re.compile(r"\[rank (\d)\] (\w+): (\d+) in ([\d.]+) s, ([\d.]+) ms each, (\d+) W")
# which card each rank ran on (PCI bus id), by stage: CUDA_VISIBLE_DEVICES unset, then 1,0 (the log's nvidia-smi
# lines give the two cards' bus ids: GPU 0 00:06.0, GPU 1 00:07.0)
SESSION5_CARDS = {"ddp01": {0: "00:06.0", 1: "00:07.0"}, "ddp10": {0: "00:07.0", 1: "00:06.0"}}


def parse_session5_log(log: str) -> list[dict]:
    """Every window of the session-5 log: the DDP and no-sync steps, and the idle and collective-alone repetitions."""
    rows, stage = [], None
    for line in log.splitlines():
        if line.startswith("== stage "):
            stage = line.split()[2]
            continue
        if stage not in SESSION5_CARDS:
            continue
        for m in _S5_STEP.finditer(line):
            r = int(m[1])
            rows.append({"stage": stage, "rank": r, "card": SESSION5_CARDS[stage][r], "label": m[2], "steps": int(m[3]),
                         "time_s": float(m[4]), "step_time_s": float(m[5]) / 1e3, "step_energy_j": float(m[6]),
                         "mean_power_w": float(m[7])})
        for m in _S5_REP.finditer(line):
            r = int(m[1])
            rows.append({"stage": stage, "rank": r, "card": SESSION5_CARDS[stage][r], "label": m[2], "repetitions": int(m[3]),
                         "time_s": float(m[4]), "per_repetition_s": float(m[5]) / 1e3, "mean_power_w": float(m[6])})
    return rows


def _mean_or_none(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _replay_session4(session4: Path, coll: list[dict] | None) -> list[float]:
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


def session5_analysis(log_path: str | Path, session4: str | Path,
                      command: str = "python -m scripts.h200x2_session5_analysis {log} {session4}") -> dict:
    """Session 5's two-H200 run read from its log (per card: the DDP and no-sync step energies, idle-after-work,
    collective-alone powers) and session 4's recorded step replayed with the model as shipped and with those collective
    powers. ``command`` (``{log}`` and ``{session4}`` filled in) is recorded in the document."""
    session4 = Path(session4)
    rows = parse_session5_log(Path(log_path).read_text())
    cards = sorted({r["card"] for r in rows})
    per_card = {}
    for c in cards:
        mine = [r for r in rows if r["card"] == c]
        per_card[c] = {
            "ddp_step_energy_j": _mean_or_none(r["step_energy_j"] for r in mine if r["label"].startswith("ddp")),
            "ddp_step_energy_by_order_j": {s: _mean_or_none(r["step_energy_j"] for r in mine
                                                    if r["stage"] == s and r["label"].startswith("ddp"))
                                           for s in SESSION5_CARDS},
            "no_sync_step_energy_j": _mean_or_none(r["step_energy_j"] for r in mine if r["label"] == "no_sync"),
            "idle_after_work_w": _mean_or_none(r["mean_power_w"] for r in mine if r["label"] == "idle"),
            "coll_transfer_w": _mean_or_none(r["mean_power_w"] for r in mine if r["label"] == "coll_transfer"),
            # only rank 0's coll_wait is the waiting side (the other rank spins in a sleep kernel)
            "coll_wait_w": _mean_or_none(r["mean_power_w"] for r in mine if r["label"] == "coll_wait" and r["rank"] == 0),
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
    shipped = _replay_session4(session4, None)
    measured_coll = _replay_session4(session4, [inc[c] for c in s4_cards])
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
    return {"command": command.format(log=Path(log_path), session4=session4), "windows": rows,
            "per_card": per_card, "second_card_over_first_pct": spread, "collective_increments_w": inc,
            "replay_session4_step": rows_out}


def session5_lines(doc: dict) -> list[str]:
    """What ``scripts.h200x2_session5_analysis`` prints."""
    out: list[str] = []
    for c, d in doc["per_card"].items():
        out.append(f"card {c}: DDP {d['ddp_step_energy_j']:.2f} J/step (by order {d['ddp_step_energy_by_order_j']}), "
                   f"sync off {d['no_sync_step_energy_j']:.2f} J; idle after work {d['idle_after_work_w']:.0f} W, "
                   f"all-reduces alone {d['coll_transfer_w']:.0f} W, waiting {d['coll_wait_w']}")
    out.append(f"second card over first: {({k: round(v, 2) for k, v in doc['second_card_over_first_pct'].items()})}")
    out.append(f"collective increments over idle-after-work: {doc['collective_increments_w']}")
    for r in doc["replay_session4_step"]:
        out.append(f"rank {r['session4_rank']} ({r['card']}): measured {r['measured_session4_j']:.2f} J (session 4), "
                   f"{r['measured_session5_j']:.2f} J (session 5); simulated {r['simulated_shipped_j']:.2f} J "
                   f"({r['error_shipped_vs_session4_pct']:+.2f} %), with the measured collective power "
                   f"{r['simulated_measured_collective_power_j']:.2f} J ({r['error_measured_collective_vs_session4_pct']:+.2f} %)")
    return out


# ---------------------------------------------------------------------- DDP runs per card
def _mean_or_nan(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def card_comparison(runs: list[Path], gpu: str = "h200", command: str = "python -m scripts.h200x2_cards {runs}") -> dict:
    """The DDP runs laid side by side by the card each rank ran on: measured step energy and power, the step with
    gradient sync off, idle and collective-alone powers where measured, beside each run's replay."""
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
                   "step_time_s": _mean_or_nan(x["step_time_s"] for x in w),
                   "step_energy_j": _mean_or_nan(x["step_energy_j"] for x in w),
                   "power_w": _mean_or_nan(x["mean_power_w"] for x in w),
                   "sm_mhz": _mean_or_nan(x.get("mean_sm_mhz", float("nan")) for x in w),
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
        d["no_sync_step_energy_j"] = _mean_or_nan(x["no_sync_step_energy_j"] for x in mine)
        d["ddp_step_energy_j"] = _mean_or_nan(x["step_energy_j"] for x in mine)
    return {"command": command.format(runs=" ".join(str(r) for r in runs)), "gpu": gpu, "rows": rows,
            "by_card": by_card}


def card_lines(doc: dict) -> list[str]:
    """What ``scripts.h200x2_cards`` prints."""
    out: list[str] = []
    for x in doc["rows"]:
        extra = "".join(f", {k[:-8]} {x[k]:.0f} W" for k in ("idle_power_w", "coll_transfer_power_w",
                                                              "coll_wait_power_w") if k in x)
        out.append(f"{x['run']} rank {x['rank']} on {x['card']}: DDP {x['step_energy_j']:.2f} J/step "
                   f"({x['power_w']:.0f} W, SM {x['sm_mhz']:.0f} MHz, min {x['min_sm_mhz']}, {x['max_temp_c']} °C), "
                   f"sync off {x['no_sync_step_energy_j']:.2f} J; simulated {x['simulated_step_energy_j']:.2f} J "
                   f"({x['energy_error_pct']:+.2f} %)"
                   + (f", with the measured collective powers {x['simulated_measured_collectives_step_energy_j']:.2f} J "
                      f"({x['measured_collectives_energy_error_pct']:+.2f} %)"
                      if "measured_collectives_energy_error_pct" in x else "") + extra)
    return out


# ---------------------------------------------------------------------- a schedule carried to another batch
BATCH_PAIRS = (("pythia-410m-b4", "pythia-410m"), ("mistral-0.4b-b2", "mistral-0.4b"), ("llama-0.5b-b2", "llama-0.5b"),
               ("bert-large-b8", "bert-large"), ("gpt2-medium-b4", "gpt2-medium"))
BATCH_SLACK_PCT = 1.0


def batch_carry_check(steps: str | Path) -> dict:
    """Each small-batch H200 step of ``steps`` (``validation/h200/steps``) carried to its large batch, against the
    model on the large trace itself: auto, and the 1 % slack kernel-level schedule (free switching). Nothing fitted."""
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
    steps = Path(steps)

    def problem(name):
        t = import_kineto(steps / f"{name}.kineto.json.gz", name=name).trace
        return Problem(t, build_profile(t, spec, default_params(t, spec)))

    rows = []
    for small, large in BATCH_PAIRS:
        ps, pl = problem(small), problem(large)
        batch = pl.trace.batch_size
        auto_c = simulate_carried(ps, spec, allocate_schedule(ps, "static", auto=True), free, batch, path="fast")
        ideal_s = optimize(ps, "waste", BATCH_SLACK_PCT, "kernel", "global")
        ideal_l = optimize(pl, "waste", BATCH_SLACK_PCT, "kernel", "global")
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
    return {"gpu": spec.name, "slack_pct": BATCH_SLACK_PCT, "command": "python -m scripts.h200_batch_carry_check",
            "note": "same kernel model on both sides (isolated throttling, no limiter); nothing fitted", "pairs": rows}


def batch_carry_lines(doc: dict) -> list[str]:
    """What ``scripts.h200_batch_carry_check`` prints (before its last line)."""
    out: list[str] = []
    for r in doc["pairs"]:
        out.append(f"{r['small']} -> batch {r['batch_large']}: auto time {r['auto_time_carried_vs_model_pct']:+.1f} %, "
                   f"energy {r['auto_energy_carried_vs_model_pct']:+.1f} % vs the model on {r['large']}; 1 % ideal carried "
                   f"{r['ideal_carried_time_pct']:+.2f} % time / {r['ideal_carried_energy_pct']:+.1f} % energy, on its own "
                   f"trace {r['ideal_own_time_pct']:+.2f} % / {r['ideal_own_energy_pct']:+.1f} %")
    return out


# ---------------------------------------------------------------------- the Ray sweep over two H200s
def _sweep_per_unit(path: Path) -> dict[str, dict]:
    """Per workload unit of a sweep file: its kernel rows' time and energy summed, power energy-weighted."""
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


def ray_sweep_comparison(two: str | Path, one: str | Path, trace: str = "gpt3xl-torch-h200-bf16", gpus: int = 2,
                         command: str = "python -m scripts.ray_sweep_compare {two} {one}") -> dict:
    """The observe-only sweep dealt over ``gpus`` GPUs (unit i on GPU i mod gpus) against a single-GPU sweep of the
    same trace: per unit, time, power and energy in each and their ratios; the ratios' mean per GPU."""
    from kdvfs.bundled import load_trace_by_name
    from kdvfs.trace import stages_of

    order: list[str] = []
    for s in stages_of(load_trace_by_name(trace)):
        if s not in order:
            order.append(s)
    a, b = _sweep_per_unit(Path(two)), _sweep_per_unit(Path(one))
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
    return {"command": command.format(two=Path(two), one=Path(one)), "trace": trace, "units": units, "by_gpu": by_gpu}


def ray_sweep_lines(doc: dict) -> list[str]:
    """What ``scripts.ray_sweep_compare`` prints."""
    out: list[str] = []
    for u in doc["units"]:
        out.append(f"GPU {u['gpu']} {u['unit']:10s} {1e3 * u['time_s']:8.3f} ms {u['power_w']:6.1f} W "
                   f"({u['core_mhz']:.0f} MHz) | single H200 {1e3 * u['single_time_s']:8.3f} ms {u['single_power_w']:6.1f} W "
                   f"| ratio time {u['time_ratio']:.3f} power {u['power_ratio']:.3f} energy {u['energy_ratio']:.3f}")
    for g, d in doc["by_gpu"].items():
        out.append(f"GPU {g}: {d['units']} units, mean ratio time {d['time_ratio']:.3f}, power {d['power_ratio']:.3f}, "
                   f"energy {d['energy_ratio']:.3f}")
    return out


# ---------------------------------------------------------------------- the H200 model's fidelity (session 5)
def _classes(fit: dict, zoo: dict[str, str]) -> dict:
    # the class of a zoo kernel: GEMMs by math, then the category; entries of the session-5 sets by role
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


def fidelity_summary(root: str | Path, zoo_categories: dict[str, str]) -> dict:
    """The H200 model's fidelity before and after session 5: zoo kernels per class (``zoo_categories``: each zoo
    kernel's category by name, for fits that did not record it) and the held-out steps, from the stored fits and step
    checks under ``root`` (``validation/h200/fidelity/before/`` = main at a6a2ddc; the current
    ``validation/h200/characterization/fit.json`` and ``validation/h200/steps_check.json``)."""
    root = Path(root)
    fid = root / "validation/h200/fidelity"
    before = json.loads((fid / "before/fit.json").read_text())
    after = json.loads((root / "validation/h200/characterization/fit.json").read_text())
    sb = json.loads((fid / "before/steps_check.json").read_text())
    sa = json.loads((root / "validation/h200/steps_check.json").read_text())
    cb, ca = _classes(before, zoo_categories), _classes(after, zoo_categories)
    classes = {c: {"before": _row(cb[c]) if c in cb else None, "after": _row(ca[c])} for c in ca}
    keys = ("kernels", "meet_clock", "meet_power", "meet_both")
    zoo = {"before": {"all": {k: before["fit"][k] for k in keys}, "heldout": {k: before["heldout"]["test"][k] for k in keys}},
           "after": {"all": {k: after["fit"][k] for k in keys}, "first_file": {k: after["fit_first_file"][k] for k in keys},
                     "heldout": {k: after["heldout"]["test"][k] for k in keys}}}

    gpu_t = {st["model"]: st["step_time_gpu_median_s"]
             for st in json.loads((root / "validation/h200/steps/steps.json").read_text())["steps"] if "error" not in st}

    def steps(doc):
        out = {}
        for r in doc["steps"]:
            if "error" not in r:
                continue
            e = r["error"]
            lim_t = r["predicted"]["limiter"]["time_s"]
            lim = r["predicted"]["limiter"]
            gap_s = r["predicted"].get("limiter_with_gaps", {}).get("gap_s", 0.0)
            # the step's own gap power where the check priced its gaps by temperature (session 9), else the report's
            gap_w = r["predicted"].get("thermal", {}).get("gap_power_w", doc["gap_power_w"] or 0.0)
            implied = (r["measured"]["energy_j"] - gap_s * gap_w) / lim["time_s"]
            out[r["model"]] = {"energy_pct": round(e["limiter_with_gaps"]["energy_pct"], 2),
                               "kernel_power_predicted_w": round(lim["energy_j"] / lim["time_s"], 1),
                               "kernel_power_implied_w": round(implied, 1),
                               "median_clock_pct": round(e["limiter_with_gaps"]["median_clock_pct"], 2),
                               "kernel_time_vs_gpu_time_pct": round(100 * (lim_t / gpu_t[r["model"]] - 1), 2),
                               "isolated_with_gaps_energy_pct": round(e["isolated_with_gaps"]["energy_pct"], 2)}
        return {"gap_power_w": doc["gap_power_w"], "met": doc["met"], "steps": out}

    return {"zoo": zoo, "classes": classes, "steps": {"before": steps(sb), "after": steps(sa)}}


def fidelity_lines(doc: dict) -> list[str]:
    """The markdown tables ``scripts.h200_fidelity_report`` prints."""
    out: list[str] = []
    out.append("| class | kernels | mean power error % before | after | mean abs power error % before | after | both targets before | after |")
    out.append("|---|---|---|---|---|---|---|---|")
    classes = doc["classes"]
    for c, v in classes.items():
        b, a = v["before"], v["after"]
        out.append(f"| {c} | {a['kernels']} | {b['mean_power_error_pct'] if b else '–'} | {a['mean_power_error_pct']} | "
                   f"{b['mean_abs_power_error_pct'] if b else '–'} | {a['mean_abs_power_error_pct']} | "
                   f"{str(b['meet_both']) + '/' + str(b['kernels']) if b else '–'} | {a['meet_both']}/{a['kernels']} |")
    out.append("")
    out.append("| step | energy % before | after | median clock % before | after | kernels' time under the limiter vs the GPU time per step (CUDA events) %, before | after | kernels' average power predicted (W) | implied by the measurement with gaps at the gap power (W) |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    B, A = doc["steps"]["before"]["steps"], doc["steps"]["after"]["steps"]
    for m, a in A.items():
        b = B.get(m)
        out.append(f"| {m} | {b['energy_pct'] if b else '–'} | {a['energy_pct']} | {b['median_clock_pct'] if b else '–'} | "
                   f"{a['median_clock_pct']} | {b['kernel_time_vs_gpu_time_pct'] if b else '–'} | {a['kernel_time_vs_gpu_time_pct']} | "
                   f"{a['kernel_power_predicted_w']} | {a['kernel_power_implied_w']} |")
    return out
