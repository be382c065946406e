"""Observe-only: NVML's SM clock against the clock a fixed GEMM's durations imply, in three phases of the same
bf16 4096³ GEMM: (ref) bursts of 25 with 8 ms gaps (top clock), (held) bursts of 25 with 0.5 ms gaps (the limiter
holds them), (steady) back to back. A thread reads NVML's SM clock as fast as it can; every GEMM is timed with CUDA
events. Nothing is set. Usage: python nvml_clock_probe.py OUT.json"""
import json
import sys
import threading
import time

import numpy as np
import pynvml
import torch

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
torch.manual_seed(0)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty_like(a)
for _ in range(20):
    torch.mm(a, b, out=c)
torch.cuda.synchronize()
samples, stop = [], [False]


def sampler():
    while not stop[0]:
        samples.append((time.perf_counter(), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0))
        time.sleep(0.0002)


def phase(name, per_burst, gap_s, seconds):
    durs, t0 = [], time.perf_counter()
    s0 = len(samples)
    while time.perf_counter() - t0 < seconds:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(per_burst + 1)]
        ev[0].record()
        for i in range(per_burst):
            torch.mm(a, b, out=c)
            ev[i + 1].record()
        ev[-1].synchronize()
        durs += [ev[i].elapsed_time(ev[i + 1]) for i in range(per_burst)]
        if gap_s:
            t = time.perf_counter()
            while time.perf_counter() - t < gap_s:
                pass
    sm = [s for s in samples[s0:] if s[0] >= t0]
    f = np.array([s[1] for s in sm], dtype=float)
    d = np.array(durs)
    return {"phase": name, "per_burst": per_burst, "gap_s": gap_s, "seconds": seconds, "gemms": len(d),
            "gemm_ms_p10_p50_p90": [float(np.percentile(d, q)) for q in (10, 50, 90)],
            "gemm_ms_mean": float(d.mean()), "nvml_samples": len(f),
            "nvml_sm_mhz_p10_p50_p90": [float(np.percentile(f, q)) for q in (10, 50, 90)],
            "nvml_sm_mhz_mean": float(f.mean()),
            "nvml_power_w_p50": float(np.median([s[2] for s in sm])),
            "nvml_sm_mhz_hist": {str(int(k)): int(v) for k, v in zip(*np.unique(f, return_counts=True))},
            "gemm_ms_first_200": [round(x, 4) for x in durs[:200]]}


th = threading.Thread(target=sampler, daemon=True)
th.start()
out = []
for name, n, gap, sec in (("ref", 25, 8e-3, 5.0), ("held", 25, 5e-4, 6.0), ("steady", 25, 0.0, 6.0),
                          ("held_again", 25, 5e-4, 6.0), ("ref_again", 25, 8e-3, 5.0)):
    out.append(phase(name, n, gap, sec))
    print(json.dumps({k: v for k, v in out[-1].items() if k not in ("gemm_ms_first_200", "nvml_sm_mhz_hist")}), flush=True)
stop[0] = True
json.dump({"gpu": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion(),
           "torch": torch.__version__, "phases": out}, open(sys.argv[1], "w"), indent=1)
