"""The H200 fit with characterization15 and 16, by the zoo's rule (issue 12, session 12):
``simulator.h200_lightfit``. ``python -m scripts.h200_lightfit [--structure S ...] [--dataset D ...]
[--steps S@D ...] [-o FILE]``."""

import argparse
import json
import shlex
import sys
from pathlib import Path

from kdvfs.h200_fit import DEFAULT_STRUCTURE
from simulator.h200_convfit import step_lines
from simulator.h200_lightfit import DATASETS, PARTS, light_comparison


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/lightfit/comparison.json")
    ap.add_argument("--structure", action="append", help="a structure of kdvfs.calibrate_h200.STRUCTURES (repeatable; "
                    "default: the bundled one)")
    ap.add_argument("--dataset", action="append", choices=list(DATASETS), help="data sets (repeatable; default all)")
    ap.add_argument("--steps", action="append", default=[], metavar="S@D",
                    help="check the steps (SEEN) with structure S fitted on data set D (repeatable)")
    ap.add_argument("--gap-model", default="thermal")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_lightfit", *map(shlex.quote, argv if argv is not None else sys.argv[1:])])

    def line(r):
        h = r["heldout"]
        files = ", ".join(f"{k} {r[f'{k}_full_fit']['met']} (10 %: {r[f'{k}_full_fit']['within_10pct']}, median "
                          f"{r[f'{k}_full_fit']['median_abs_pct']:.1f} %)" for k in PARTS[1:])
        print(f"{r['candidate']}: all {r['zoo_all']}, held out {h['forward']['total']} {h['forward']['parts']}, "
              f"reverse {h['reverse']['total']} {h['reverse']['parts']}, check12 {r['check12']['met']}; full fit: "
              f"{files}", flush=True)
        for ln in step_lines(r.get("steps_seen")):
            print(ln, flush=True)

    doc = light_comparison(Path(__file__).resolve().parents[1], structures=a.structure or (DEFAULT_STRUCTURE,),
                           datasets=a.dataset or tuple(DATASETS), gap_model=a.gap_model, steps_for=a.steps,
                           command=cmd, on_row=line)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
