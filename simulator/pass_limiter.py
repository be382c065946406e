"""The study's passes run through the limiter's discrete-time controller (issue 11, session 10).

``kdvfs.limiter_pass`` puts each pass of the RTX 3080 Ti's pass-level sweep in the limiter's *steady state*: one ceiling
for the whole pass, where its average power is the cap. That is exact only for a window much longer than the kernels.
On this trace the GEMMs run 14–19 ms and the loss kernels 100–120 ms, against the H200's fitted window of 22 ms, so the
ceiling moves inside a layer. Here every one of the study's settings runs as one whole training step (forward, loss,
backward) through ``simulator.limiter.run_limited`` (every kernel locked to that setting, one warm-up step), and the
passes' time and energy changes are compared with the steady state and with the study. Nothing is fitted.
"""

from __future__ import annotations

import numpy as np

from kdvfs.gpus import AUTO, GpuSpec, SwitchModel
from kdvfs.limiter import LimiterModel
from kdvfs.model import KernelParams, evaluate
from kdvfs.passweep import PassSweep, main_region, pass_index
from simulator.engine import GpuRun, SimConfig

__all__ = ["H200_WINDOW", "dynamic_passes", "pass_limiter_check"]

H200_WINDOW = LimiterModel(0.02219755852249347, 132.19655879426764, 7780.364602315957,
                           source="traces/h200.limiter.json (kdvfs limiter fit on the H200's step responses)")
"""The H200's fitted window, gain and slew (``traces/h200.limiter.json``); the cap is the card's own."""


def dynamic_passes(trace, spec: GpuSpec, params: KernelParams, settings, lim: LimiterModel,
                   loss_pass: str = "backward", warmup: int = 1) -> dict:
    """Forward and backward time and energy, shape (2, settings) each, of one training step with every kernel locked to
    each setting, under the limiter's controller (``lim``; its ``cap_w`` or the card's), after ``warmup`` steps."""
    from simulator.limiter import run_limited

    passes = pass_index(trace, loss_pass)
    inst = trace.instances()
    seg = passes[inst]  # the run's two "segments" are the passes
    cfg = SimConfig(switch=SwitchModel(0.0, 0.0))  # one setting per step: nothing switches
    t = np.zeros((2, len(settings)))
    e = np.zeros((2, len(settings)))
    mean_mhz = np.zeros(len(settings))
    for j, (c, m) in enumerate(settings):
        ev = evaluate(spec, params, np.array([c]), np.array([m]))
        run = GpuRun(kernel=inst, setting=np.zeros(len(inst), dtype=np.int64), T=ev.time_s, P=ev.power_w,
                     segment=seg, names=["forward", "backward"])
        r = run_limited(run, [(c, m)], spec, params, lim, cfg, "fast", warmup)
        t[:, j], e[:, j] = r["segment_time_s"], r["segment_energy_j"]
        mean_mhz[j] = r["limiter"]["mean_core_mhz"]
    return {"time_s": t, "energy_j": e, "mean_ceiling_mhz": mean_mhz}


def _summary(pt, pe, sweep: PassSweep) -> dict:
    ia = sweep.settings.index((AUTO, AUTO))
    mt, me = 100 * (pt / pt[:, ia:ia + 1] - 1), 100 * (pe / pe[:, ia:ia + 1] - 1)
    et, ee = mt - sweep.time_change_pct, me - sweep.energy_change_pct
    reg = main_region(sweep.settings)
    return {"median_abs_time_err": float(np.median(np.abs(et))), "median_abs_energy_err": float(np.median(np.abs(ee))),
            "worst_main_time_err": float(np.abs(et[:, reg]).max()),
            "worst_main_energy_err": float(np.abs(ee[:, reg]).max()),
            "model_time_change_pct": mt, "model_energy_change_pct": me}


def pass_limiter_check(fit_path, sweep: PassSweep, trace, windows_s=(None,), loss_pass: str = "backward") -> dict:
    """One calibration JSON's passes: isolated and summed, the limiter's steady state, and the controller at the
    H200's window (``None``) and at other windows (same gain and slew), each against the study's sweep."""
    import json
    from pathlib import Path

    from kdvfs.diagnosis import load_fit
    from kdvfs.limiter_pass import solve_passes

    spec, params = load_fit(fit_path)
    struct = json.loads(Path(fit_path).read_text()).get("structure", {})
    cap = struct.get("limit_cap_w")
    st = list(sweep.settings)
    C, M = np.array([s[0] for s in st]), np.array([s[1] for s in st])  # noqa: N806
    pi = pass_index(trace, loss_pass)
    w = np.stack([trace.repeats * (pi == k) for k in range(2)]).astype(float)
    alone = evaluate(spec, params, C, M)
    steady = solve_passes(spec, params, C, M, w, cap)
    out: dict = {"fit": str(fit_path), "cap_w": float(spec.cap_w if cap is None else cap),
                 "structure": struct, "isolated": _summary(w @ alone.time_s, w @ alone.energy_j, sweep),
                 "steady": _summary(w @ steady.time_s, w @ steady.energy_j, sweep), "dynamic": []}
    # session 6's model-free finding, in the model: each pass's lowest energy over the 66 settings (against the pass at
    # auto) beside its kernels' own minima summed (against the kernels at auto, alone); the study: backward −37.42 %
    # against −36.45 % (a pass can be cheaper than every kernel at its own best only if the pass differs from the sum)
    ia = st.index((AUTO, AUTO))
    for nm, e_ in (("isolated", alone.energy_j), ("steady", steady.energy_j)):
        pe = w @ e_
        out[nm]["pass_min_energy_pct"] = (100 * (pe.min(1) / pe[:, ia] - 1)).tolist()
        out[nm]["pass_auto_over_kernels_alone"] = ((pe[:, ia]) / (w @ alone.energy_j[:, ia])).tolist()
    out["kernel_minima_sum_pct"] = (100 * ((w @ alone.energy_j.min(1)) / (w @ alone.energy_j[:, ia]) - 1)).tolist()
    for win in windows_s:
        lim = H200_WINDOW if win is None else LimiterModel(float(win), H200_WINDOW.gain_mhz_per_ws,
                                                             H200_WINDOW.slew_mhz_per_s, source="H200 gain and slew")
        from dataclasses import replace

        lim = replace(lim, cap_w=cap)
        d = dynamic_passes(trace, spec, params, st, lim, loss_pass)
        s = _summary(d["time_s"], d["energy_j"], sweep)
        s["window_s"] = lim.window_s
        s["gain_mhz_per_ws"] = lim.gain_mhz_per_ws
        s["slew_mhz_per_s"] = lim.slew_mhz_per_s
        s["mean_ceiling_mhz"] = d["mean_ceiling_mhz"]
        out["dynamic"].append(s)
    return out
