"""Issue 12, session 9: the convolutional steps' predicted energy by kernel class, beside their deficit and the
nearest zoo entries' power errors (``simulator.h200_convsteps``; reads stored files only, fits nothing).

    python -m scripts.h200_convsteps [-o validation/h200/convsteps/convsteps.json]
"""

from scripts import write_report
from simulator.h200_convsteps import convsteps_diagnosis, convsteps_lines


def main(argv=None) -> int:
    return write_report(argv, "h200_convsteps", "validation/h200/convsteps/convsteps.json", convsteps_diagnosis,
                        convsteps_lines)


if __name__ == "__main__":
    raise SystemExit(main())
