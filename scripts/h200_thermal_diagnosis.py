"""Issue 12, session 9: the steps' energy error against host gaps, temperature and gap lengths, and the zoo's
temperatures (``simulator.h200_thermal``; reads stored files only).

    python -m scripts.h200_thermal_diagnosis [-o validation/h200/thermal/diagnosis.json]
"""

from scripts import write_report
from simulator.h200_thermal import diagnosis_lines, thermal_diagnosis


def main(argv=None) -> int:
    return write_report(argv, "h200_thermal_diagnosis", "validation/h200/thermal/diagnosis.json", thermal_diagnosis,
                        diagnosis_lines)


if __name__ == "__main__":
    raise SystemExit(main())
