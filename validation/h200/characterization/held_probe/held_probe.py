"""Observe-only: bursts of 25 bf16 4096³ GEMMs held by the limiter (0.5 ms gaps) and at the top clock (8 ms gaps),
launched eagerly and as a CUDA-graph replay (as `kdvfs characterize` runs its duty entries), 5 s each between
energy-counter readings; each burst timed with CUDA events; NVML's SM clock read every ~0.3 ms. Nothing is set.
Usage: python held_probe.py OUT.json"""
import json
import sys
import threading
import time

import numpy as np
import pynvml
import torch

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty_like(a)
for _ in range(20):
    torch.mm(a, b, out=c)
torch.cuda.synchronize()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        torch.mm(a, b, out=c)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(25):
        torch.mm(a, b, out=c)
torch.cuda.synchronize()
clk, stop = [], [False]


def sampler():
    while not stop[0]:
        clk.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
        time.sleep(0.0003)


def eager():
    for _ in range(25):
        torch.mm(a, b, out=c)


threading.Thread(target=sampler, daemon=True).start()
out = []
for name, fn, gap in (("eager_ref", eager, 8e-3), ("graph_ref", g.replay, 8e-3), ("eager_held", eager, 5e-4),
                      ("graph_held", g.replay, 5e-4), ("graph_held_again", g.replay, 5e-4), ("eager_held_again", eager, 5e-4)):
    t_end = time.perf_counter() + 1.0
    while time.perf_counter() < t_end:
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        while time.perf_counter() - t < gap:
            pass
    k0, e0, t0 = len(clk), pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    busy, n = [], 0
    while time.perf_counter() - t0 < 5.0:
        e1_, e2_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e1_.record()
        fn()
        e2_.record()
        e2_.synchronize()
        busy.append(e1_.elapsed_time(e2_) / 1000.0)
        t = time.perf_counter()
        while time.perf_counter() - t < gap:
            pass
    t1, e1 = time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    f = np.array(clk[k0:], dtype=float)
    span, E = t1 - t0, (e1 - e0) / 1000.0
    bt = float(np.sum(busy))
    row = {"phase": name, "gap_s": gap, "bursts": len(busy), "span_s": span, "energy_j": E, "power_w": E / span,
           "burst_ms_p50": 1000 * float(np.median(busy)), "busy_share": bt / span,
           "burst_power_w_at_123w_gaps": (E - (span - bt) * 123.3) / bt,
           "nvml_sm_mhz_p10_p50_p90": [float(np.percentile(f, q)) for q in (10, 50, 90)], "nvml_samples": len(f)}
    out.append(row)
    print(json.dumps(row), flush=True)
stop[0] = True
json.dump({"gpu": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion(), "phases": out},
          open(sys.argv[1], "w"), indent=1)
