"""The conv set in the H200 fit by the project's rule (issue 12, session 10): ``simulator.h200_convfit``.
``python -m scripts.h200_conv_fit [--structure S ...] [--no-steps] [-o FILE]``."""

import argparse
import json
import shlex
import sys
from pathlib import Path

from kdvfs.h200_fit import DEFAULT_STRUCTURE
from simulator.h200_convfit import conv_fit_comparison, step_lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/convfit/comparison.json")
    ap.add_argument("--structure", action="append", help="a structure of kdvfs.calibrate_h200.STRUCTURES (repeatable; "
                    "default: the bundled one)")
    ap.add_argument("--gap-model", default="thermal")
    ap.add_argument("--no-steps", action="store_true", help="no step checks")
    a = ap.parse_args(argv)
    cmd = " ".join(["python -m scripts.h200_conv_fit", *map(shlex.quote, argv if argv is not None else sys.argv[1:])])

    def line(r):
        h = r["heldout"]
        print(f"{r['candidate']}: all {r['zoo_all']}, held out {h['forward']['total']} "
              f"(nine {h['forward']['nine_files']}, conv {h['forward']['conv']}), reverse {h['reverse']['total']} "
              f"(nine {h['reverse']['nine_files']}, conv {h['reverse']['conv']}), check12 {r['check12']['met']}"
              + (f", conv all held out {r['conv_all_heldout']}" if "conv_all_heldout" in r else ""), flush=True)
        for ln in step_lines(r.get("steps")):
            print(ln, flush=True)

    doc = conv_fit_comparison(Path(__file__).resolve().parents[1], structures=a.structure or
                              (DEFAULT_STRUCTURE,), gap_model=a.gap_model, steps=not a.no_steps,
                              command=cmd, on_row=line)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
