"""Where the RTX 3080 Ti's energy minima lie, model-free and per fit (issue 11, session 8): ``kdvfs.vfshape``.

    python -m scripts.vf_shape_check [CALIBRATION.json …] [--out FILE.json]   (the name validation/rtx3080ti-calibration/session8/ was written with)
"""

import argparse

from kdvfs.vfshape import vf_shape_check
from scripts import emit_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Where the RTX 3080 Ti's energy minima lie along the core clock, in the "
                                 "data and in fits (issue 11, session 8).")
    ap.add_argument("fits", nargs="*", help="calibration JSON files (default: the bundled one)")
    ap.add_argument("--out", help="write the JSON here (default: print it)")
    a = ap.parse_args(argv)
    return emit_json(vf_shape_check(a.fits), a.out)


if __name__ == "__main__":
    raise SystemExit(main())
