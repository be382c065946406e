"""A Hugging Face GPT-2 training step (built from config, random weights): record it, or run it under the kdvfs
runtime with no-op clock writes (``python -m scripts.hf_gpt2_step record|runtime``; the H200 runtime validation).

Never changes a clock: the runtime mode reads the card through the observe-only NVML backend, and the runtime's
clock writes are no-ops (recorded, not made). Needs torch and transformers (the device-side extra); with
``device="cpu"`` and a tiny model it dry-runs on any machine (``record --tiny --device cpu``).
"""

from __future__ import annotations

import gzip
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GPT2Size", "TINY", "build_gpt2_step", "record_step", "runtime_overhead", "timed"]


@dataclass(frozen=True, slots=True)
class GPT2Size:
    """Attributes: layers, hidden (heads: hidden / 128), batch and seq (tokens) of the step."""

    layers: int = 24
    hidden: int = 2048
    batch: int = 4
    seq: int = 1024


TINY = GPT2Size(layers=2, hidden=128, batch=1, seq=64)
"""2 layers × 128, batch 1 × 64: a CPU dry run."""


def build_gpt2_step(size: GPT2Size, device: str = "cuda"):
    """(model, optimizer, step, sync, config): GPT-2 from config with random weights (seed 0), AdamW, and one bf16
    autocast training step on random token ids; ``sync`` waits for the GPU (a no-op on the CPU)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=size.layers, n_embd=size.hidden, n_head=max(1, size.hidden // 128),
                     n_positions=size.seq, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (size.batch, size.seq), device=device)

    def step() -> None:
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    return model, opt, step, sync, cfg


def timed(step: Callable[[], None], sync: Callable[[], None], n: int,
          clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """The time of each of ``n`` steps, each between two synchronisations."""
    out = []
    for _ in range(n):
        sync()
        t0 = clock()
        step()
        sync()
        out.append(clock() - t0)
    return out


def record_step(out: Path, size: GPT2Size, device: str = "cuda", steps: int = 10) -> dict:
    """Time ``steps`` steps after three warm-up ones, then profile one step (after one warm-up step under the
    profiler) into ``out/hf_gpt2_step.kineto.json.gz``; returns what was run and measured."""
    import torch

    model, opt, step, sync, cfg = build_gpt2_step(size, device)
    for _ in range(3):
        step()
    sync()
    base = timed(step, sync, steps)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True, with_modules=True,
                                with_stack=True) as prof:
        for _ in range(2):
            step()
            sync()
            prof.step()
    raw = out / "trace.json"
    prof.export_chrome_trace(str(raw))
    gz = out / "hf_gpt2_step.kineto.json.gz"
    with raw.open("rb") as f, gzip.open(gz, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    size_b = raw.stat().st_size
    raw.unlink()
    return {"model": f"GPT-2 (HF transformers) {cfg.n_layer} layers x hidden {cfg.n_embd}, {cfg.n_head} heads",
            "params": sum(p.numel() for p in model.parameters()), "batch": size.batch, "seq": size.seq,
            "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "torch": torch.__version__, "step_time_s": base, "trace_bytes": size_b, "trace_gz_bytes": gz.stat().st_size}


def runtime_overhead(trace_path: str | Path, schedule_paths: list[str], size: GPT2Size, device: str = "cuda",
                     steps: int = 10, rounds: int = 3, on_result: Callable[[str, dict], Any] | None = None) -> dict:
    """The runtime with no-op writes on the live model, for each schedule; step time with and without it
    (``hw_backend.torch_runtime.measure_overhead``, rounds alternating). On a CUDA device the card's clocks are read
    (observe-only) before and after, to show nothing changed."""
    import torch

    from hw_backend.nvml import NvmlBackend
    from hw_backend.torch_runtime import measure_overhead
    from kdvfs.runtime_plan import plan_for
    from kdvfs.schedule import load_schedule
    from kdvfs.trace import load_trace

    trace = load_trace(trace_path)
    model, opt, step, sync, cfg = build_gpt2_step(size, device)
    for _ in range(3):
        step()
    sync()
    out: dict = {"model": f"GPT-2 (HF transformers) {cfg.n_layer} layers x hidden {cfg.n_embd}", "batch": size.batch,
                 "seq": size.seq, "torch": torch.__version__, "schedules": {}}
    be = None
    if device == "cuda":
        be = NvmlBackend(observe_only=True)  # reads only; the runtime's writes are no-ops
        out["device"] = be.name
        out["clocks_before_mhz"] = be.clocks_mhz()
    for path in schedule_paths:
        plan = plan_for(trace, load_schedule(path))
        res = measure_overhead(model, opt, plan, step, sync, steps=steps, rounds=rounds)
        out["schedules"][Path(path).name] = res
        if on_result is not None:
            on_result(Path(path).name, res)
    if be is not None:
        out["clocks_after_mhz"] = be.clocks_mhz()
    return out
