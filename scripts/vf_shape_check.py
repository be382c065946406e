"""Where the RTX 3080 Ti's energy minima lie, model-free and per fit (issue 11, session 8): ``kdvfs.vfshape``.

    python -m scripts.vf_shape_check [options]   (the name validation/rtx3080ti-calibration/session8/ was written with)
"""

from kdvfs.vfshape import main

if __name__ == "__main__":
    raise SystemExit(main())
