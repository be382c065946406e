"""Observe-only measurements on a real card: each stage alone, the step, the cost of issuing a switch, carry-over, noise.

The H200 session of ``python -m scripts.h200_observe OUT`` (``observe_session``) records the GPT-3 XL block's traces,
then measures over energy-counter windows (``hw_backend.measure.measure_window``):

- every stage of the block alone (``measure_units``: a batch per synchronisation sized to ~15 ms);
- the whole training step;
- the step with a no-op "switch" issued at every stage boundary, by each mechanism (``live_noop_cost``): nothing at
  all (the hook only), a host synchronisation before the no-op (``sync``), an in-stream host function (``callback``,
  with cupy). The boundaries are counted on one step, not assumed.

Two follow-ups: ``carryover`` (``scripts/h200_carryover.py``: does a light stage cost more right after a heavy one?)
and ``measurement_noise`` (``scripts/h200_measurement_noise.py``: how much one window's measurement scatters).

Nothing here changes a clock, limit or mode: the backend is only read (energy counter, clocks, power). The pieces
take any ``GpuBackend`` and any workload callables, so tests drive them with ``FakeNvml`` and a simulated workload;
only ``observe_session``, ``foreign_trace`` and ``torch_issuers`` need torch and a GPU.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hw_backend.measure import measure_window

__all__ = ["batch_for", "boundaries_per_step", "carryover", "foreign_trace", "live_noop_cost", "measure_units",
           "measurement_noise", "noise_summary", "observe_only_block", "observe_session", "torch_issuers"]

log = logging.getLogger(__name__)

BATCH_TARGET_S = 0.015
"""How long one batch of a stage (units between two synchronisations) should last: long enough that the
synchronisation is a small part of it, short enough for many batches per window."""

StepRunner = Callable[[Callable[[Any], None] | None], None]
"""Runs one step, calling ``before(boundary)`` at every switch point where given (``Workload.run_step``)."""


def batch_for(unit: Callable[[], None], sync: Callable[[], None], target_s: float = BATCH_TARGET_S,
              clock: Callable[[], float] = time.perf_counter, trials: int = 10, warmups: int = 3,
              rounding: Callable[[float], int] = int) -> int:
    """Units per batch so that a batch lasts about ``target_s`` (at least 1), from ``trials`` timed units after
    ``warmups`` untimed ones; ``rounding`` turns the ratio into a whole number (``int`` or ``round``)."""
    for _ in range(warmups):
        unit()
    sync()
    t = clock()
    for _ in range(trials):
        unit()
    sync()
    per = (clock() - t) / trials
    return max(1, rounding(target_s / per)) if per > 0 else 1


def measure_units(units: Mapping[str, Callable[[], None]], sync: Callable[[], None], backend, *, window_s: float,
                  warmup_s: float = 1.0, clock: Callable[[], float] = time.perf_counter,
                  on_result: Callable[[str, dict], None] | None = None) -> dict[str, dict]:
    """Each unit alone over its own window: ``WindowResult.to_dict()`` plus the ``batch`` used. A unit that fails is
    recorded as ``{"error": ...}`` and the others go on (one broken stage must not lose a session);
    ``on_result(name, row)`` after each, to save progress."""
    out: dict[str, dict] = {}
    for name, unit in units.items():
        try:
            b = batch_for(unit, sync, clock=clock)
            w = measure_window(unit, sync, backend, window_s=window_s, warmup_s=warmup_s, batch=b, clock=clock)
            out[name] = dict(w.to_dict(), batch=b)
            log.info("%-14s %9.4f ms %7.1f W  core %s-%s", name, w.time_per_iter_s * 1e3, w.power_w, w.core_mhz_min,
                     w.core_mhz_max)
        except Exception as e:  # noqa: BLE001 — one failed unit must not lose the others
            log.warning("unit %s failed: %r", name, e, exc_info=True)
            out[name] = {"error": repr(e)}
        if on_result is not None:
            on_result(name, out[name])
    return out


def boundaries_per_step(run_step: StepRunner) -> int:
    """How many switch points one step has: ``run_step`` with a hook that only counts."""
    seen = [0]

    def count(_boundary: Any) -> None:
        seen[0] += 1

    run_step(count)
    return seen[0]


def live_noop_cost(run_step: StepRunner, sync: Callable[[], None], backend, issuers: Mapping[str, Callable[[], None]],
                   *, window_s: float, warmup_s: float = 1.0,
                   clock: Callable[[], float] = time.perf_counter) -> dict[str, dict]:
    """The step measured once per mechanism with ``issuers[mechanism]()`` run at every boundary (a no-op switch: the
    clock write itself replaced by nothing), each row ``WindowResult.to_dict()`` plus ``boundaries_per_step``
    (counted on one step first). A mechanism that cannot run here (cupy missing) is recorded as ``{"error": ...}``."""
    n = boundaries_per_step(run_step)
    out: dict[str, dict] = {}
    for mode, issue in issuers.items():
        def before(_boundary: Any, issue: Callable[[], None] = issue) -> None:
            issue()

        try:
            w = measure_window(lambda: run_step(before), sync, backend, window_s=window_s, warmup_s=warmup_s, batch=1,
                               clock=clock)
        except Exception as e:  # noqa: BLE001 — cupy may be missing; report and go on
            out[mode] = {"error": repr(e)}
            continue
        out[mode] = dict(w.to_dict(), boundaries_per_step=n)
        log.info("live %s %s", mode, out[mode])
    return out


def carryover(run_stage: Callable[[str], None], step: Callable[[], None], sync: Callable[[], None], backend, *,
              heavy: str = "fwd.fc1", lights: tuple[str, ...] = ("bwd.res2", "fwd.res1", "bwd.ln1"), window_s: float,
              warmup_s: float = 1.0, clock: Callable[[], float] = time.perf_counter,
              on_progress: Callable[[dict], None] | None = None) -> dict:
    """Does a light stage cost more energy right after a heavy one than alone? Each light stage L alone, the heavy
    stage H alone and the pair H then L as one unit, each over its own window; the step before and after (thermal
    drift). If the card's operating point carries over, E(H+L) − E(H) > E(L): ``energy_ratio_in_pair_vs_alone`` > 1.
    ``on_progress(doc)`` after each pair, to save progress."""

    def m(fn: Callable[[], None], batch: int = 1) -> dict:
        return measure_window(fn, sync, backend, window_s=window_s, warmup_s=warmup_s, batch=batch,
                              clock=clock).to_dict()

    res: dict = {"pairs": {}, "step_before": m(step)}
    res["heavy_alone"] = m(functools.partial(run_stage, heavy), 10)

    def pair(light: str) -> None:
        run_stage(heavy)
        run_stage(light)

    for light in lights:
        alone = m(functools.partial(run_stage, light), 20)
        both = m(functools.partial(pair, light), 10)
        e_in = both["energy_per_iter_j"] - res["heavy_alone"]["energy_per_iter_j"]
        t_in = both["time_per_iter_s"] - res["heavy_alone"]["time_per_iter_s"]
        res["pairs"][light] = {"alone": alone, "after_heavy": both, "light_energy_in_pair_j": e_in,
                               "light_time_in_pair_s": t_in,
                               "energy_ratio_in_pair_vs_alone": e_in / alone["energy_per_iter_j"]}
        log.info("%s %s", light, {k: v for k, v in res["pairs"][light].items() if k not in ("alone", "after_heavy")})
        if on_progress is not None:
            on_progress(res)
    res["step_after"] = m(step)
    return res


def measurement_noise(run_stage: Callable[[str], None], sync: Callable[[], None], backend, *, stages: Sequence[str],
                      rounds: int, window_s: float, warmup_s: float,
                      clock: Callable[[], float] = time.perf_counter,
                      on_progress: Callable[[dict], None] | None = None) -> dict:
    """How much one window's measurement of a stage scatters between repeats, with the study's protocol (one window
    per kernel and setting): each stage measured ``rounds`` times, the stages interleaved and their order rotated
    each round so that every window follows a different stage. Returns the batch per stage, every window (with its
    round) and ``noise_summary`` of them; ``on_progress(doc)`` after each round."""
    stages = tuple(stages)
    batch = {st: batch_for(functools.partial(run_stage, st), sync, clock=clock, trials=20, warmups=0, rounding=round)
             for st in stages}
    res: dict = {"batch": batch, "windows": {st: [] for st in stages}}
    for rnd in range(rounds):
        order = stages[rnd % len(stages):] + stages[:rnd % len(stages)]  # rotate: each stage follows another
        for st in order:
            w = measure_window(functools.partial(run_stage, st), sync, backend, window_s=window_s, warmup_s=warmup_s,
                               batch=batch[st], clock=clock).to_dict()
            w["round"] = rnd
            res["windows"][st].append(w)
            log.info("round %d %-9s %.4f ms %.5f J %.1f W core %s-%s", rnd, st, 1e3 * w["time_per_iter_s"],
                     w["energy_per_iter_j"], w["power_w"], w["core_mhz_min"], w["core_mhz_max"])
        if on_progress is not None:
            on_progress(res)
    res["summary"] = noise_summary(res["windows"])
    return res


def noise_summary(windows: Mapping[str, list[dict]]) -> dict[str, dict]:
    """Per stage: its windows' coefficients of variation (%) of time, energy and mean power per iteration, the
    correlation of log time with log energy, and the mean power."""

    def cv_pct(xs: list[float]) -> float:
        return 100 * statistics.stdev(xs) / statistics.fmean(xs)

    out = {}
    for st, ws in windows.items():
        t = [w["time_per_iter_s"] for w in ws]
        e = [w["energy_per_iter_j"] for w in ws]
        p = [w["power_w"] for w in ws]
        out[st] = {"windows": len(ws), "time_cv_pct": cv_pct(t), "energy_cv_pct": cv_pct(e), "power_cv_pct": cv_pct(p),
                   "log_time_energy_corr": statistics.correlation([math.log(x) for x in t], [math.log(x) for x in e]),
                   "mean_power_w": statistics.fmean(p)}
    return out


def observe_only_block(precision: str = "bf16"):
    """(backend, workload, sync) on this machine's CUDA GPU: ``NvmlBackend(observe_only=True)`` — never a clock, limit
    or mode change — and the GPT-3 XL block, run once and prepared for stage-by-stage replay; ``sync`` waits for the
    GPU."""
    import torch

    from hw_backend.nvml import NvmlBackend
    from hw_backend.workloads import BlockConfig, BlockWorkload

    be = NvmlBackend(observe_only=True)
    wl = BlockWorkload(BlockConfig(precision=precision))
    wl.step()
    wl.prepare()
    return be, wl, torch.cuda.synchronize


def torch_issuers() -> dict[str, Callable[[], None]]:
    """The no-op switch of each mechanism on a CUDA GPU: ``none`` (the boundary hook alone), ``sync`` (the host waits
    for the kernel, calls the no-op driver write, launches the next), ``callback`` (an in-stream host function running
    the no-op: the stream stalls while it runs; needs cupy)."""
    import torch

    def noop_write() -> None:
        return None

    def sync() -> None:
        torch.cuda.synchronize()
        noop_write()

    def callback() -> None:
        import cupy  # type: ignore[import-not-found,unused-ignore]  # optional, device-side only

        s = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        s.launch_host_func(lambda _arg: noop_write(), None)

    return {"none": noop_write, "sync": sync, "callback": callback}


def foreign_trace(out: Path) -> None:
    """A transformer training step recorded the ordinary way (not by kdvfs): no labels, autograd backward, AdamW;
    the Chrome trace written gzipped to ``out``."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True,
                                             norm_first=True, activation="gelu")
    model = torch.nn.TransformerEncoder(layer, num_layers=2).cuda()
    head = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    x = torch.randn(8, 512, 1024, device="cuda")
    tgt = torch.randn(8, 512, 1024, device="cuda")
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=3, active=1, repeat=1)) as prof:
        for _ in range(4):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = head(model(x, is_causal=False))
                loss = torch.nn.functional.mse_loss(y.float(), tgt)
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch.cuda.synchronize()
            prof.step()
    tmp = out.with_suffix(".tmp")
    prof.export_chrome_trace(str(tmp))
    out.write_bytes(gzip.compress(tmp.read_bytes(), mtime=0))
    tmp.unlink()


def observe_session(out: Path, window_s: float = 5.0, only_foreign: bool = False) -> dict:
    """The observe-only H200 session (``python -m scripts.h200_observe OUT``): writes into ``out`` the bf16 and fp32
    traces (``kdvfs record``), the raw bf16 profiler trace, a foreign (unlabelled) transformer trace, and
    ``h200_measurements.json`` (saved after every part, so a failure late keeps what came before). Returns that
    document."""
    import traceback

    import torch

    from hw_backend.nvml import NvmlBackend
    from hw_backend.record import record
    from hw_backend.sim_workload import block_step
    from hw_backend.workloads import BlockConfig, BlockWorkload

    out.mkdir(parents=True, exist_ok=True)
    if only_foreign:
        foreign_trace(out / "foreign-transformer.kineto.json.gz")
        return {}
    res: dict = {"command": f"python -m scripts.h200_observe OUT --window {window_s:g}", "torch": torch.__version__}
    t0 = time.time()

    def save() -> None:
        (out / "h200_measurements.json").write_text(json.dumps(res, indent=1) + "\n")

    def attempt(key: str, fn: Callable[[], Any]) -> None:
        try:
            res[key] = fn()
        except Exception as e:  # noqa: BLE001 — one failed part must not lose the others
            traceback.print_exc()
            res[key] = {"error": repr(e)}
        save()

    def rec(prec: str, raw: str) -> dict:
        imp = record(out / f"gpt3xl-torch-h200-{prec}.trace.json", precision=prec, raw_out=out / raw)
        return {"kernels": len(imp.trace.kernels), "step_s": imp.trace.total_time_s,
                "assigned_time_share": imp.assigned_time_share}

    attempt("bf16_record", lambda: rec("bf16", "gpt3xl-torch-h200-bf16.kineto.json.gz"))
    attempt("fp32_record", lambda: rec("fp32", "fp32.kineto.json.gz"))
    if (out / "fp32.kineto.json.gz").exists():
        (out / "fp32.kineto.json.gz").unlink()
    def foreign() -> dict:
        foreign_trace(out / "foreign-transformer.kineto.json.gz")
        return {"ok": True}

    attempt("foreign", foreign)
    log.info("recorded in %.1f s", time.time() - t0)

    be = NvmlBackend(observe_only=True)  # reads only: never a clock, limit or mode change
    caps = be.capabilities()
    res["card"] = {"name": be.name, "power_limit_w": caps.power_limit_w, "energy_counter": caps.energy_counter,
                   "clocks_idle": be.clocks_mhz(), "power_idle_w": be.power_mw() / 1000}
    sync = torch.cuda.synchronize
    wl = BlockWorkload(BlockConfig(precision="bf16"))
    wl.step()
    wl.prepare()
    res["stages"] = {}

    def stage_done(name: str, row: dict) -> None:
        res["stages"][name] = row
        save()

    measure_units({st: functools.partial(wl.run_stage, st) for st in wl.stage_names()}, sync, be, window_s=window_s,
                  on_result=stage_done)
    wl2 = BlockWorkload(BlockConfig(precision="bf16"))
    attempt("step", lambda: measure_window(wl2.step, sync, be, window_s=window_s, warmup_s=1.0, batch=1).to_dict())
    res["live_noop"] = live_noop_cost(functools.partial(block_step, wl2), sync, be, torch_issuers(), window_s=window_s)
    res["wall_s"] = time.time() - t0
    save()
    return res
