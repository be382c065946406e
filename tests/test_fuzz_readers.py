"""Hypothesis fuzzing of the readers: whatever the bytes, a reader returns a value or raises a ``KdvfsError`` — never
another exception (issue 13)."""

import contextlib
import copy
import gzip
import json
import tempfile
from pathlib import Path

import pytest
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kdvfs.bundled import resolve_trace_path
from kdvfs.errors import KdvfsError
from kdvfs.fit import read_sweep
from kdvfs.importers import import_kineto
from kdvfs.profile import load_profile
from kdvfs.schedule import load_schedule, schedule_from_dict
from kdvfs.trace import load_trace, trace_from_dict

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(doc, prefix=()):
    """Every (path) into a JSON document, to mutate one place at a time."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, path, value):
    doc = copy.deepcopy(doc)
    if not path:
        return value
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


def _ok(fn, *a):
    with contextlib.suppress(KdvfsError):
        fn(*a)


_SMALL_TRACE = json.loads(resolve_trace_path("gpt3xl-llmc-rtx3080ti").read_text())
_SMALL_TRACE["segments"] = _SMALL_TRACE["segments"][:2]
_TRACE_PATHS = list(_paths(_SMALL_TRACE))


@FUZZ
@given(st.sampled_from(_TRACE_PATHS), json_values)
def test_trace_documents(path, value):
    _ok(trace_from_dict, _mutate(_SMALL_TRACE, path, value))


def _bytes_file(data: bytes, name: str):
    d = tempfile.mkdtemp()
    p = Path(d) / name
    p.write_bytes(data)
    return p


@FUZZ
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), st.sampled_from(["t.json", "t.json.gz"]))
def test_trace_and_schedule_files_from_any_bytes(data, name):
    p = _bytes_file(data, name)
    _ok(load_trace, p)
    _ok(load_schedule, p)


_SCHEDULE = {"format": "kdvfs-schedule/1", "trace": "x", "trace_sha": "", "gpu": "rtx3080ti", "instances": 4,
             "objective": "waste", "slack_pct": 0, "granularity": "kernel", "scope": "global", "solver": "fast",
             "bound_energy_j": 1.0, "gap_pct": 0.0, "predicted": {}, "auto": {}, "switch_model": {},
             "runs": [["auto", "auto", 2], [1050, 9501, 2]]}


@FUZZ
@given(st.sampled_from(list(_paths(_SCHEDULE))), json_values)
def test_schedule_documents(path, value):
    _ok(schedule_from_dict, _mutate(_SCHEDULE, path, value))


_PROFILE = ("# kdvfs-profile/1 gpu=rtx3080ti trace=x trace_sha=0123456789abcdef\n"
            "kernel,core_mhz,mem_mhz,time_s,power_w,energy_j,source\n"
            "a.0,auto,auto,1.0e-03,200.0,2.0e-01,model\n"
            "a.0,1050,9501,1.5e-03,150.0,2.25e-01,model\n"
            "a.1,auto,auto,2.0e-03,210.0,4.2e-01,model\n"
            "a.1,1050,9501,2.5e-03,160.0,4.0e-01,model\n")
_SWEEP = ("# kdvfs-sweep/1 gpu=rtx3080ti trace=x trace_sha=0123456789abcdef\n"
          "kernel,core_mhz,mem_mhz,repeat,time_s,power_w,energy_j,core_actual_mhz,temperature_c,window_s,iterations,unit\n"
          "a.0,auto,auto,0,1.0e-03,200.0,2.0e-01,1800,60,1.0,100,a.0\n"
          "a.0,1050,9501,0,1.5e-03,150.0,2.25e-01,1050,60,1.0,100,a.0\n"
          "a.0,630,9501,0,2.5e-03,120.0,3.0e-01,630,60,1.0,100,a.0\n")


def _text_edits(base: str):
    """A valid file with a few characters replaced, inserted or deleted, or a line duplicated or cut."""
    pos = st.integers(0, len(base))
    return st.one_of(
        st.tuples(pos, st.text(max_size=6)).map(lambda t: base[:t[0]] + t[1] + base[t[0]:]),
        st.tuples(pos, st.integers(1, 8)).map(lambda t: base[:t[0]] + base[t[0] + t[1]:]),
        st.tuples(pos, st.text(min_size=1, max_size=4)).map(lambda t: base[:t[0]] + t[1] + base[t[0] + len(t[1]):]),
        pos.map(lambda n: base[:n]),
        st.integers(0, base.count("\n") - 1).map(
            lambda i: "\n".join(base.split("\n")[:i + 1] + base.split("\n")[i:])),
    )


@FUZZ
@given(_text_edits(_PROFILE), st.booleans())
def test_profile_files(text, gz):
    data = text.encode("utf-8", "surrogatepass")
    _ok(load_profile, _bytes_file(gzip.compress(data) if gz else data, "p.csv"))


@FUZZ
@given(_text_edits(_SWEEP))
def test_sweep_files(text):
    p = _bytes_file(text.encode("utf-8", "surrogatepass"), "s.csv")
    _ok(read_sweep, p, 1)
    from hw_backend.sweep import done_rows

    _ok(done_rows, p)


@FUZZ
@given(st.binary(max_size=300))
def test_profile_and_sweep_from_any_bytes(data):
    p = _bytes_file(data, "x.csv")
    _ok(load_profile, p)
    _ok(read_sweep, p)


def _kineto_small():
    doc = json.loads(gzip.decompress((DATA / "foreign-transformer.kineto.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"][:8]
    corr = {e["args"]["correlation"] for e in kernels}
    runtime = [e for e in ev if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in corr]
    ops = [e for e in ev if e.get("cat") in ("user_annotation", "cpu_op")][:10]
    return {"traceEvents": kernels + runtime + ops}


_KINETO = _kineto_small()
_KINETO_PATHS = [p for p in _paths(_KINETO) if len(p) >= 3]


@FUZZ
@given(st.sampled_from(_KINETO_PATHS), json_values)
def test_kineto_documents(path, value):
    p = _bytes_file(json.dumps(_mutate(_KINETO, path, value)).encode(), "k.json")
    _ok(import_kineto, p)


@FUZZ
@given(st.binary(max_size=200))
def test_kineto_from_any_bytes(data):
    _ok(import_kineto, _bytes_file(data, "k.json"))


def test_the_fuzzed_files_are_valid_before_mutation():
    """The seeds must parse, or the fuzzing would only ever test the first error."""
    trace_from_dict(_SMALL_TRACE)
    schedule_from_dict(_SCHEDULE)
    assert load_profile(_bytes_file(_PROFILE.encode(), "p.csv")).trace_sha == "0123456789abcdef"
    assert len(read_sweep(_bytes_file(_SWEEP.encode(), "s.csv"), 1).points["a.0"]) == 3
    assert import_kineto(_bytes_file(json.dumps(_KINETO).encode(), "k.json")).trace.kernels


@pytest.mark.parametrize("data", [b"[" * 100000, b'{"format": "kdvfs-trace/1", "segments": ' + b"9" * 5000 + b"}"])
def test_pathological_json(data):
    _ok(load_trace, _bytes_file(data, "t.json"))
