"""The H200 fit with characterization15 and 16, by the zoo's rule (issue 12, session 12):
``simulator.h200_lightfit``. ``python -m scripts.h200_lightfit [--structure S ...] [--dataset D ...]
[--steps S@D ...] [-o FILE]``; ``--diagnose FIT`` writes instead each entry of characterization15 and 16 against the
fit document FIT (``simulator.h200_lightfit.light_diagnosis``); ``--check FILE`` checks the bundled model and the
comparison's leading candidates on a zoo file none of them saw (``light_check``)."""

import argparse
import json
import shlex
import sys
from pathlib import Path

from kdvfs.h200_fit import DEFAULT_STRUCTURE
from simulator.h200_convfit import step_lines
from simulator.h200_lightfit import DATASETS, PARTS, light_check, light_comparison, light_diagnosis, seen_by_a_fit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/lightfit/comparison.json")
    ap.add_argument("--structure", action="append", help="a structure of kdvfs.calibrate_h200.STRUCTURES (repeatable; "
                    "default: the bundled one)")
    ap.add_argument("--dataset", action="append", choices=list(DATASETS), help="data sets (repeatable; default all)")
    ap.add_argument("--steps", action="append", default=[], metavar="S@D",
                    help="check the steps (SEEN) with structure S fitted on data set D (repeatable)")
    ap.add_argument("--gap-model", default="thermal")
    ap.add_argument("--diagnose", metavar="FIT", help="write the per-entry diagnosis of c15 and c16 against this fit "
                    "document (e.g. traces/h200.fit.json) instead of the comparison")
    ap.add_argument("--check", metavar="FILE", help="check the bundled model and the leading candidates on this zoo "
                    "file, which none of them saw, instead of the comparison")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_lightfit", *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    root = Path(__file__).resolve().parents[1]
    if a.check:
        if not Path(a.check).is_file():
            ap.error(f"--check {a.check!r} is not a file; give a characterisation file none of the fits saw")
        if seen_by_a_fit(a.check, root):
            ap.error(f"--check {a.check!r} is one of the files the candidates are fitted on, so it is not held out; "
                     "give a file none of them saw")
        if Path(a.output).resolve() == Path(a.check).resolve():
            ap.error(f"-o {a.output!r} is the --check file: it would be replaced by the report; give another -o")
        doc = {"command": cmd, **light_check(root, a.check)}
        for r in doc["candidates"]:
            print(f"{r['structure']}, {r['dataset']}: both {r['meet_both']} of {r['kernels']}, clock {r['meet_clock']}, "
                  f"power within 10 % {r['within_10pct']}, median |error| {r['median_abs_pct']:.1f} %", flush=True)
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    if a.diagnose:
        doc = {"command": cmd, "fit": a.diagnose,
               **light_diagnosis(root, json.loads(Path(a.diagnose).read_text()))}
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
        return 0

    def line(r):
        h = r["heldout"]
        files = ", ".join(f"{k} {r[f'{k}_full_fit']['met']} (10 %: {r[f'{k}_full_fit']['within_10pct']}, median "
                          f"{r[f'{k}_full_fit']['median_abs_pct']:.1f} %)" for k in PARTS[1:])
        print(f"{r['candidate']}: all {r['zoo_all']}, held out {h['forward']['total']} {h['forward']['parts']}, "
              f"reverse {h['reverse']['total']} {h['reverse']['parts']}, check12 {r['check12']['met']}; full fit: "
              f"{files}", flush=True)
        for ln in step_lines(r.get("steps_seen")):
            print(ln, flush=True)

    doc = light_comparison(root, structures=a.structure or (DEFAULT_STRUCTURE,),
                           datasets=a.dataset or tuple(DATASETS), gap_model=a.gap_model, steps_for=a.steps,
                           command=cmd, on_row=line)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
