"""What the observe-only H200 scripts share: the NVML backend that only reads, and the recorded block ready to replay."""

from __future__ import annotations


def observe_only_block(precision: str = "bf16"):
    """(backend, workload, sync): ``NvmlBackend(observe_only=True)`` — never a clock, limit or mode change — and the
    GPT-3 XL block, run once and prepared for stage-by-stage replay; ``sync`` waits for the GPU."""
    import torch

    from hw_backend.nvml import NvmlBackend
    from hw_backend.workloads import BlockConfig, BlockWorkload

    be = NvmlBackend(observe_only=True)
    wl = BlockWorkload(BlockConfig(precision=precision))
    wl.step()
    wl.prepare()
    return be, wl, torch.cuda.synchronize
