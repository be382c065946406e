"""Which kernels of the recorded H200 steps carry the model's energy error, by class (issue 12, session 8): ``simulator.h200_small_kernels``.

    python -m scripts.h200_small_kernels [options]   (the name the files under validation/h200/small_kernels/ were written with)
"""

import argparse
import json
import sys
from pathlib import Path

from simulator.h200_small_kernels import diagnosis, diagnosis_lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/small_kernels/diagnosis.json")
    ap.add_argument("--fit", default="validation/h200/fidelity/session7_fit.json",
                    help="the H200 fit whose model is diagnosed (default: session 7's, the model the diagnosis was for; "
                         "traces/h200.fit.json: the bundled one)")
    a = ap.parse_args(argv)
    command = "python -m scripts.h200_small_kernels " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = diagnosis(Path(__file__).resolve().parents[1], a.fit, command)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(diagnosis_lines(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
