"""Per-step energy error before → after of the validate-steps reports in this folder (issue 12, session 12).

    python validation/h200/work12/table.py

Reads ``before_<set>.json`` and ``after_<set>.json`` (``kdvfs validate-steps ... -o``) and prints one markdown table
per set: measured energy, the judged prediction's energy error (``limiter_with_gaps``) before and after, and the
target count (±3 %); then, from ``breakdown_before.json.gz`` and ``breakdown_after.json.gz``
(``scripts.h200_step_breakdown``), the predicted energy and power of the ops whose rule changed, per steps12 step.
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = ("steps12", "steps12_repeat_lease2", "steps12_repeat_lease3", "steps", "steps7", "steps8", "steps9", "steps10",
        "steps11")


def rows(name: str) -> list[tuple[str, float, float, float]]:
    b, a = (json.loads((HERE / f"{w}_{name}.json").read_text()) for w in ("before", "after"))
    key = b["judged_on"]
    after = {s["model"]: s for s in a["steps"]}
    out = []
    for s in b["steps"]:
        t = after[s["model"]]
        out.append((s["model"], s["measured"]["energy_j"], s["error"][key]["energy_pct"],
                    t["error"][key]["energy_pct"]))
    return out


def main() -> int:
    for name in SETS:
        if not all((HERE / f"{w}_{name}.json").is_file() for w in ("before", "after")):
            continue
        r = rows(name)
        print(f"\n### {name}\n\n| step | measured J | error before % | error after % | change (points) |\n|---|---|---|---|---|")
        for m, e, b, a in r:
            print(f"| {m} | {e:.2f} | {b:+.2f} | {a:+.2f} | {a - b:+.2f} |")
        nb = sum(abs(b) <= 3.0 for _, _, b, _ in r)
        na = sum(abs(a) <= 3.0 for _, _, _, a in r)
        mb = statistics.median(abs(b) for _, _, b, _ in r)
        ma = statistics.median(abs(a) for _, _, _, a in r)
        print(f"| **within 3 %** | | **{nb} of {len(r)}** (median abs {mb:.2f}) | **{na} of {len(r)}** "
              f"(median abs {ma:.2f}) | |")
    ops_table()
    return 0


CHANGED = ("upsample_bilinear2d", "upsample_bilinear2d_backward", "avg_pool2d", "avg_pool2d_backward", "im2col",
           "col2im", "_index_put_impl_", "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "scatter_add_")


def ops_table() -> None:
    docs = {}
    for w in ("before", "after"):
        f = HERE / f"breakdown_{w}.json.gz"
        if not f.is_file():
            return
        folders = json.loads(gzip.decompress(f.read_bytes()))["folders"]
        # the before run was made from a checkout of main elsewhere, with absolute folder names
        docs[w] = {k[k.index("validation/"):]: v for k, v in folders.items()}
    print("\n### the re-priced ops (breakdown, steady ceiling)\n\n| folder | step | op | time ms | rule before → after |"
          " predicted J before → after | predicted W before → after |\n|---|---|---|---|---|---|---|")
    for folder, doc in docs["after"].items():
        for model, st in doc["steps"].items():
            old = {r["key"].split(" [")[0]: r for r in docs["before"][folder]["steps"][model]["by_op"]}
            for r in st["by_op"]:
                op = r["key"].split(" [")[0]
                if op not in CHANGED or op not in old:
                    continue
                o = old[op]
                rule_b, rule_a = (x["key"].split(" [")[1].split(",")[0] for x in (o, r))
                print(f"| {folder.split('/')[-1]} | {model} | {op} | {1e3 * r['time_s']:.2f} | {rule_b} → {rule_a} | "
                      f"{o['energy_j']:.2f} → {r['energy_j']:.2f} | {o['power_w']:.0f} → {r['power_w']:.0f} |")


if __name__ == "__main__":
    raise SystemExit(main())
