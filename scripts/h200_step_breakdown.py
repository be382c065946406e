"""Measured steps' predicted energy split by op and by how each kernel's work was priced (issue 12, session 11):
``simulator.step_breakdown``. ``python -m scripts.h200_step_breakdown DIR[@REPORT] ... [-o FILE] [--top N] [--measured ZOO [--measured-vs ANCHOR]]``.

Each DIR is a ``kdvfs-steps/1`` folder (steps.json and its Kineto traces); REPORT (a file name in DIR) is the
``validate-steps`` report whose gap power and judged energy each step is set beside (default: DIR/steps_check.json
where it exists). Prints one line per step and, over all steps given, how the kernels' error goes with the share of
their predicted energy priced by the catch-all, by kernel names, by category, or in ops no zoo set has.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from kdvfs.gpus import get_gpu
from simulator.step_breakdown import (
    SHARE_KEYS,
    association,
    breakdown_steps,
    by_power_band,
    check_rows,
    measured_substitution,
    step_ops_pricing,
    summary_rows,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR[@REPORT]")
    ap.add_argument("-o", "--output", help="the breakdown JSON, gzipped where it ends in .gz (default: print only)")
    ap.add_argument("--top", type=int, default=15, help="ops kept per step, by predicted energy (default 15)")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--measured", metavar="FILE", help="a zoo file (kdvfs characterize) whose kernels the steps ran: "
                    "each step again with those kernels at their measured power (measured_substitution)")
    ap.add_argument("--measured-vs", metavar="FILE", help="a characterisation file of the steps' own card (their "
                    "anchor run): the zoo card's idle power above it is taken off the measured powers")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_step_breakdown",
                    *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    spec = get_gpu(a.gpu)
    out = {"command": cmd, "folders": {}}
    rows_all = []
    for arg in a.dirs:
        d, _, rep = arg.partition("@")
        report = Path(d) / (rep or "steps_check.json")
        checks = check_rows(report) if report.is_file() else None
        doc = breakdown_steps(d, spec, top=a.top, checks=checks)
        doc["report"] = str(report) if checks is not None else None
        out["folders"][d] = doc
        for r in summary_rows(doc):
            r["folder"] = d
            chk = doc["steps"][r["model"]].get("check") or {}
            r["check_error_pct"] = chk.get("error_pct")
            rows_all.append(r)
            print(f"{d} {r['model']:28s} {r['kernel_power_w']:3.0f} W kernels, error {r['error_pct']:+6.2f} % (check {_pct(r['check_error_pct'])}), kernels "
                  f"{_pct(r.get('kernel_error_pct'))}, gaps {100 * (r['gap_share'] or 0):3.0f} % of the time, "
                  + ", ".join(f"{key} {100 * r[f'{key}_share']:4.1f} %" for _, key in SHARE_KEYS), flush=True)
    out["summary"] = rows_all
    out["association"] = {key: association(rows_all, f"{key}_share") for _, key in SHARE_KEYS}
    out["association"]["kernel_power_w"] = association(rows_all, "kernel_power_w")
    out["association"]["kernel_power_w (check)"] = association(rows_all, "kernel_power_w", "check_kernel_error_pct")
    for key, s in out["association"].items():
        if s.get("steps", 0) >= 3:
            print(f"kernel error against {key} over {s['steps']} steps: slope {s['slope_pct_per_share']:+.3g} "
                  f"points per unit, r = {s['correlation']:+.2f}; mean error above the median "
                  f"({s['median_share']:.3g}) {s['mean_error_above_median_pct']:+.2f} %, at or below "
                  f"{s['mean_error_at_or_below_median_pct']:+.2f} %")
    out["by_power_band"] = by_power_band(rows_all)
    out["by_power_band_check"] = by_power_band(rows_all, check=True)
    for tag, bands in (("breakdown", out["by_power_band"]), ("check", out["by_power_band_check"])):
        for b in bands:
            upper = f"{b['to_w']:.0f}" if b["to_w"] is not None else ""
            print(f"[{tag}] kernels predicted at {b['from_w']:.0f}–{upper} W: {b['steps']} steps, kernel error mean "
                  f"{b['mean_kernel_error_pct']:+.2f} %, median {b['median_kernel_error_pct']:+.2f} %, lacking "
                  f"{b['median_missing_power_w']:+.1f} W (median); {b['within_3pct']} within 3 %")
    out["by_folder"] = {}
    for d in out["folders"]:
        sel = [r for r in rows_all if r["folder"] == d and r.get("missing_power_w") is not None]
        if sel:
            mp = sorted(r["missing_power_w"] for r in sel)
            ke = sorted(r["kernel_error_pct"] for r in sel)
            out["by_folder"][d] = {"steps": len(sel), "median_missing_power_w": mp[len(mp) // 2],
                                   "median_kernel_error_pct": ke[len(ke) // 2]}
            print(f"{d}: {len(sel)} steps, the kernels lack {mp[len(mp) // 2]:+.1f} W (median; upper median of an "
                  f"even count), kernel error {ke[len(ke) // 2]:+.2f} %")
    if a.measured:
        from hw_backend.characterize import load_characterization

        zoo = load_characterization(a.measured)
        offset = 0.0
        if a.measured_vs:
            offset = float(zoo["idle_after"]["power_w"]) - float(load_characterization(a.measured_vs)["idle_after"]["power_w"])
        sub = {"measured": a.measured, "measured_vs": a.measured_vs, "static_offset_w": offset, "folders": {}}
        for arg in a.dirs:
            d, _, rep = arg.partition("@")
            report = Path(d) / (rep or "steps_check.json")
            res = measured_substitution(d, spec, zoo, checks=check_rows(report) if report.is_file() else None,
                                        static_offset_w=offset)
            sub["folders"][d] = {m: r for m, r in res.items() if r["entries"]}
            for m, r in sub["folders"][d].items():
                print(f"{d} {m}: {1e3 * r['matched_time_s']:.2f} of {1e3 * r['kernel_time_s']:.1f} ms of kernels "
                      f"measured alone ({len(r['entries'])} entries, less {offset:.1f} W): error "
                      f"{r['error_pct']:+.2f} % → {r['substituted_error_pct']:+.2f} %")
                for n, g in r["entries"].items():
                    print(f"    {n}: {1e3 * g['time_s']:.2f} ms, predicted {g['predicted_power_w']:.0f} W, measured "
                          f"{g['measured_power_w']:.0f} W")
        out["substitution"] = sub
    out["step_ops_pricing"] = step_ops_pricing()
    for r in out["step_ops_pricing"]:
        if r["importer_flops"] is not None:
            print(f"{r['entry']}: the importer ({r['op']}, {r['family']}) gives {_ratio(r['importer_flops'], r['zoo_flops'])}"
                  f" of its FLOPs and {_ratio(r['importer_bytes'], r['zoo_bytes'])} of its bytes")
    if a.output:
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(out, indent=1) + "\n"
        if a.output.endswith(".gz"):
            import gzip

            with open(a.output, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as f:
                f.write(text.encode())  # mtime 0: the same breakdown gives the same bytes
        else:
            Path(a.output).write_text(text)
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g} ×" if b else ("0 ×" if not a else "∞")


def _pct(v) -> str:
    return "—" if v is None else f"{v:+.2f} %"


if __name__ == "__main__":
    raise SystemExit(main())
