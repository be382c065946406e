"""One BLAS thread for a block of linear algebra, without threadpoolctl.

OpenBLAS starts one thread per core; on a shared machine (CI, two cores, other jobs) a thread pool thrashes — an SVD
of a 700 × 250 matrix took 18 s instead of 0.1 s — and a threaded sum can differ in its last bit from run to run.
The calibration runs its solver single-threaded for both reasons: speed, and the same bytes twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import sys

__all__ = ["single_threaded_blas"]

log = logging.getLogger(__name__)

# (set, get) symbol pairs of the OpenBLAS builds numpy and scipy ship, and of a plain OpenBLAS
_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))


def _loaded_openblas() -> list[str]:
    if not sys.platform.startswith("linux"):
        return []
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if ln.strip()}
    except OSError:
        return []
    return sorted(p for p in paths if "openblas" in p.lower() and ".so" in p)


@contextlib.contextmanager
def single_threaded_blas():
    """Inside the block every loaded OpenBLAS runs one thread; the previous counts are restored after it. Where
    the libraries cannot be found (another platform or BLAS) it does nothing."""
    restore = []
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _SYMBOLS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                old = int(getattr(lib, get_name)())
                getattr(lib, set_name)(1)
                restore.append((getattr(lib, set_name), old))
                break
    log.debug("single-threaded BLAS for %d libraries", len(restore))
    try:
        yield len(restore)
    finally:
        for fn, old in restore:
            fn(old)
