"""Issue 12, session 9: the steps' energy error against host gaps, temperature and gap lengths, and the zoo's
temperatures (``simulator.h200_thermal``; reads stored files only).

    python -m scripts.h200_thermal_diagnosis [-o validation/h200/thermal/diagnosis.json]
"""

import argparse
import json
from pathlib import Path

from simulator.h200_thermal import diagnosis_lines, thermal_diagnosis


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="validation/h200/thermal/diagnosis.json")
    a = ap.parse_args(argv)
    doc = thermal_diagnosis(Path(__file__).resolve().parents[1],
                            "python -m scripts.h200_thermal_diagnosis" + (f" -o {a.output}" if argv else ""))
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(diagnosis_lines(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
