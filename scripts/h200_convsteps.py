"""Issue 12, session 9: the convolutional steps' predicted energy by kernel class, beside their deficit and the
nearest zoo entries' power errors (``simulator.h200_convsteps``; reads stored files only, fits nothing).

    python -m scripts.h200_convsteps [-o validation/h200/convsteps/convsteps.json]
"""

import argparse
import json
from pathlib import Path

from simulator.h200_convsteps import convsteps_diagnosis, convsteps_lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/convsteps/convsteps.json")
    a = ap.parse_args(argv)
    doc = convsteps_diagnosis(Path(__file__).resolve().parents[1],
                              "python -m scripts.h200_convsteps" + (f" -o {a.output}" if argv else ""))
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(convsteps_lines(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
