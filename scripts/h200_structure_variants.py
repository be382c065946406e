"""The H200 model's structure variants refitted on the zoo and compared by its held-out split (issue 12, session 8): ``simulator.h200_variants``.

    python -m scripts.h200_structure_variants [options]   (the name the files under validation/h200/small_kernels/ were written with)
"""

import argparse
import json
from pathlib import Path

from simulator.h200_variants import structure_variants


def _say(row: dict) -> None:
    print(row["variant"], row["zoo_all"], row["zoo_heldout"], {d: s["met"] for d, s in row.get("steps", {}).items()},
          flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/small_kernels/variants.json")
    a = ap.parse_args(argv)
    doc = structure_variants(Path(__file__).resolve().parents[1], on_row=_say)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
