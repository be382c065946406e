"""An observe-only session on a real card: each stage alone, the whole step, and what issuing a clock switch costs.

The H200 session of ``python -m scripts.h200_observe OUT`` (``observe_session``) records the GPT-3 XL block's traces,
then measures over energy-counter windows (``hw_backend.measure.measure_window``):

- every stage of the block alone (``measure_units``: a batch per synchronisation sized to ~15 ms);
- the whole training step;
- the step with a no-op "switch" issued at every stage boundary, by each mechanism (``live_noop_cost``): nothing at
  all (the hook only), a host synchronisation before the no-op (``sync``), an in-stream host function (``callback``,
  with cupy). The boundaries are counted on one step, not assumed.

Nothing here changes a clock, limit or mode: the backend is only read (energy counter, clocks, power). The pieces
take any ``GpuBackend`` and any workload callables, so tests drive them with ``FakeNvml`` and a simulated workload;
only ``observe_session``, ``foreign_trace`` and ``torch_issuers`` need torch and a GPU.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hw_backend.measure import measure_window

__all__ = ["batch_for", "boundaries_per_step", "foreign_trace", "live_noop_cost", "measure_units", "observe_session",
           "torch_issuers"]

log = logging.getLogger(__name__)

BATCH_TARGET_S = 0.015
"""How long one batch of a stage (units between two synchronisations) should last: long enough that the
synchronisation is a small part of it, short enough for many batches per window."""

StepRunner = Callable[[Callable[[Any], None] | None], None]
"""Runs one step, calling ``before(boundary)`` at every switch point where given (``Workload.run_step``)."""


def batch_for(unit: Callable[[], None], sync: Callable[[], None], target_s: float = BATCH_TARGET_S,
              clock: Callable[[], float] = time.perf_counter, trials: int = 10) -> int:
    """Units per batch so that a batch lasts about ``target_s`` (at least 1), from ``trials`` timed units after three
    warm-up ones."""
    for _ in range(3):
        unit()
    sync()
    t = clock()
    for _ in range(trials):
        unit()
    sync()
    per = (clock() - t) / trials
    return max(1, int(target_s / per)) if per > 0 else 1


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
    from hw_backend.sim_workload import block_step
    from hw_backend.workloads import BlockConfig, BlockWorkload
    from kdvfs.record import record

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
