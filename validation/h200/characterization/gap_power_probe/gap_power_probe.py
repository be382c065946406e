"""Observe-only: the power of sub-millisecond gaps right after heavy work. Bursts of 3 bf16 4096³ GEMMs (every one
timed with CUDA events) then the host spins a gap of 0.25, 0.5, 1, 2 or 4 ms, each setting for 4 s between readings of
NVML's energy counter, NVML's SM clock read by a thread. The bursts stay below the cap, so they run at the top clock;
energy per period against the idle time per period gives the power in the gaps (the slope) and the bursts' energy
(the intercept). Nothing is set. Usage: python gap_power_probe.py OUT.json"""
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
clk, stop = [], [False]


def sampler():
    while not stop[0]:
        clk.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
        time.sleep(0.001)


threading.Thread(target=sampler, daemon=True).start()
out = []
for gap in (4e-3, 2e-3, 1e-3, 5e-4, 2.5e-4, 4e-3):
    busy, periods, k0 = 0.0, 0, len(clk)
    t_end = time.perf_counter() + 1.0  # warm-up at this setting
    while time.perf_counter() < t_end:
        for _ in range(3):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        t = time.perf_counter()
        while time.perf_counter() - t < gap:
            pass
    e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    k0 = len(clk)
    while time.perf_counter() - t0 < 4.0:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record()
        for i in range(3):
            torch.mm(a, b, out=c)
            ev[i + 1].record()
        ev[-1].synchronize()
        busy += ev[0].elapsed_time(ev[-1]) / 1000.0
        periods += 1
        t = time.perf_counter()
        while time.perf_counter() - t < gap:
            pass
    t1, e1 = time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    span = t1 - t0
    f = np.array(clk[k0:], dtype=float)
    row = {"gap_s": gap, "periods": periods, "span_s": span, "energy_j": (e1 - e0) / 1000.0,
           "busy_s_per_period": busy / periods, "period_s": span / periods, "idle_s_per_period": (span - busy) / periods,
           "energy_j_per_period": (e1 - e0) / 1000.0 / periods, "power_w": (e1 - e0) / 1000.0 / span,
           "sm_mhz_p10_p50_p90": [float(np.percentile(f, q)) for q in (10, 50, 90)] if len(f) else None}
    out.append(row)
    print(json.dumps(row), flush=True)
stop[0] = True
x = np.array([r["idle_s_per_period"] for r in out])
y = np.array([r["energy_j_per_period"] for r in out])
slope, icpt = np.polyfit(x, y, 1)
res = {"gpu": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion(), "settings": out,
       "fit": {"gap_power_w": float(slope), "burst_energy_j": float(icpt),
               "burst_power_w": float(icpt / np.mean([r["busy_s_per_period"] for r in out]))}}
print(json.dumps(res["fit"]), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
