"""Sweeps lose and mix nothing (issue 13): resume per kernel of a unit, foreign outputs refused untouched, one writer
per file, a marker for clocks a killed run left locked, argument ranges checked first; the card chosen by UUID, PCI
bus id or CUDA_VISIBLE_DEVICES."""

import csv
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli

import hw_backend.sweep as sweep_mod
from hw_backend import FakeNvml, NvmlBackend, SimulatedWorkload
from hw_backend.safety import ClockMarker, state_dir
from hw_backend.sim_workload import Unit
from hw_backend.sweep import run_sweep
from kdvfs.errors import InputError, NoGpuError
from kdvfs.gpus import AUTO, get_gpu
from kdvfs.model import default_params

G = get_gpu("rtx3080ti")
KW = dict(window_s=0.2, warmup_s=0.02, min_steps=2, allow_clock_control=True)
SETTINGS = [(AUTO, AUTO), (1050, 9501)]


def _rows(p):
    with open(p, newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


@pytest.fixture
def fake(spaan_trace):
    return FakeNvml(G, default_params(spaan_trace, G), seed=1, time_noise=0.01, power_noise=0.02)


class StagedWorkload(SimulatedWorkload):
    """Units of three kernels each, like the real NVML path's stages."""

    def units(self):
        keys = self.trace.kernel_keys[:12]
        return [Unit(f"stage{i}", tuple(keys[i:i + 3]), (0.5, 0.3, 0.2)) for i in range(0, 12, 3)]

    def unit_time_estimate_s(self, unit):
        return sum(self.trace.kernels[self._idx[k]].time_s for k in unit.keys)

    def run_unit(self, unit, repeats=1):
        for k in unit.keys:
            self.fake.run_kernel(self._idx[k], repeats)


def test_resume_keeps_every_kernel_of_a_unit(tmp_path, spaan_trace, fake, monkeypatch):
    be, wl, out = NvmlBackend(fake, observe_only=False), StagedWorkload(spaan_trace, fake), tmp_path / "s.csv"
    real_append, n = sweep_mod._append, [0]

    def killed_mid_unit(*a):
        n[0] += 1
        if n[0] == 8:  # the second row of the third unit: the old resume lost the unit's other rows for good
            raise KeyboardInterrupt
        real_append(*a)

    monkeypatch.setattr(sweep_mod, "_append", killed_mid_unit)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(be, wl, G, SETTINGS, out, **KW)
    assert len(_rows(out)) == 7
    monkeypatch.setattr(sweep_mod, "_append", real_append)
    run_sweep(be, wl, G, SETTINGS, out, **KW)
    keys = [(r["kernel"], r["core_mhz"], r["mem_mhz"], r["repeat"]) for r in _rows(out)]
    assert len(keys) == len(set(keys)) == 12 * 2
    assert fake.at_default_clocks


@pytest.mark.parametrize("content", [b"my notes\nsecond line\n", b"kernel,core_mhz\nx,1\n", b"\x00\x01binary"])
def test_an_output_that_is_not_a_sweep_is_refused_untouched(tmp_path, spaan_trace, fake, content):
    out = tmp_path / "notes.txt"
    out.write_bytes(content)
    with pytest.raises(InputError, match="is not a kdvfs sweep .* left untouched"):
        run_sweep(NvmlBackend(fake, observe_only=False), SimulatedWorkload(spaan_trace, fake), G, SETTINGS, out, **KW)
    assert out.read_bytes() == content
    assert fake.at_default_clocks and not any("Set" in c[0] for c in fake.calls)


def test_a_sweep_of_another_trace_or_card_is_refused_untouched(tmp_path, spaan_trace, fake):
    be, wl, out = NvmlBackend(fake, observe_only=False), SimulatedWorkload(spaan_trace, fake), tmp_path / "s.csv"
    run_sweep(be, wl, G, [(AUTO, AUTO)], out, **KW)
    text = out.read_text()
    assert text.startswith("# kdvfs-sweep/1 gpu=rtx3080ti trace=gpt3xl-llmc-rtx3080ti trace_sha=")
    for old, new, what in (("gpu=rtx3080ti", "gpu=h200", "gpu"), ("trace_sha=", "trace_sha=0", "trace kernels")):
        out.write_text(text.replace(old, new, 1))
        before = out.read_bytes()
        with pytest.raises(InputError, match=f"is a sweep of {what} .* left untouched"):
            run_sweep(be, wl, G, SETTINGS, out, **KW)
        assert out.read_bytes() == before


def test_a_second_writer_is_refused(tmp_path, spaan_trace, fake):
    out = tmp_path / "s.csv"
    with open(out, "a") as other:  # another process's lock (flock conflicts between open files, even in one process)
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(InputError, match="being written by another kdvfs sweep"):
            run_sweep(NvmlBackend(fake, observe_only=False), SimulatedWorkload(spaan_trace, fake), G, SETTINGS, out,
                      **KW)
    assert out.read_bytes() == b""


def test_a_sweep_refused_by_the_card_leaves_no_file(tmp_path, spaan_trace, fake):
    from kdvfs.errors import ObserveOnlyError

    out = tmp_path / "s.csv"
    with pytest.raises(ObserveOnlyError):
        run_sweep(NvmlBackend(fake), SimulatedWorkload(spaan_trace, fake), G, [(1050, 9501)], out, **KW)
    assert not out.exists()


def test_two_sweeps_in_one_file_are_refused_by_the_fit(tmp_path, spaan_trace, fake, capsys):
    out = tmp_path / "s.csv"
    run_sweep(NvmlBackend(fake, observe_only=False), SimulatedWorkload(spaan_trace, fake), G, SETTINGS, out, **KW)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines + lines[2:5]) + "\n")  # rows of a second, unlocked writer (the old behaviour)
    code, _, err = run_cli(["profile", "fit", str(out), "--gpu", "rtx3080ti", "-o", str(tmp_path / "p.csv")], capsys)
    assert code == 2 and "was already measured on line 3: two sweeps were written into one file" in err


@pytest.mark.parametrize("args, needle", [
    (["--repeats", "0"], "--repeats 0 must be a whole number in 1–1000"),
    (["--repeats", "1000000000"], "--repeats 1000000000 must be"),
    (["--noise", "nan"], "--noise nan must be a relative scatter in [0, 0.5]"),
    (["--noise", "-1"], "--noise -1.0 must be"),
    (["--window", "0"], "--window 0.0 must be > 0 s"),
    (["--window", "inf"], "--window inf must be a number of seconds"),
    (["--warmup", "-1"], "--warmup -1.0 must be"),
    (["--min-steps", "0"], "--min-steps 0 must be"),
])
def test_sweep_arguments_are_checked_before_any_work(tmp_path, capsys, args, needle):
    out = tmp_path / "s.csv"
    code, _, err = run_cli(["sweep", "--backend", "fake", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "rtx3080ti",
                            "--settings", "auto:auto", "-o", str(out)] + args, capsys)
    assert code == 2 and needle in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["dir", "missing-dir"])
def test_sweep_output_paths(tmp_path, capsys, kind):
    out = tmp_path if kind == "dir" else tmp_path / "nope" / "s.csv"
    code, _, err = run_cli(["sweep", "--backend", "fake", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu", "rtx3080ti",
                            "--settings", "auto:auto", "-o", str(out)], capsys)
    assert code == 2 and ("is a directory" if kind == "dir" else "does not exist") in err
    assert list(tmp_path.iterdir()) == []


def test_a_killed_run_leaves_a_marker_that_the_next_run_reports(tmp_path):
    out = tmp_path / "s.csv"
    cmd = [sys.executable, "-m", "kdvfs.cli", "sweep", "--backend", "fake", "--trace", "gpt3xl-llmc-rtx3080ti", "--gpu",
           "rtx3080ti", "--settings", "1050:9501,1890:5001", "--allow-clock-control", "--window", "1",
           "--warmup", "0.05", "--min-steps", "2", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 5):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # nothing can restore the clocks now
    proc.wait(timeout=30)
    markers = list(state_dir().glob("clocks-locked-*.json"))
    assert len(markers) == 1 and json.loads(markers[0].read_text())["pid"] == proc.pid
    r = subprocess.run(cmd[:cmd.index("--settings")] + ["--settings", "auto:auto", "--window", "0.05", "--warmup", "0",
                       "--min-steps", "1", "-o", str(tmp_path / "t.csv")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0
    assert f"may still be locked: a kdvfs run (pid {proc.pid})" in r.stderr
    assert f"run `kdvfs reset-clocks --device {FakeNvml.uuid_of(0)}`" in r.stderr


def test_marker_written_before_the_lock_and_removed_after_the_restore(spaan_trace, fake):
    from hw_backend import ClockGuard

    be = NvmlBackend(fake, observe_only=False)
    with ClockGuard(be) as g:
        g.set(1050, 9501)
        assert be.marker.path.exists()
        assert be.marker.stale() is None  # this very process holds it
    assert not be.marker.path.exists()
    assert NvmlBackend(fake).clock_marker is None  # observe-only never writes one
    m = ClockMarker("GPU-x", "card", "GPU-x")
    m.path.parent.mkdir(parents=True, exist_ok=True)
    m.path.write_text(json.dumps({"pid": 2 ** 22 + 12345}))  # a pid that does not run
    assert "kdvfs reset-clocks --device GPU-x" in m.stale()


# ---------------------------------------------------------------------- choosing the card


@pytest.fixture
def three(spaan_trace):
    return FakeNvml(G, default_params(spaan_trace, G), devices=3, workload_device=0)


@pytest.mark.parametrize("device, env, index", [
    (None, {}, 0),
    ("2", {}, 2),
    (FakeNvml.uuid_of(1), {}, 1),
    (FakeNvml.uuid_of(2)[:12], {}, 2),  # a unique prefix, as CUDA accepts
    ("0000:03:00.0", {}, 2),
    ("00000000:02:00.0", {}, 1),
    (None, {"CUDA_VISIBLE_DEVICES": FakeNvml.uuid_of(2) + "," + FakeNvml.uuid_of(0)}, 2),
    (None, {"CUDA_VISIBLE_DEVICES": "1"}, 1),
    ("0", {"CUDA_VISIBLE_DEVICES": "1"}, 0),  # --device wins
])
def test_the_card_is_chosen_by_index_uuid_bus_id_or_cuda_visible_devices(three, device, env, index):
    be = NvmlBackend(three, observe_only=False, device=device, env=env)
    assert be.uuid == FakeNvml.uuid_of(index)
    be.set_clocks_mhz(1050, 9501, verify=False)
    if index == 0:
        assert not three.at_default_clocks and three.other_locks == {}
    else:
        assert three.at_default_clocks and three.other_locks == {index: (1050, 9501)}
    be.reset_clocks()
    assert three.at_default_clocks and three.other_locks == {}


@pytest.mark.parametrize("device, env, exc, needle", [
    ("7", {}, InputError, "GPU index 7 does not exist: NVML sees 3 GPU(s)"),
    ("GPU-nope", {}, InputError, "matches 0 of the 3 GPU(s) by UUID"),
    ("GPU-fake", {}, InputError, "matches 3 of the 3"),
    ("0000:09:00.0", {}, InputError, "no GPU has PCI bus id"),
    ("MIG-abc", {}, InputError, "is a MIG slice"),
    ("cuda:0", {}, InputError, "is not an index, a GPU UUID"),
    (None, {"CUDA_VISIBLE_DEVICES": ""}, NoGpuError, "hides every GPU"),
    (None, {"CUDA_VISIBLE_DEVICES": "-1"}, NoGpuError, "hides every GPU"),
])
def test_a_card_that_is_not_there_is_one_clear_error(three, device, env, exc, needle):
    with pytest.raises(exc, match=needle.replace("(", r"\(").replace(")", r"\)")):
        NvmlBackend(three, device=device, env=env)


def test_device_option_on_every_nvml_verb(capsys):
    from kdvfs.cli import build_parser

    p = build_parser()
    for verb in (["sweep", "--trace", "t", "--gpu", "g", "-o", "x"], ["validate", "--trace", "t", "--gpu", "g",
                                                                      "--schedule", "s"], ["reset-clocks"]):
        assert p.parse_args(verb + ["--device", "GPU-1"]).device == "GPU-1"
