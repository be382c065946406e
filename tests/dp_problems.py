"""Random small problems for the switch-aware DP tests (shared by ``test_predictive_age0.py``,
``test_predictive_shared.py`` and ``test_sync_onestep.py``): kernel times around the switch latencies the tests use,
so that switches land on time, late and in between, and with ``levels`` values drawn from a few levels, so that table
entries tie exactly and the order in which ties break is checked."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def tables(rng: np.random.Generator, kernels: int, settings: int, levels: bool) -> tuple[np.ndarray, np.ndarray]:
    """Time (s) and energy (J) per kernel and setting."""
    if levels:
        T = rng.choice([2e-4, 5e-4, 1e-3, 3e-3], size=(kernels, settings))  # noqa: N806
        E = rng.choice([0.1, 0.2, 0.4], size=(kernels, settings))  # noqa: N806
    else:
        T = rng.uniform(1e-4, 5e-3, size=(kernels, settings))  # noqa: N806
        E = T * rng.uniform(100, 300, size=(kernels, settings))  # noqa: N806
    return T, E


def problem(inst: np.ndarray, T: np.ndarray, E: np.ndarray) -> tuple[SimpleNamespace, np.ndarray]:  # noqa: N803
    """The parts of a ``Problem`` the DPs read (the trace's kernel per instance, the tables, a memo that keeps
    nothing), and every setting as a candidate."""
    pb = SimpleNamespace(trace=SimpleNamespace(instances=lambda: inst), T=T, E=E, memo=lambda key, make: make())
    return pb, np.arange(T.shape[1])
