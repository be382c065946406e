"""The zoo's strided copies against the bundled fit (issue 12, session 13): ``simulator.h200_copies``.

``python -m scripts.h200_copies --diagnose traces/h200.fit.json -o validation/h200/copies/diagnosis.json``: every
copy row of the measured zoo files, measured against predicted with the useful bytes and with the stride rule's.
``python -m scripts.h200_copies --check FILE [--fit traces/h200.fit.json] -o OUT``: each entry of a characterisation
file against the fit, clock, power, time and energy (measured, predicted, error), printed one line per entry and
written to OUT.
``python -m scripts.h200_copies --rates TRACE [TRACE ...] -o OUT``: the strided copies of recorded steps, their
useful, sector and DRAM rates over their measured kernel time.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from simulator.h200_copies import copies_diagnosis, step_copy_rates, zoo_check


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--fit", default="traces/h200.fit.json", help="the fit document (default: the bundled one)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--diagnose", metavar="FIT", help="write the copy rows' diagnosis against this fit document")
    g.add_argument("--check", metavar="FILE", help="check this characterisation file against --fit, per entry")
    g.add_argument("--rates", metavar="TRACE", nargs="+", help="the strided copies' rates in these Kineto traces")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_copies", *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    root = Path(__file__).resolve().parents[1]
    if a.rates:
        missing = [t for t in a.rates if not Path(t).is_file()]
        if missing:
            ap.error(f"--rates {missing[0]!r} is not a file; give Kineto traces recorded with record_shapes=True")
        doc = {"command": cmd, "traces": {t: step_copy_rates(t) for t in a.rates}}
        for t, rows in doc["traces"].items():
            print(t)
            for r in rows:
                print(f"  {r['ops']:6.1f}x {r['shape']:22s} {r['dtypes']:32s} {r['us_per_op']:9.1f} us  useful "
                      f"{r['useful_tbs']:5.2f}  sectors {r['sector_tbs']:5.2f}  DRAM {r['dram_tbs']:5.2f} TB/s  "
                      f"W {r['reuse_mb']:.2f} MB")
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    fit_path = a.diagnose or a.fit
    if not Path(fit_path).is_file():
        ap.error(f"the fit {fit_path!r} is not a file; give a kdvfs-h200-fit/1 document such as traces/h200.fit.json")
    fit = json.loads(Path(fit_path).read_text())
    if a.check:
        if not Path(a.check).is_file():
            ap.error(f"--check {a.check!r} is not a file; give a characterisation file (.json.gz)")
        if Path(a.output).resolve() == Path(a.check).resolve():
            ap.error(f"-o {a.output!r} is the --check file: it would be replaced by the report; give another -o")
        doc = {"command": cmd, "fit": fit_path, **zoo_check(fit, [a.check])}
        print(f"{'entry':48s} {'clock MHz m/p':>15s} {'power W m/p (err)':>24s} {'time us m/p (err)':>26s} "
              f"{'energy mJ m/p (err)':>28s} both")
        for o in doc["per_kernel"]:
            print(f"{o['name'][:48]:48s} {o['measured_sm_mhz']:7.0f}/{o['predicted_sm_mhz']:<7.0f} "
                  f"{o['measured_power_w']:6.1f}/{o['predicted_power_w']:6.1f} ({o['power_error_pct']:+6.1f} %) "
                  f"{o['measured_time_us']:9.1f}/{o['predicted_time_us']:9.1f} ({o['time_error_pct']:+5.1f} %) "
                  f"{o['measured_energy_mj']:9.3f}/{o['predicted_energy_mj']:9.3f} ({o['energy_error_pct']:+6.1f} %) "
                  f"{'yes' if o['meets_both'] else 'no'}")
        print(f"within both targets (clock {doc['targets']['clock_pct']:g} %, power {doc['targets']['power_pct']:g} %): "
              f"{doc['meet_both']} of {doc['kernels']}; clock {doc['meet_clock']}, power {doc['meet_power']}")
    else:
        doc = {"command": cmd, "fit": fit_path, **copies_diagnosis(root, fit)}
        for r in doc["rows"]:
            ru = r["rule"] or {}
            print(f"{r['file']:28s} {r['name'][:40]:40s} {r['measured_sm_mhz']:5.0f} MHz {r['measured_power_w']:6.1f} W "
                  f"useful {r['useful_tbs']:5.2f} TB/s sectors {ru.get('sector_tbs', 0):5.2f} dram "
                  f"{ru.get('dram_tbs', 0):5.2f} (W {ru.get('reuse_mb', 0):6.2f} MB) power "
                  f"{r['before']['power_error_pct']:+6.1f} -> {r['after']['power_error_pct']:+6.1f} %")
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
