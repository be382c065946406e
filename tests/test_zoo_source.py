"""The H200 fit's one seam to hw_backend (kdvfs.zoo_source): plain data, loaded lazily, handed in."""

import subprocess
import sys
from types import MappingProxyType

import pytest

from kdvfs.h200_rows import busy_fraction, onset_rows, row_role, zoo_rows
from kdvfs.zoo_source import ZooEntry, ZooSource, zoo_source


def test_importing_the_fit_loads_no_hw_backend():
    code = ("import sys, kdvfs.calibrate_h200, kdvfs.h200_rows, kdvfs.h200_fit, kdvfs.zoo_source; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hw_backend'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]"]


def test_the_seam_carries_the_zoo_as_plain_read_only_data():
    from hw_backend.zoo import PROBE, ZOO_SETS, full_zoo

    z = zoo_source()
    names = {k.name for k in full_zoo()} | {k.name for make in ZOO_SETS.values() for k in make()}
    assert set(z.entries) == names
    k = next(k for k in full_zoo() if k.op != "idle")
    assert z.entries[k.name] == ZooEntry(k.name, k.op, k.role, k.graph, k.work.flops, k.work.bytes, k.work.tensor)
    assert (z.probe.flops, z.probe.bytes) == (PROBE.work.flops, PROBE.work.bytes)
    with pytest.raises(TypeError):
        z.entries["x"] = k  # type: ignore[index]


def _record(name, **kw):
    return {"name": name, "category": "gemm", "dtype": "bf16", "flops": 1.0, "bytes": 2.0, "time_s": 1e-3,
            "sm_mhz_median": 1980.0, "power_w": 500.0} | kw


def test_rows_take_their_definitions_from_the_zoo_handed_in():
    """A hand-made zoo, not hw_backend's: its role, graph and work are the ones the rows take."""
    mine = ZooSource(entries=MappingProxyType({
        "mine": ZooEntry("mine", "gemm", "launch", 4, 10.0, 800.0),
        "idle": ZooEntry("idle", "idle", "gap", 0, None, None)}), probe=ZooEntry("p", "gemm", "kernel", 0, 7.0, 9.0))
    rows = zoo_rows({"kernels": [_record("mine"), _record("idle", power_w=120.0), _record("other")]}, mine)
    by = {r["name"]: r for r in rows}
    assert [by["mine"][k] for k in ("role", "flops", "bytes", "recorded_flops", "ws_bytes")] == [
        "launch", 10.0, 800.0, 1.0, 200.0]  # the zoo's work; the bytes one launch of its 4-launch graph touches
    assert by["idle"]["role"] == "gap" and by["idle"]["flops"] == 1.0  # an idle entry keeps the file's numbers
    assert by["other"]["role"] == "kernel" and "recorded_flops" not in by["other"]  # not in the zoo: the file's
    assert row_role({"name": "mine"}, mine) == "launch"
    assert busy_fraction({"name": "mine", "time_s": 1.0, "cuda_kernels": [{"name": "k", "us": 1.0}]}, mine) == 1.0
    doc = {"step_responses": [{"power_instant": [[0.0, 300.0], [1.05, 900.0], [1.5, 700.0]],
                               "probe": {"time_at_max_clock_s": 2e-3},
                               "phases": [{"load": "idle", "start_s": 0.0}, {"load": "heavy", "start_s": 1.0}]}]}
    (onset,) = onset_rows([doc], zoo=mine)
    assert (onset["flops"], onset["bytes"], onset["power_w"]) == (7.0, 9.0, 900.0)
