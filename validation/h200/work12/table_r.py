"""Session 12, second part (helper i12r): the passes the light kernels make, before → after.

    python validation/h200/work12/table_r.py

Reads the zoo check of characterization16 against the bundled fit (``c16_check_before.json``,
``c16_check_after.json``: ``kdvfs calibrate-h200 --check traces/h200.fit.json --data ... -o``) and the
validate-steps reports ``r_before_<set>.json`` / ``r_after_<set>.json`` (``kdvfs validate-steps ... -o``; where a
``r_before`` file is absent, i12p's ``after_<set>.json``, the same code as integ12's, is the before) and prints
markdown tables: each zoo entry's power error, and each step's energy error (``limiter_with_gaps``).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = ("steps12", "steps12_repeat_lease2", "steps12_repeat_lease3", "steps", "steps7", "steps8", "steps9", "steps10",
        "steps11")


def zoo_table() -> None:
    b, a = (json.loads((HERE / f"c16_check_{w}.json").read_text()) for w in ("before", "after"))
    pb, pa = ({k["name"]: k for k in d["check"]["per_kernel"]} for d in (b, a))
    print("| entry | measured W | predicted W before → after | power error before → after (%) |\n|---|---|---|---|")
    for n, kb in pb.items():
        ka = pa[n]
        print(f"| {n} | {kb['measured_power_w']:.1f} | {kb['predicted_power_w']:.1f} → {ka['predicted_power_w']:.1f} | "
              f"{kb['power_error_pct']:+.1f} → {ka['power_error_pct']:+.1f} |")
    mb = statistics.median(abs(k["power_error_pct"]) for k in pb.values())
    ma = statistics.median(abs(k["power_error_pct"]) for k in pa.values())
    print(f"| **within 3 % (both targets)** | | | **{b['check']['meet_both']} → {a['check']['meet_both']} of "
          f"{len(pb)}** (median abs {mb:.1f} → {ma:.1f} %) |")


def step_table(name: str) -> None:
    fb = HERE / f"r_before_{name}.json"
    if not fb.is_file():
        fb = HERE / f"after_{name}.json"
    fa = HERE / f"r_after_{name}.json"
    if not (fb.is_file() and fa.is_file()):
        return
    b, a = (json.loads(f.read_text()) for f in (fb, fa))
    key = b["judged_on"]
    after = {s["model"]: s for s in a["steps"]}
    r = [(s["model"], s["measured"]["energy_j"], s["error"][key]["energy_pct"],
          after[s["model"]]["error"][key]["energy_pct"]) for s in b["steps"]]
    print(f"\n### {name} (before: {fb.name})\n\n| step | measured J | error before % | error after % | change (points) |"
          "\n|---|---|---|---|---|")
    for m, e, x, y in r:
        print(f"| {m} | {e:.2f} | {x:+.2f} | {y:+.2f} | {y - x:+.2f} |")
    nb, na = sum(abs(x) <= 3.0 for _, _, x, _ in r), sum(abs(y) <= 3.0 for _, _, _, y in r)
    print(f"| **within 3 %** | | **{nb} of {len(r)}** | **{na} of {len(r)}** | |")


def main() -> int:
    zoo_table()
    for s in SETS:
        step_table(s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
