"""Command-line verbs of the hardware backend: ``sweep``, ``validate``, ``reset-clocks`` (hw_backend imported lazily).

``--backend fake`` runs everything against ``hw_backend.fake.FakeNvml`` (the calibrated model of the bundled trace,
or the category model of another), ``--backend nvml`` against the real GPU through NVML, observe-only unless
``--allow-clock-control`` is given.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from pathlib import Path

from kdvfs.console import make_console, print_json
from kdvfs.errors import InputError

__all__ = ["make_backend", "register"]


def check_noise(noise) -> float:
    """The fake backend's relative noise: a finite number in [0, 0.5] (NaN used to hang the sweep)."""
    import math

    if not isinstance(noise, (int, float)) or not math.isfinite(noise) or not 0 <= noise <= 0.5:
        raise InputError(f"--noise {noise!r} must be a relative scatter in [0, 0.5] (0.01 = 1 %); give e.g. --noise 0.01")
    return float(noise)


def report_stale_marker(be) -> None:
    """Tell the user when a killed run may have left this card's clocks locked (``hw_backend.safety``)."""
    msg = be.marker.stale() if getattr(be, "marker", None) is not None else None
    if msg:
        print(f"kdvfs: warning: {msg}", file=sys.stderr)


def make_backend(kind: str, spec, trace, *, allow_clock_control: bool, seed: int = 0, noise: float = 0.01,
                 fake_state: str | None = None, device: str | None = None):
    """(backend, workload) for ``fake`` or ``nvml`` — the one factory the command line uses."""
    from hw_backend.nvml import NvmlBackend
    from kdvfs.bundled import model_params

    check_noise(noise)
    if kind == "fake":
        from hw_backend.fake import FakeNvml
        from hw_backend.sim_workload import SimulatedWorkload

        fake = FakeNvml(spec, model_params(trace, spec), seed=seed, time_noise=noise, power_noise=2 * noise)
        if fake_state:
            atexit.register(lambda: open(fake_state, "w").write(json.dumps(  # noqa: SIM115
                {"at_default_clocks": fake.at_default_clocks, "calls": [c[0] for c in fake.calls][-20:]})))
        be = NvmlBackend(fake, observe_only=not allow_clock_control, device=device, env={})
        report_stale_marker(be)
        return be, SimulatedWorkload(trace, fake)
    if kind == "nvml":
        from hw_backend.sim_workload import TorchWorkload

        be = NvmlBackend(observe_only=not allow_clock_control, device=device)
        report_stale_marker(be)
        return be, TorchWorkload(trace)
    raise InputError(f"backend {kind!r} is not fake or nvml")


def cmd_sweep(a) -> int:
    from hw_backend.sweep import check_output, check_sweep_args, parse_settings, run_sweep, sparse_sweep
    from kdvfs.bundled import load_trace_by_name
    from kdvfs.gpus import get_gpu

    # every range first: nothing is opened, locked or written for a bad argument
    check_sweep_args(window_s=a.window, warmup_s=a.warmup, repeats=a.repeats, min_steps=a.min_steps)
    check_noise(a.noise)
    spec = get_gpu(a.gpu)
    trace = load_trace_by_name(a.trace)
    settings = parse_settings(a.settings, spec)
    if a.gpus > 1:  # each Ray actor builds its own backend on its GPU: none here (no CUDA context on a card)
        from types import SimpleNamespace

        be, wl = None, SimpleNamespace(trace=trace)
    else:
        be, wl = make_backend(a.backend, spec, trace, allow_clock_control=a.allow_clock_control, seed=a.seed,
                              noise=a.noise, fake_state=a.fake_state, device=a.device)
    check_output(Path(a.output), spec, wl)
    c = make_console()
    kw = dict(window_s=a.window, warmup_s=a.warmup, repeats=a.repeats, allow_clock_control=a.allow_clock_control,
              min_steps=a.min_steps)
    t0 = time.perf_counter()
    if a.gpus > 1:
        from hw_backend.multisweep import ray_sweep

        if a.sparse:
            raise InputError("--sparse runs on one GPU (each round depends on the last); drop --gpus or --sparse")
        info = ray_sweep(a.backend, a.gpu, a.trace, settings, a.output, a.gpus, address=a.ray_address,
                         seed=a.seed, noise=a.noise, noise_p=a.noise, **kw)
        doc = dict(info, output=a.output, seconds=time.perf_counter() - t0)
        print_json(doc) if a.json else c.print(f"sweep over {a.gpus} GPUs written to {a.output} ({info['rows']} rows)")
        return 0
    err = make_console(sys.stderr)  # progress on stderr: stdout stays clean for --json
    from kdvfs.cli.common import progress

    with progress(err, 0, "sweep") as prog:  # a bar on a terminal, else a line every ~10 s
        task = prog.add_task("sweep", total=None)
        kw["progress"] = lambda n, tot: prog.update(task, completed=n, total=tot)
        if a.sparse:
            info = sparse_sweep(be, wl, spec, settings, a.output, **kw)
        else:
            run_sweep(be, wl, spec, settings, a.output, **kw)
            info = {}
    doc = dict(info, output=a.output, settings=len(settings), units=len(wl.units()), seconds=time.perf_counter() - t0)
    print_json(doc) if a.json else c.print(f"sweep written to {a.output} ({len(settings)} settings × {len(wl.units())} units)")
    return 0


def cmd_validate(a) -> int:
    from hw_backend.validate import validate
    from kdvfs.bundled import load_trace_by_name, resolve_profile_path
    from kdvfs.console import table
    from kdvfs.gpus import get_gpu
    from kdvfs.profile import load_profile
    from kdvfs.schedule import load_schedule

    if not isinstance(a.repeats, int) or not 1 <= a.repeats <= 1000:
        raise InputError(f"--repeats {a.repeats!r} must be a whole number in 1–1000; give e.g. --repeats 3")
    from hw_backend.sweep import check_sweep_args

    check_sweep_args(window_s=a.window, warmup_s=a.warmup, repeats=1, min_steps=a.min_steps)
    check_noise(a.noise)
    spec = get_gpu(a.gpu)
    trace = load_trace_by_name(a.trace)
    from kdvfs.identity import check_card

    prof = load_profile(resolve_profile_path(a.profile or a.trace))
    check_card(prof.gpu, spec.name)
    sched = load_schedule(a.schedule)
    sched.check_for(trace, spec)
    be, wl = make_backend(a.backend, spec, trace, allow_clock_control=a.allow_clock_control, seed=a.seed, noise=a.noise,
                          device=a.device)
    res = validate(be, wl, trace, prof, sched, spec, mode=a.mode, repeats=a.repeats, window_s=a.window,
                   warmup_s=a.warmup, allow_clock_control=a.allow_clock_control, noop_writes=a.noop_writes,
                   min_steps=a.min_steps)
    if a.json:
        print_json(res)
        return 0
    c = make_console()
    rows = [[k, res[k]["time_s"], res[k]["time_std_s"], res[k]["energy_j"], res[k]["energy_std_j"]] for k in ("auto", "schedule")]
    c.print(table(f"validate ({a.mode}, {a.repeats} repeats, {a.backend})", ["run", "time (s)", "± s", "energy (J)", "± J"], rows))
    c.print(f"measured: time {res['measured_time_change_pct']:+.2f} %, energy {res['measured_energy_change_pct']:+.2f} % vs auto; "
            f"simulated: time {res['simulated_time_change_pct']:+.2f} %, energy {res['simulated_energy_change_pct']:+.2f} %")
    return 0


def cmd_reset(a) -> int:
    from hw_backend.nvml import NvmlBackend

    be = NvmlBackend(observe_only=False, device=a.device)
    be.reset_clocks()  # also removes the card's clock marker
    make_console().print(f"clocks of {be.name} {be.uuid} reset to the driver's defaults")
    return 0


def register(sub, j) -> None:
    def common(sp):
        sp.add_argument("--backend", choices=["nvml", "fake"], default="nvml")
        sp.add_argument("--trace", required=True)
        sp.add_argument("--gpu", required=True)
        sp.add_argument("--allow-clock-control", action="store_true",
                        help="let kdvfs lock clocks (restored on every exit path); never on a shared card")
        sp.add_argument("--window", type=float, default=5.0, help="measurement window, seconds (default 5)")
        sp.add_argument("--warmup", type=float, default=1.0)
        sp.add_argument("--min-steps", type=int, default=20, help="energy-counter steps per window at least")
        sp.add_argument("--seed", type=int, default=0, help="fake backend: noise seed")
        sp.add_argument("--noise", type=float, default=0.01, help="fake backend: relative time noise (power: twice)")
        device_arg(sp)
        return sp

    sp = j(common(sub.add_parser("sweep", help="measure kernels at clock settings (resumable)")))
    sp.add_argument("--settings", default="study", help="study, all, or CORE:MEM,… (auto allowed)")
    sp.add_argument("--repeats", type=int, default=1)
    sp.add_argument("--sparse", action="store_true", help="measure a few settings, fit, then around the optimum")
    sp.add_argument("--gpus", type=int, default=1, help="spread the sweep over N GPUs, one Ray actor each")
    sp.add_argument("--ray-address", help="--gpus: a running Ray cluster (auto, ray://HOST:PORT); default local")
    sp.add_argument("-o", "--output", required=True)
    sp.add_argument("--fake-state", help=argparse_hidden())
    sp.set_defaults(fn=cmd_sweep)

    sp = j(common(sub.add_parser("validate", help="run a schedule on the GPU and compare with the simulator")))
    sp.add_argument("--schedule", required=True)
    sp.add_argument("--profile")
    sp.add_argument("--mode", choices=["isolated", "live"], default="isolated")
    sp.add_argument("--repeats", type=int, default=3)
    sp.add_argument("--noop-writes", action="store_true", help="live mode with the clock writes replaced by no-ops")
    sp.set_defaults(fn=cmd_validate)

    sp = sub.add_parser("reset-clocks", help="restore the driver's default clocks (needs root)")
    device_arg(sp)
    sp.set_defaults(fn=cmd_reset)


def device_arg(sp) -> None:
    sp.add_argument("--device", help="the card: NVML index, UUID (GPU-…) or PCI bus id (default: the first entry of "
                                     "CUDA_VISIBLE_DEVICES, else index 0)")


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS
