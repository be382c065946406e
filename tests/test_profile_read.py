"""``load_profile``'s column-at-a-time reader of plain files gives exactly what the row reader gives: the same arrays,
or the same error naming the same line (it hands every file it does not fully accept to the row reader)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kdvfs import profile as prof
from kdvfs.bundled import resolve_profile_path
from kdvfs.errors import KdvfsError

BASE = """# kdvfs-profile/1 gpu=rtx3080ti trace=t
kernel,core_mhz,mem_mhz,time_s,power_w,energy_j,source,eff_core_mhz
a.0,auto,auto,1.000000e-03,300.0,3.0e-01,measured,1900.0
a.0,210,auto,2.000000e-03,100.0,2.0e-01,model,210.0
a.0,210,405,3.000000e-03,90.0,2.7e-01,,
b.1,auto,auto,4.000000e-03,310.0,1.24e+00,fitted,1800.0
b.1,210,auto,5.000000e-03,110.0,5.5e-01,fitted,210.0
b.1,210,405,6.000000e-03,95.0,5.7e-01,fitted,210.0
"""


def _outcome(path):
    try:
        p = prof.load_profile(path)
    except KdvfsError as e:
        return ("error", type(e).__name__, str(e))
    eff = None if p.eff_core_mhz is None else p.eff_core_mhz.tobytes()
    return ("ok", p.keys, p.settings, p.time_s.tobytes(), p.power_w.tobytes(), p.source.tolist(), p.gpu, p.trace,
            p.trace_sha, eff)


def _both(path, monkeypatch):
    """(outcome as shipped, outcome with the row reader only)."""
    calls = []
    real = prof._parse_body_plain

    def spy(*a):
        r = real(*a)
        calls.append(r is not None)
        return r

    monkeypatch.setattr(prof, "_parse_body_plain", spy)
    fast = _outcome(path)
    monkeypatch.setattr(prof, "_parse_body_plain", lambda *a: None)
    rows = _outcome(path)
    monkeypatch.setattr(prof, "_parse_body_plain", real)
    return fast, rows, calls


@pytest.mark.parametrize("name", ["gpt3xl-llmc-rtx3080ti", "gpt3xl-torch-h200-bf16"])
def test_bundled_profiles_read_alike(name, monkeypatch):
    fast, rows, calls = _both(resolve_profile_path(name), monkeypatch)
    assert calls == [True]  # the bundled files take the column reader
    assert fast[0] == "ok" and fast == rows


@pytest.mark.parametrize("edit", [
    lambda s: s,
    lambda s: s.replace("a.0,", '"a.0",'),  # quoted keys: the row reader
    lambda s: s.replace("\n", "\r\n"),  # CR LF line ends: the row reader
    lambda s: s.rstrip("\n"),  # no final newline
    lambda s: s.replace(",,\n", ",model,\n"),
    lambda s: s.replace("\nb.1,210,405", "\n\nb.1,210,405"),  # a blank line: an error naming it
    lambda s: s.replace("6.000000e-03", "6e-3x"),
    lambda s: s.replace("95.0,5.7e-01,fitted,210.0", "95.0,5.7e-01,fitted"),
    lambda s: s.replace("95.0,5.7e-01,fitted,210.0", "95.0,5.7e-01,fitted,210.0,1"),
    lambda s: s.replace("model,210.0", "model").replace(",,\n", ",,,\n"),  # one field moved between lines
    lambda s: s.replace("b.1,210,405", "b.1,210.0,405"),  # the same setting written two ways
    lambda s: s.replace("b.1,210,405", "b.1,210,auto"),  # a duplicate cell
    lambda s: s.replace("b.1,210,405", "b.1,-5,405"),
    lambda s: s.replace("300.0", "nan"),
    lambda s: s.replace("1800.0", "fast"),
    lambda s: s.replace(",source,eff_core_mhz", ",source,other").replace(",measured,1900.0", ",measured,x"),
    lambda s: s.split("\n", 2)[0] + "\n" + s.split("\n", 2)[1] + "\n",  # a header and no rows
    # kernel rows in runs of one length and clock columns that repeat with it are indexed from one run or period:
    # the rows out of that shape are counted row by row
    lambda s: s.replace("b.1,210,auto,5.000000e-03", "b.1,210,auto,5.000000e-03").replace(
        "b.1,auto,auto,4.000000e-03,310.0,1.24e+00,fitted,1800.0\nb.1,210,auto", "b.1,210,auto").replace(
        "b.1,210,405,6.000000e-03,95.0,5.7e-01,fitted,210.0\n",
        "b.1,210,405,6.000000e-03,95.0,5.7e-01,fitted,210.0\nb.1,auto,auto,4.000000e-03,310.0,1.24e+00,fitted,1800.0\n"),
    lambda s: s.replace("a.0,210,405", "c.2,210,405"),  # runs of unequal lengths
    lambda s: s.replace("b.1,auto,auto", "a.0,auto,auto").replace("a.0,210,405", "b.1,210,405"),  # keys interleaved
    lambda s: s.replace("a.0,210,auto", "a.0,225,auto"),  # the clocks do not repeat
    lambda s: s.replace(",model,", ",fitted,").replace(",measured,", ",fitted,").replace(",,\n", ",fitted,\n"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_edge_files_read_alike(edit, gz, tmp_path, monkeypatch):
    text = edit(BASE)
    path = tmp_path / ("p.csv.gz" if gz else "p.csv")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    fast, rows, _ = _both(path, monkeypatch)
    assert fast == rows


_PIECES = [",", "\n", '"', "x", "", "auto", "-1", "nan", "1e-3", " ", "\r", "210", "a.0", "0"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(BASE) - 1), st.integers(0, 3), st.sampled_from(_PIECES)), max_size=4))
def test_edited_files_read_alike(tmp_path, monkeypatch, edits):
    text = BASE
    for at, cut, piece in edits:
        at = min(at, len(text))
        text = text[:at] + piece + text[at + cut:]
    path = tmp_path / "p.csv"
    path.write_text(text)
    fast, rows, _ = _both(path, monkeypatch)
    assert fast == rows


def test_column_reader_keeps_first_appearance_order(tmp_path):
    text = BASE.replace("a.0,", "z.0,")
    path = tmp_path / "p.csv"
    path.write_text(text)
    p = prof.load_profile(path)
    assert p.keys == ("z.0", "b.1")
    assert p.settings == ((0, 0), (210, 0), (210, 405))
    assert np.array_equal(p.source[0], ["measured", "model", "measured"])


def test_a_field_moved_between_lines_is_not_read_as_columns(tmp_path, monkeypatch):
    # every field numeric, so that columns shifted by one would still convert: only the per-line count catches it
    text = "kernel,core_mhz,mem_mhz,time_s,power_w\n1,210,210,1,1,1\n1,210,210,1\n"
    path = tmp_path / "p.csv"
    path.write_text(text)
    fast, rows, calls = _both(path, monkeypatch)
    assert calls == [False] and fast == rows and fast[0] == "error" and "line 2" in fast[2]
