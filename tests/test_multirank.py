"""Multi-rank traces (kdvfs.multirank) and their replay through the dependency graph (simulator.ranks)."""

import gzip
import json

import pytest

from kdvfs.errors import InputError
from kdvfs.gpus import get_gpu
from kdvfs.multirank import import_ranks, load_multitrace, save_multitrace
from simulator.ranks import build_graph, replay_ranks
from tests.conftest import run_cli
from tests.kineto_ranks import rank_trace, write_ranks


def test_import_two_ranks_any_order(tmp_path):
    p = write_ranks(tmp_path)
    mt = import_ranks(list(reversed(p)))
    assert mt.world_size == 2 and mt.backend == "nccl"
    assert mt.ranks[0].name.endswith("rank0")
    k0 = [mt.ranks[0].kernels[i] for i in mt.ranks[0].instances()]
    assert sum(k.category == "collective" for k in k0) == 2
    assert set(mt.timing[0].stream.tolist()) == {7, 21}
    assert mt.timing[0].start_s[0] == 0.0
    f = save_multitrace(mt, tmp_path / "m.json.gz")
    back = load_multitrace(f)
    assert back.world_size == 2 and (back.timing[1].start_s == mt.timing[1].start_s).all()


def test_import_keeps_each_instance_recorded_duration(tmp_path):
    """A repeated layer is folded into one segment of mean kernel times; the multi-rank import still keeps every
    instance's own recorded start and duration (the GPT-2 DDP recording failed to import before this)."""
    import numpy as np

    p = write_ranks(tmp_path, layers=True)
    mt = import_ranks(p)
    t = mt.ranks[0]
    fwd = [i for i, k in enumerate(t.kernels[j] for j in t.instances()) if k.name.endswith("_fwd")]
    assert len(fwd) == 6
    means = {t.kernels[t.instances()[i]].time_s for i in fwd}
    assert len(means) == 1  # the trace holds the mean
    d = mt.durations_s(0)[fwd]
    np.testing.assert_allclose(d, 400e-6 * (1 + 0.1 * np.arange(6)))  # the recording holds each one's own
    back = load_multitrace(save_multitrace(mt, tmp_path / "m.json.gz"))
    np.testing.assert_array_equal(back.durations_s(1), mt.durations_s(1))
    r = replay_ranks(mt, get_gpu("h200"))
    for i in range(2):
        assert r.per_gpu_time_s[i] == pytest.approx(mt.summary()["ranks"][i]["span_s"], rel=0.05)


def test_bad_rank_sets(tmp_path):
    p = write_ranks(tmp_path, world=3)
    with pytest.raises(InputError, match=r"rank\(s\) \[2\] is missing"):
        import_ranks(p[:2])
    with pytest.raises(InputError, match="rank 1 is given twice"):
        import_ranks([p[0], p[1], p[1]])
    other = tmp_path / "other.json"
    other.write_text(json.dumps(rank_trace(1, 2, model="b")))
    (tmp_path / "two").mkdir()
    q = write_ranks(tmp_path / "two", world=2)
    with pytest.raises(InputError, match="different models"):
        import_ranks([q[0], other])
    with pytest.raises(InputError, match="different sizes"):
        import_ranks([q[0], p[1]])
    with pytest.raises(InputError, match="cannot be laid out"):
        import_ranks(p, gpus_per_node=2)
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(rank_trace(1, 2, buckets=1)))
    with pytest.raises(InputError, match="collective kernels"):
        import_ranks([q[0], fewer])


def test_graph_and_replay_reproduce_recording(tmp_path):
    mt = import_ranks(write_ranks(tmp_path))
    g = build_graph(mt)
    e = g.graph["edges"]
    assert e["launch"] >= 2 and e["wait"] >= 1 and e["rank"] == 2
    spec = get_gpu("h200")
    r = replay_ranks(mt, spec, graph=g)
    spans = mt.summary()["ranks"]
    # replayed at the recorded durations, each rank's span is what was recorded
    for i in range(2):
        assert r.per_gpu_time_s[i] == pytest.approx(spans[i]["span_s"], rel=0.05)
    assert r.time_s == pytest.approx(max(s["span_s"] for s in spans), rel=0.05)
    assert all(c > 0 for c in r.collective_time_s) and all(x <= c for x, c in zip(r.exposed_collective_s,
                                                                                   r.collective_time_s))
    assert all(e > spec.idle_power_w * r.time_s for e in r.per_gpu_energy_j)
    # a slower compute stream on rank 0 delays both ranks at the shared collective
    import numpy as np

    slow = [np.where([mt.ranks[k].kernels[i].category == "gemm" for i in mt.ranks[k].instances()], 1.5, 1.0)
            for k in range(2)]
    r2 = replay_ranks(mt, spec, graph=g, time_factor=slow)
    assert r2.time_s > r.time_s * 1.2


def test_replay_power_cap_and_collective_wait(tmp_path):
    """Concurrent kernels never draw above the card's cap; a collective's wait can be charged at its own power."""
    import numpy as np

    mt = import_ranks(write_ranks(tmp_path))
    spec = get_gpu("h200")
    g = build_graph(mt)
    free = replay_ranks(mt, spec, graph=g, cap_w=np.inf)
    capped = replay_ranks(mt, spec, graph=g)
    assert all(c <= f + 1e-9 for c, f in zip(capped.per_gpu_energy_j, free.per_gpu_energy_j))
    low = replay_ranks(mt, spec, graph=g, cap_w=spec.idle_power_w + 1.0)
    assert all(e <= (spec.idle_power_w + 1.0) * low.time_s + 1e-9 for e in low.per_gpu_energy_j)
    # rank 0 (faster) waits at each collective for rank 1: only its energy drops when the wait is charged at idle
    w = replay_ranks(mt, spec, graph=g, cap_w=np.inf, wait_power_w=spec.idle_power_w)
    assert w.per_gpu_energy_j[0] < free.per_gpu_energy_j[0] - 1e-6
    assert w.per_gpu_energy_j[1] == pytest.approx(free.per_gpu_energy_j[1])
    assert w.collective_time_s == pytest.approx(free.collective_time_s)  # the split changes power, not time
    assert w.exposed_collective_s == pytest.approx(free.exposed_collective_s)


def test_cli_import_and_simulate_ranks(tmp_path, capsys):
    p = write_ranks(tmp_path)
    out = tmp_path / "m.json.gz"
    code, o, _ = run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(out), "--json"], capsys)
    assert code == 0 and json.loads(o)["world_size"] == 2
    code, o, _ = run_cli(["simulate-ranks", "--trace", str(out), "--gpu", "h200", "--json"], capsys)
    d = json.loads(o)
    assert code == 0 and len(d["per_gpu_energy_j"]) == 2 and 0 < d["collective_share"][0] < 1
    code, o, _ = run_cli(["simulate-ranks", "--trace", str(out), "--gpu", "h200", "--json",
                          "--collective-wait-power", "122"], capsys)
    assert code == 0 and json.loads(o)["per_gpu_energy_j"][0] < d["per_gpu_energy_j"][0]
    code, _, err = run_cli(["simulate-ranks", "--trace", str(out), "--gpu", "h200", "--collective-wait-power", "-5"],
                           capsys)
    assert code == 2 and "--collective-wait-power" in err
    code, _, err = run_cli(["trace", "import", str(p[0]), str(p[0]), "-o", str(out)], capsys)
    assert code == 2 and "given twice" in err
    assert gzip.decompress(out.read_bytes())


def test_recorded_h200_ddp_step_replays_its_span():
    """The DDP step recorded on two H200s (validation/h200x2): the graph explains the recording (the replay at the
    recorded durations gives each rank's recorded span) and joins the 37 gradient all-reduces across the ranks."""
    from pathlib import Path

    mt = load_multitrace(Path(__file__).parent / "data" / "gpt2-ddp-h200x2.ranks.json.gz")
    g = build_graph(mt)
    assert g.graph["edges"]["rank"] == 37 and g.graph["edges"]["launch"] >= 37
    r = replay_ranks(mt, get_gpu("h200"), graph=g)
    for i, row in enumerate(mt.summary()["ranks"]):
        assert r.per_gpu_time_s[i] == pytest.approx(row["span_s"], rel=1e-3)
    # measured on the cards: 235.06 / 235.08 ms per step; the replay is within 1 %
    assert r.time_s == pytest.approx(0.23507, rel=0.01)
    assert 0 < r.exposed_collective_s[0] < r.collective_time_s[0] < 0.1 * r.time_s


def test_rank_powers_under_the_limiter(tmp_path):
    """Under the H200's windowed limiter each rank runs at one steady ceiling, whose average power — the gap power
    plus every kernel's power above it over the rank's span, overlapping kernels adding — is at most the cap (or the
    ceiling is the top clock); a kernel may then draw above the cap, so its replay has no instantaneous cap."""
    import numpy as np

    from kdvfs.limiter import gap_power_for, limiter_for
    from simulator.ranks import rank_powers

    mt = import_ranks(write_ranks(tmp_path))
    spec = get_gpu("h200")
    lim, gap = limiter_for(spec), gap_power_for(spec)
    # the card fit's gap power: since session 9 the thermal gap line's at the zoo kernels' median temperature (131 W)
    assert lim is not None and gap is not None and 100 < gap < spec.idle_power_w + 20
    iso = rank_powers(mt, spec)
    lp = rank_powers(mt, spec, limiter=True)
    spans = [r["span_s"] for r in mt.summary()["ranks"]]
    for r in range(2):
        d = mt.durations_s(r)
        assert lp[r].shape == iso[r].shape
        avg = gap + float(np.sum((lp[r] - gap) * d)) / spans[r]
        assert avg <= lim.cap_for(spec) + 1.0 or np.all(lp[r] >= iso[r] - 1e-6)
    g = build_graph(mt)
    a = replay_ranks(mt, spec, graph=g, powers=lp, cap_w=np.inf)
    b = replay_ranks(mt, spec, graph=g, powers=iso)
    assert a.time_s == pytest.approx(b.time_s)  # power, not time: the durations stay the recorded ones


@pytest.mark.parametrize("run", ["session6", "session6-b32", "session6-b8-twin"])
def test_ddp_step_with_shapes_replayed_under_the_limiter(run):
    """The DDP steps recorded with op shapes on two H200s in session 6 (validation/h200x2/session6*, held out: nothing
    fitted to them; batch 16, 32 and 8 per GPU, the last with its timing from a step recorded without shapes):
    replayed under the limiter, time within 5 % and each card's energy per step within 5 % of its energy counter
    (−3.2 … +4.1 % when this was written in session 6). Session 7's model read +4.54 / +5.55 % on the batch-8 run (held
    to 6 % then); session 8's (the occupancy structure, seven zoo files) reads −3.41 / +0.26, −2.04 / −3.66 and
    +2.04 / +3.10 %, all three held to 5 % again; session 9's (nine files, the thermal gap model) −3.41 / +0.22,
    −1.82 / −3.44 and +1.75 / +2.82 %. Each kernel throttled alone, every run is at least 5 points lower than
    under the limiter."""
    from pathlib import Path

    import numpy as np

    from simulator.ranks import rank_powers

    root = Path(__file__).resolve().parents[1] / "validation" / "h200x2" / run
    meas = json.loads((root / "measurements.json").read_text())
    files = sorted(f for f in root.glob("rank*.kineto.json.gz") if ".shapes." not in f.name)
    twins = [f.with_name(f.name.replace(".kineto", ".shapes.kineto")) for f in files]
    mt = import_ranks(files, work_from=twins if all(t.exists() for t in twins) else None)
    spec = get_gpu("h200")
    g = build_graph(mt)
    lim = replay_ranks(mt, spec, graph=g, powers=rank_powers(mt, spec, limiter=True), cap_w=np.inf)
    iso = replay_ranks(mt, spec, graph=g)
    for r, m in enumerate(sorted(meas["ranks"], key=lambda x: x["rank"])):
        e = float(np.mean([w["step_energy_j"] for w in m["windows"]]))
        t = float(np.mean([w["step_time_s"] for w in m["windows"]]))
        assert abs(lim.time_s / t - 1) <= 0.05 and abs(lim.per_gpu_energy_j[r] / e - 1) <= 0.05
        assert iso.per_gpu_energy_j[r] / e < lim.per_gpu_energy_j[r] / e - 0.05 and iso.per_gpu_energy_j[r] < e


def test_simulate_ranks_limiter_switch(tmp_path, capsys):
    p = write_ranks(tmp_path)
    out = tmp_path / "m.json.gz"
    assert run_cli(["trace", "import", str(p[0]), str(p[1]), "-o", str(out)], capsys)[0] == 0
    runs = {}
    for mode in ("auto", "on", "off"):
        code, o, _ = run_cli(["simulate-ranks", "--trace", str(out), "--gpu", "h200", "--limiter", mode, "--json"],
                             capsys)
        assert code == 0
        runs[mode] = json.loads(o)
    assert runs["auto"]["per_gpu_energy_j"] == runs["on"]["per_gpu_energy_j"]  # the h200 has a fitted limiter
    assert runs["off"]["limiter"].startswith("each kernel") and runs["on"]["limiter"].startswith("windowed")
    code, _, err = run_cli(["simulate-ranks", "--trace", str(out), "--gpu", "a100", "--limiter", "on"], capsys)
    assert code == 2 and "limiter" in err


def test_import_ranks_takes_work_from_shape_recorded_twins(tmp_path, capsys):
    """The timing from one recording, the kernels' work from a second recording of the same step (with op shapes):
    matched one to one per rank; a twin of another step is refused."""
    for sub in ("timing", "shapes", "other"):
        (tmp_path / sub).mkdir()
    a = write_ranks(tmp_path / "timing")
    b = write_ranks(tmp_path / "shapes")
    for f in b:  # the twin ran its kernels 1.5× longer: their work (estimated from duration and name) differs
        doc = json.loads(gzip.decompress(f.read_bytes()))
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel":
                e["dur"] *= 1.5
        doc["record_shapes"] = 1  # as PyTorch marks a trace recorded with op shapes
        f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    plain = import_ranks(a)
    mt = import_ranks(a, work_from=b)
    twin = import_ranks(b)
    for r in range(2):
        assert [k.time_s for k in mt.ranks[r].kernels] == [k.time_s for k in plain.ranks[r].kernels]
        assert [(k.flops, k.bytes) for k in mt.ranks[r].kernels] == [(k.flops, k.bytes) for k in twin.ranks[r].kernels]
        assert [k.flops for k in mt.ranks[r].kernels] != [k.flops for k in plain.ranks[r].kernels]
        assert mt.durations_s(r).tolist() == plain.durations_s(r).tolist()
    with pytest.raises(InputError, match="one per rank"):
        import_ranks(a, work_from=b[:1])
    c = write_ranks(tmp_path / "other", layers=True)
    for f in c:
        doc = json.loads(gzip.decompress(f.read_bytes()))
        f.write_bytes(gzip.compress(json.dumps({**doc, "record_shapes": 1}).encode()))
    with pytest.raises(InputError, match="rank 0.*same kernels"):
        import_ranks(a, work_from=c)
    code, _, err = run_cli(["trace", "import", str(a[0]), "--work-from", str(b[0]), "-o", str(tmp_path / "x.json")],
                           capsys)
    assert code == 2 and "--work-from" in err
    code, o, _ = run_cli(["trace", "import", str(a[0]), str(a[1]), "--work-from", str(b[0]), "--work-from", str(b[1]),
                          "-o", str(tmp_path / "m.json.gz"), "--json"], capsys)
    assert code == 0 and json.loads(o)["world_size"] == 2


def test_transfer_work_matches_kernels_of_other_streams_by_occurrence():
    """A collective on another stream can start before or after a compute kernel from one step to the next: the work
    is matched by each (op, name)'s occurrence; kernels that differ are refused."""
    from kdvfs.importers import transfer_work
    from kdvfs.trace import Kernel, Segment, Trace

    def tr(names, flops):
        ks = tuple(Kernel(name=n, category="gemm" if n.startswith("g") else "collective", time_s=1e-3, flops=f,
                          op="aten::mm" if n.startswith("g") else "nccl:all_reduce") for n, f in zip(names, flops))
        return Trace(name="t", segments=(Segment("backward", ks, 1, "backward"),))

    timing = tr(["g1", "nccl", "g2", "g1"], [0.0, 0.0, 0.0, 0.0])
    shaped = tr(["g1", "g2", "nccl", "g1"], [1.0, 2.0, 3.0, 4.0])
    got = [k.flops for k in transfer_work(timing, shaped).kernels]
    assert got == [1.0, 3.0, 2.0, 4.0]  # g1 #1, the collective, g2, g1 #2
    with pytest.raises(InputError, match="same kernels"):
        transfer_work(timing, tr(["g1", "g2", "g2", "g1"], [1.0, 2.0, 3.0, 4.0]))
