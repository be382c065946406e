"""Numeric flags checked before a verb loads anything: one line and exit 2 at once, not after seconds of loading.

`optimize --slack nan`, `compare --switch-latency -1`, `simulate --gpus 0` and `whatif --batch 0` were refused only
after the trace and profile had been read (5–25 s on a 3 500-kernel step), and `analyze --slack nan` after the
profiler trace was imported. ``check_numeric_flags`` runs the library's own checks on the flags a command line gives,
by their destination (one meaning for one name across every verb), before the verb's function: the ranges stay the
library's (``check_slack``, ``SwitchModel.from_latency``), and the library still checks what it is handed. Flags whose
range depends on the inputs (``--tp`` must divide the model's heads) are left to the library.
"""

from __future__ import annotations

import math

from kdvfs.errors import InputError

__all__ = ["check_numeric_flags"]


def _listed(v) -> list:
    return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]


def _whole_at_least_1(flag: str, what: str, v, example: str) -> None:
    if v is not None and (not isinstance(v, int) or v < 1):
        raise InputError(f"{flag} {v!r}: the {what} must be a whole number ≥ 1; give e.g. {flag} {example}")


def check_numeric_flags(a) -> None:
    """Refuse a bad ``--slack``, ``--switch-latency``, ``--latency``, ``--spread``, ``--governor-lag``, ``--gpus``,
    ``--batch`` or ``--tp`` on any verb that has it, with the message the library gives (or one in its words)."""
    slacks = _listed(getattr(a, "slack", None))
    if slacks:
        from kdvfs.optimize.problem import check_slack

        for s in slacks:
            check_slack(s)
    lats = _listed(getattr(a, "switch_latency", None))
    if lats:
        from kdvfs.gpus import SwitchModel

        for lat in lats:
            SwitchModel.from_latency(lat)
    # whatif's grid, as simulator.whatif.grid checks it; with --preset-latency-only, whatif says the two conflict
    for lat in [] if getattr(a, "preset_latency_only", False) else _listed(getattr(a, "latency", None)):
        from kdvfs.gpus import check_grid_latency

        check_grid_latency(lat)
    spread = getattr(a, "spread", None)
    if spread is not None and not (math.isfinite(spread) and spread >= 0):
        raise InputError(f"--spread {spread!r} must be a relative spread ≥ 0 (the lognormal sigma of the switch "
                         "latencies); give e.g. --spread 0.25, or leave it out for the card's")
    lag = getattr(a, "governor_lag", None)
    if lag is not None and not (math.isfinite(lag) and lag >= 0):
        # nan passed the engine's `< 0` check and switched the power limiter off without a word, exit 0
        raise InputError(f"--governor-lag {lag!r} must be a number of seconds ≥ 0 (0: no lag); give e.g. "
                         "--governor-lag 0.01")
    _whole_at_least_1("--gpus", "number of GPUs", getattr(a, "gpus", None), "2")
    _whole_at_least_1("--batch", "batch size", getattr(a, "batch", None), "8")
    _whole_at_least_1("--tp", "tensor-parallel degree", getattr(a, "tp", None), "2")
