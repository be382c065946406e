"""Typed values (issue 15): Prediction and SwitchPlan keep the schedule format's documents exactly as the dicts they
replaced wrote them."""

import json
from pathlib import Path

import pytest
from conftest import ROOT

from kdvfs.errors import FormatError
from kdvfs.gpus import get_gpu
from kdvfs.modes import Mechanism
from kdvfs.optimize import optimize
from kdvfs.optimize.switchaware import switch_aware
from kdvfs.prediction import Prediction, SwitchPlan
from kdvfs.schedule import load_schedule, save_schedule, schedule_from_dict

# every schedule file kept under validation/ was written by the dict-based code before these types existed
KEPT = sorted((ROOT / "validation").rglob("schedule-*.json"))
BASE_KEYS = ["time_s", "energy_j", "time_change_pct", "energy_change_pct", "switches"]


def test_there_are_kept_schedules_to_check():
    assert len(KEPT) >= 5


@pytest.mark.parametrize("path", KEPT, ids=lambda p: str(p.relative_to(ROOT)))
def test_kept_schedule_files_read_back_to_the_same_document(path: Path):
    doc = json.loads(path.read_text())
    back = load_schedule(path).to_dict()
    if "trace_sha" not in doc:  # files from before trace identity: the only key added since
        assert back.pop("trace_sha") == ""
    assert json.dumps(back) == json.dumps(doc)  # same keys, same order, same values


def _roundtrip_bytes(s, tmp_path: Path) -> tuple[bytes, bytes]:
    a = save_schedule(s, tmp_path / "a.json").read_bytes()
    b = save_schedule(load_schedule(tmp_path / "a.json"), tmp_path / "b.json").read_bytes()
    return a, b


def test_free_switching_schedule_roundtrips_byte_identical(tmp_path, spaan_problem):
    s = optimize(spaan_problem, "waste", 1.0)
    assert isinstance(s.predicted, Prediction) and s.switch_plan is None
    a, b = _roundtrip_bytes(s, tmp_path)
    assert a == b
    doc = json.loads(a)
    assert list(doc["predicted"]) == BASE_KEYS and doc["switch_model"] == {}


@pytest.mark.parametrize("mech", ["sync", "predictive"])
def test_switch_aware_schedule_carries_its_plan(tmp_path, spaan_problem, mech):
    sw = get_gpu("rtx3080ti").switch
    s = switch_aware(spaan_problem, sw, mech, 1.0)
    assert s.switch_plan == SwitchPlan(sw, Mechanism(mech))
    a, b = _roundtrip_bytes(s, tmp_path)
    assert a == b
    doc = json.loads(a)
    assert list(doc["predicted"]) == BASE_KEYS + ["ideal_time_s", "ideal_energy_j"]
    assert doc["switch_model"] == {"host_call_s": sw.host_call_s, "transition_s": sw.transition_s, "mechanism": mech}


def test_prediction_against_auto():
    p = Prediction.against(1.02, 90.0, 1.0, 100.0, 3, ceiling_mhz=1500.0, power_w=400.0, limiter=True)
    assert p.time_change_pct == pytest.approx(2.0) and p.energy_change_pct == pytest.approx(-10.0)
    assert list(p.to_dict()) == BASE_KEYS + ["ceiling_mhz", "power_w", "limiter"]
    assert Prediction.from_dict(p.to_dict()) == p
    assert Prediction.from_dict({}) is None


def test_values_are_frozen():
    p = Prediction(1.0, 2.0, 0.0, 0.0, 0)
    with pytest.raises(AttributeError):
        p.time_s = 3.0  # type: ignore[misc]
    assert not hasattr(p, "__dict__")  # slotted


@pytest.mark.parametrize("key, value, msg", [
    ("predicted", {"time_s": 1.0}, r"'predicted' lacks 'energy_j'"),
    ("predicted", {**dict.fromkeys(BASE_KEYS, 1), "speedup": 2}, r"unknown key\(s\) 'speedup'"),
    ("predicted", {**dict.fromkeys(BASE_KEYS, 1), "switches": -1}, r"'switches' must be an integer ≥ 0, got -1"),
    ("predicted", {**dict.fromkeys(BASE_KEYS, 1), "time_s": "fast"}, r"predicted 'time_s' must be a finite number"),
    ("switch_model", {"host_call_s": 1e-3, "transition_s": 0.0}, r"'switch_model' must hold exactly"),
    ("switch_model", {"host_call_s": 1e-3, "transition_s": 0.0, "mechanism": "telepathy"},
     r"'mechanism' 'telepathy' is not one of sync, callback, predictive"),
    ("switch_model", {"host_call_s": -1, "transition_s": 0.0, "mechanism": "sync"}, r"'host_call_s' must be a number ≥ 0"),
])
def test_bad_values_name_the_field(key, value, msg):
    doc = {"format": "kdvfs-schedule/1", "trace": "x", "gpu": "rtx3080ti", "runs": [[0, 0, 2]], key: value}
    with pytest.raises(FormatError, match=msg):
        schedule_from_dict(doc)


def test_timeline_event_args_keep_the_chrome_trace_layout(tmp_path):
    from simulator.timeline import KERNEL_LANE, SWITCH_LANE, TimelineEvent, write_timeline

    k = TimelineEvent("gemm", 0, KERNEL_LANE, 0.5, 1e-3, setting=1, segment="fwd", kernel=7)
    late = TimelineEvent("switch lands late", 0, SWITCH_LANE, 0.501, 2e-4, setting=0)
    assert k.args() == {"setting": 1, "segment": "fwd", "kernel": 7}
    settings = [(0, 0), (1500, 9501)]
    assert list(k.args(settings).items()) == [("segment", "fwd"), ("kernel", 7), ("core_mhz", 1500), ("mem_mhz", 9501)]
    assert late.args(settings) == {"core_mhz": "auto", "mem_mhz": "auto"}
    doc = json.loads(write_timeline([k, late], tmp_path / "t.json", settings).read_text())
    assert [e["name"] for e in doc["traceEvents"]] == ["thread_name", "thread_name", "gemm", "switch lands late"]
    assert doc["traceEvents"][2]["ts"] == pytest.approx(5e5) and doc["traceEvents"][3]["tid"] == SWITCH_LANE


def test_sim_result_is_typed_and_writes_the_same_document(spaan_problem):
    from kdvfs.optimize import optimize
    from simulator import SegmentResult, simulate

    pb = spaan_problem
    r = simulate(pb.trace, pb.profile, optimize(pb), get_gpu("rtx3080ti"))
    assert all(isinstance(v, SegmentResult) for v in r.segments.values())
    d = r.to_dict()
    assert list(d) == ["time_s", "energy_j", "switches", "switch_time_s", "path", "gpus", "segments"]
    assert d["segments"][pb.trace.segments[0].name] == {"time_s": r.segments[pb.trace.segments[0].name].time_s,
                                                         "energy_j": r.segments[pb.trace.segments[0].name].energy_j}
    with pytest.raises(AttributeError):
        r.time_s = 0.0  # type: ignore[misc]
