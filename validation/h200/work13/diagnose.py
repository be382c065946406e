"""Session 13 (helper i13b), step 1: every softmax / log-softmax (row and spatial), 1 × 1 convolution (forward and
backward) and gather-like entry of the seen zoo files against the bundled fit, with today's work estimates.

    python validation/h200/work13/diagnose.py      # writes validation/h200/work13/diagnosis.json, prints the table

Per entry: measured and predicted clock and power, the kernel time per launch, the bytes the work counts and their
rate, the most passes over the tensor the measured time allows at the best rate the zoo ever measured from device
memory (add_bf16_1GiB: 4.39 TB/s), and the extra traffic that would close the power gap at the fit's traffic power
(``simulator.h200_lightfit.light_diagnosis``). For the spatial softmax also the L2 share of its re-reads
(``kdvfs.work_passes``) and the card's occupancy over the kernel's time from its own block schedule (blocks of
unequal trip counts on 264 slots; ``occupancy_over_time``). The nine fitted files' entries are listed from the fit
document (their rows are pinned: their work did not change). Nothing is fitted.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

PATTERN = re.compile(r"softmax|conv2d|gather|embed|index")
FILES = ["characterization16.json.gz", "characterization17.json.gz", "characterization17b.json.gz",
         "characterization17c.json.gz", "characterization12.json.gz"]
BEST_TBS = 4.39  # add_bf16_1GiB (characterization.json): the most any zoo entry moved from device memory


def occupancy_over_time(outer: int, inner: int, grid: list[int], block_y: int = 1024, slots: int = 264) -> float:
    """The share of the card's block slots the spatial softmax's blocks fill over its time: block (x, y) runs
    ceil((outer − x) / grid.x) outer iterations (× its inner iterations), blocks start in order as slots free up."""
    gx, gy = int(grid[0]), int(grid[1])
    inner_it = math.ceil(inner / (block_y * gy))
    work = [len(range(x, outer, gx)) * inner_it for _ in range(gy) for x in range(gx)]
    h = [0.0] * slots
    end = 0.0
    for w in work:
        t = heapq.heappop(h)
        heapq.heappush(h, t + w)
        end = max(end, t + w)
    return sum(work) / (slots * end) if end else 1.0


def main() -> int:
    from kdvfs.work_passes import spatial_softmax_reread_share
    from simulator.h200_lightfit import light_diagnosis

    fit = json.loads((ROOT / "traces/h200.fit.json").read_text())
    diag = light_diagnosis(ROOT, fit, files=[str(Path("validation/h200/characterization") / f) for f in FILES])
    out = []
    for f, ents in diag["entries"].items():
        doc = json.loads(__import__("gzip").open(ROOT / f).read())
        recs = {k["name"]: k for k in doc["kernels"]}
        for e in ents:
            if not PATTERN.search(e["name"]):
                continue
            k = recs[e["name"]]
            g = max(1, int(k.get("graph") or 1))
            t = e["kernel_time_us"] * 1e-6 / g
            row = {"file": Path(f).name, **{x: e[x] for x in ("name", "dtype", "measured_sm_mhz", "predicted_sm_mhz",
                                                              "measured_power_w", "predicted_power_w",
                                                              "power_error_pct", "kernel_time_shares",
                                                              "extra_traffic_tbs_to_close", "useful_tbs")},
                   "time_per_launch_us": round(t * 1e6, 1),
                   "kernels": sorted({re.sub(r"[<(].*", "", str(c.get("name", "")))[:60]
                                      for c in k.get("cuda_kernels") or [] if not str(c.get("name")).startswith("(+")})}
            s = k["shape"]
            if "log_softmax_ch" in k["op"]:
                size = 2 if k["dtype"] == "bf16" else 4
                n = math.prod(s)
                pass_bytes = n * size
                bwd = k["op"].endswith("_bwd")
                row["passes_counted"] = round(e["useful_tbs"] * 1e12 * t / pass_bytes, 3)
                row["passes_possible_at_best_rate"] = round(BEST_TBS * 1e12 * t / pass_bytes, 2)
                row["passes_to_close_power"] = round(row["passes_counted"]
                                                     + e["extra_traffic_tbs_to_close"] * 1e12 * t / pass_bytes, 2)
                row["reread_share"] = round(spatial_softmax_reread_share(s[0], s[1], math.prod(s[2:]), k["dtype"],
                                                                         backward=bwd), 3)
                lg = [c for c in k.get("launch_grids") or [] if c.get("grid")]
                if lg:
                    row["grid"] = lg[0]["grid"]
                    row["occupancy_over_time"] = round(occupancy_over_time(s[0], math.prod(s[2:]), lg[0]["grid"]), 3)
            out.append(row)
    # the spatial softmax rows at their occupancy over time (the bundled constants; what a time-averaged occupancy
    # would give them, not the model)
    from kdvfs.calibrate_h200 import prepared_rows, spec_from_fit
    from kdvfs.h200_fit import predict_zoo

    spec = spec_from_fit(fit)
    for f in FILES:
        rows = {r["name"]: r for r in prepared_rows([str(ROOT / "validation/h200/characterization" / f)])[0]}
        for row in out:
            if row["file"] == f and "occupancy_over_time" in row:
                r = dict(rows[row["name"]], occupancy=row["occupancy_over_time"])
                _, pp = predict_zoo(spec, [r], gap_w=fit["params"]["gap_power_w"])
                row["power_error_at_occupancy_over_time_pct"] = round(100 * (float(pp[0]) / r["power_w"] - 1), 1)
    fitted = [{"file": "(fitted: traces/h200.fit.json)", **{x: p[x] for x in ("name", "measured_sm_mhz",
                                                                             "predicted_sm_mhz", "measured_power_w",
                                                                             "predicted_power_w", "power_error_pct")}}
              for p in fit["fit"]["per_kernel"] if PATTERN.search(p["name"])]
    doc = {"command": "python validation/h200/work13/diagnose.py", "best_rate_tbs": BEST_TBS,
           "traffic_w_per_tbs": diag["traffic_w_per_tbs"], "entries": out, "fitted_entries": fitted}
    (ROOT / "validation/h200/work13/diagnosis.json").write_text(json.dumps(doc, indent=1) + "\n")
    for r in out:
        extra = ""
        if "passes_counted" in r:
            extra = (f" passes counted {r['passes_counted']:.2f}, to close {r['passes_to_close_power']:.2f}, possible "
                     f"≤ {r['passes_possible_at_best_rate']:.2f}; φ {r['reread_share']:.2f}; occupancy over time "
                     f"{r.get('occupancy_over_time', float('nan')):.3f} "
                     f"(power error there {r.get('power_error_at_occupancy_over_time_pct', float('nan')):+.1f} %)")
        print(f"{r['file'][16:-8]:4s} {r['name'][:48]:48s} {r['measured_sm_mhz']:5.0f}/{r['predicted_sm_mhz']:6.0f} MHz "
              f"{r['measured_power_w']:6.1f}/{r['predicted_power_w']:6.1f} W ({r['power_error_pct']:+6.1f} %) "
              f"{r['time_per_launch_us']:7.1f} µs {r['useful_tbs']:5.2f} TB/s counted, +{r['extra_traffic_tbs_to_close']:5.2f} "
              f"to close{extra}")
    for r in fitted:
        print(f"fit  {r['name'][:48]:48s} {r['measured_sm_mhz']:5.0f}/{r['predicted_sm_mhz']:6.0f} MHz "
              f"{r['measured_power_w']:6.1f}/{r['predicted_power_w']:6.1f} W ({r['power_error_pct']:+6.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
