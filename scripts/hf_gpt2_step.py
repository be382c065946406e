"""A Hugging Face GPT-2 training step (built from config, random weights) on the lent H200: record it, or run it under
the kdvfs runtime with no-op clock writes.

    python -m scripts.hf_gpt2_step record  --out DIR [--layers 24 --hidden 2048 --batch 4 --seq 1024]
    python -m scripts.hf_gpt2_step runtime --out DIR --trace T.json --schedule S.json [...]
    python -m scripts.hf_gpt2_step record --out /tmp/x --tiny --device cpu     # dry run on a laptop

Never changes a clock: ``runtime`` uses the observe-only NVML backend in no-op mode (writes are recorded, not made).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import time
from pathlib import Path


def build(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=args.layers, n_embd=args.hidden, n_head=max(1, args.hidden // 128),
                     n_positions=args.seq, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=args.device)
    dt = torch.bfloat16

    def step():
        with torch.autocast(device_type=args.device, dtype=dt):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    return model, opt, step, sync, cfg


def timed(step, sync, n: int) -> list[float]:
    out = []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def cmd_record(args) -> dict:
    import torch

    model, opt, step, sync, cfg = build(args)
    for _ in range(3):
        step()
    sync()
    base = timed(step, sync, args.steps)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True, with_modules=True,
                                with_stack=True) as prof:
        for _ in range(2):
            step()
            sync()
            prof.step()
    raw = Path(args.out) / "trace.json"
    prof.export_chrome_trace(str(raw))
    gz = Path(args.out) / "hf_gpt2_step.kineto.json.gz"
    with raw.open("rb") as f, gzip.open(gz, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    size = raw.stat().st_size
    raw.unlink()
    return {"model": f"GPT-2 (HF transformers) {cfg.n_layer} layers x hidden {cfg.n_embd}, {cfg.n_head} heads",
            "params": sum(p.numel() for p in model.parameters()), "batch": args.batch, "seq": args.seq,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "torch": torch.__version__, "step_time_s": base, "trace_bytes": size, "trace_gz_bytes": gz.stat().st_size}


def cmd_runtime(args) -> dict:
    """The runtime with no-op writes on the live model, for each schedule given; step time with and without it."""
    import torch

    from hw_backend.nvml import NvmlBackend
    from hw_backend.torch_runtime import measure_overhead
    from kdvfs.runtime_plan import plan_for
    from kdvfs.schedule import load_schedule
    from kdvfs.trace import load_trace

    trace = load_trace(args.trace)
    model, opt, step, sync, cfg = build(args)
    for _ in range(3):
        step()
    sync()
    out = {"model": f"GPT-2 (HF transformers) {cfg.n_layer} layers x hidden {cfg.n_embd}", "batch": args.batch,
           "seq": args.seq, "torch": torch.__version__, "schedules": {}}
    if args.device == "cuda":
        be = NvmlBackend(observe_only=True)  # reads only; the runtime's writes are no-ops
        out["device"] = be.name
        out["clocks_before_mhz"] = be.clocks_mhz()
    for path in args.schedule.split(","):
        plan = plan_for(trace, load_schedule(path))
        res = measure_overhead(model, opt, plan, step, sync, steps=args.steps, rounds=args.rounds)
        out["schedules"][Path(path).name] = res
        print(Path(path).name, {k: v for k, v in res.items() if not isinstance(v, list) or len(v) < 8}, flush=True)
    if args.device == "cuda":
        out["clocks_after_mhz"] = be.clocks_mhz()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["record", "runtime"])
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="2 layers x 128, batch 1 x 64 (CPU dry run)")
    p.add_argument("--trace", help="kdvfs trace of the step (runtime mode)")
    p.add_argument("--schedule", help="kdvfs schedule(s), comma-separated (runtime mode)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds without/with the runtime (runtime mode)")
    args = p.parse_args()
    if args.tiny:
        args.layers, args.hidden, args.batch, args.seq = 2, 128, 1, 64
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.mode == "record":
        res = cmd_record(args)
    else:
        res = cmd_runtime(args)
    (Path(args.out) / f"{args.mode}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k not in ("steps", "schedules")}, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
