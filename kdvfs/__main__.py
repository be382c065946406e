"""``python -m kdvfs`` and the ``kdvfs`` command.

Before numpy loads, its OpenBLAS is asked for one thread (``OPENBLAS_NUM_THREADS``, unless the environment sets it):
starting a pool of one thread per core cost most of a short command's wall time on a loaded machine (numpy's import
0.20–0.67 s against 0.14 s), no verb runs linear algebra large enough to gain from threads, and the calibration
runs its solver single-threaded anyway (``kdvfs.blas``: the same bytes twice).
"""

import os
import sys


def run() -> int:
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from kdvfs.cli import main

    return main()


if __name__ == "__main__":
    raise SystemExit(run())
