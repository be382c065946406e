"""Observe-only: how long one NVML energy-counter read (and a clock read, a power read) takes on this card, idle and
while a GEMM loop runs; and how often the energy counter's value changes. Nothing is set. Usage: python energy_read_probe.py OUT.json"""
import json
import sys
import time

import pynvml
import torch

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)


def timed(fn, n=200):
    ts, vals = [], []
    for _ in range(n):
        t = time.perf_counter()
        vals.append(fn())
        ts.append(time.perf_counter() - t)
    ts.sort()
    return {"median_ms": 1000 * ts[n // 2], "p90_ms": 1000 * ts[int(n * 0.9)], "max_ms": 1000 * ts[-1],
            "distinct_values": len(set(vals))}


out = {}
reads = {"energy": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
         "sm_clock": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
         "power": lambda: pynvml.nvmlDeviceGetPowerUsage(h)}
for k, f in reads.items():
    out["idle_" + k] = timed(f)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty_like(a)
for _ in range(2000):
    torch.mm(a, a, out=c)  # ~0.35 s queued ahead
for k, f in reads.items():
    out["busy_" + k] = timed(f, 100)
torch.cuda.synchronize()
# how often the counter changes: read it in a tight loop for 0.5 s
t0, last, changes = time.perf_counter(), None, []
while time.perf_counter() - t0 < 0.5:
    v = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    if v != last:
        changes.append(time.perf_counter() - t0)
        last = v
out["energy_changes_in_0.5s_idle"] = len(changes)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out))
