import gzip
import json

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from kdvfs.errors import FormatError
from kdvfs.trace import (
    CATEGORIES,
    PASSES,
    Kernel,
    Segment,
    Trace,
    load_trace,
    save_trace,
    trace_from_dict,
    trace_to_dict,
)


def test_spaan_trace_totals(spaan_trace):
    t = spaan_trace
    assert len(t.kernels) == 46
    assert len(t.instances()) == 897
    assert t.total_time_s == pytest.approx(5.358, abs=5e-4)
    assert t.total_energy_j == pytest.approx(1815.4, abs=0.05)
    assert [s.name for s in t.segments] == ["embedding", "forward_layer", "loss", "backward_layer", "embedding_backward"]
    assert [s.repeat for s in t.segments] == [1, 24, 1, 24, 1]


def test_instances_unroll_in_execution_order(spaan_trace):
    inst = spaan_trace.instances()
    fwd = spaan_trace.segments[1]
    # after the 2 embedding kernels come 24 repetitions of the 12 forward kernels
    assert inst[2:14].tolist() == list(range(2, 14))
    assert inst[14:26].tolist() == list(range(2, 14))
    assert np.bincount(inst).tolist() == spaan_trace.repeats.tolist()
    assert len(fwd.kernels) == 12


def test_trace_show_json(capsys):
    code, out, _ = run_cli(["trace", "show", "gpt3xl-llmc-rtx3080ti", "--json"], capsys)
    d = json.loads(out)
    assert code == 0
    assert (d["kernels"], d["instances"], round(d["total_time_s"], 3)) == (46, 897, 5.358)
    seg = d["segments"][1]
    assert {"name", "repeat", "kernels", "time_s"} <= set(seg)
    assert seg["repeat"] == 24 and seg["kernels"] == 12


def _kernels():
    return st.builds(
        Kernel, name=st.text(min_size=1, max_size=20), category=st.sampled_from(CATEGORIES),
        time_s=st.floats(min_value=1e-9, max_value=10, allow_nan=False),
        energy_j=st.none() | st.floats(min_value=0, max_value=1e3, allow_nan=False),
        flops=st.none() | st.floats(min_value=0, max_value=1e15, allow_nan=False),
        grid=st.none() | st.tuples(st.integers(1, 1000), st.integers(1, 10), st.integers(1, 10)),
        stream=st.none() | st.integers(0, 64), op=st.none() | st.text(max_size=10),
    )


@st.composite
def traces(draw):
    n = draw(st.integers(1, 4))
    segs = tuple(Segment(name=f"s{i}", kernels=tuple(draw(st.lists(_kernels(), min_size=1, max_size=5))),
                         repeat=draw(st.integers(1, 30)), pass_name=draw(st.sampled_from(PASSES))) for i in range(n))
    return Trace(name=draw(st.text(max_size=10)), segments=segs, model="m", batch_size=draw(st.none() | st.integers(1, 64)),
                 capture_core_mhz=draw(st.none() | st.integers(100, 3000)))


@settings(max_examples=60, deadline=None)
@given(traces())
def test_roundtrip_dict(t):
    assert trace_from_dict(json.loads(json.dumps(trace_to_dict(t)))) == t


@settings(max_examples=20, deadline=None)
@given(traces(), st.booleans())
def test_roundtrip_file(tmp_path_factory, t, gz):
    p = tmp_path_factory.mktemp("t") / ("x.trace.json.gz" if gz else "x.trace.json")
    save_trace(t, p)
    assert load_trace(p) == t


def _doc(spaan_trace):
    return trace_to_dict(spaan_trace)


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(format="kdvfs-trace/9"), "newer than this kdvfs understands"),
    (lambda d: d.update(format="other"), "not a kdvfs trace"),
    (lambda d: d["segments"][0]["kernels"][0].update(time_s=-1.0), "time_s must be a positive"),
    (lambda d: d["segments"][0]["kernels"][0].pop("time_s"), "missing duration 'time_s'"),
    (lambda d: d["segments"][0].update(repeat=0), "repeat must be an integer ≥ 1"),
    (lambda d: d["segments"][0]["kernels"][0].update(category="gemmm"), "is not one of"),
])
def test_bad_documents(spaan_trace, mutate, needle):
    d = _doc(spaan_trace)
    mutate(d)
    with pytest.raises(FormatError, match=needle):
        trace_from_dict(d)


def test_cli_bad_input_exits_2_without_traceback(tmp_path, capsys, spaan_trace):
    trunc = tmp_path / "t.trace.json"
    trunc.write_text(json.dumps(trace_to_dict(spaan_trace))[:500])
    newer = tmp_path / "n.trace.json"
    d = trace_to_dict(spaan_trace)
    d["format"] = "kdvfs-trace/3"  # /2 is a trace with concurrency (session 12)
    newer.write_text(json.dumps(d))
    badgz = tmp_path / "b.trace.json.gz"
    badgz.write_bytes(gzip.compress(b'{"format": "kdvfs-trace/1"')[:-5])
    for arg, needle in ((str(trunc), "not valid JSON"), (str(newer), "newer than"), (str(badgz), "truncated"),
                        ("no-such-trace", "neither a file nor a bundled name")):
        code, out, err = run_cli(["trace", "show", arg], capsys)
        assert code == 2, arg
        assert needle in err and "Traceback" not in err
        assert arg in err or "no-such-trace" in err
