"""Workloads that run on a real GPU through PyTorch: the GPT-3-style transformer block recorded by ``kdvfs record``.

torch is imported inside the functions that need it, never at import time.

The block (pre-LayerNorm, causal self-attention, GELU MLP) is written as a list of *stages*; each stage is one op
with its forward and its backward (``torch.autograd.grad`` on that op alone). The recorder runs forward, loss,
backward and optimizer stage by stage under ``record_function`` labels, so every kernel of the recorded trace carries
the stage that launched it (``Kernel.op`` = ``stage:<name>``). Replaying a trace kernel in isolation means running
its stage alone (``BlockWorkload.run_stage``), which launches the same kernels with the same shapes; the whole step is
``BlockWorkload.step``. The mapping is documented in docs/workloads.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kdvfs.errors import InputError, NoGpuError

__all__ = ["BlockConfig", "BlockWorkload", "require_torch_cuda", "FORWARD_STAGES"]

log = logging.getLogger(__name__)

FORWARD_STAGES = ("ln1", "qkv", "attn", "proj", "res1", "ln2", "fc1", "gelu", "fc2", "res2")
LAYER_REPEAT = 24


def require_torch_cuda():
    """torch with a CUDA device, or a ``NoGpuError`` that says how to get one."""
    try:
        import torch
    except ImportError:
        raise NoGpuError("recording needs PyTorch: install the extra with `pip install 'kdvfs[torch]'` on a machine with an NVIDIA GPU") from None
    if not torch.cuda.is_available():
        raise NoGpuError("recording needs a CUDA GPU, and torch.cuda.is_available() is False here; run it on a GPU machine")
    return torch


@dataclass(frozen=True, slots=True)
class BlockConfig:
    """Attributes:
        hidden: model width (GPT-3 XL: 2048).
        heads: attention heads (16).
        batch: sequences per step.
        seq: tokens per sequence.
        precision: ``bf16`` (autocast) or ``fp32``.
        seed: parameter and input seed.
    """

    hidden: int = 2048
    heads: int = 16
    batch: int = 8
    seq: int = 2048
    precision: str = "bf16"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.precision not in ("bf16", "fp32"):
            raise InputError(f"precision {self.precision!r} is not bf16 or fp32")
        if self.hidden % self.heads:
            raise InputError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")


class BlockWorkload:
    """One GPT-3-style transformer block with AdamW, runnable whole or stage by stage (engine: holds state)."""

    def __init__(self, cfg: BlockConfig, device: str = "cuda") -> None:
        import torch

        self.torch = torch
        self.cfg = cfg
        self.device = device
        g = torch.Generator(device="cpu").manual_seed(cfg.seed)
        h = cfg.hidden

        def param(*shape, std=0.02):
            return torch.nn.Parameter((torch.randn(*shape, generator=g) * std).to(device))

        self.p = {
            "ln1_w": torch.nn.Parameter(torch.ones(h, device=device)), "ln1_b": torch.nn.Parameter(torch.zeros(h, device=device)),
            "qkv_w": param(3 * h, h), "qkv_b": torch.nn.Parameter(torch.zeros(3 * h, device=device)),
            "proj_w": param(h, h), "proj_b": torch.nn.Parameter(torch.zeros(h, device=device)),
            "ln2_w": torch.nn.Parameter(torch.ones(h, device=device)), "ln2_b": torch.nn.Parameter(torch.zeros(h, device=device)),
            "fc1_w": param(4 * h, h), "fc1_b": torch.nn.Parameter(torch.zeros(4 * h, device=device)),
            "fc2_w": param(h, 4 * h), "fc2_b": torch.nn.Parameter(torch.zeros(h, device=device)),
        }
        self.opt = torch.optim.AdamW(list(self.p.values()), lr=1e-4, foreach=True)
        self.x = torch.randn(cfg.batch, cfg.seq, h, generator=g).to(device)
        self._fwd: dict[str, Callable] = self._stage_functions()
        self.saved: dict[str, tuple] = {}

    # ------------------------------------------------------------------ stages
    def _stage_functions(self) -> dict[str, Callable]:
        F = self.torch.nn.functional
        p = self.p
        cfg = self.cfg

        def attn(qkv):
            b, s, _ = qkv.shape
            q, k, v = qkv.view(b, s, 3, cfg.heads, cfg.hidden // cfg.heads).permute(2, 0, 3, 1, 4).unbind(0)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return o.transpose(1, 2).reshape(b, s, cfg.hidden)

        return {
            "ln1": lambda x: F.layer_norm(x, (cfg.hidden,), p["ln1_w"], p["ln1_b"]),
            "qkv": lambda x: F.linear(x, p["qkv_w"], p["qkv_b"]),
            "attn": attn,
            "proj": lambda x: F.linear(x, p["proj_w"], p["proj_b"]),
            "res1": lambda x, r: x + r,
            "ln2": lambda x: F.layer_norm(x, (cfg.hidden,), p["ln2_w"], p["ln2_b"]),
            "fc1": lambda x: F.linear(x, p["fc1_w"], p["fc1_b"]),
            "gelu": lambda x: F.gelu(x),
            "fc2": lambda x: F.linear(x, p["fc2_w"], p["fc2_b"]),
            "res2": lambda x, r: x + r,
        }

    def _autocast(self):
        if self.cfg.precision == "bf16":
            return self.torch.autocast("cuda", dtype=self.torch.bfloat16)
        return contextlib.nullcontext()

    def _label(self, name: str):
        return self.torch.profiler.record_function(name)

    def forward(self, label: bool = False):
        """Forward stage by stage; keeps each stage's inputs and output for the backward."""
        torch = self.torch
        x0 = self.x.detach().requires_grad_(True)
        inputs = {"ln1": (x0,)}
        with self._autocast():
            order = [("ln1", lambda o: (x0,)), ("qkv", None), ("attn", None), ("proj", None), ("res1", None),
                     ("ln2", None), ("fc1", None), ("gelu", None), ("fc2", None), ("res2", None)]
            prev: Any = None  # the previous stage's output tensor
            outs: dict[str, Any] = {}
            for name, _ in order:
                args: tuple[Any, ...]
                if name == "ln1":
                    args = (x0,)
                elif name == "res1":
                    args = (prev, x0)
                elif name == "res2":
                    args = (prev, outs["res1"])
                else:
                    args = (prev,)
                args = tuple(a.detach().requires_grad_(True) for a in args)
                inputs[name] = args
                with torch.enable_grad(), (self._label(f"kdvfs.op:fwd.{name}") if label else contextlib.nullcontext()):
                    out = self._fwd[name](*args)
                outs[name] = out
                prev = out
        self.saved = {n: (inputs[n], outs[n]) for n in outs}
        return outs["res2"]

    def loss(self, y, label: bool = False):
        torch = self.torch
        yl = y.detach().requires_grad_(True)
        with torch.enable_grad(), (self._label("kdvfs.op:loss") if label else contextlib.nullcontext()):
            loss = yl.float().pow(2).mean()
            (gy,) = torch.autograd.grad(loss, (yl,))
        return gy

    def backward(self, grad_out, label: bool = False):
        """Backward stage by stage in reverse order, accumulating parameter gradients."""
        torch = self.torch
        grads_for: dict[str, object] = {"res2": grad_out}
        res1_extra = None
        x0_grad = None
        for name in reversed(FORWARD_STAGES):
            args, out = self.saved[name]
            go = grads_for[name]
            if name == "res1" and res1_extra is not None:
                go = go + res1_extra
            params = [self.p[k] for k in self.p if k.startswith(name + "_")]
            with (self._label(f"kdvfs.op:bwd.{name}") if label else contextlib.nullcontext()):
                gs = torch.autograd.grad(out, list(args) + params, go, allow_unused=True)
            gin, gpar = gs[: len(args)], gs[len(args):]
            for prm, gp in zip(params, gpar):
                if gp is not None:
                    prm.grad = gp if prm.grad is None else prm.grad + gp
            prev_name = FORWARD_STAGES[FORWARD_STAGES.index(name) - 1] if name != "ln1" else None
            if name == "res2":
                grads_for["fc2"] = gin[0]
                res1_extra = gin[1]
            elif name == "res1":
                grads_for["proj"] = gin[0]
                x0_grad = gin[1]
            elif prev_name is not None:
                grads_for[prev_name] = gin[0]
            else:  # ln1: its input is the block input, which also feeds the first residual
                x0_grad = gin[0] + x0_grad
        return x0_grad

    def optimizer_step(self, label: bool = False):
        with (self._label("kdvfs.op:optimizer") if label else contextlib.nullcontext()):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)

    def step(self, label: bool = False) -> None:
        """One training step: forward, loss, backward, AdamW (segment labels ``kdvfs:<segment>`` when ``label``)."""
        ctx = self._label if label else (lambda n: contextlib.nullcontext())
        with ctx("kdvfs:forward_layer"):
            y = self.forward(label)
        with ctx("kdvfs:loss"):
            gy = self.loss(y, label)
        with ctx("kdvfs:backward_layer"):
            self.backward(gy, label)
        with ctx("kdvfs:optimizer"):
            self.optimizer_step(label)

    # ------------------------------------------------------------------ isolated replay
    def stage_names(self) -> list[str]:
        return [f"fwd.{n}" for n in FORWARD_STAGES] + ["loss"] + [f"bwd.{n}" for n in reversed(FORWARD_STAGES)] + ["optimizer"]

    def run_stage(self, stage: str) -> None:
        """Run one stage alone, on the inputs saved by the last ``forward`` (call ``prepare`` once first)."""
        torch = self.torch
        if stage.startswith("fwd."):
            name = stage[4:]
            args, _ = self.saved[name]
            with self._autocast(), torch.no_grad():
                self._fwd[name](*args)
        elif stage == "loss":
            self.loss(self.saved["res2"][1])
        elif stage.startswith("bwd."):
            name = stage[4:]
            args, out = self.saved[name]
            params = [self.p[k] for k in self.p if k.startswith(name + "_")]
            torch.autograd.grad(out, list(args) + params, torch.ones_like(out), allow_unused=True, retain_graph=True)
        elif stage == "optimizer":
            for prm in self.p.values():
                if prm.grad is None:
                    prm.grad = torch.zeros_like(prm)
            self.opt.step()
        else:
            raise InputError(f"stage {stage!r} is not one of {', '.join(self.stage_names())}")

    def prepare(self) -> None:
        """Run one forward whose saved tensors keep their graphs, so stages can be replayed many times."""
        self.forward()


STAGE_REPEATS = {"forward_layer": LAYER_REPEAT, "loss": 1, "backward_layer": LAYER_REPEAT, "optimizer": LAYER_REPEAT}


def stage_of_kernel_op(op: str | None) -> str | None:
    """The workload stage that launched a trace kernel (from ``Kernel.op`` = ``stage:<name>``)."""
    if op and op.startswith("stage:"):
        return op[len("stage:"):]
    return None
