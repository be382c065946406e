"""Findings of session 6's new-user / hostile test of the multi-GPU additions (issue 16): `trace import r0 r1
--work-from …`, `simulate-ranks --limiter …`, `summarize h200x2`. Each bad input is one line and exit 2."""

import gzip
import json
import os

import pytest

from kdvfs.errors import FormatError, InputError
from kdvfs.multirank import import_ranks
from tests.conftest import run_cli
from tests.kineto_ranks import rank_trace, write_ranks


def _edit(path, fn):
    doc = json.loads(gzip.decompress(path.read_bytes()))
    fn(doc)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _twins(d, scale=1.5):
    """Per-rank traces of the same step recorded again with op shapes (PyTorch's `record_shapes` flag), their kernels
    slower so that the work estimated from them differs from the timing traces'."""
    d.mkdir()
    out = write_ranks(d)

    def mark(doc):
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel":
                e["dur"] *= scale
        doc["record_shapes"] = 1
    for f in out:
        _edit(f, mark)
    return out


def test_work_from_twins_are_matched_to_their_own_rank(tmp_path):
    """Swapped --work-from files were taken in the order given; rank 1's twin gave rank 0 its work."""
    (tmp_path / "t").mkdir()
    a = write_ranks(tmp_path / "t")
    b = _twins(tmp_path / "s")
    ordered = import_ranks(a, work_from=b)
    swapped = import_ranks(a, work_from=list(reversed(b)))
    twin = import_ranks(b)
    for r in range(2):
        assert [k.flops for k in swapped.ranks[r].kernels] == [k.flops for k in ordered.ranks[r].kernels]
        assert [k.flops for k in swapped.ranks[r].kernels] == [k.flops for k in twin.ranks[r].kernels]
    # the two ranks' twins give different work (rank 1 ran slower), so a mix-up would show
    assert [k.flops for k in twin.ranks[0].kernels] != [k.flops for k in twin.ranks[1].kernels]


def test_work_from_bad_twins_are_refused(tmp_path, capsys):
    (tmp_path / "t").mkdir()
    a = write_ranks(tmp_path / "t")
    b = _twins(tmp_path / "s")
    with pytest.raises(InputError, match="timing file itself"):
        import_ranks(a, work_from=a)
    with pytest.raises(InputError, match="timing file itself"):
        import_ranks(a, work_from=[a[1], a[0]])
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="without op shapes.*record_shapes=True"):
        import_ranks(a, work_from=write_ranks(tmp_path / "plain"))
    with pytest.raises(InputError, match="rank 0 is given twice"):
        import_ranks(a, work_from=[b[0], b[0]])
    (tmp_path / "w3").mkdir()
    three = write_ranks(tmp_path / "w3", world=3)
    for f in three:
        _edit(f, lambda doc: doc.update(record_shapes=1))
    with pytest.raises(InputError, match="world size"):
        import_ranks(a, work_from=three[:2])
    code, _, err = run_cli(["trace", "import", str(a[0]), str(a[1]), "--work-from", str(a[0]), "--work-from",
                            str(a[1]), "-o", str(tmp_path / "m.json.gz")], capsys)
    assert code == 2 and err.count("\n") == 1 and "timing file itself" in err


def test_identical_files_without_rank_info_are_one_rank_twice(tmp_path):
    """Two copies of one recording (no distributedInfo to tell the ranks) were imported as two ranks."""
    doc = rank_trace(0, 2, with_info=False)
    p = [tmp_path / "a.json.gz", tmp_path / "b.json.gz"]
    for f in p:
        f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(InputError, match="same recording"):
        import_ranks(p)


def test_ranks_without_collectives_are_refused(tmp_path, capsys):
    """Files with no NCCL kernel at all (single-GPU steps) were accepted as the ranks of one step."""
    p = write_ranks(tmp_path, buckets=0)
    with pytest.raises(InputError, match="none of the 2 files has a collective"):
        import_ranks(p)
    code, _, err = run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(tmp_path / "m.json.gz")], capsys)
    assert code == 2 and "has a collective" in err and "Traceback" not in err


def test_ranks_recorded_minutes_apart_are_refused(tmp_path):
    """Rank 0 of one run and rank 1 of another run of the same model were accepted (their spans differed by 12 %)."""
    p = write_ranks(tmp_path)
    base = 1_790_857_026_000_000_000
    _edit(p[0], lambda doc: doc.update(baseTimeNanoseconds=base))
    _edit(p[1], lambda doc: doc.update(baseTimeNanoseconds=base + 2 * 10**9))  # 2 s: one step, clocks apart
    assert import_ranks(p).world_size == 2
    _edit(p[1], lambda doc: doc.update(baseTimeNanoseconds=base + 546 * 10**9))
    with pytest.raises(InputError, match="546 s apart.*different runs"):
        import_ranks(p)


def test_single_trace_verbs_point_a_multirank_trace_to_simulate_ranks(tmp_path, capsys):
    p = write_ranks(tmp_path)
    m = tmp_path / "m.ranks.json.gz"
    assert run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(m)], capsys)[0] == 0
    code, _, err = run_cli(["analyze", str(m)], capsys)
    assert code == 2 and "simulate-ranks" in err


def test_simulate_ranks_says_which_power_rule(tmp_path, capsys):
    p = write_ranks(tmp_path)
    m = tmp_path / "m.ranks.json.gz"
    assert run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(m)], capsys)[0] == 0
    _, on, _ = run_cli(["simulate-ranks", "--trace", str(m), "--gpu", "h200"], capsys)
    _, off, _ = run_cli(["simulate-ranks", "--trace", str(m), "--gpu", "h200", "--limiter", "off"], capsys)
    flat = lambda s: " ".join(s.split())  # noqa: E731 (rich wraps the title)
    assert "windowed limiter" in flat(on) and "each kernel alone" in flat(off)
    code, _, err = run_cli(["simulate-ranks", "--trace", str(m), "--gpu", "rtx3080ti", "--limiter", "on"], capsys)
    assert code == 2 and "--limiter off" in err


def _run_folder(d, ranks=(0, 1)):
    """A folder as `scripts.h200x2_ddp` writes it: per-rank traces and measurements.json."""
    d.mkdir()
    write_ranks(d)
    for r in (0, 1):
        (d / f"rank{r}.json.gz").rename(d / f"rank{r}.kineto.json.gz")
    win = {"step_time_s": 2.4e-3, "step_energy_j": 1.5, "time_s": 10.0, "steps": 4000, "mean_power_w": 600.0}
    meas = {"model": "synthetic", "ranks": [{"rank": r, "windows": [win, win],
                                             "no_sync": {"step_time_s": 2.3e-3, "step_energy_j": 1.4}}
                                            for r in ranks]}
    (d / "measurements.json").write_text(json.dumps(meas))
    return d


def test_summarize_h200x2_writes_where_it_says(tmp_path, capsys):
    """With -o elsewhere, the multi-rank trace was still written into the measurement folder."""
    d = _run_folder(tmp_path / "run")
    (tmp_path / "out").mkdir()
    code, o, _ = run_cli(["summarize", "h200x2", "--folder", str(d), "-o", str(tmp_path / "out" / "c.json")], capsys)
    assert code == 0
    assert (tmp_path / "out" / "c.json").exists() and (tmp_path / "out" / "c.ranks.trace.json.gz").exists()
    assert not (d / "ranks.trace.json.gz").exists() and not (d / "comparison.json").exists()
    assert "c.ranks.trace.json.gz" in o
    code, o, _ = run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)
    assert code == 0 and (d / "ranks.trace.json.gz").exists() and (d / "comparison.json").exists()


def test_summarize_refuses_an_unwritable_folder_before_the_work(tmp_path, capsys, monkeypatch):
    """A read-only copy of a validation folder ended in a generic 'Permission denied (….part)' after the replay."""
    d = _run_folder(tmp_path / "run")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(d) else real(p, mode))
    code, _, err = run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)
    assert code == 2 and "not writable" in err and "-o FILE" in err and err.count("\n") == 1
    code, _, err = run_cli(["summarize", "h200x2", "--folder", str(d), "-o", str(tmp_path / "nope" / "c.json")],
                           capsys)
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("break_it, message", [
    (lambda d: [f.unlink() for f in d.glob("rank*.kineto.json.gz")], "no rank\\*.kineto.json.gz"),
    (lambda d: (d / "measurements.json").write_text("{}"), "has no 'ranks'"),
    (lambda d: (d / "measurements.json").write_text(json.dumps(
        {"ranks": [{"rank": 0, "windows": [], "no_sync": {}}]})), "no DDP measurement window"),
])
def test_summarize_bad_folders_one_line(tmp_path, capsys, break_it, message):
    d = _run_folder(tmp_path / "run")
    break_it(d)
    code, _, err = run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert pytest.importorskip("re").search(message, err), err


def test_summarize_refuses_measurements_of_another_rank_count(tmp_path, capsys):
    d = _run_folder(tmp_path / "run", ranks=(0,))
    code, _, err = run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)
    assert code == 2 and "holds ranks [0]" in err


def test_summarize_refuses_twins_for_some_ranks_only(tmp_path, capsys):
    """Twins for some ranks only were ignored without a word (batch 8: +7.2 % instead of +4.1 % on rank 1)."""
    d = _run_folder(tmp_path / "run")
    _edit(d / "rank0.kineto.json.gz", lambda doc: None)
    (d / "rank0.shapes.kineto.json.gz").write_bytes((d / "rank0.kineto.json.gz").read_bytes())
    code, _, err = run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)
    assert code == 2 and "rank1.shapes.kineto.json.gz" in err


def test_measurement_file_message_names_it_once(tmp_path):
    from simulator.summaries import h200x2_comparison

    with pytest.raises(FormatError) as e:
        h200x2_comparison(tmp_path)
    assert "measurement file '" in str(e.value) and "file file" not in str(e.value)


def test_multirank_import_checks_its_output_before_the_work(tmp_path, capsys):
    """-o in a missing folder or naming a folder ended in "No such file or directory (….part)" after the import."""
    p = write_ranks(tmp_path)
    code, _, err = run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(tmp_path / "nope" / "m.json.gz")],
                           capsys)
    assert code == 2 and "does not exist" in err and ".part" not in err
    code, _, err = run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err


@pytest.mark.parametrize("corrupt, message", [
    (lambda d: d["ranks"][0].pop("timing"), "needs a 'trace' and a 'timing'"),  # was KeyError
    (lambda d: d.update(ranks="x"), "'ranks' must be a list"),  # was TypeError
    (lambda d: d["ranks"][1].update(rank=0), "says rank 0"),  # was replayed as two rank 0s
    (lambda d: d["ranks"][0]["timing"]["start_s"].__setitem__(1, None), "must be finite"),  # was NaN
    (lambda d: d["ranks"][0]["timing"]["dur_s"].__setitem__(1, -1.0), "≥ 0"),  # was replayed
])
def test_corrupt_multirank_file_is_one_line(tmp_path, capsys, corrupt, message):
    p = write_ranks(tmp_path)
    m = tmp_path / "m.ranks.json.gz"
    assert run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(m)], capsys)[0] == 0
    _edit(m, corrupt)
    code, _, err = run_cli(["simulate-ranks", "--trace", str(m), "--gpu", "h200"], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_summarize_h200x2_command_rebuilds_its_document(tmp_path, capsys):
    """--gpu was left out of the recorded command, so rerunning it gave another card's numbers."""
    d = _run_folder(tmp_path / "run")
    code, o, _ = run_cli(["summarize", "h200x2", "--folder", str(d), "--gpu", "h100", "--json"], capsys)
    assert code == 0 and "--gpu h100" in json.loads(o)["command"]


def test_summarize_other_replays_do_not_overwrite_the_comparison(tmp_path, capsys):
    """`--limiter off`, as validation/h200x2/README.md suggests, overwrote the kept comparison.json (limiter replay)."""
    d = _run_folder(tmp_path / "run")
    assert run_cli(["summarize", "h200x2", "--folder", str(d)], capsys)[0] == 0
    kept = (d / "comparison.json").read_text()
    assert run_cli(["summarize", "h200x2", "--folder", str(d), "--limiter", "off"], capsys)[0] == 0
    assert (d / "comparison.json").read_text() == kept
    off = json.loads((d / "comparison_limiter_off.json").read_text())
    assert off["replay"].startswith("each kernel") and "--limiter off" in off["command"]
