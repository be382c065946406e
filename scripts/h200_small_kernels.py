"""Which kernels of the recorded H200 steps carry the model's energy error, by class (issue 12, session 8): ``simulator.h200_small_kernels``.

    python -m scripts.h200_small_kernels [options]   (the name the files under validation/h200/small_kernels/ were written with)
"""

from simulator.h200_small_kernels import main

if __name__ == "__main__":
    raise SystemExit(main())
