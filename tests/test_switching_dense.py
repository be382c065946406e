"""``sequence_cost``'s dense path (most boundaries switch) against its sparse walk: the same arrays, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from kdvfs import switching
from kdvfs.gpus import SwitchModel
from kdvfs.switching import SwitchCosts, sequence_cost


def _both(monkeypatch, *args, **kw) -> tuple[dict, dict]:
    monkeypatch.setattr(switching, "DENSE_MIN_SHARE", 0.0)  # dense wherever it applies
    dense = sequence_cost(*args, **kw)
    monkeypatch.setattr(switching, "DENSE_MIN_SHARE", np.inf)  # never
    sparse = sequence_cost(*args, **kw)
    return dense, sparse


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k  # the sign of each zero too
        else:
            assert type(a[k]) is type(b[k]) and a[k] == b[k], k


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mechanism", ["sync", "callback"])
def test_dense_path_is_the_sparse_walk(monkeypatch, seed, mechanism):
    rng = np.random.default_rng(seed)
    K, S, n = 7, 5, int(rng.integers(2, 400))  # noqa: N806
    T = rng.uniform(1e-5, 3e-3, (K, S))  # noqa: N806
    P = rng.uniform(50, 400, (K, S))  # noqa: N806
    kernel = rng.integers(0, K, n)
    # from every boundary switching to almost none; runs of one, two and many instances
    p_switch = [1.0, 0.9, 0.5, 0.3, 0.05, 0.0][seed % 6]
    setting = np.empty(n, dtype=np.int64)
    setting[0] = rng.integers(0, S)
    for i in range(1, n):
        setting[i] = (setting[i - 1] + rng.integers(1, S)) % S if rng.random() < p_switch else setting[i - 1]
    flat = kernel * S + setting
    t_inst, p_inst = T.ravel()[flat], P.ravel()[flat]
    costs = SwitchCosts(idle_power_w=90.0)
    # lags shorter than a kernel, lasting several kernels, none; and a transition that stalls the GPU
    for sw in (SwitchModel(1e-4, 2e-4), SwitchModel(1e-4, 8e-3), SwitchModel(1e-4, 0.0),
               SwitchModel(1e-4, 3e-3, stall_while_relocking=True)):
        for e_inst in (None, t_inst * p_inst):
            dense, sparse = _both(monkeypatch, t_inst, p_inst, setting, T, P, kernel, sw, mechanism, costs,
                                  e_inst=e_inst)
            _same(dense, sparse)
        # a switch before the first instance takes the sparse walk either way
        _same(*_both(monkeypatch, t_inst, p_inst, setting, T, P, kernel, sw, mechanism, costs,
                     start_setting=(int(setting[0]) + 1) % S))


def test_dense_path_on_the_bundled_dense_schedule(monkeypatch):
    """The simulate benchmark's schedule (switching at ~90 % of 2 336 boundaries on the H200 trace)."""
    import dataclasses

    from kdvfs.bundled import load_trace_by_name, resolve_profile_path
    from kdvfs.gpus import get_gpu
    from kdvfs.profile import load_profile

    t = load_trace_by_name("gpt3xl-torch-h200-bf16")
    prof = load_profile(resolve_profile_path("gpt3xl-torch-h200-bf16")).for_trace(t)
    kernel = t.instances()
    S = len(prof.settings)  # noqa: N806
    setting = np.random.default_rng(0).integers(0, S, len(kernel))
    flat = kernel * S + setting
    t_inst, p_inst = prof.time_s.ravel()[flat], prof.power_w.ravel()[flat]
    spec = get_gpu("h200")
    sw = dataclasses.replace(spec.switch, spread=0.0)
    dense, sparse = _both(monkeypatch, t_inst, p_inst, setting, prof.time_s, prof.power_w, kernel, sw, "sync",
                          SwitchCosts.for_gpu(spec), e_inst=t_inst * p_inst)
    assert dense["switches"] > 0.9 * len(kernel)
    _same(dense, sparse)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")  # the 0/0 it drops
def test_dense_path_with_a_zero_time_entry_where_nothing_switches(monkeypatch):
    """A kernel that takes no time at its own setting, at a boundary that does not switch, under a zero lag: its
    0/0 share is never needed (the sparse walk does not compute it) and must not turn the dense sums into NaN."""
    T = np.array([[0.0, 0.0], [1e-3, 2e-3]])  # noqa: N806
    P = np.array([[100.0, 90.0], [200.0, 150.0]])  # noqa: N806
    kernel = np.array([1, 0, 1, 0, 1, 0, 1, 0])
    setting = np.array([0, 0, 1, 1, 0, 0, 1, 1])
    t_inst, p_inst = T[kernel, setting], P[kernel, setting]
    sw = SwitchModel(1e-4, 0.0)
    dense, sparse = _both(monkeypatch, t_inst, p_inst, setting, T, P, kernel, sw, "callback", SwitchCosts())
    _same(dense, sparse)
    assert np.isfinite(dense["energy_j"]) and dense["switches"] == 3
