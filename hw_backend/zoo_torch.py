"""``TorchZoo``: the characterisation zoo's kernels on a CUDA device through PyTorch (torch imported here only).

Each zoo entry becomes a closure over preallocated tensors that launches one invocation; ``run_batch`` times a batch
with CUDA events. ``probe_plan`` enqueues a step-response schedule (idle, heavy = probe GEMMs back to back, light =
a memory-bound add with a sparse probe every ~5 ms, probe-only = sparse probes with the card otherwise idle) and
returns every probe's GPU-timeline start and duration. Nothing here touches a clock or a limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from hw_backend.characterize import LIGHT, PROBE, SkipKernel, ZooKernel
from hw_backend.zoo import _STEP_OPS

__all__ = ["TorchZoo"]


class _HostEvent:
    """A CUDA-event stand-in for CPU dry runs: records the host time."""

    def __init__(self) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, other: _HostEvent) -> float:
        return (other.t - self.t) * 1000.0


class TorchZoo:
    """Zoo kernels on ``cuda:0`` (an engine: holds the tensors of the kernel being measured)."""

    def __init__(self, device: str = "cuda") -> None:
        if device == "cpu":  # a dry run of the code path on a machine without a GPU (host timing, tiny zoo)
            import torch
        else:
            from hw_backend.workloads import require_torch_cuda

            torch = require_torch_cuda()
        self.torch = torch
        self.device = device
        self.fn: Callable[[], object] | None = None
        self._single: Callable[[], object] | None = None
        self._bursts: list = []
        self._keep: list = []
        self._event = (lambda: torch.cuda.Event(enable_timing=True)) if device != "cpu" else _HostEvent
        self._sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)

    # ------------------------------------------------------------------ kernels
    def _build(self, k: ZooKernel) -> Callable[[], object]:
        """The closure of one invocation: the op, replayed ``k.graph`` times from a CUDA graph where asked, then the
        host's wait of ``k.gap_s`` (spinning: ``time.sleep`` overshoots by ~50 µs)."""
        base = self._op(k)
        self._single = base  # one launch of the op, un-graphed: what ``launch_grids`` profiles
        if k.graph > 0:
            base = self._graph(base, k.graph)
        if k.gap_s <= 0:
            return base
        gap = k.gap_s
        clock = time.perf_counter
        bursts = self._bursts = []
        timed = k.role == "duty"
        ev = self._event

        def with_gap() -> None:
            if timed:  # the burst's own GPU time (its clock may differ from the profiler's single run)
                a, b = ev(), ev()
                a.record()
                base()
                b.record()
                b.synchronize()  # the gap starts when the burst ends, not when it is enqueued
                if len(bursts) < 4000:
                    bursts.append((a, b))
            else:
                base()
            end = clock() + gap
            while clock() < end:
                pass
        return with_gap

    def extra_record(self) -> dict:
        """Measurements beside the generic ones: a duty entry's median burst time (GPU time of one replay), and the
        launch grids of one un-graphed launch of the op (``launch_grids``; profiled after the window)."""
        out: dict = {}
        grids = self.launch_grids()
        if grids:
            out["launch_grids"] = grids
        bs = getattr(self, "_bursts", None)
        if not bs:
            return out
        self._sync()
        ts = sorted(a.elapsed_time(b) / 1000.0 for a, b in bs[len(bs) // 4:])  # the first quarter is warm-up
        return {**out, "burst_time_s": ts[len(ts) // 2], "bursts_timed": len(ts)} if ts else out

    def _graph(self, fn: Callable[[], object], times: int) -> Callable[[], object]:
        """``fn`` launched ``times`` times, captured once in a CUDA graph (a CPU dry run calls it in a loop)."""
        torch = self.torch
        if self.device == "cpu":
            def loop() -> None:
                for _ in range(times):
                    fn()
            return loop
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture (cuBLAS workspaces, allocator)
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(times):
                fn()
        self._keep.append(g)
        return g.replay

    def _op(self, k: ZooKernel) -> Callable[[], object]:
        torch = self.torch
        F = torch.nn.functional
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[k.dtype]
        dev = self.device
        # fp32 GEMMs on CUDA cores unless the entry asks for tf32 tensor cores
        torch.backends.cuda.matmul.allow_tf32 = k.dtype == "tf32"
        g = torch.Generator(device=dev).manual_seed(0)

        def rnd(*shape, dtype=dt, req=False):
            x = torch.randn(*shape, device=dev, dtype=dtype, generator=g)
            if req:
                x.requires_grad_(True)
            self._keep.append(x)
            return x

        s = k.shape
        if k.op == "gemm":
            m, n, kk = s
            a, b = rnd(m, kk), rnd(kk, n)
            c = torch.empty(m, n, device=dev, dtype=dt)
            self._keep.append(c)
            return lambda: torch.mm(a, b, out=c)
        if k.op == "bmm":
            nb, m, n, kk = s
            a, b = rnd(nb, m, kk), rnd(nb, kk, n)
            c = torch.empty(nb, m, n, device=dev, dtype=dt)
            self._keep.append(c)
            return lambda: torch.bmm(a, b, out=c)
        if k.op == "sdpa":
            q, kt, v = rnd(*s), rnd(*s), rnd(*s)
            return lambda: F.scaled_dot_product_attention(q, kt, v, is_causal=k.causal)
        if k.op == "sdpa_bwd":
            q, kt, v = rnd(*s, req=True), rnd(*s, req=True), rnd(*s, req=True)
            o = F.scaled_dot_product_attention(q, kt, v, is_causal=k.causal)
            go = torch.randn_like(o)
            self._keep += [o, go]
            return lambda: torch.autograd.grad(o, (q, kt, v), go, retain_graph=True)
        if k.op in ("add", "mul"):
            a, b = rnd(*s), rnd(*s)
            c = torch.empty_like(a)
            self._keep.append(c)
            f = torch.add if k.op == "add" else torch.mul
            return lambda: f(a, b, out=c)
        if k.op in ("gelu", "silu", "relu", "sigmoid"):
            a = rnd(*s)
            f = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu, "sigmoid": torch.sigmoid}[k.op]
            return lambda: f(a)
        if k.op == "avg_pool":  # global average pooling, as squeeze-excitation's AdaptiveAvgPool2d(1) runs it
            a = rnd(*s)
            return lambda: a.mean(dim=(2, 3))
        if k.op in ("batch_norm", "batch_norm_bwd"):
            # training mode, bf16 activations with fp32 affine parameters and running statistics (an autocast step's
            # BatchNorm2d): ATen's channels-first kernels, one block row per channel
            c = s[1]
            x, wt, bs = rnd(*s), rnd(c, dtype=torch.float32), rnd(c, dtype=torch.float32)
            rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)
            self._keep += [rm, rv]
            if k.op == "batch_norm":
                return lambda: F.batch_norm(x, rm, rv, wt, bs, training=True)
            # the aten backward a training step's autograd calls, called directly: autograd.grad inside a CUDA-graph
            # capture failed on the H200 (characterization8's dwconv_bwd entry)
            y, mean, invstd = torch.ops.aten.native_batch_norm(x, wt, bs, rm, rv, True, 0.1, 1e-5)
            gy = torch.randn_like(y)
            self._keep += [y, mean, invstd, gy]
            return lambda: torch.ops.aten.native_batch_norm_backward(gy, x, wt, rm, rv, mean, invstd, True, 1e-5,
                                                                     [True, True, True])
        if k.op == "sum":
            a = rnd(*s)
            return lambda: a.sum()
        if k.op == "amax":
            a = rnd(*s)
            return lambda: a.amax(dim=1)
        if k.op in ("layer_norm", "rms_norm"):
            x = rnd(*s)
            w = torch.ones(s[-1], device=dev, dtype=dt)
            b = torch.zeros(s[-1], device=dev, dtype=dt)
            self._keep += [w, b]
            if k.op == "layer_norm":
                return lambda: F.layer_norm(x, (s[-1],), w, b)
            return lambda: F.rms_norm(x, (s[-1],), w)
        if k.op == "softmax":
            x = rnd(*s)
            return lambda: torch.softmax(x, dim=-1)
        if k.op == "copy":
            a = rnd(*s)
            c = torch.empty_like(a)
            self._keep.append(c)
            return lambda: c.copy_(a)
        if k.op == "transpose":
            a = rnd(*s)
            c = torch.empty(s[1], s[0], device=dev, dtype=dt)
            self._keep.append(c)
            return lambda: c.copy_(a.t())
        if k.op == "cast":  # 16-bit up to fp32; fp32 down to bf16
            a = rnd(*s)
            c = torch.empty(*s, device=dev, dtype=torch.bfloat16 if dt == torch.float32 else torch.float32)
            self._keep.append(c)
            return lambda: c.copy_(a)
        if k.op == "fill":
            a = torch.empty(*s, device=dev, dtype=dt)
            self._keep.append(a)
            return lambda: a.fill_(1.5)
        if k.op in ("dwconv", "dwconv_bwd"):  # depthwise k × k, "same" padding, as ConvNeXt's and MBConv's
            nb, c, h, w_, kk = s[:5]
            st = s[5] if len(s) > 5 else 1
            x, wt = rnd(nb, c, h, w_), rnd(c, 1, kk, kk)
            if k.op == "dwconv":
                return lambda: F.conv2d(x, wt, stride=st, padding=kk // 2, groups=c)
            y = F.conv2d(x, wt, stride=st, padding=kk // 2, groups=c)
            gy = torch.randn_like(y)
            self._keep += [y, gy]
            # aten's convolution_backward (the input's and the weight's gradients), as autograd calls it in a step,
            # called directly: autograd.grad inside a CUDA-graph capture failed on the H200 (characterization8)
            p = kk // 2
            return lambda: torch.ops.aten.convolution_backward(gy, x, wt, None, [st, st], [p, p], [1, 1], False,
                                                               [0, 0], c, [True, True, False])
        if k.op in ("gconv1d", "gconv1d_bwd"):  # grouped 1-D, as wav2vec 2.0's convolutional position embedding
            nb, c, length, kk, grp = s[:5]
            x, wt = rnd(nb, c, length), rnd(c, c // grp, kk)
            if k.op == "gconv1d":
                return lambda: F.conv1d(x, wt, padding=kk // 2, groups=grp)
            y = F.conv1d(x, wt, padding=kk // 2, groups=grp)
            gy = torch.randn_like(y)
            self._keep += [y, gy]
            p = kk // 2  # aten's convolution_backward called directly, as for dwconv_bwd
            return lambda: torch.ops.aten.convolution_backward(gy, x, wt, None, [1], [p], [1], False, [0], grp,
                                                               [True, True, False])
        if k.op in _STEP_OPS:
            return self._step_op(k, rnd, dt)
        if k.op == "idle":  # nothing launched: the wait (gap_s) is the whole invocation
            return lambda: None
        if k.op == "adamw":
            n = s[0]
            per = 1_000_000
            ps = [torch.nn.Parameter(torch.randn(per, device=dev, generator=g)) for _ in range(max(1, n // per))]
            for p in ps:
                p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW(ps, lr=1e-4, foreach=True)
            self._keep += [ps, opt]
            return opt.step
        raise SkipKernel(f"op {k.op!r} has no torch implementation")

    def _step_op(self, k: ZooKernel, rnd, dt) -> Callable[[], object]:
        """The ``step-ops`` set's ops, as the steps12 traces recorded them (their ATen ops and arguments); backward
        ops are called directly, as autograd calls them in a step (autograd.grad inside a CUDA-graph capture failed
        on the H200, characterization8)."""
        torch = self.torch
        F = torch.nn.functional
        aten = torch.ops.aten
        s, dev = k.shape, self.device
        cl = torch.channels_last
        if k.op in ("upsample_bilinear", "upsample_bilinear_bwd"):
            nb, c, h, w, sc = s
            if k.op == "upsample_bilinear":
                # SegFormer's logits reach the upsampling channels-last (a cuDNN convolution's output): the step ran
                # ATen's upsample_bilinear2d_nhwc_out_frame
                x = rnd(nb, c, h, w).contiguous(memory_format=cl)
                self._keep.append(x)
                return lambda: F.interpolate(x, scale_factor=sc, mode="bilinear", align_corners=False)
            gy = rnd(nb, c, h * sc, w * sc)  # contiguous, from the log-softmax's backward: the NCHW kernel
            return lambda: aten.upsample_bilinear2d_backward(gy, [h * sc, w * sc], [nb, c, h, w], False)
        if k.op in ("log_softmax_ch", "log_softmax_ch_bwd"):
            x = rnd(*s)
            if k.op == "log_softmax_ch":
                return lambda: torch.log_softmax(x, dim=1)  # cunn_SpatialSoftMaxForward
            y = torch.log_softmax(x, dim=1)
            gy = rnd(*s)
            self._keep.append(y)
            return lambda: aten._log_softmax_backward_data(gy, y, 1, y.dtype)
        if k.op == "copy_nhwc":
            a = rnd(*s).contiguous(memory_format=cl)
            out = torch.empty(*s, device=dev, dtype=dt)
            self._keep += [a, out]
            return lambda: out.copy_(a)
        if k.op in ("avg_pool2d", "avg_pool2d_bwd"):  # PoolFormer's token mixer: count_include_pad=False
            kk = s[4]
            p = kk // 2
            x = rnd(*s[:4])
            if k.op == "avg_pool2d":
                return lambda: F.avg_pool2d(x, kk, 1, p, count_include_pad=False)
            gy = rnd(*s[:4])
            return lambda: aten.avg_pool2d_backward(gy, x, [kk, kk], [1, 1], [p, p], False, False, None)
        if k.op in ("group_norm", "group_norm_bwd"):  # PoolFormer's GroupNorm(1, C), fp32 affine parameters
            nb, c, h, w, grp = s
            x, wt, bs = rnd(nb, c, h, w), rnd(c, dtype=torch.float32), rnd(c, dtype=torch.float32)
            if k.op == "group_norm":
                return lambda: F.group_norm(x, grp, wt, bs)
            _, mean, rstd = aten.native_group_norm(x, wt, bs, nb, c, h * w, grp, 1e-5)
            gy = rnd(nb, c, h, w)
            self._keep += [mean, rstd]
            return lambda: aten.native_group_norm_backward(gy, x, mean, rstd, wt, nb, c, h * w, grp, [True, True, True])
        if k.op == "col2im":  # ConvBERT's span convolution: nn.Unfold((k, 1), padding=(k // 2, 0)); its backward
            nb, c, length, kk = s
            cols = rnd(nb, c * kk, length)
            return lambda: F.fold(cols, (length, 1), (kk, 1), padding=(kk // 2, 0))
        # conv2d / conv2d_bwd: PoolFormer's MLP, 1 × 1 convolutions on channels-first bf16 activations
        nb, ci, h, w, co, kk = s
        p = kk // 2
        x, wt = rnd(nb, ci, h, w), rnd(co, ci, kk, kk)
        if k.op == "conv2d":
            return lambda: F.conv2d(x, wt, padding=p)
        gy = rnd(nb, co, h, w)
        # with the bias's gradient, as the step's convolution_backward (its output mask [True, True, True])
        return lambda: aten.convolution_backward(gy, x, wt, [co], [1, 1], [p, p], [1, 1], False, [0, 0], 1,
                                                 [True, True, True])

    def prepare(self, k: ZooKernel) -> None:
        torch = self.torch
        self.release()
        try:
            self.fn = self._build(k)
            self.fn()
            self._sync()
        except torch.OutOfMemoryError as e:
            self.release()
            raise SkipKernel(f"CUDA out of memory: {str(e).splitlines()[0]}") from None
        except (RuntimeError, TypeError, NotImplementedError) as e:
            self.release()
            raise SkipKernel(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None

    def release(self) -> None:
        self.fn = None
        self._single = None
        self._keep = []
        self._bursts = []
        if self.device != "cpu":
            self.torch.cuda.empty_cache()

    def launch(self, n: int) -> tuple:
        """Enqueue ``n`` invocations between two events; returns them (the handle)."""
        fn = self.fn
        assert fn is not None
        a = self._event()
        b = self._event()
        a.record()
        for _ in range(n):
            fn()
        b.record()
        return a, b

    def wait(self, handle: tuple) -> float:
        a, b = handle
        b.synchronize()
        return a.elapsed_time(b) / 1000.0

    def now_s(self) -> float:
        return time.perf_counter()

    def run_for(self, seconds: float, tick=None) -> tuple[float, int]:
        """Invocations back to back for ``seconds`` (a duty entry's invocation waits for its burst and spins its gap
        itself, so nothing else runs on the host between a burst and its gap). ``tick`` is not called: on a real card
        the energy counter is read in a thread of its own (``hw_backend.sampling.CounterWatch``), never in this loop."""
        fn = self.fn
        assert fn is not None
        clock = time.perf_counter
        t0, n = clock(), 0
        while clock() - t0 < seconds:
            fn()
            n += 1
        self._sync()
        return clock() - t0, n

    def sleep(self, s: float) -> None:
        time.sleep(s)

    # ------------------------------------------------------------------ step responses
    def kernels_launched(self) -> list[dict]:
        """The CUDA kernels one invocation of the prepared entry launches (name, µs), read with ``torch.profiler``
        (the entry already ran once in ``prepare``); empty where the profiler gives nothing."""
        torch = self.torch
        fn = self.fn
        assert fn is not None
        if self.device == "cpu":
            return []
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                fn()
                self._sync()
            evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            rows = [{"name": e.name, "us": round(float(getattr(e, "device_time", 0.0)), 3)} for e in evs]
            if len(rows) > 20:  # names are provenance: keep 20, and the rest's count and time summed
                rest = rows[20:]
                rows = rows[:20] + [{"name": f"(+{len(rest)} more)", "us": round(sum(r["us"] for r in rest), 3)}]
            return rows
        except Exception as e:  # noqa: BLE001 — names are provenance; never lose a measurement over them
            return [{"error": f"{type(e).__name__}: {e}"}]

    def launch_grids(self) -> list[dict]:
        """The launch configuration of each kernel one un-graphed launch of the entry's op runs (grid, block, blocks
        per SM, the profiler's estimated occupancy), read from the profiler's Kineto trace; empty where the profiler
        gives nothing."""
        import json
        import os
        import tempfile

        torch, single = self.torch, self._single
        if self.device == "cpu" or single is None:
            return []
        keys = ("grid", "block", "blocks per SM", "warps per SM", "registers per thread", "shared memory",
                "est. achieved occupancy %")
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                single()
                self._sync()
            prof.export_chrome_trace(path)
            with open(path) as f:
                evs = json.load(f).get("traceEvents", [])
            out = [{"name": e.get("name", "")[:200], "us": e.get("dur"),
                    **{k: e["args"][k] for k in keys if k in e.get("args", {})}}
                   for e in evs if e.get("cat") == "kernel"]
            return out[:20]
        except Exception as e:  # noqa: BLE001 — launch grids are extra; never lose a measurement over them
            return [{"error": f"{type(e).__name__}: {e}"}]
        finally:
            os.unlink(path)

    def probe_plan(self, phases: Sequence[tuple[str, float]], sample: Callable[[], None]) -> dict:
        probe = self._build(PROBE)
        light = self._build(LIGHT)
        for _ in range(20):
            probe()
            light()
        self._sync()

        def est(fn, n=50):
            a, b = self._event(), self._event()
            a.record()
            for _ in range(n):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / 1000.0 / n

        t_probe, t_light = est(probe), est(light)
        n_light = max(1, int(0.005 / t_light))  # light kernels between two sparse probes (~5 ms)
        ev = self._event
        self._sync()
        ref = ev()
        ref.record()
        host0 = time.perf_counter()
        probes: list[tuple] = []  # (start event, end event)
        marks: list[tuple] = []  # (load, start event, end event)

        def timed_probe(fn: Callable[[], object] = probe) -> None:
            """One probe between its own start and end events (its duration gives the clock)."""
            a = ev()
            a.record()
            fn()
            b = ev()
            b.record()
            probes.append((a, b))
        for load, dur in phases:
            e0 = ev()
            e0.record()
            if load == "idle":
                self._sync()
                time.sleep(dur)
            elif load == "heavy":
                n = max(1, int(dur / t_probe))
                prev = e0
                for _ in range(n):
                    probe()
                    e = ev()
                    e.record()
                    probes.append((prev, e))
                    prev = e
            elif load == "probe-only":
                self._sync()
                t_end = time.perf_counter() + dur
                while time.perf_counter() < t_end:
                    timed_probe()
                    time.sleep(0.005)
            elif load == "light":
                n = max(1, int(dur / (n_light * t_light + t_probe)))
                for _ in range(n):
                    for _ in range(n_light):
                        light()
                    timed_probe()
            e1 = ev()
            e1.record()
            marks.append((load, e0, e1))
        self._sync()
        raw = [(ref.elapsed_time(a) / 1000.0, a.elapsed_time(b) / 1000.0) for a, b in probes]
        out = [{"start_s": ref.elapsed_time(a) / 1000.0, "end_s": ref.elapsed_time(b) / 1000.0, "load": load,
                "kernel": {"heavy": PROBE.name, "probe-only": PROBE.name, "light": LIGHT.name}.get(load)}
               for load, a, b in marks]
        del probe, light, timed_probe
        self.release()
        return {"raw": raw, "phases_out": out, "host_ref_s": host0,
                "probe_estimate_s": t_probe, "light_estimate_s": t_light, "light_per_probe": n_light}
