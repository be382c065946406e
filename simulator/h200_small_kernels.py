"""Issue 12, session 8: which kernels of the recorded H200 training steps carry the model's energy over-prediction,
and what they share (launch grid against the SM count, duration, achieved rate, category).

For every step of ``validation/h200/steps`` (23), ``steps7`` and ``steps8`` (10 more; all seen, none fitted): check it
as ``kdvfs validate-steps`` does with the model of ``--fit`` (default: session 7's, the model this diagnosis was made
for), take that model's kernel parameters (``default_params``), evaluate each kernel's power at the step's measured
median SM clock (no cap: the clock the step ran at), and put the kernels in classes by their launch grid
(``kdvfs.occupancy.sm_fraction``: the share of the 132 SMs with a resident block), duration and achieved FLOP/byte
rate. The step's predicted kernel energy is the check's (``limiter_with_gaps``, less its host gaps at the gap power);
each class's share of it follows from the per-kernel evaluation. The measured kernel energy is the step's NVML energy
less the same host gaps at the same gap power. Nothing here is fitted to the model; the least-squares split of the
excess over classes (across the 33 steps) is a diagnosis only.

``diagnosis`` returns the document and ``diagnosis_lines`` its text; ``python -m scripts.h200_small_kernels [--fit FIT]
[-o validation/h200/small_kernels/diagnosis.json]`` writes the one and prints the other (about two minutes).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

__all__ = ["CLASSES", "FAMILY_STEPS", "FOLDERS", "GROUPS", "class_table", "diagnosis", "diagnosis_lines", "split_excess",
           "step_rows"]

log = logging.getLogger(__name__)

FOLDERS = ("validation/h200/steps", "validation/h200/steps7", "validation/h200/steps8")
CLASSES = ("few SMs (< 1/4 of the SMs)", "part of the SMs (1/4 … 1)", "full grid, short (< 10 µs)",
           "full grid, low rate (< 25 % of peak)", "full grid, GEMM/attention", "full grid, other", "no grid")


def _classify(k, frac: float | None, util: float) -> int:
    if frac is None:
        return 6
    if frac < 0.25:
        return 0
    if frac < 1.0:
        return 1
    if k.time_s < 10e-6:
        return 2
    if util < 0.25:
        return 3
    if k.category in ("gemm", "attention"):
        return 4
    return 5


def _family(name: str) -> str:
    """A kernel's family: its name without template arguments and namespaces (``vectorized_layer_norm_kernel``)."""
    head = name.replace("(anonymous namespace)::", "").split("<", 1)[0].split("(", 1)[0].strip()
    head = head.removeprefix("void ").strip()
    base = head.rsplit("::", 1)[-1]
    if base in ("vectorized_elementwise_kernel", "elementwise_kernel", "unrolled_elementwise_kernel") and "<" in name:
        # the functor says what the elementwise kernel does (GeluCUDAKernelImpl, direct_copy_kernel_cuda, …)
        for part in name.split("at::native::")[1:]:
            fn = part.split("<", 1)[0].split(",", 1)[0].split("(", 1)[0].strip(" >")
            if fn and not fn.startswith(("vectorized", "elementwise", "unrolled", "gpu_kernel", "(anonymous")):
                return f"{base}: {fn}"
    return base


def step_rows(root: Path, fit_path: Path) -> list[dict]:
    from kdvfs.calibrate_h200 import spec_from_fit
    from kdvfs.gpus import AUTO
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params, evaluate
    from kdvfs.occupancy import sm_fraction
    from simulator.stepcheck import check_steps

    fit = json.loads(fit_path.read_text())
    spec = spec_from_fit(fit)
    out = []
    for folder in FOLDERS:
        gap_w = float(fit["params"]["gap_power_w"])
        check = check_steps(root / folder, spec, gap_power_w=gap_w)  # as `kdvfs validate-steps` with this fit
        for st in check["steps"]:
            if "measured" not in st:
                continue
            m = st["model"]
            tr = import_kineto(root / folder / f"{m}.kineto.json.gz", name=m).trace
            n = len(tr.kernels)
            p = default_params(tr, spec)
            f = float(st["measured"]["median_core_mhz"])
            ev = evaluate(spec, p, np.full(n, f), np.full(n, AUTO), kernel_index=np.arange(n), cap_w=np.inf)
            lw = st["predicted"]["limiter_with_gaps"]
            gap_e = float(lw.get("gap_s", 0.0)) * gap_w
            pred_k = float(lw["energy_j"]) - gap_e
            meas_k = float(st["measured"]["energy_j"]) - gap_e
            e = tr.repeats * ev.energy_j
            scale = pred_k / e.sum()  # the per-kernel split of the official (limiter) prediction
            t = tr.repeats * tr.times_s
            cls_t, cls_e, cls_n = np.zeros(len(CLASSES)), np.zeros(len(CLASSES)), np.zeros(len(CLASSES), int)
            fam: dict[str, dict] = {}
            for i, k in enumerate(tr.kernels):
                frac = sm_fraction(k.grid, k.block)
                peak = spec.peak_flops(k.math or "simt") * f / spec.boost_core_mhz
                util = max((k.flops or 0) / (peak * k.time_s), (k.bytes or 0) / (spec.mem_bandwidth_gbs[-1] * 1e9 * k.time_s))
                c = _classify(k, frac, util)
                cls_t[c] += t[i]
                cls_e[c] += e[i] * scale
                cls_n[c] += 1
                g = fam.setdefault(_family(k.name), {"time_s": 0.0, "energy_j": 0.0, "sm_time": 0.0, "util_time": 0.0,
                                                     "short_time": 0.0, "category": k.category})
                g["time_s"] += t[i]
                g["energy_j"] += e[i] * scale
                g["sm_time"] += t[i] * (1.0 if frac is None else frac)
                g["util_time"] += t[i] * min(util, 1.0)
                g["short_time"] += t[i] * (k.time_s < 10e-6)
            top = sorted(fam.items(), key=lambda kv: -kv[1]["time_s"])[:12]
            families = [{"family": nm, "category": g["category"], "time_share": g["time_s"] / t.sum(),
                         "model_power_w": g["energy_j"] / g["time_s"], "mean_sm_fraction": g["sm_time"] / g["time_s"],
                         "mean_achieved_rate": g["util_time"] / g["time_s"], "short_share": g["short_time"] / g["time_s"]}
                        for nm, g in top]
            out.append({"folder": folder, "model": m, "median_core_mhz": f,
                        "kernel_time_s": float(t.sum()), "predicted_kernel_energy_j": pred_k,
                        "measured_kernel_energy_j": meas_k, "excess_pct": 100 * (pred_k / meas_k - 1),
                        "step_energy_error_pct": st["error"]["limiter_with_gaps"]["energy_pct"],
                        "families": families, "classes": {CLASSES[c]: {"kernels": int(cls_n[c]), "time_share": float(cls_t[c] / t.sum()),
                                                 "model_power_w": float(cls_e[c] / cls_t[c]) if cls_t[c] else None,
                                                 "model_energy_j": float(cls_e[c])} for c in range(len(CLASSES))}})
    return out


def split_excess(rows: list[dict]) -> dict:
    """Bounded least squares, across the steps, of each step's excess (predicted − measured kernel energy, relative
    to the measured) over the classes' predicted energies: the share of each class's model energy that is too much
    (bounded to ±1; a diagnosis, nothing fitted)."""
    from scipy.optimize import lsq_linear

    a = np.array([[r["classes"][c]["model_energy_j"] for c in CLASSES] for r in rows])
    y = np.array([r["predicted_kernel_energy_j"] - r["measured_kernel_energy_j"] for r in rows])
    w = 1.0 / np.array([r["measured_kernel_energy_j"] for r in rows])  # each step in relative terms
    used = [j for j in range(len(CLASSES)) if a[:, j].sum() > 0]
    res = lsq_linear(a[:, used] * w[:, None], y * w, bounds=(-1.0, 1.0))
    return {CLASSES[j]: float(c) for j, c in zip(used, res.x)}


def class_table(rows: list[dict]) -> list[dict]:
    """Per class over ``rows``: its share of the kernels' time, the model's time-weighted power, and the power the
    measured energy implies for it if the whole excess of each step were in that class (the bound on what a
    structure acting on that class alone must reach)."""
    out = []
    tot_t = sum(r["kernel_time_s"] for r in rows)
    for c in CLASSES:
        t = sum(r["classes"][c]["time_share"] * r["kernel_time_s"] for r in rows)
        e = sum(r["classes"][c]["model_energy_j"] for r in rows)
        ex = sum(r["predicted_kernel_energy_j"] - r["measured_kernel_energy_j"] for r in rows)
        out.append({"class": c, "kernel_time_share": t / tot_t if tot_t else 0.0,
                    "model_power_w": e / t if t else None,
                    "implied_power_w_if_all_excess_here": (e - ex) / t if t else None})
    return out


FAMILY_STEPS = ("convnext-tiny", "swin-tiny", "bloom-560m", "deberta-base", "falcon-0.3b")
GROUPS = {"the 23 steps (validation/h200/steps)": lambda r: r["folder"] == "validation/h200/steps",
          "steps7 + steps8 (10 steps, seen)": lambda r: r["folder"] != "validation/h200/steps",
          "ConvNeXt-T and Swin-T at batch 64": lambda r: r["model"] in ("convnext-tiny", "swin-tiny"),
          "BLOOM, batch 8 and 16": lambda r: r["model"].startswith("bloom")}


def diagnosis(root: Path, fit: str, command: str) -> dict:
    """The diagnosis document (``validation/h200/small_kernels/diagnosis.json``): every step's rows with the model of
    ``fit`` (a path relative to ``root``, the checkout), the excess split over classes, the class tables per group and
    how many steps' energy is within 3 %. ``command`` is recorded as the command that made it."""
    rows = step_rows(root, root / fit)
    split = split_excess(rows)
    tables = {g: class_table([r for r in rows if sel(r)]) for g, sel in GROUPS.items()}
    doc = {"command": command, "fit": fit, "classes": list(CLASSES), "steps": rows,
           "excess_share_by_class": split, "class_tables": tables,
           "note": "steps7 and steps8 are seen here (looked at to find the structure); nothing is fitted to any step"}
    met = {f: sum(abs(r["step_energy_error_pct"]) <= 3.0 for r in rows if r["folder"] == f) for f in FOLDERS}
    doc["energy_within_3pct"] = met
    log.info("small-kernel diagnosis of %s: %d steps, energy within 3 %%: %s", fit, len(rows), met)
    return doc


def diagnosis_lines(doc: dict) -> list[str]:
    """The diagnosis as text (``diagnosis.txt``): the steps' excess and class shares, the excess split, the kernel
    families of ``FAMILY_STEPS``' steps and the class table of each group."""
    rows, split, tables = doc["steps"], doc["excess_share_by_class"], doc["class_tables"]
    out = [f"steps' energy within 3 % with this fit: {doc['energy_within_3pct']}",
           "step | kernel energy excess % | time share per class % | model W per class"]
    for r in rows:
        ts = " ".join(f"{100 * r['classes'][c]['time_share']:5.1f}" for c in CLASSES)
        pw = " ".join(f"{r['classes'][c]['model_power_w'] or 0:4.0f}" for c in CLASSES)
        out.append(f"{r['model']:20s} {r['excess_pct']:+6.2f} | {ts} | {pw}")
    out.append(f"excess share by class: { {k: round(v, 3) for k, v in split.items()} }")
    for r in rows:
        if r["model"] in FAMILY_STEPS:
            out.append(f"\n{r['model']} ({r['folder']}): kernel energy {r['excess_pct']:+.2f} % over the measurement\n"
                       "| kernel family | category | share of kernel time % | SMs busy (time-weighted) | achieved share "
                       "of roofline | share < 10 µs | model W |\n|---|---|---|---|---|---|---|")
            for fm in r["families"]:
                out.append(f"| {fm['family'][:60]} | {fm['category']} | {100 * fm['time_share']:.1f} | "
                           f"{fm['mean_sm_fraction']:.2f} | {fm['mean_achieved_rate']:.2f} | {fm['short_share']:.2f} | "
                           f"{fm['model_power_w']:.0f} |")
    for g, tab in tables.items():
        out.append(f"\n{g}\n| class | share of kernel time % | model W | implied W if all the excess were here |"
                   "\n|---|---|---|---|")
        for t in tab:
            if t["kernel_time_share"]:
                out.append(f"| {t['class']} | {100 * t['kernel_time_share']:.1f} | {t['model_power_w']:.0f} | "
                           f"{t['implied_power_w_if_all_excess_here']:.0f} |")
    return out
