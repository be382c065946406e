"""A sweep spread over several GPUs on Ray: one actor per GPU measures its share, into one resumable output.

The work (setting × kernel unit × repeat) is split by setting, round-robin in the sweep's order, so each GPU changes
its clocks once per setting it owns (the single-GPU sweep's rule); with fewer settings than GPUs (an observe-only
sweep at auto has one) the units are dealt round-robin instead. Actor ``g`` runs ``run_sweep`` on its share into
its own part file ``OUT.gpuG.part.csv`` — appended and flushed row by row, resumable exactly like a single sweep —
and when all are done the driver merges the parts into ``OUT`` in the sweep's order (settings, then units, then
repeats) and deletes them. A sweep killed at any point and run again skips every row already in ``OUT`` or in a part
(same GPU count or another), so no row is lost or measured twice.

Each actor builds its own backend: ``fake`` — a ``FakeNvml`` card per actor (seeded by its index), for tests and dry
runs; ``nvml`` — the actor's GPU through NVML (observe-only unless clock control is allowed), with the actor reserving
one GPU (``num_gpus=1``) so Ray places one actor per card.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

from hw_backend.sweep import FIELDS, done_rows
from kdvfs.errors import InputError
from kdvfs.profile import fmt_clock, parse_clock

__all__ = ["NO_MULTICAST_ENV", "split_settings", "merge_parts", "run_sweep_share", "ShareActor", "ray_sweep",
           "worker_env"]

log = logging.getLogger(__name__)

# NVLink multicast stays off in every process Ray starts for a sweep (workers get the job's runtime_env, not only
# the environment the cluster was started with): a program using it can take the host's GPUs out of service. The
# driver's CUDA device order goes along, so a worker's CUDA and NVML indices agree.
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def worker_env() -> dict[str, str]:
    """Environment variables every sweep worker gets: multicast off, and the driver's CUDA_DEVICE_ORDER."""
    import os

    env = dict(NO_MULTICAST_ENV)
    if os.environ.get("CUDA_DEVICE_ORDER"):
        env["CUDA_DEVICE_ORDER"] = os.environ["CUDA_DEVICE_ORDER"]
    return env


def split_settings(settings: list[tuple[int, int]], gpus: int) -> list[list[tuple[int, int]]]:
    """Settings dealt round-robin to ``gpus`` shares (share g gets settings g, g + gpus, …)."""
    if not isinstance(gpus, int) or gpus < 1:
        raise InputError(f"a sweep needs at least one GPU, got {gpus!r}; give --gpus N with N ≥ 1")
    return [settings[g::gpus] for g in range(gpus)]


def _part(out: Path, g: int) -> Path:
    return out.with_name(f"{out.name}.gpu{g}.part.csv")


def _rows(path: Path) -> list[dict]:
    if not path.exists() or path.stat().st_size == 0:
        return []
    done_rows(path)  # repairs a half-written last line
    with path.open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _ident_line(path: Path) -> str | None:
    """The ``# kdvfs-sweep/1 …`` line a sweep file starts with (which trace and card it measures), if any."""
    if not path.exists():
        return None
    with path.open() as f:
        first = f.readline()
    return first if first.startswith("#") else None


def _key(r: dict) -> tuple[str, int, int, int]:
    return r["kernel"], parse_clock(r["core_mhz"]), parse_clock(r["mem_mhz"]), int(r["repeat"])


def merge_parts(out: str | Path, settings: list[tuple[int, int]], kernel_order: list[str]) -> int:
    """Merge every ``OUT.gpu*.part.csv`` into ``OUT`` (rows already there kept), in the sweep's order; parts deleted.
    Returns the number of rows in ``OUT``."""
    out = Path(out)
    parts = sorted(out.parent.glob(f"{out.name}.gpu*.part.csv"))
    rows = {_key(r): r for r in _rows(out)}
    for p in parts:
        for r in _rows(p):
            rows.setdefault(_key(r), r)
    s_pos = {s: i for i, s in enumerate(settings)}
    k_pos = {k: i for i, k in enumerate(kernel_order)}
    order = sorted(rows, key=lambda k: (s_pos.get((k[1], k[2]), len(s_pos)), k[3], k_pos.get(k[0], len(k_pos)), k[0]))
    head = next((h for h in map(_ident_line, [out, *parts]) if h), None)
    tmp = out.with_name(out.name + ".merge")
    with tmp.open("w", newline="") as f:
        if head:
            f.write(head if head.endswith("\n") else head + "\n")
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for k in order:
            w.writerow({f: rows[k].get(f, "") for f in FIELDS})
    tmp.replace(out)
    for p in parts:
        p.unlink()
    return len(order)


def run_sweep_share(g: int, backend_kind: str, gpu: str, trace_ref: str, share: list[tuple[int, int]], out: str,
                    done: set, kw: dict[str, Any], unit_share: tuple[int, int] | None = None) -> int:
    """Actor body: measure this GPU's share into its part file, skipping rows ``done`` elsewhere. Returns rows
    written by this call."""
    from hw_backend.nvml import NvmlBackend
    from hw_backend.sim_workload import Workload
    from hw_backend.sweep import run_sweep
    from kdvfs.bundled import load_trace_by_name, model_params
    from kdvfs.gpus import get_gpu

    spec = get_gpu(gpu)
    trace = load_trace_by_name(trace_ref)
    wl: Workload
    if backend_kind == "fake":
        from hw_backend.fake import FakeNvml
        from hw_backend.sim_workload import SimulatedWorkload

        fake = FakeNvml(spec, model_params(trace, spec), seed=int(kw.pop("seed", 0)) + g,
                        time_noise=float(kw.pop("noise", 0.01)), power_noise=2 * float(kw.pop("noise_p", 0.01)))
        be, wl = NvmlBackend(fake, observe_only=not kw.get("allow_clock_control", False)), SimulatedWorkload(trace, fake)
    elif backend_kind == "nvml":
        import ray

        from hw_backend.sim_workload import TorchWorkload

        ids = ray.get_gpu_ids()
        index = int(ids[0]) if ids else g  # physical index (CUDA_DEVICE_ORDER=PCI_BUS_ID keeps it NVML's)
        kw.pop("seed", None), kw.pop("noise", None), kw.pop("noise_p", None)
        be, wl = NvmlBackend(index=index, observe_only=not kw.get("allow_clock_control", False)), TorchWorkload(trace)
    else:
        raise InputError(f"backend {backend_kind!r} is not fake or nvml")
    part = _part(Path(out), g)
    before = len(_rows(part))
    units = {u.keys[0] for u in wl.units()}
    reps = int(kw.get("repeats", 1))
    only = {}
    for i, u in enumerate(wl.units()):
        mine = unit_share is None or i % unit_share[1] == unit_share[0]
        left = [s for s in share if mine and any((u.keys[0], s[0], s[1], r) not in done for r in range(reps))]
        only[u.name] = left
    if any(only.values()):
        run_sweep(be, wl, spec, share, part, only=only, **{k: v for k, v in kw.items() if k != "seed"})
    log.info("GPU %d: %d units, share of %d settings", g, len(units), len(share))
    return len(_rows(part)) - before


class ShareActor:
    """One GPU's sweeper (a Ray actor: it holds its GPU for the whole share)."""

    def __init__(self, g: int) -> None:
        self.g = g

    def run(self, *args) -> int:
        return run_sweep_share(self.g, *args)

    def env(self) -> dict[str, str | None]:
        """The multicast switches and device order as this worker sees them (checked by the tests and the driver)."""
        import os

        return {k: os.environ.get(k) for k in (*NO_MULTICAST_ENV, "CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES")}


def ray_sweep(backend_kind: str, gpu: str, trace_ref: str, settings: list[tuple[int, int]], out: str | Path,
              gpus: int, address: str | None = None, num_cpus: int | None = None, **kw) -> dict:
    """Spread a sweep over ``gpus`` Ray actors (one per GPU) and merge their parts into ``out``.

    Args:
        backend_kind: ``fake`` or ``nvml``.
        address: a running Ray cluster (``ray://HOST:PORT`` or ``auto``); default a local instance.
        num_cpus: CPUs of a local instance.
        kw: ``run_sweep`` options (window_s, warmup_s, repeats, allow_clock_control, min_steps) and, for the fake
            backend, seed and noise.
    """
    try:
        import ray
    except ImportError:
        raise InputError("a sweep over several GPUs needs Ray: pip install 'kdvfs[ray]'") from None
    from kdvfs.bundled import load_trace_by_name

    out = Path(out)
    by_units = len(settings) < gpus
    shares = [list(settings)] * gpus if by_units else split_settings(settings, gpus)
    done = set(done_rows(out))
    for p in out.parent.glob(f"{out.name}.gpu*.part.csv"):
        done |= done_rows(p)
    owned = not ray.is_initialized()
    if owned:
        init: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": False,
                                "runtime_env": {"env_vars": worker_env()}}
        if address:
            init["address"] = address
        else:
            init["num_cpus"] = num_cpus or 2
        try:
            ray.init(**init)
        except Exception as e:  # noqa: BLE001 — Ray raises many types; one clear message
            raise InputError(f"cannot start or reach Ray at {address or 'a local instance'}: {e}") from None
    try:
        opts: dict[str, Any] = {"num_gpus": 1} if backend_kind == "nvml" else {"num_cpus": 0}
        opts["runtime_env"] = {"env_vars": worker_env()}  # also when Ray was initialised by the caller
        actor: Any = ray.remote(**opts)(ShareActor)  # an actor class: Ray's stubs cannot say so
        actors = {g: actor.remote(g) for g in range(gpus) if shares[g]}
        envs = ray.get([a.env.remote() for a in actors.values()])
        for g, wenv in zip(actors, envs):
            bad = {k: wenv.get(k) for k, v in NO_MULTICAST_ENV.items() if wenv.get(k) != v}
            if bad:
                raise InputError(f"Ray worker for GPU {g} has NVLink multicast switches {bad}, not {NO_MULTICAST_ENV}; "
                                 "start the cluster with them exported")
            log.info("GPU %d worker: %s", g, wenv)
        refs = [a.run.remote(backend_kind, gpu, trace_ref, shares[g], str(out), done, dict(kw),
                             (g, gpus) if by_units else None)
                for g, a in actors.items()]
        written = ray.get(refs)
        for a in actors.values():
            ray.kill(a)
    finally:
        if owned:
            ray.shutdown()
    trace = load_trace_by_name(trace_ref)
    n = merge_parts(out, settings, list(trace.kernel_keys))
    return {"gpus": gpus, "rows": n, "written": [int(x) for x in written], "worker_env": envs,
            "split": "units" if by_units else "settings",
            "settings_per_gpu": [[f"{fmt_clock(c)}:{fmt_clock(m)}" for c, m in s] for s in shares]}
