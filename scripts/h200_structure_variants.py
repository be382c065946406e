"""The H200 model's structure variants refitted on the zoo, compared by its held-out split (issue 12, sessions 8, 9):
``simulator.h200_variants``. ``python -m scripts.h200_structure_variants [options]``."""

import argparse
import json
import shlex
import sys
from pathlib import Path

from simulator.h200_variants import structure_variants


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/small_kernels/variants.json")
    ap.add_argument("--variant", action="append", help="only this structure (repeatable; default: every VARIANTS "
                    "entry and session 7's stored fit); STRUCTURE@GAP_MODEL fits it with that gap model "
                    "(kdvfs.calibrate_h200.GAP_MODELS), e.g. warp-occupancy+conv-dot@thermal")
    ap.add_argument("--steps", action="append", help="check the steps of this folder for every variant fitted "
                    "(repeatable; default: the variants of STEPS_FOR on FOLDERS)")
    ap.add_argument("--zoo-only", action="store_true", help="no step checks (the rule reads the zoo alone)")
    ap.add_argument("--check", action="append", metavar="FILE", help="also predict this characterisation file with "
                    "each variant's fit, fitting nothing to it (repeatable; e.g. a zoo set measured after the choice)")
    ap.add_argument("--reverse-split", action="store_true", help="also the split the other way round (odd positions "
                    "fitted, even checked): a sensitivity of the rule, not the rule")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_structure_variants",
                    *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    doc = structure_variants(Path(__file__).resolve().parents[1], variants=a.variant, steps=a.steps,
                             zoo_only=a.zoo_only, check=a.check, reverse_split=a.reverse_split, command=cmd,
                             on_row=lambda r: print(r["variant"], r["zoo_all"], r["zoo_heldout"], flush=True))
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
