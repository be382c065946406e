"""The tables of validation/h200/card_anchor/README.md from the reports beside it (``kdvfs card-anchor -o``, and
``kdvfs validate-steps -o`` with and without ``--anchors``): ``python -m scripts.card_anchor_table [FOLDER]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _s(x: dict) -> str:
    if not x.get("entries"):
        return "–"
    return (f"{x['meet_both']}/{x['entries']} (power {x['meet_power']}), median {x['power_error_pct_median']:+.2f} %, "
            f"rms {x['power_rms_error_pct']:.1f} %")


def zoo_table(folder: Path) -> list[str]:
    out = ["| anchors from | entries checked | card parameters (static W, core ×, memory ×, ambient °C) | anchors: bundled → "
           "adapted | held out: bundled | held out: adapted |", "|---|---|---|---|---|---|"]
    tot = {"bundled": [0, 0], "adapted": [0, 0]}
    for f in sorted(folder.glob("check_*.json")):
        d = json.loads(f.read_text())
        for k in tot:
            tot[k][0] += d["held_out"][k].get("meet_both", 0)
            tot[k][1] += d["held_out"][k]["entries"]
        a = d["anchor"]
        par = (f"{a['static_w']:+.1f}, {a['core_scale']:.3f}{'' if a['core_scale_fitted'] else ' (not fitted)'}, "
               f"{a.get('mem_scale', 1.0):.3f}{'' if a.get('mem_scale_fitted') else ' (not fitted)'}, "
               f"{a['ambient_shift_c']:+.1f} ({len(a['entries'])} anchors)")
        anc = f"{d['anchors']['bundled']['meet_both']} → {d['anchors']['adapted']['meet_both']} of " \
              f"{d['anchors']['bundled']['entries']}"
        out.append(f"| {d['file']} | {', '.join(d['checked'])} | {par} | {anc} | {_s(d['held_out']['bundled'])} | "
                   f"{_s(d['held_out']['adapted'])} |")
    out.append(f"| all | | | | {tot['bundled'][0]}/{tot['bundled'][1]} | {tot['adapted'][0]}/{tot['adapted'][1]} |")
    return out


def _key(step: dict) -> str:
    return "limiter_with_gaps" if "limiter_with_gaps" in step["error"] else "limiter"


def steps_table(bundled: Path, anchored: Path) -> list[str]:
    b, a = json.loads(bundled.read_text()), json.loads(anchored.read_text())
    out = [f"`{b.get('command', '')}` against `{a.get('command', '')}`; the adapted card: "
           f"{json.dumps(a.get('card_anchor', {}).get('source'))}", "",
           "| step | measured J | bundled ΔE % | adapted ΔE % | bundled Δclock % | adapted Δclock % |",
           "|---|---|---|---|---|---|"]
    for x, y in zip(b["steps"], a["steps"]):
        if "skipped" in x or "skipped" in y:
            out.append(f"| {x['model']} | skipped | | | | |")
            continue
        k = _key(x)
        out.append(f"| {x['model']} | {x['measured']['energy_j']:.2f} | {x['error'][k]['energy_pct']:+.2f} | "
                   f"{y['error'][k]['energy_pct']:+.2f} | {x['error'][k]['median_clock_pct']:+.2f} | "
                   f"{y['error'][k]['median_clock_pct']:+.2f} |")
    mv = [y["error"][_key(x)]["energy_pct"] - x["error"][_key(x)]["energy_pct"] for x, y in zip(b["steps"], a["steps"])
          if "skipped" not in x and "skipped" not in y]
    if mv:
        out.append(f"| energy moved by the anchors | | {min(mv):+.2f} … {max(mv):+.2f} points | | | |")
    out.append(f"| within the targets (energy, clock) | | {b['met']['energy']}, {b['met']['clock']} of {b['met']['of']} "
               f"| {a['met']['energy']}, {a['met']['clock']} of {a['met']['of']} | | |")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0] if argv else "validation/h200/card_anchor")
    lines = zoo_table(folder)
    for b in sorted(folder.glob("*steps*_bundled.json")):  # X_bundled.json beside X_anchored*.json
        for a in sorted(folder.glob(b.name.replace("_bundled.json", "_anchored*.json"))):
            lines += ["", f"**{a.stem}**", ""] + steps_table(b, a)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
