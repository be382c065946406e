"""Issue 12, session 13: the zoo's strided copies against a fit, and a per-entry check of a characterisation file
with time and energy beside clock and power. Analysis only: it writes no fit and no profile.

``copies_diagnosis`` takes every copy row of the measured zoo files (``COPY_FILES``) and gives, per row, what was
measured (clock, power, time), what the fit predicts with the copy's useful bytes (``before``) and with the bytes the
stride rule gives (``kdvfs.work_copies``, ``after``: today's zoo definitions), the rule's sector and DRAM traffic,
and the bytes that would explain the measured time at the card's bandwidth. ``zoo_check`` is
``kdvfs calibrate-h200 --check`` with each entry's time and energy as well. ``python -m scripts.h200_copies``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["COPY_FILES", "copies_diagnosis", "copy_rule_of", "step_copy_rates", "zoo_check"]

COPY_FILES = tuple(f"validation/h200/characterization/characterization{s}.json.gz"
                   for s in ("", "5", "8", "16", "17", "17b", "17c"))
"""The measured zoo files that hold copies run alone (the first zoo's copy, transpose and cast; characterization5's
fp32 copy, cast and transpose; characterization8's small transpose; characterization16's and 17's channels-last
copies, 17 on three cards)."""

_COPY_OPS = ("copy", "transpose", "copy_nhwc", "cast")


def step_copy_rates(trace: str | Path, top: int = 8) -> list[dict]:
    """The strided copies of a recorded step (a Kineto trace with ``Input Strides``): for each ``aten::copy_`` shape
    and stride pair whose sectors exceed its useful bytes by more than 5 %, how often it ran, its kernels' mean time
    per op, and the useful, sector (``kdvfs.work_copies``) and DRAM rates over that time; the ``top`` by total time.
    An op's bytes are split evenly over the kernels it launched. A measured rate to set beside the zoo's, not a fit."""
    import gzip
    import json
    from collections import Counter

    from kdvfs.work import torch_dtype_name
    from kdvfs.work_copies import copy_traffic

    p = Path(trace)
    with (gzip.open(p, "rt") if p.suffix == ".gz" else p.open()) as f:
        ev = json.load(f).get("traceEvents", [])
    ops = {(e.get("args") or {}).get("External id"): e for e in ev
           if e.get("cat") == "cpu_op" and e.get("name") == "aten::copy_"}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    per_op = Counter((e.get("args") or {}).get("External id") for e in kernels)
    agg: dict[tuple, list[float]] = {}
    for e in kernels:
        xid = (e.get("args") or {}).get("External id")
        o = ops.get(xid)
        if o is None:
            continue
        a = o.get("args") or {}
        dims, st, ty = a.get("Input Dims"), a.get("Input Strides"), a.get("Input type")
        if not (isinstance(dims, list) and isinstance(st, list) and isinstance(ty, list)) or len(dims) < 2 \
                or len(st) < 2 or len(ty) < 2 or dims[0] != dims[1]:
            continue
        tr = copy_traffic(dims[0], st[0], st[1], torch_dtype_name(ty[0]) or "fp32", torch_dtype_name(ty[1]) or "fp32")
        if tr is None or tr.sector_bytes <= 1.05 * tr.useful_bytes:
            continue
        m = per_op[xid]
        g = agg.setdefault((json.dumps(dims[0]), json.dumps(st[:2]), str(ty[0]), str(ty[1])), [0.0] * 6)
        for i, v in enumerate((1 / m, float(e["dur"]) * 1e-6, tr.useful_bytes / m, tr.sector_bytes / m,
                               tr.dram_bytes / m, tr.reuse_bytes / m)):
            g[i] += v
    out = []
    for (shape, strides, t_dst, t_src), (n, t, u, sec, dram, w) in sorted(agg.items(), key=lambda x: -x[1][1])[:top]:
        out.append({"shape": shape, "strides": strides, "dtypes": f"{t_dst} <- {t_src}", "ops": round(n, 2),
                    "us_per_op": round(1e6 * t / n, 2), "useful_tbs": round(u / t / 1e12, 3),
                    "sector_tbs": round(sec / t / 1e12, 3), "dram_tbs": round(dram / t / 1e12, 3),
                    "reuse_mb": round(w / n / 1e6, 3)})
    return out


def copy_rule_of(name: str):
    """The stride rule's ``CopyTraffic`` for a zoo copy entry by name (``hw_backend.zoo``), or None (not a copy)."""
    from hw_backend.zoo import ZOO_SETS

    for make in ZOO_SETS.values():
        for k in make():
            if k.name == name and k.op in _COPY_OPS:
                return k.copy_traffic()
    return None


def _predict(spec, rows: list[dict], gap_w: float | None):
    """(clock MHz, power W, kernel time s) per row at the driver's own clocks: ``kdvfs.h200_fit.predict_zoo``'s
    model, with the time of each row's kernels at the predicted clock as well."""
    from kdvfs.gpus import AUTO
    from kdvfs.h200_fit import _mix, zoo_params
    from kdvfs.model import evaluate

    n = len(rows)
    params = zoo_params(spec, rows)
    ev = evaluate(spec, params, np.full(n, AUTO), np.full(n, AUTO), kernel_index=np.arange(n))
    f, pw, t = ev.core_mhz, ev.power_w, ev.time_s
    fixed = np.array([bool(r.get("uncapped")) for r in rows])
    if fixed.any():  # a burst's onset: measured above what the cap allows, predicted at its measured clock
        fm = np.array([r["sm_mhz_median"] for r in rows])
        ev2 = evaluate(spec, params, fm, np.full(n, AUTO), kernel_index=np.arange(n), cap_w=np.inf)
        f, pw, t = np.where(fixed, fm, f), np.where(fixed, ev2.power_w, pw), np.where(fixed, ev2.time_s, t)
    busy = np.array([r.get("busy", 1.0) for r in rows])
    return f, _mix(pw, busy, gap_w, rows), t


def _rows(fit: dict, data: Sequence[str]):
    """The rows of ``data`` prepared as ``kdvfs calibrate-h200 --check`` prepares them, with the fit's gap power."""
    from kdvfs.calibrate_h200 import prepared_rows, spec_from_fit
    from kdvfs.thermal import thermal_from_params

    spec = spec_from_fit(fit)
    rows, gap_w, paths, _ = prepared_rows(list(data))
    fitted_gap = (fit.get("params") or {}).get("gap_power_w")
    gw = fitted_gap if fitted_gap is not None else gap_w
    th = thermal_from_params(fit.get("params"), "the fit")
    if th is not None:
        rows = [dict(r, gap_power_w=float(th.gap_power_w(r["temperature_c"])))
                if isinstance(r.get("temperature_c"), (int, float)) else r for r in rows]
    return spec, rows, gw, paths


def zoo_check(fit: dict, data: Sequence[str], clock_pct: float = 5.0, power_pct: float = 3.0) -> dict:
    """Each measured entry of ``data`` against ``fit``: clock, power, time and energy per invocation, measured and
    predicted (the model takes each entry's measured time at its measured clock, as ``calibrate-h200 --check``;
    its predicted time is its kernels' time at the predicted clock, plus the measured idle share of a launch-bound
    entry), and whether clock and power are within the targets."""
    from kdvfs.h200_rows import kernel_time_s, period_s

    spec, rows, gw, paths = _rows(fit, data)
    f, p, tk = _predict(spec, rows, gw)
    out = []
    for i, r in enumerate(rows):
        per_m = period_s(r)
        per_p = per_m - kernel_time_s(r) + float(tk[i])
        ef, ep = float(f[i] / r["sm_mhz_median"] - 1), float(p[i] / r["power_w"] - 1)
        e_m, e_p = r["power_w"] * per_m, float(p[i]) * per_p
        out.append({"name": r["name"], "category": r["category"], "role": r["role"],
                    "measured_sm_mhz": r["sm_mhz_median"], "predicted_sm_mhz": round(float(f[i]), 1),
                    "clock_error_pct": round(100 * ef, 2),
                    "measured_power_w": round(r["power_w"], 2), "predicted_power_w": round(float(p[i]), 2),
                    "power_error_pct": round(100 * ep, 2),
                    "measured_time_us": round(1e6 * per_m, 2), "predicted_time_us": round(1e6 * per_p, 2),
                    "time_error_pct": round(100 * (per_p / per_m - 1), 2),
                    "measured_energy_mj": round(1e3 * e_m, 4), "predicted_energy_mj": round(1e3 * e_p, 4),
                    "energy_error_pct": round(100 * (e_p / e_m - 1), 2),
                    "meets_clock": abs(ef) <= clock_pct / 100, "meets_power": abs(ep) <= power_pct / 100,
                    "meets_both": abs(ef) <= clock_pct / 100 and abs(ep) <= power_pct / 100})
    return {"format": "kdvfs-h200-zoo-check/1", "fit_data": fit.get("data"), "data": paths, "gap_power_w": gw,
            "targets": {"clock_pct": clock_pct, "power_pct": power_pct},
            "kernels": len(out), "meet_clock": sum(o["meets_clock"] for o in out),
            "meet_power": sum(o["meets_power"] for o in out), "meet_both": sum(o["meets_both"] for o in out),
            "per_kernel": out}


def copies_diagnosis(root: Path, fit: dict, files: Sequence[str] = COPY_FILES) -> dict:
    """Every copy row of ``files`` against ``fit`` (module docstring). Each file is prepared alone (its own rows, the
    fit's gap power), so the three cards' characterization17 rows are all kept."""
    from kdvfs.h200_rows import kernel_time_s

    spec = None
    peak = None
    out = []
    for fpath in files:
        spec, rows, gw, _ = _rows(fit, [str(root / fpath)])
        peak = spec.mem_bandwidth_gbs[-1] * 1e9
        w_per_tbs = spec.mem_traffic_power_w / (peak / 1e12)
        idx = [i for i, r in enumerate(rows) if r.get("op") in _COPY_OPS or r["category"] == "copy"
               and any(o in r["name"] for o in ("copy", "transpose", "cast"))]
        if not idx:
            continue
        sub = [rows[i] for i in idx]
        before = []
        for r in sub:  # the copy's useful bytes only (one read, one write): the work before the stride rule
            g = max(1, int(r.get("graph") or 0))
            tr = copy_rule_of(r["name"])
            useful = tr.useful_bytes * g if tr is not None else float(r["bytes"])
            if r.get("op") == "cast" or tr is None:
                useful = float(r["bytes"])
            before.append(dict(r, bytes=useful, ws_bytes=useful / g))
        fb, pb, _ = _predict(spec, before, gw)
        fa, pa, _ = _predict(spec, sub, gw)
        for j, r in enumerate(sub):
            g = max(1, int(r.get("graph") or 0))
            t = kernel_time_s(r)
            tr = copy_rule_of(r["name"])
            useful = before[j]["bytes"]
            sectors = tr.sector_bytes * g if tr is not None else useful
            dram = tr.dram_bytes * g if tr is not None else useful
            gap_w = r["power_w"] - float(pb[j])
            out.append({
                "file": Path(fpath).name, "name": r["name"], "dtype": r["dtype"],
                "kernels": sorted({str(c.get("name", ""))[:60] for c in r.get("cuda_kernels") or []
                                   if isinstance(c, dict) and not str(c.get("name", "")).startswith("(+")}),
                "measured_sm_mhz": r["sm_mhz_median"], "measured_power_w": round(r["power_w"], 1),
                "kernel_time_us": round(1e6 * t, 1),
                "useful_gb": round(useful / 1e9, 4), "useful_tbs": round(useful / t / 1e12, 3),
                "bytes_at_peak_bw_over_useful": round(peak * t / useful, 2),
                "rule": None if tr is None else {
                    "sector_gb": round(sectors / 1e9, 4), "sector_tbs": round(sectors / t / 1e12, 3),
                    "dram_gb": round(dram / 1e9, 4), "dram_tbs": round(dram / t / 1e12, 3),
                    "reuse_mb": round(tr.reuse_bytes / 1e6, 2), "l2_partition_mb": round(tr.l2_bytes / 1e6, 2),
                    "spills": tr.spills},
                "before": {"predicted_sm_mhz": round(float(fb[j]), 1), "predicted_power_w": round(float(pb[j]), 1),
                           "power_error_pct": round(100 * (float(pb[j]) / r["power_w"] - 1), 2)},
                "after": {"predicted_sm_mhz": round(float(fa[j]), 1), "predicted_power_w": round(float(pa[j]), 1),
                          "power_error_pct": round(100 * (float(pa[j]) / r["power_w"] - 1), 2)},
                "gap_w_before": round(gap_w, 1),
                "extra_dram_tbs_to_close_before": round(gap_w / w_per_tbs, 2),
                "waste_tbs": round((sectors - useful) / t / 1e12, 3),
            })
    assert spec is not None and peak is not None
    return {"fit_params": fit["params"], "peak_bw_tbs": peak / 1e12,
            "traffic_w_per_tbs": round(spec.mem_traffic_power_w / (peak / 1e12), 2), "rows": out}
