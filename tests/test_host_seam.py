"""The hardware seam (issue 15): what the NVML backend needs beside NVML's functions — how to wait, whether clocks
may be locked — comes from the NVML object's ``host``; the backend never asks whether it talks to a fake."""

import os
import types

import pytest

from hw_backend.fake import FakeHost, FakeNvml
from hw_backend.nvml import NvmlBackend, Pynvml, SystemHost
from kdvfs.gpus import get_gpu

G = get_gpu("rtx3080ti")


class _RefusingHost(FakeHost):
    def clock_privilege(self) -> str:
        return "not root: locking clocks needs root or CAP_SYS_ADMIN"


def test_fake_waits_in_simulated_time():
    fake = FakeNvml(G)
    be = NvmlBackend(fake, observe_only=False)
    t0 = fake.now_s
    be.sleep(0.25)
    assert fake.now_s == pytest.approx(t0 + 0.25)
    assert isinstance(fake.host, FakeHost) and fake.host.clock_privilege() == ""


def test_the_hosts_privilege_decides_clock_control():
    fake = FakeNvml(G)
    fake.host = _RefusingHost(fake)
    caps = NvmlBackend(fake, observe_only=False).capabilities()
    assert not caps.can_set_clocks and caps.reason.startswith("not root")
    assert NvmlBackend(FakeNvml(G), observe_only=False).capabilities().can_set_clocks


def test_system_host_asks_for_root(monkeypatch):
    if not hasattr(os, "geteuid"):
        pytest.skip("no effective uid on this platform")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in SystemHost().clock_privilege()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert SystemHost().clock_privilege() == ""


def test_pynvml_adapter_forwards_nvml_names():
    mod = types.SimpleNamespace(nvmlInit=lambda: "init", NVMLError=RuntimeError)
    p = Pynvml(mod)
    assert p.nvmlInit() == "init" and p.NVMLError is RuntimeError and isinstance(p.host, SystemHost)


def test_no_fake_sniffing_in_the_backend():
    import inspect

    import hw_backend.nvml as nvml

    src = inspect.getsource(nvml)
    assert "is_fake" not in src and "FakeNvml(" not in src
