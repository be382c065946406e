"""Typed seams of issue 15: modes as enums checked once, one policy module and one evaluator, idle power from the card."""

import dataclasses
import json

import pytest

from kdvfs.errors import InputError
from kdvfs.gpus import get_gpu
from kdvfs.modes import Granularity, Mechanism, Objective, Policy, Scope
from kdvfs.optimize import allocate, switch_aware
from kdvfs.optimize.policies import policy_schedule
from kdvfs.switching import SwitchCosts
from simulator.timeline import KERNEL_LANE


@pytest.mark.parametrize("enum", [Objective, Granularity, Scope, Mechanism, Policy])
def test_modes_behave_as_their_strings(enum):
    for m in enum:
        assert m == m.value and str(m) == m.value and f"{m}" == m.value
        assert json.loads(json.dumps({m: m})) == {m.value: m.value}
        assert enum.parse(m.value) is m and enum.parse(m) is m
    with pytest.raises(InputError, match=rf"{enum.__name__.lower()} 'nope' is not one of {', '.join(enum.values())}"):
        enum.parse("nope")


def test_bad_modes_are_refused_where_they_enter(spaan_problem):
    with pytest.raises(InputError, match="granularity 'layer' is not one of static, pass, kernel"):
        allocate(spaan_problem, "waste", 0.0, "layer")
    with pytest.raises(InputError, match="mechanism 'async' is not one of sync, callback, predictive"):
        switch_aware(spaan_problem, get_gpu("h200").switch, "async")


def test_switch_aware_prices_stalls_at_the_cards_idle_power(spaan_problem):
    pb = spaan_problem  # an RTX 3080 Ti profile: idle 76.8 W, not the generic 80 W
    sw = dataclasses.replace(get_gpu("rtx3080ti").switch, spread=0.0)
    card = SwitchCosts.for_gpu(get_gpu("rtx3080ti"))
    assert card.idle_power_w == get_gpu("rtx3080ti").idle_power_w != SwitchCosts().idle_power_w
    a = switch_aware(pb, sw, "sync", 1.0)
    b = switch_aware(pb, sw, "sync", 1.0, card)
    assert a.predicted == b.predicted and (a.core_mhz == b.core_mhz).all()


def test_policies_share_their_schedules_and_naive_is_ideal(spaan_problem):
    pb = spaan_problem
    ideal = policy_schedule(pb, "ideal", 1.0)
    assert policy_schedule(pb, Policy.NAIVE, 1.0) is ideal  # built once: no latency or mechanism in it
    assert policy_schedule(pb, "ideal", 2.0) is not ideal
    assert policy_schedule(pb, "auto", 0.0).switches == 0
    with pytest.raises(TypeError, match="needs the switch model"):
        policy_schedule(pb, "switch-aware", 1.0)


def test_compare_and_whatif_are_one_evaluator(spaan_problem):
    from simulator.evaluate import compare_rows
    from simulator.whatif import Scenario, run_scenario

    spec = get_gpu("rtx3080ti")
    rows = compare_rows(spaan_problem, spec, spec.switch, "sync", 0.0)
    labels = dict(zip(Policy.values(), rows))
    for policy in Policy.values():
        w = run_scenario("gpt3xl-llmc-rtx3080ti", "gpt3xl-llmc-rtx3080ti", "rtx3080ti",
                         Scenario("rtx3080ti", None, "sync", policy, 0.0))
        c = labels[policy]
        assert (w["time_change_pct"], w["energy_change_pct"], w["switches"]) == (
            c["time_change_pct"], c["energy_change_pct"], c["switches"]), policy


def test_frozen_values_are_frozen_all_through(spaan_problem):
    import numpy as np

    from kdvfs.model import default_params
    from kdvfs.schedule import Schedule

    core = np.array([0, 1500, 1500])
    s = Schedule("t", "rtx3080ti", core, [0, 9501, 9501])
    core[1] = 1234  # the caller's array is not the schedule's
    assert s.core_mhz.tolist() == [0, 1500, 1500] and s.mem_mhz.dtype == np.int64
    with pytest.raises(ValueError):
        s.core_mhz[0] = 1234
    prof = spaan_problem.profile
    for arr in (prof.time_s, prof.power_w, prof.source):
        with pytest.raises(ValueError):
            arr[0, 0] = arr[0, 1]
    params = default_params(spaan_problem.trace, get_gpu("rtx3080ti"))
    with pytest.raises(ValueError):
        params.tc_s[0] = 1.0
    assert prof.restrict(prof.settings[:3]).time_s.flags.writeable is False


def test_timeline_names_kernels_and_shows_late_predictive_switches(spaan_problem):
    from kdvfs.optimize import optimize
    from simulator import SimConfig, simulate
    from simulator.api import build_run
    from simulator.engine import planned_lateness

    pb = spaan_problem
    spec = get_gpu("rtx3080ti")
    s = optimize(pb, "waste", 1.0)
    sw = dataclasses.replace(get_gpu("h200").switch, spread=0.0)
    r = simulate(pb.trace, pb.profile, s, spec, SimConfig("predictive", sw, SwitchCosts.for_gpu(spec), timeline=True))
    kernels = [e for e in r.timeline if e.lane == KERNEL_LANE]
    names = [k.name for k in pb.trace.kernels]
    first = [names[k] for k in pb.trace.instances()[:10]]
    assert [e.name for e in kernels[:10]] == first
    assert kernels[0].segment == pb.trace.segments[0].name
    late = [e for e in r.timeline if e.name == "switch lands late"]
    planned = [v for v in planned_lateness(build_run(pb.trace, pb.profile, s, spec), sw).values() if v > 0]
    assert late and len(late) == len(planned)
    assert sum(e.dur_s for e in late) == pytest.approx(sum(planned), rel=1e-12)
    assert r.switch_time_s > 0


def test_clock_guard_survives_a_second_signal_during_restore():
    from hw_backend.base import ClockGuard

    class Backend:
        name = "b"

        def __init__(self):
            self.resets = 0

        def set_clocks_mhz(self, core_mhz, mem_mhz, verify=True):
            self.verify = verify

        def reset_clocks(self):
            self.resets += 1
            if self.resets == 1:
                guard.restore()  # what a second SIGINT's handler does while the first restore runs

    be = Backend()
    guard = ClockGuard(be)
    guard.set(1050, 9501, verify=False)
    assert be.verify is False and guard.changed
    guard.restore()  # a plain (non-re-entrant) lock deadlocked here
    assert be.resets == 2 and not guard.changed
    guard.set(1050, 9501)
    guard.reset()
    assert be.resets == 3 and not guard.changed and be.verify is True


def test_read_back_tolerance_is_the_cards_clock_step():
    from hw_backend.nvml import clock_step_mhz

    assert clock_step_mhz(get_gpu("rtx3080ti").core_clocks_mhz) == 15
    assert clock_step_mhz((1980, 1965, 1995, 1995)) == 15
    assert clock_step_mhz((405,)) == 0
