"""Structure found on import: period detection, module units, the streaming reader, a real HF GPT-2 step."""

import gzip
import json
import time

import numpy as np
import pytest
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from kdvfs.errors import FormatError
from kdvfs.importers import import_kineto
from kdvfs.structure import find_blocks, merge_units, tandem_repeat

HF = ROOT / "validation/h200/runtime/hf_gpt2_step.kineto.json.gz"


def test_tandem_repeat_finds_the_layers():
    layer = [5, 6, 7, 8, 9, 10]
    keys = np.array([1, 2] + layer * 24 + [3, 4, 4])
    b = tandem_repeat(keys)
    assert (b.start, b.period, b.count) == (2, 6, 24)


def test_find_blocks_covers_the_sequence_in_order():
    keys = np.array([1, 2] + [5, 6, 7, 8] * 3 + [9] + [11, 12, 13, 14, 15] * 2 + [20] * 6)
    bl = find_blocks(keys)
    assert [(b.period, b.count) for b in bl] == [(2, 1), (4, 3), (1, 1), (5, 2), (1, 6)]
    assert bl[0].start == 0 and all(a.stop == b.start for a, b in zip(bl, bl[1:])) and bl[-1].stop == len(keys)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=200))
def test_find_blocks_reproduces_any_sequence(seq):
    keys = np.array(seq, dtype=np.int64)
    out = []
    for b in find_blocks(keys):
        block = keys[b.start:b.start + b.period]
        assert np.array_equal(keys[b.start:b.stop], np.tile(block, b.count))
        out += list(np.tile(block, b.count))
    assert out == seq


def test_period_detection_is_not_quadratic():
    rng = np.random.default_rng(0)
    layer = rng.integers(0, 50, 40)
    keys = np.concatenate([rng.integers(100, 200, 300), np.tile(layer, 400), rng.integers(300, 400, 300)])
    t0 = time.perf_counter()
    b = tandem_repeat(keys)
    assert time.perf_counter() - t0 < 2.0
    assert b.period == 40 and b.count == 400


def test_merge_units_only_merges_identical_instances():
    keys = np.array([1, 2, 3, 2, 3, 2, 4, 9])
    units = ["Emb_0", "Blk_0", "Blk_0", "Blk_1", "Blk_1", "Blk_2", "Blk_2", None]
    bl = merge_units(keys, units)
    assert [(b.unit, b.period, b.count) for b in bl] == [("Emb", 1, 1), ("Blk", 2, 2), ("Blk", 2, 1), (None, 1, 1)]


@pytest.fixture(scope="module")
def hf():
    return import_kineto(HF)


def test_hf_gpt2_step_reads_as_layers(hf):
    """HF GPT-2, 24 layers × hidden 2048, recorded on the H200 with with_stack/with_modules/record_shapes."""
    t = hf.trace
    seg = {s.name: s for s in t.segments}
    assert hf.structure == "modules"
    assert seg["forward.GPT2Block"].repeat == 24 and seg["backward.GPT2Block"].repeat == 24
    assert len(t.instances()) == 2952 and len(t.kernels) < 200
    assert t.gpu == "NVIDIA H200" and (t.batch_size, t.seq_len) == (4, 1024)
    assert hf.assigned_time_share == 1.0


def test_trace_show_prints_no_none(tmp_path, capsys):
    p = tmp_path / "t.json"
    assert run_cli(["trace", "import", str(ROOT / "tests/data/foreign-transformer.kineto.json.gz"), "-o", str(p)],
                   capsys)[0] == 0
    code, out, _ = run_cli(["trace", "show", str(p)], capsys)
    assert code == 0 and "None" not in out


def test_step_all_averages_identical_steps(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_import import write_trace

    p = tmp_path / "s.json"
    write_trace(p, steps=5, layers=6, per_layer=5, opt_kernels=10)
    imp = import_kineto(p, step="all")
    assert imp.steps == 5 and imp.steps_used == 5
    assert [s.repeat for s in imp.trace.segments if s.pass_name == "forward"] == [6]
    last = import_kineto(p, step="last")
    assert len(last.trace.instances()) == len(imp.trace.instances())


def test_streaming_reader_errors(tmp_path):
    p = tmp_path / "cut.json.gz"
    doc = json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {}}] * 50})
    p.write_bytes(gzip.compress(doc[: len(doc) // 2].encode()))
    with pytest.raises(FormatError, match="not valid JSON .* truncated"):
        import_kineto(p)
    q = tmp_path / "array.json"
    q.write_text(json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {}}]))
    assert len(import_kineto(q).trace.instances()) == 1
    r = tmp_path / "other.json"
    r.write_text(json.dumps({"hello": 1}))
    with pytest.raises(FormatError, match="no 'traceEvents'"):
        import_kineto(r)


def test_reader_is_independent_of_chunk_boundaries(monkeypatch):
    import kdvfs.kineto as kk

    ref = import_kineto(ROOT / "tests/data/foreign-transformer.kineto.json.gz").trace
    monkeypatch.setattr(kk, "_CHUNK", 97)  # every event straddles a chunk boundary somewhere
    small = import_kineto(ROOT / "tests/data/foreign-transformer.kineto.json.gz").trace
    assert small == ref
