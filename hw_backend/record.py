"""Recording one training step of the GPT-3-style block with the PyTorch profiler (the `kdvfs record` verb).

Needs the ``torch`` extra and a CUDA GPU. Warm-up steps run under the profiler's schedule and are excluded; the
recorded step's segments come from ``record_function`` labels, and layer segments get repeat 24 (GPT-3 XL has 24
layers; the optimizer step updates 24 layers' parameters, so its segment repeats 24 times too).
"""

from __future__ import annotations

import logging
import platform
from pathlib import Path

from kdvfs.importers import KinetoImport, import_kineto
from kdvfs.trace import save_trace

__all__ = ["record"]

log = logging.getLogger(__name__)


def record(out: str | Path, *, precision: str = "bf16", batch: int = 8, seq: int = 2048, warmup: int = 5,
           name: str | None = None, raw_out: str | Path | None = None, seed: int = 0) -> KinetoImport:
    """Record one step and write the trace to ``out``; the raw Kineto JSON to ``raw_out`` if given."""
    from hw_backend.workloads import STAGE_REPEATS, BlockConfig, BlockWorkload, require_torch_cuda

    torch = require_torch_cuda()
    cfg = BlockConfig(batch=batch, seq=seq, precision=precision, seed=seed)
    wl = BlockWorkload(cfg)
    out = Path(out)
    raw = Path(raw_out) if raw_out else out.with_name(out.name.split(".")[0] + ".kineto.json.gz")
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    sched = torch.profiler.schedule(wait=0, warmup=warmup, active=1, repeat=1)
    with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=False) as prof:
        for _ in range(warmup + 1):
            wl.step(label=True)
            torch.cuda.synchronize()
            prof.step()
    tmp = raw.with_name(raw.name.replace(".gz", "").replace(".json", "") + ".tmp.json")
    prof.export_chrome_trace(str(tmp))
    import gzip

    raw.write_bytes(gzip.compress(tmp.read_bytes(), mtime=0))
    tmp.unlink()
    dev = torch.cuda.get_device_name(0)
    meta = {
        "model": f"GPT-3 XL transformer block (hidden {cfg.hidden}, {cfg.heads} heads, causal attention, GELU MLP, "
                 "pre-LayerNorm), AdamW",
        "batch_size": batch, "seq_len": seq, "gpu": dev,
        "source": (f"recorded with `kdvfs record --precision {precision} --batch {batch} --seq {seq}` on {dev}: "
                   f"PyTorch {torch.__version__} profiler (Kineto), {warmup} warm-up steps excluded, one step kept; "
                   "one layer recorded, layer and optimizer segments repeat 24"),
        "licence": "CC0 (measured by the kdvfs project)",
        "notes": f"precision {precision}; driver clocks (auto) at capture; host {platform.node()}",
    }
    imp = import_kineto(raw, name=name or out.name.split(".")[0], repeats=STAGE_REPEATS, step="last", meta=meta)
    save_trace(imp.trace, out)
    log.info("recorded %d kernels to %s", len(imp.trace.kernels), out)
    return imp
