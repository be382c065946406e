"""Session 13 (helper i13b): the stored step sets before (the files session 12's chain wrote, main at 5bb42c0) and
after (``checks/``, written by ``chain.sh`` on this branch): energy and median-clock counts within the targets, and
every step whose energy error moved by more than 0.05 points.

    python validation/h200/work13/table.py        # writes validation/h200/work13/steps_table.json, prints the table
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
H = ROOT / "validation/h200"
SETS = [  # (name in checks/, before file, seen or held out)
    ("steps23", "steps_check.json", "held out"),
    ("steps7", "steps7/steps_check.json", "seen"),
    ("steps8", "steps8/steps_check.json", "seen"),
    ("steps9", "steps9/steps_check_session12.json", "seen"),
    ("steps10", "steps10/steps_check_session12.json", "seen"),
    ("steps11", "steps11/steps_check_session12.json", "seen"),
    ("steps11_repeat_leaseB", "steps11/repeat_leaseB/steps_check_session12.json", "seen"),
    ("steps11_repeat_leaseC", "steps11/repeat_leaseC/steps_check_session12.json", "seen"),
    ("steps12", "steps12/steps_check_session12.json", "seen"),
    ("steps12_repeat_lease2", "steps12/repeat_lease2/steps_check_session12.json", "seen"),
    ("steps12_repeat_lease3", "steps12/repeat_lease3/steps_check_session12.json", "seen"),
    ("steps13", "steps13/steps_check.json", "seen (checked blind in session 12)"),
    ("steps13_repeat_lease2", "steps13/repeat_lease2/steps_check.json", "seen (checked blind in session 12)"),
    ("leaseA", "lease_anchor/leaseA/steps_check.json", "held out"),
    ("leaseB", "lease_anchor/leaseB/steps_check.json", "held out"),
    ("leaseC", "lease_anchor/leaseC/steps_check.json", "held out"),
]


def _rows(path: Path) -> tuple[dict, dict]:
    d = json.loads(path.read_text())
    key = d.get("judged_on", "limiter_with_gaps")
    return d["met"], {s["model"]: (s["error"][key]["energy_pct"], s["error"][key]["median_clock_pct"])
                      for s in d["steps"] if "error" in s and isinstance(s["error"], dict)}


ZOO = [  # (after: zoo_check_<x>.json here; before: session 12's final checks)
    ("c16", "work12/c16_check_after.json"),
    ("c17", "characterization/check17/characterization17_final.json"),
    ("c17b", "characterization/check17/characterization17b_final.json"),
    ("c17c", "characterization/check17/characterization17c_final.json"),
]


def zoo_table() -> list[dict]:
    """The seen zoo files' entries whose power error moved, before → after, and each file's counts."""
    out = []
    for name, before in ZOO:
        b = json.loads((H / before).read_text())["check"]
        a = json.loads((H / "work13" / f"zoo_check_{name}.json").read_text())
        pb = {e["name"]: e for e in b["per_kernel"]}
        moved = {e["name"]: (pb[e["name"]]["power_error_pct"], e["power_error_pct"], pb[e["name"]]["clock_error_pct"],
                             e["clock_error_pct"])
                 for e in a["per_kernel"] if abs(e["power_error_pct"] - pb[e["name"]]["power_error_pct"]) > 0.05}
        out.append({"file": name, "before_file": before, "both_before": b["meet_both"], "both_after": a["meet_both"],
                    "of": a["kernels"], "moved": moved})
        print(f"{name}: within both {b['meet_both']} → {a['meet_both']} of {a['kernels']}")
        for n, (x, y, cx, cy) in moved.items():
            print(f"    {n:50s} power {x:+6.1f} → {y:+6.1f} %, clock {cx:+5.1f} → {cy:+5.1f} %")
    return out


def main() -> int:
    zoo = zoo_table()
    out = []
    for name, before, kind in SETS:
        after = H / "work13/checks" / f"{name}.json"
        if not after.is_file():
            print(f"{name}: no {after.relative_to(ROOT)} (run chain.sh)")
            continue
        mb, rb = _rows(H / before)
        ma, ra = _rows(after)
        moved = {m: (round(rb[m][0], 2), round(ra[m][0], 2)) for m in ra if m in rb and abs(ra[m][0] - rb[m][0]) > 0.05}
        clock_moved = max((abs(ra[m][1] - rb[m][1]) for m in ra if m in rb), default=0.0)
        errs = [v[0] for v in ra.values()]
        out.append({"set": name, "kind": kind, "before_file": before, "before": mb, "after": ma,
                    "energy_range_after_pct": [round(min(errs), 2), round(max(errs), 2)],
                    "moved_energy_pct": moved, "largest_clock_move_points": round(clock_moved, 3)})
        mv = "; ".join(f"{m} {a:+.2f} → {b:+.2f}" for m, (a, b) in moved.items()) or "none beyond 0.05 points"
        print(f"{name:24s} {kind:36s} energy {mb['energy']} → {ma['energy']}, clock {mb['clock']} → {ma['clock']} "
              f"of {ma['of']}; range {min(errs):+.2f} … {max(errs):+.2f} %; moved: {mv}")
    (H / "work13/steps_table.json").write_text(json.dumps({"command": "python validation/h200/work13/table.py",
                                                           "zoo": zoo, "sets": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
