"""Issue 12, session 9: why the H200 model under-predicts step energy — host gaps, temperature, gap lengths.

Reads only stored files (no model is fitted here): each step-check report (``kdvfs validate-steps -o``) beside its
``steps.json`` and Kineto traces, and the zoo's characterisation files. Per step: the energy error, the share of the
step the GPU idles (measured step time less the recorded kernels), the temperature and average power the step was
measured at, the lengths of the idle intervals between kernels in its trace, and the energy deficit split by least
squares into watts per second of gap and per second of kernels. For the zoo: the entries' temperature against their
power (the operating point), the gap entries against temperature, and the fit's power residuals against temperature
within each file.

``thermal_diagnosis`` returns the document; ``python -m scripts.h200_thermal_diagnosis [-o
validation/h200/thermal/diagnosis.json]`` writes it and prints ``diagnosis_lines``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

__all__ = ["CHECKS", "diagnosis_lines", "gap_lengths", "step_rows", "thermal_diagnosis", "zoo_temperature"]

CHECKS = (("steps", "validation/h200/steps_check.json", "validation/h200/steps"),
          ("steps7", "validation/h200/steps7/steps_check.json", "validation/h200/steps7"),
          ("steps8", "validation/h200/steps8/steps_check.json", "validation/h200/steps8"),
          ("steps9", "validation/h200/steps9/steps_check_session10.json", "validation/h200/steps9"))
BINS_US = ((0.0, 10.0), (10.0, 100.0), (100.0, 1000.0), (1000.0, float("inf")))


def gap_lengths(kineto: Path) -> dict:
    """The idle intervals between the GPU activities (kernels, memcpy, memset; streams merged) of a Kineto trace:
    their count, total (s) and the share of the idle time in intervals of < 10 µs, 10–100 µs, 0.1–1 ms, > 1 ms.
    A profiled step runs slower than the measured one (the profiler's own host time), so these lengths are upper
    bounds; their mix, not their sum, is the point."""
    with gzip.open(kineto) as f:
        doc = json.loads(f.read())
    ev = sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
                 ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    iv: list[list[float]] = []
    for e in ev:
        a, b = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if iv and a <= iv[-1][1]:
            iv[-1][1] = max(iv[-1][1], b)
        else:
            iv.append([a, b])
    g = np.array([iv[i + 1][0] - iv[i][1] for i in range(len(iv) - 1)])
    tot = float(g.sum())
    return {"count": int(len(g)), "total_s": tot * 1e-6,
            "share_by_length": {f"{lo:g}-{hi:g}us": round(float(g[(g >= lo) & (g < hi)].sum() / tot), 3) if tot else 0.0
                                for lo, hi in BINS_US}}


def step_rows(root: Path, checks=CHECKS) -> list[dict]:
    out = []
    for name, check, folder in checks:
        ck = json.loads((root / check).read_text())
        meas = {s["model"]: s for s in json.loads((root / folder / "steps.json").read_text())["steps"]}
        for r in ck["steps"]:
            if "measured" not in r:
                continue
            p = r["predicted"]["limiter_with_gaps"]
            m = meas[r["model"]]
            t, g = float(r["measured"]["time_s"]), float(p["gap_s"])
            out.append({"set": name, "model": r["model"], "energy_pct": round(r["error"]["limiter_with_gaps"]["energy_pct"], 2),
                        "clock_pct": round(r["error"]["limiter_with_gaps"]["median_clock_pct"], 2),
                        "gap_share": round(g / t, 3), "temperature_c": m.get("temperature_c"),
                        "power_w": round(float(m["power_w"]), 1), "step_s": t, "gap_s": g,
                        "deficit_j": float(r["measured"]["energy_j"]) - float(p["energy_j"]),
                        "gap_power_w": r["predicted"].get("thermal", {}).get("gap_power_w", ck.get("gap_power_w")),
                        "gaps": gap_lengths(root / folder / m.get("trace", f"{r['model']}.kineto.json.gz"))})
    return out


def _split(rows: list[dict]) -> dict:
    """The energy deficit as ``a`` W per second of gap + ``b`` W per second of kernels (least squares), and the
    correlations of the error with gap share, temperature and power."""
    g = np.array([r["gap_s"] for r in rows])
    t = np.array([r["step_s"] for r in rows])
    d = np.array([r["deficit_j"] for r in rows])
    a, b = np.linalg.lstsq(np.c_[g, t - g], d, rcond=None)[0]
    e = -np.array([r["energy_pct"] for r in rows])  # > 0: under-predicted
    c = {k: round(float(np.corrcoef(e, [float(r[k]) for r in rows])[0, 1]), 2)
         for k in ("gap_share", "temperature_c", "power_w")}
    return {"steps": len(rows), "deficit_w_per_gap_s": round(float(a), 1), "deficit_w_per_kernel_s": round(float(b), 1),
            "mean_deficit_w": round(float(np.mean(d / t)), 1), "corr_underprediction_with": c,
            "energy_within_3pct": int(sum(abs(r["energy_pct"]) <= 3 for r in rows))}


def zoo_temperature(root: Path, fit_path: str = "validation/h200/characterization/fit.json") -> dict:
    """The zoo entries' (power, temperature): the operating point's line, the gap entries, and the stored fit's power
    residuals against temperature (W/°C, pooled over the files with each file's own offset)."""
    from kdvfs.calibrate_h200 import load_rows
    from kdvfs.thermal import fit_gap_line, fit_operating_point

    fit = json.loads((root / fit_path).read_text())
    data = fit["data"] if isinstance(fit["data"], list) else [fit["data"]]
    rows, gaps, _, _ = load_rows([root / p for p in data])
    amb, r = fit_operating_point(rows + gaps)
    pk = {o["name"]: o for o in fit["fit"]["per_kernel"]}
    ok = [x for x in rows if x["name"] in pk and isinstance(x.get("temperature_c"), (int, float))]
    files = sorted({x["file"] for x in ok})
    design = np.array([[float(x["temperature_c"])] + [float(x["file"] == f) for f in files] for x in ok])
    resid = np.array([pk[x["name"]]["measured_power_w"] - pk[x["name"]]["predicted_power_w"] for x in ok])
    slope = float(np.linalg.lstsq(design, resid, rcond=None)[0][0])
    g0, ref, k = fit_gap_line(gaps)
    return {"operating_point": {"ambient_c": round(amb, 2), "c_per_w": round(r, 5)},
            "gap_entries": [{"name": x["name"], "file": x["file"], "power_w": round(float(x["power_w"]), 2),
                             "temperature_c": x.get("temperature_c")} for x in gaps],
            "gap_line": {"gap_ref_w": round(g0, 2), "ref_c": round(ref, 2), "gap_w_per_c": round(k, 3)},
            "fit_residual_w_per_c_within_files": round(slope, 2), "fit": fit_path,
            "kernels_temperature_c": [float(np.min([x["temperature_c"] for x in ok])),
                                      float(np.median([x["temperature_c"] for x in ok])),
                                      float(np.max([x["temperature_c"] for x in ok]))]}


def adamw_as_trace(root: Path, name: str = "adamw_fp32_100M") -> dict:
    """The zoo's foreach AdamW entry priced as a trace prices its kernels: each profiled kernel (the file keeps the
    first 20) by its name's multi-tensor estimate (``kdvfs.work.work_from_name``, 320 blocks of 512 threads as in the
    steps' traces) at the clock measured, time-weighted. The zoo row itself is priced as one op (7 fp32 accesses per
    element), which is not how a step's optimizer kernels are priced."""
    from hw_backend.characterize import load_characterization
    from kdvfs.gpus import get_gpu
    from kdvfs.model import evaluate, params_from_work
    from kdvfs.occupancy import thread_occupancies
    from kdvfs.work import NAME_PEAK_FLOPS, math_class, work_from_name

    spec = get_gpu("h200")
    doc = load_characterization(root / "validation/h200/characterization/characterization.json.gz")
    k = next(x for x in doc["kernels"] if x["name"] == name)
    grid, block = (320, 1, 1), (512, 1, 1)
    ws = []
    for c in k["cuda_kernels"]:
        w = None if str(c["name"]).startswith("(+") else work_from_name(c["name"], "optimizer", grid, block,
                                                                         c["us"] * 1e-6, peak_flops=NAME_PEAK_FLOPS)
        if w is not None:
            ws.append((w, float(c["us"]) * 1e-6))
    n = len(ws)
    t = np.array([x[1] for x in ws])
    p = params_from_work(spec, [w.flops for w, _ in ws], [w.bytes for w, _ in ws],
                         [math_class("optimizer", w.dtype) for w, _ in ws], ["optimizer"] * n, [str(i) for i in range(n)],
                         t, core_mhz=np.full(n, float(k["sm_mhz_median"])),
                         occupancy=thread_occupancies([grid] * n, [block] * n, 132))
    ev = evaluate(spec, p, np.full(n, float(k["sm_mhz_median"])), np.zeros(n), kernel_index=np.arange(n), cap_w=np.inf)
    return {"entry": name, "kernels_priced": n, "measured_power_w": round(float(k["power_w"]), 1),
            "priced_as_trace_w": round(float(ev.power_w @ t / t.sum()), 1),
            "achieved_tb_s_by_estimate": round(float(np.sum([w.bytes for w, _ in ws]) / t.sum() / 1e12), 2)}


SHIFT_STEPS = ("bert-large-b8", "mistral-0.4b-b2", "pythia-410m-b4", "block-bf16-b2", "llama-0.5b-b2", "gpt2-medium-b4")


def class_shift(root: Path, steps=SHIFT_STEPS, before: str = "validation/h200/fidelity/session7_fit.json") -> dict:
    """Where the kernels' predicted energy moved between session 7's fit and the bundled one, on the small-batch
    steps (each kernel alone at auto, ``kdvfs.model.evaluate``; no limiter, no gaps): per class — GEMM and attention,
    the optimizer, other kernels filling under half the card's thread slots, the rest — joules per step before and
    now, beside the step's measured energy less the bundled check's prediction (its deficit)."""
    from kdvfs.calibrate_h200 import spec_from_fit
    from kdvfs.gpus import get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params, evaluate
    from kdvfs.occupancy import thread_occupancies

    old = spec_from_fit(json.loads((root / before).read_text()))
    new = get_gpu("h200")
    chk = {r["model"]: r for r in json.loads((root / CHECKS[0][1]).read_text())["steps"] if "measured" in r}
    out = {}
    for m in steps:
        tr = import_kineto(root / CHECKS[0][2] / f"{m}.kineto.json.gz", name=m).trace
        occ = thread_occupancies([k.grid for k in tr.kernels], [k.block for k in tr.kernels], 132)
        cls = ["gemm+attention" if k.category in ("gemm", "attention") else "optimizer" if k.category == "optimizer"
               else "other, occupancy < 0.5" if o is not None and o < 0.5 else "other" for k, o in zip(tr.kernels, occ)]
        e: dict[str, dict[str, float]] = {}
        for tag, sp in (("session7_j", old), ("now_j", new)):
            ev = evaluate(sp, default_params(tr, sp), np.array([0]), np.array([0]))
            ej = ev.energy_j[:, 0] * tr.repeats
            for c in sorted(set(cls)):
                e.setdefault(c, {})[tag] = round(float(sum(x for x, y in zip(ej, cls) if y == c)), 3)
        r = chk[m]
        out[m] = {"classes": e, "deficit_j": round(float(r["measured"]["energy_j"]
                                                        - r["predicted"]["limiter_with_gaps"]["energy_j"]), 3)}
    return out


def thermal_diagnosis(root: Path, command: str = "python -m scripts.h200_thermal_diagnosis") -> dict:
    """The document of ``python -m scripts.h200_thermal_diagnosis`` (``validation/h200/thermal/diagnosis.json``),
    from the stored files under ``root`` (the checkout)."""
    rows = step_rows(root)
    held = [r for r in rows if r["set"] == "steps"]
    return {"command": command, "checks": [c[1] for c in CHECKS], "held_out_23": _split(held),
            "seen": _split([r for r in rows if r["set"] != "steps"]), "all": _split(rows),
            "zoo": zoo_temperature(root), "adamw_as_trace": adamw_as_trace(root),
            "class_shift_since_session7": class_shift(root), "steps": rows}


def diagnosis_lines(doc: dict) -> list[str]:
    """The diagnosis as text lines: per step the error, gap share, temperature, power and gap-length shares, then
    the least-squares splits, the zoo's temperatures, AdamW as a trace prices it and the class shifts."""
    out = [f"{'set':7s} {'step':20s} {'dE %':>6s} {'gap':>5s} {'°C':>4s} {'W':>6s} {'<10us':>6s} {'10-100':>6s} "
           f"{'.1-1ms':>6s} {'>1ms':>6s}"]
    for r in doc["steps"]:
        s = list(r["gaps"]["share_by_length"].values())
        out.append(f"{r['set']:7s} {r['model']:20s} {r['energy_pct']:6.2f} {r['gap_share']:5.2f} "
                   f"{r['temperature_c']:4.0f} {r['power_w']:6.1f} " + " ".join(f"{x:6.2f}" for x in s))
    out += [f"{k} {json.dumps(doc[k])}" for k in ("held_out_23", "seen", "all")]
    out.append("zoo " + json.dumps({k: v for k, v in doc["zoo"].items() if k != "gap_entries"}))
    out.append("adamw_as_trace " + json.dumps(doc["adamw_as_trace"]))
    for m, v in doc["class_shift_since_session7"].items():
        out.append(f"{m} deficit {v['deficit_j']} J; " + "; ".join(f"{c} {x['session7_j']} → {x['now_j']} J"
                                                                for c, x in sorted(v["classes"].items())))
    return out
