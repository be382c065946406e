"""A data-parallel (DDP over NCCL) training step of a real model on several GPUs, measured observe-only.

The body of ``torchrun … -m scripts.h200x2_ddp`` (one process per rank): a GPT-2-style model built from its Hugging
Face config (random weights, nothing downloaded), bf16 autocast, AdamW, each rank its own GPU at the cards' own clocks.
Never changes a clock, limit or mode: NVML is only read (``NvmlReader``: the energy counter, power, clocks,
temperature, limits). What it writes is described in ``scripts/h200x2_ddp.py``. ``DdpConfig(dry_run=True)`` runs it on
the CPU with gloo and a tiny model (torch and transformers needed, no GPU).
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["DdpConfig", "NvmlReader", "ddp_session"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DdpConfig:
    """Attributes: out (folder written); layers, hidden, heads, seq: the GPT-2 model; batch: per-GPU batch size
    (large enough that the GPU, not the host, sets the pace, also under the profiler); window_s: each measured
    window; windows: DDP windows before the no-sync one; warmup_s: warm-up steps; dry_run: CPU, gloo, a tiny
    model, short windows, no NVML; extra: also an idle window and the collective-alone windows; extra_window_s: each
    extra window; bucket_mb: the extra windows' all-reduce size (DDP's bucket). The script's options keep their
    names (``--window``, ``--warmup``, ``--extra-window``, seconds)."""

    out: str
    layers: int = 24
    hidden: int = 1024
    heads: int = 16
    seq: int = 1024
    batch: int = 16
    window_s: float = 10.0
    windows: int = 2
    warmup_s: float = 15.0
    dry_run: bool = False
    extra: bool = False
    extra_window_s: float = 5.0
    bucket_mb: float = 25.0


class NvmlReader:
    """Read-only NVML access for one GPU (observe-only: no setter is ever called)."""

    def __init__(self, index: int, pci_bus_id: str | None = None):
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        # by the CUDA device's PCI bus id: NVML ignores CUDA_VISIBLE_DEVICES, so a reordered list (1,0) still reads
        # the card this rank runs on
        self.h = (pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id) if pci_bus_id
                  else pynvml.nvmlDeviceGetHandleByIndex(index))
        self.samples: list[tuple[float, float, int, int, int]] = []
        self._stop = threading.Event()
        self._thr: threading.Thread | None = None

    def energy_j(self) -> float:
        return self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h) / 1e3

    def _get(self, fn, *args, scale: float = 1.0):
        """One read; a value this driver or VM does not expose is recorded as such, never fatal (the energy counter,
        which the windows need, is read without this guard)."""
        try:
            v = getattr(self.nv, fn)(self.h, *args)
        except Exception as e:  # noqa: BLE001 - any NVML or attribute error of an optional read
            return f"unreadable: {e!r}"
        if isinstance(v, bytes):
            v = v.decode()
        return v / scale if scale != 1.0 and isinstance(v, (int, float)) else v

    def read(self) -> dict:
        nv = self.nv
        return {"power_w": self._get("nvmlDeviceGetPowerUsage", scale=1e3),
                "sm_mhz": self._get("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM),
                "mem_mhz": self._get("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM),
                "temp_c": self._get("nvmlDeviceGetTemperature", getattr(nv, "NVML_TEMPERATURE_GPU", 0))}

    def static(self) -> dict:
        nv = self.nv
        pci = self._get("nvmlDeviceGetPciInfo")
        return {"name": self._get("nvmlDeviceGetName"),
                "pci_bus_id": getattr(pci, "busId", pci) if not isinstance(pci, str) else pci,
                "power_limit_w": self._get("nvmlDeviceGetPowerManagementLimit", scale=1e3),
                "enforced_power_limit_w": self._get("nvmlDeviceGetEnforcedPowerLimit", scale=1e3),
                "max_sm_mhz": self._get("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_SM),
                "max_mem_mhz": self._get("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_MEM)}

    def start_sampling(self, period_s: float = 0.1) -> None:
        self.samples = []
        self._stop.clear()

        def loop():
            while not self._stop.is_set():
                r = self.read()
                if all(isinstance(r[k], (int, float)) for k in ("power_w", "sm_mhz", "mem_mhz", "temp_c")):
                    self.samples.append((time.perf_counter(), r["power_w"], r["sm_mhz"], r["mem_mhz"], r["temp_c"]))
                self._stop.wait(period_s)

        self._thr = threading.Thread(target=loop, daemon=True)
        self._thr.start()

    def stop_sampling(self) -> dict:
        self._stop.set()
        if self._thr is not None:
            self._thr.join()
        s = self.samples
        if not s:
            return {}
        n = len(s)
        return {"samples": n, "mean_power_w": sum(x[1] for x in s) / n, "mean_sm_mhz": sum(x[2] for x in s) / n,
                "min_sm_mhz": min(x[2] for x in s), "max_sm_mhz": max(x[2] for x in s),
                "mean_mem_mhz": sum(x[3] for x in s) / n, "max_temp_c": max(x[4] for x in s)}


def ddp_session(a: DdpConfig) -> int:
    """Run this rank's part of the session (inside ``torchrun``); rank 0 writes ``measurements.json``."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import GPT2Config, GPT2LMHeadModel

    if a.dry_run:
        a = replace(a, layers=2, hidden=64, heads=4, seq=32, batch=2, window_s=1.0, windows=1, warmup_s=1.0)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        if not a.dry_run and os.environ.get(k) != ("0" if k == "NCCL_NVLS_ENABLE" else "1"):
            raise SystemExit(f"{k} must be set (NVLink multicast off) before starting")
    dist.init_process_group("gloo" if a.dry_run else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cpu") if a.dry_run else torch.device("cuda", local)
    if not a.dry_run:
        torch.cuda.set_device(dev)
    pci = None
    if not a.dry_run:
        pr0 = torch.cuda.get_device_properties(dev)
        pci = "%08x:%02x:%02x.0" % (pr0.pci_domain_id, pr0.pci_bus_id, pr0.pci_device_id)  # noqa: UP031
    nv = None if a.dry_run else NvmlReader(local, pci)
    sync = (lambda: None) if a.dry_run else torch.cuda.synchronize

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, n_positions=a.seq, vocab_size=50257,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).to(dev)
    params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, device_ids=None if a.dry_run else [local], gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(1 + rank)
    x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).to(dev)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

    def step(no_sync: bool = False) -> None:
        ctx = ddp.no_sync() if no_sync else _null()
        with ctx:
            with amp:
                loss = ddp(input_ids=x, labels=x).loss
            loss.backward()
        opt.step()  # also without sync: the step differs from the DDP one only by its gradient all-reduce
        opt.zero_grad(set_to_none=True)

    def log(*m) -> None:  # each rank's progress, through logging (the script sends it to stdout)
        _log.info("[rank %d] %s", rank, " ".join(map(str, m)))

    log(f"model {params / 1e6:.1f} M parameters, batch {a.batch} × {a.seq} per GPU, world {world}, device {dev}")
    # warm-up, and the step count per window (rank 0's, shared: every rank must run the same steps)
    sync()
    t0 = time.perf_counter()
    n = 0
    flag = torch.ones(1, device=dev)  # rank 0 decides when warm-up ends: every rank must run the same steps
    while flag.item() > 0:
        for _ in range(5):
            step()
        n += 5
        sync()
        flag.fill_(1.0 if time.perf_counter() - t0 < a.warmup_s else 0.0)
        dist.broadcast(flag, 0)
    tp = time.perf_counter()  # the step time from a steady-state probe, not the warm-up's slow first steps
    for _ in range(10):
        step()
    sync()
    per = (time.perf_counter() - tp) / 10
    steps = torch.tensor([max(5, math.ceil(1.1 * a.window_s / per))], dtype=torch.int64, device=dev)  # NCCL: on GPU
    dist.broadcast(steps, 0)
    steps_n = int(steps.item())
    log(f"warm-up {n} steps, {1e3 * per:.1f} ms/step; {steps_n} steps per window")

    def measured(body) -> tuple[float, float, dict]:
        """(seconds, joules, NVML samples) of ``body`` on this rank's card, all ranks starting together."""
        dist.barrier()
        sync()
        if nv:
            nv.start_sampling()
        e0 = nv.energy_j() if nv else 0.0
        t = time.perf_counter()
        body()
        sync()
        dt = time.perf_counter() - t
        e1 = nv.energy_j() if nv else 0.0
        return dt, e1 - e0, (nv.stop_sampling() if nv else {})

    def window(label: str, no_sync: bool = False) -> dict:
        def steps() -> None:
            for _ in range(steps_n):
                step(no_sync)

        dt, e, s = measured(steps)
        r = {"label": label, "steps": steps_n, "time_s": dt, "energy_j": e, "step_time_s": dt / steps_n,
             "step_energy_j": e / steps_n, "mean_power_w": e / dt, **s}
        log(f"{label}: {steps_n} steps in {dt:.2f} s: {1e3 * r['step_time_s']:.2f} ms, {r['step_energy_j']:.2f} J "
            f"per step, {r['mean_power_w']:.0f} W")
        return r

    def timed(label: str, body, n: int, **extra) -> dict:
        """A window of anything (idle, collectives alone): energy and power per card, time per repetition."""
        dt, e, s = measured(body)
        r = {"label": label, "repetitions": n, "time_s": dt, "energy_j": e, "per_repetition_s": dt / n,
             "mean_power_w": e / dt, **extra, **s}
        log(f"{label}: {n} in {dt:.2f} s, {1e3 * dt / n:.3f} ms each, {r['mean_power_w']:.0f} W")
        return r

    res: dict = {"rank": rank, "world_size": world, "static": nv.static() if nv else {}, "before": nv.read() if nv else {}}
    if not a.dry_run:  # to check that this rank's NVML device is its CUDA device
        pr = torch.cuda.get_device_properties(dev)
        res["cuda_pci"] = "%04x:%02x:%02x" % tuple(getattr(pr, k, 0) for k in ("pci_domain_id", "pci_bus_id",  # noqa: UP031
                                                                                   "pci_device_id"))
        res["cuda_name"] = pr.name
    res["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    if a.extra:
        res["idle"] = timed("idle", lambda: time.sleep(a.extra_window_s), 1)
    res["windows"] = [window(f"ddp{i}") for i in range(a.windows)]
    res["no_sync"] = window("no_sync", no_sync=True)
    res["windows"].append(window(f"ddp{a.windows}"))
    if a.extra:
        buf = torch.ones(int(a.bucket_mb * 2**20 / 4), dtype=torch.float32, device=dev)
        sync()
        tp = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(buf)
        sync()
        per_ar = (time.perf_counter() - tp) / 20
        n_ar = torch.tensor([max(20, math.ceil(a.extra_window_s / per_ar))], dtype=torch.int64, device=dev)
        dist.broadcast(n_ar, 0)
        n_ar_i = int(n_ar.item())

        def transfer():
            for _ in range(n_ar_i):
                dist.all_reduce(buf)

        res["coll_transfer"] = timed("coll_transfer", transfer, n_ar_i, bytes=buf.numel() * 4)
        # rank 0's collective waits while the others spin 4 all-reduce times in a GPU sleep kernel first
        # rank 0's counts for every rank: each rank timed its own all-reduces, and a rank that posts one all-reduce
        # more than the others waits for ever (session 5's first run lost its last windows so)
        wcount = torch.tensor([int(4 * per_ar * 1.98e9), max(5, math.ceil(a.extra_window_s / (5 * per_ar)))],
                              dtype=torch.int64, device=dev)
        dist.broadcast(wcount, 0)
        cycles, n_w = int(wcount[0].item()), int(wcount[1].item())

        def waiting():
            for _ in range(n_w):
                if rank != 0 and not a.dry_run:
                    torch.cuda._sleep(cycles)
                dist.all_reduce(buf)

        res["coll_wait"] = timed("coll_wait", waiting, n_w, bytes=buf.numel() * 4, sleep_cycles=cycles)
        del buf
    res["after"] = nv.read() if nv else {}

    # one profiled step per rank for the timing (no op shapes: recording them costs host time, which stretches a
    # launch-bound step), then one with op shapes for the kernels' FLOPs and bytes (`kdvfs trace import … --work-from`)
    acts = [torch.profiler.ProfilerActivity.CPU] + ([] if a.dry_run else [torch.profiler.ProfilerActivity.CUDA])
    for suffix, shapes in (("", False), (".shapes", True)):
        dist.barrier()
        with torch.profiler.profile(activities=acts, record_shapes=shapes,
                                    schedule=torch.profiler.schedule(wait=1, warmup=2, active=1, repeat=1)) as prof:
            for i in range(4):  # no synchronisation before the recorded step: it runs as the measured ones (host ahead)
                step()
                if i == 3:
                    sync()  # the recorded (last) step completes before the profiler stops
                prof.step()
        tmp = out / f"rank{rank}{suffix}.kineto.json"
        prof.export_chrome_trace(str(tmp))
        gz = out / f"rank{rank}{suffix}.kineto.json.gz"
        gz.write_bytes(gzip.compress(tmp.read_bytes(), mtime=0))
        tmp.unlink()
        log(f"trace{suffix or ''}: {gz.stat().st_size / 1e6:.2f} MB gzipped")

    allres: list = [None] * world
    dist.all_gather_object(allres, res)
    if rank == 0:
        doc = {"command": f"torchrun --standalone --nproc_per_node {world} -m scripts.h200x2_ddp --out OUT "
                          f"--window {a.window_s:g} --windows {a.windows} --warmup {a.warmup_s:g}"
                          + (f" --extra --extra-window {a.extra_window_s:g} --bucket-mb {a.bucket_mb:g}" if a.extra else ""),
               "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
               "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not a.dry_run else "",
               "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                      "NVSHMEM_DISABLE_NVLS", "CUDA_DEVICE_ORDER")},
               "model": {"arch": "GPT-2 (transformers GPT2LMHeadModel from config, random weights)",
                         "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq": a.seq,
                         "batch_per_gpu": a.batch, "parameters": params, "precision": "bf16 autocast, fp32 master",
                         "optimizer": "AdamW (foreach)", "ddp": "gradient_as_bucket_view, 25 MB buckets"},
               "ranks": allres}
        (out / "measurements.json").write_text(json.dumps(doc, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0



class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


