"""One session on a lent H200, observe-only: record traces, measure kernels and the step, cost of live switching.

    python -m scripts.h200_observe OUT_DIR [--window 5]

Never changes a clock, limit or mode: the NVML backend is built with observe_only=True and only reads the energy
counter, clocks and power. Writes into OUT_DIR:
  gpt3xl-torch-h200-bf16.trace.json, gpt3xl-torch-h200-fp32.trace.json   (kdvfs record, layer segments × 24)
  gpt3xl-torch-h200-bf16.kineto.json.gz                                   (the raw profiler trace, labelled)
  foreign-transformer.kineto.json.gz   (a plain PyTorch training step of nn.TransformerEncoder, no kdvfs labels)
  h200_measurements.json               (isolated stages, whole step, live-mode switching cost with no-op writes)
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def foreign_trace(out: Path) -> None:
    """A transformer training step recorded the ordinary way (not by kdvfs): no labels, autograd backward, AdamW."""
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
    import gzip

    out.write_bytes(gzip.compress(tmp.read_bytes(), mtime=0))
    tmp.unlink()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--only-foreign", action="store_true", help="record only the foreign (unlabelled) trace")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from hw_backend.measure import measure_window
    from hw_backend.nvml import NvmlBackend
    from hw_backend.workloads import BlockConfig, BlockWorkload
    from kdvfs.record import record

    if a.only_foreign:
        foreign_trace(out / "foreign-transformer.kineto.json.gz")
        return 0
    res: dict = {"command": f"python -m scripts.h200_observe OUT --window {a.window:g}", "torch": torch.__version__}
    t0 = time.time()
    import traceback

    def attempt(key, fn):
        try:
            res[key] = fn()
        except Exception as e:  # noqa: BLE001 — one failed part must not lose the others
            traceback.print_exc()
            res[key] = {"error": repr(e)}
        (out / "h200_measurements.json").write_text(json.dumps(res, indent=1) + "\n")

    def rec(prec, raw):
        imp = record(out / f"gpt3xl-torch-h200-{prec}.trace.json", precision=prec, raw_out=out / raw)
        return {"kernels": len(imp.trace.kernels), "step_s": imp.trace.total_time_s,
                "assigned_time_share": imp.assigned_time_share}

    attempt("bf16_record", lambda: rec("bf16", "gpt3xl-torch-h200-bf16.kineto.json.gz"))
    attempt("fp32_record", lambda: rec("fp32", "fp32.kineto.json.gz"))
    if (out / "fp32.kineto.json.gz").exists():
        (out / "fp32.kineto.json.gz").unlink()
    attempt("foreign", lambda: foreign_trace(out / "foreign-transformer.kineto.json.gz") or {"ok": True})
    print(f"recorded in {time.time() - t0:.1f} s", res, flush=True)

    be = NvmlBackend(observe_only=True)  # reads only: never a clock, limit or mode change
    caps = be.capabilities()
    res["card"] = {"name": be.name, "power_limit_w": caps.power_limit_w, "energy_counter": caps.energy_counter,
                   "clocks_idle": be.clocks_mhz(), "power_idle_w": be.power_mw() / 1000}
    wl = BlockWorkload(BlockConfig(precision="bf16"))
    wl.step()
    wl.prepare()
    sync = torch.cuda.synchronize

    def batch_for(fn) -> int:
        for _ in range(3):
            fn()
        sync()
        t = time.perf_counter()
        for _ in range(10):
            fn()
        sync()
        per = (time.perf_counter() - t) / 10
        return max(1, int(0.015 / per))

    stages = {}
    res["stages"] = stages
    for st in wl.stage_names():
        try:
            fn = functools.partial(wl.run_stage, st)
            b = batch_for(fn)
            w = measure_window(fn, sync, be, window_s=a.window, warmup_s=1.0, batch=b)
            stages[st] = dict(w.to_dict(), batch=b)
            print(f"{st:14s} {w.time_per_iter_s * 1e3:9.4f} ms {w.power_w:7.1f} W  core {w.core_mhz_min}-{w.core_mhz_max}", flush=True)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            stages[st] = {"error": repr(e)}
        (out / "h200_measurements.json").write_text(json.dumps(res, indent=1) + "\n")

    wl2 = BlockWorkload(BlockConfig(precision="bf16"))
    step = wl2.step
    attempt("step", lambda: measure_window(step, sync, be, window_s=a.window, warmup_s=1.0, batch=1).to_dict())
    print("step", res["step"], flush=True)

    # live mode with the clock write replaced by a no-op, at every stage boundary (22 per step)
    def noop_write() -> None:
        return None

    boundaries = {"n": 0}

    def hooked_step(mode: str) -> None:
        def boundary() -> None:
            boundaries["n"] += 1
            if mode == "none":
                return
            if mode == "sync":
                torch.cuda.synchronize()  # host waits for the kernel, calls the driver, launches the next
                noop_write()
            else:
                import cupy

                s = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
                s.launch_host_func(lambda _arg: noop_write(), None)  # the stream stalls while the host function runs

        _labels = wl2._label
        wl2._label = lambda name: _Boundary(name, boundary, _labels)  # type: ignore[method-assign]
        try:
            wl2.step(label=True)
        finally:
            wl2._label = _labels  # type: ignore[method-assign]

    live = {}
    for mode in ("none", "sync", "callback"):
        boundaries["n"] = 0
        try:
            w = measure_window(lambda m=mode: hooked_step(m), sync, be, window_s=a.window, warmup_s=1.0, batch=1)
        except Exception as e:  # noqa: BLE001 — cupy may be missing; report and go on
            live[mode] = {"error": repr(e)}
            continue
        d = w.to_dict()
        d["boundaries_per_step"] = 22
        live[mode] = d
        print("live", mode, d, flush=True)
    res["live_noop"] = live
    res["wall_s"] = time.time() - t0
    (out / "h200_measurements.json").write_text(json.dumps(res, indent=1) + "\n")
    return 0


class _Boundary:
    """Wraps a record_function label: a stage label ``kdvfs.op:*`` is a switch point."""

    def __init__(self, name, hook, labels):
        self.name, self.hook, self.ctx = name, hook, labels(name)

    def __enter__(self):
        if self.name.startswith("kdvfs.op:"):
            self.hook()
        return self.ctx.__enter__()

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc)


if __name__ == "__main__":
    raise SystemExit(main())
