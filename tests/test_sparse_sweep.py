"""The sparse sweep: ``kdvfs.fit`` decides which settings to measure next, ``hw_backend.sweep`` only measures.

``_reference_sparse`` is the loop ``hw_backend.sweep.sparse_sweep`` ran before the decision moved into
``kdvfs.fit.sparse_probes`` / ``kdvfs.fit.sparse_next`` (session 8, from main f723fc3): the fit, the model and the
global strict-waste solve inside ``hw_backend``. The sweep of today must measure the same settings in the same order
and write the same bytes.
"""

import numpy as np
import pytest

from hw_backend import FakeNvml, NvmlBackend, SimulatedWorkload
from hw_backend.sweep import run_sweep, sparse_sweep
from kdvfs.calibrate import study_settings
from kdvfs.fit import read_sweep, sparse_next, sparse_probes
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import default_params

G = get_gpu("rtx3080ti")
SETTINGS = study_settings()
KW = dict(window_s=0.2, warmup_s=0.05, min_steps=3, allow_clock_control=True)


def _old_probes(spec, settings, first):
    grid = [s for s in settings if s != (AUTO, AUTO)]
    mems = sorted({m for _, m in grid if m != AUTO})
    cores = sorted({c for c, _ in grid if c != AUTO})
    out = [(AUTO, AUTO)] if (AUTO, AUTO) in settings else []

    def nearest(c, m):
        cand = [s for s in grid if s[1] == m] or grid
        return min(cand, key=lambda s: abs((s[0] or spec.boost_core_mhz) - c))

    if cores and mems:
        out.append(nearest(0.55 * spec.boost_core_mhz, mems[-1]))
        if len(mems) > 1:
            hi = [m for m in mems if spec.bandwidth_gbs(np.array(m)) > 0.3 * spec.mem_bandwidth_gbs[-1]]
            out.append(nearest(spec.boost_core_mhz, hi[0] if hi else mems[-2]))
    explicit = sorted(grid, key=lambda s: (s[1], s[0]))
    for i in np.linspace(0, len(explicit) - 1, max(first - 2, 0) + 2).round().astype(int)[1:-1]:
        if len(out) >= first + 1:
            break
        if explicit[i] not in out:
            out.append(explicit[i])
    return list(dict.fromkeys(out))[: first + 1]


def _reference_sparse(backend, workload, spec, settings, out, *, first, rounds, **kw):
    from kdvfs.fit import fit_params
    from kdvfs.model import evaluate
    from kdvfs.optimize.knapsack import solve_fast

    run_sweep(backend, workload, spec, _old_probes(spec, settings, first), out, only=None, **kw)
    units = workload.units()
    reps = {u.name: 1 for u in units}
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    for _ in range(rounds):
        sw = read_sweep(out)
        _, params = fit_params(sw, spec)
        ev = evaluate(spec, params, c, m)
        key_idx = {k: i for i, k in enumerate(params.keys)}
        idx = [key_idx[u.keys[0]] for u in units]
        T, E = ev.time_s[idx], ev.energy_j[idx]
        r = np.array([reps[u.name] for u in units])
        if hasattr(workload, "trace"):
            rep_of = dict(zip(workload.trace.kernel_keys, workload.trace.repeats.tolist()))
            r = np.array([rep_of.get(u.keys[0], 1) for u in units])
        ia = settings.index((AUTO, AUTO)) if (AUTO, AUTO) in settings else int(np.argmax(c))
        alloc = solve_fast(T, E, r, float(r @ T[:, ia]))
        done = {(k, cc, mm) for k, ps in read_sweep(out, min_points=1).points.items() for p in ps
                for cc, mm in [(p.core_mhz, p.mem_mhz)]}
        only = {}
        for u, cnt in zip(units, alloc.counts):
            s = max(cnt, key=cnt.__getitem__)
            st = settings[s]
            if (u.keys[0], st[0], st[1]) not in done:
                only[u.name] = [st]
        if not only:
            break
        extra = sorted({s for v in only.values() for s in v}, key=lambda s: (s[1], s[0]))
        run_sweep(backend, workload, spec, extra, out, only=only, **kw)
    n_meas = sum(len(ps) for ps in read_sweep(out, min_points=1).points.values())
    return {"measured_settings": n_meas, "units": len(units)}


def _fake(trace, seed):
    fake = FakeNvml(G, default_params(trace, G), seed=seed, time_noise=0.01, power_noise=0.02)
    return NvmlBackend(fake, observe_only=False), SimulatedWorkload(trace, fake), fake


@pytest.mark.parametrize("first,rounds", [(2, 2), pytest.param(4, 1, marks=pytest.mark.slow)])
def test_sparse_sweep_measures_what_it_measured_before(tmp_path, spaan_trace, first, rounds):
    be, wl, fake = _fake(spaan_trace, 5)
    ref = _reference_sparse(be, wl, G, SETTINGS, tmp_path / "ref.csv", first=first, rounds=rounds, **KW)
    be, wl, fake = _fake(spaan_trace, 5)
    new = sparse_sweep(be, wl, G, SETTINGS, tmp_path / "new.csv", first=first, rounds=rounds, **KW)
    assert new == ref
    assert (tmp_path / "new.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()  # same settings, same order
    assert fake.at_default_clocks
    rows = read_sweep(tmp_path / "new.csv", min_points=1).points
    assert len(rows) == 46 and ref["measured_settings"] > 46 * (first + 1)  # the later rounds measured something


def test_the_decision_is_a_pure_function_of_the_measurements(tmp_path, spaan_trace):
    """``sparse_next`` reads nothing but the sweep it is given: called twice it answers alike, and a setting already
    measured for a unit is never asked for again."""
    be, wl, _ = _fake(spaan_trace, 2)
    probes = sparse_probes(G, SETTINGS, 2)
    assert probes == _old_probes(G, SETTINGS, 2)
    out = run_sweep(be, wl, G, probes, tmp_path / "s.csv", **KW)
    units = [(u.name, u.keys[0]) for u in wl.units()]
    repeats = dict(zip(spaan_trace.kernel_keys, spaan_trace.repeats.tolist()))
    sw = read_sweep(out, min_points=1)
    a = sparse_next(sw, G, SETTINGS, units, repeats)
    assert a == sparse_next(sw, G, SETTINGS, units, repeats) and a
    measured = {(k, p.core_mhz, p.mem_mhz) for k, ps in sw.points.items() for p in ps}
    for name, key in units:
        for st in a.get(name, []):
            assert st in SETTINGS and (key, *st) not in measured


def test_a_fit_that_does_not_converge_is_an_input_error_naming_the_fix(tmp_path, spaan_trace, monkeypatch):
    """A sparse sweep on the fake (seed 11, 0.2 s windows, the study's settings) stopped with numpy's 'SVD did not
    converge' traceback from inside the fit; the fit now says what it could not do and what to measure."""
    import kdvfs.fit as fit
    from kdvfs.errors import InputError

    be, wl, _ = _fake(spaan_trace, 2)
    out = run_sweep(be, wl, G, sparse_probes(G, SETTINGS, 2), tmp_path / "s.csv", **KW)

    def singular(*a, **k):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(fit, "least_squares", singular)
    with pytest.raises(InputError, match=r"did not converge .* on 46 kernels with 3–3 measured settings each; measure "
                                         "more settings per kernel"):
        fit.fit_params(read_sweep(out), G)
