"""Which mechanism of ``kdvfs.scaling`` makes the carried clocks' slowdown grow as the per-GPU work shrinks.

    python -m scripts.scaling_mechanisms [-o validation/scaling/mechanisms.json]      (~40 s on 2 cores)

The study's experiment (``kdvfs reproduce spaan2026 --scaling``: the kernel-level global strict-waste clocks chosen
at batch 40 carried to batch 1 and to tensor-parallel degree 16, calibrated RTX 3080 Ti profile, free switching),
each time with one of the model's assumptions switched off or changed. Nothing is fitted; the study's held-out
numbers (+2.9 % at batch 1, +6.5 % at degree 16) are printed beside for reading only.

Variants:
  as-is              the model as shipped.
  no-cap             no power cap at any size: auto never throttles (isolates the throttling mechanism).
  no-waves           wave-quantisation efficiency 1 at every size (GEMMs' time strictly ∝ FLOPs).
  no-floor           the fixed time t0 scales with the work like the core term (no launch/latency floor).
  floor-at-core      the fixed time t0 runs at the core clock (moved into the core-bound term): an upper bound for
                     a latency floor that is on-GPU work at the core clock rather than host launch time.
  gemm-mem-flops     a GEMM's whole memory term ∝ FLOPs (session 4's rule), instead of its compulsory DRAM traffic,
                     2·(MK + KN + MN) bytes at bf16, scaled by those bytes (the weight K×N is read whole at any batch;
                     a tensor-parallel shard reads or writes one activation whole) and only the rest (tile re-reads)
                     ∝ FLOPs, as shipped now.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HELD_OUT = {"batch 1": 2.9, "tp 16": 6.5}


def run(variant: str) -> dict:
    import numpy as np

    import kdvfs.scaling as sc
    from kdvfs.gpus import get_gpu
    from kdvfs.model import KernelParams
    from kdvfs.optimize import allocate_schedule
    from kdvfs.reproduce import study_problem

    spec = get_gpu("rtx3080ti")
    orig_eff, orig_scale = sc.wave_efficiency, sc.scale_params
    if variant == "no-cap":
        spec = replace(spec, cap_w=float("inf"), power_limit_w=float("inf"))
    if variant == "no-waves":
        sc.wave_efficiency = lambda tiles, sms: 1.0
    if variant == "gemm-mem-flops":
        def scale_params(trace, params, spec_, batch=None, tp=1, seq_len=None, heads=sc.DEFAULT_HEADS):
            p, ks = orig_scale(trace, params, spec_, batch, tp, seq_len, heads)
            mf = np.array([k.mem_factor for k in ks])  # GEMMs: the re-read (∝ FLOPs) factor for the whole term
            return KernelParams(p.keys, p.t0_s, p.tc_s, params.tm_s * mf, p.uc, p.um, p.source, p.p0_w), ks
        sc.scale_params = scale_params
    if variant in ("no-floor", "floor-at-core"):
        def scale_params(trace, params, spec_, batch=None, tp=1, seq_len=None, heads=sc.DEFAULT_HEADS):
            p, ks = orig_scale(trace, params, spec_, batch, tp, seq_len, heads)
            if variant == "no-floor":
                cf = np.array([k.core_factor for k in ks])
                return KernelParams(p.keys, p.t0_s * cf, p.tc_s, p.tm_s, p.uc, p.um, p.source, p.p0_w), ks
            return KernelParams(p.keys, np.zeros_like(p.t0_s), p.tc_s + p.t0_s, p.tm_s, p.uc, p.um, p.source,
                                p.p0_w), ks
        sc.scale_params = scale_params
    try:
        pb = study_problem()
        sched = allocate_schedule(pb, "kernel")
        rows = sc.scaling_experiment(pb, spec, sched, [1, 40], [16])
    finally:
        sc.wave_efficiency, sc.scale_params = orig_eff, orig_scale
    out = {}
    for r in rows:
        k = f"{r['experiment']} {r['batch'] if r['experiment'] == 'batch' else r['tp']}"
        out[k] = {"time_change_pct": r["time_change_pct"], "energy_change_pct": r["energy_change_pct"],
                  "kernels_time_change_pct": r["kernels_time_change_pct"],
                  "kernels_energy_change_pct": r["kernels_energy_change_pct"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    doc = {"command": "python -m scripts.scaling_mechanisms" + (f" -o {a.output}" if a.output else ""),
           "held_out_study_time_change_pct": HELD_OUT, "variants": {}}
    for v in ("as-is", "no-cap", "no-waves", "no-floor", "floor-at-core", "gemm-mem-flops"):
        doc["variants"][v] = res = run(v)
        print(f"{v:14s} " + "  ".join(f"{k}: Δt {r['time_change_pct']:+.2f} % (kernels {r['kernels_time_change_pct']:+.2f})"
                                        f" ΔE {r['energy_change_pct']:+.2f} %" for k, r in res.items()))
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
