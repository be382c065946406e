"""Record one training step of a tiny SegFormer/PoolFormer-like net on CPU torch with ``record_shapes=True``
(tester12b, session 12): a strided stem convolution, a 3 × 3 average-pooling token mixer, a ceil-mode max pooling,
``nn.Unfold`` (im2col; col2im in the backward), a linear and a layer norm, bilinear upsampling by size and by scale
factor (the ``.vec`` overload), a global adaptive average pooling, a 1 × 1 head and a per-pixel cross-entropy, then
AdamW. Needs torch (``/work/venv-torch``); the second of two profiled steps is written.

    /work/venv-torch/bin/python validation/user-findings12b/record_cpu.py OUT.json
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 7, stride=4, padding=3)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)  # PoolFormer's token mixer
        self.mp = nn.MaxPool2d(3, 2, 1, ceil_mode=True)
        self.unfold = nn.Unfold(3, padding=1)
        self.proj = nn.Linear(16 * 9, 32)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Conv2d(32 + 16, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.stem(x))
        y = y + self.pool(y) - y
        z = self.mp(y)
        cols = self.unfold(z).transpose(1, 2)
        t = self.norm(self.proj(cols)).transpose(1, 2).reshape(x.shape[0], 32, *z.shape[-2:])
        t = F.interpolate(t, size=y.shape[-2:], mode="bilinear", align_corners=False)
        g = F.adaptive_avg_pool2d(y, 1)
        o = self.head(torch.cat([t, y * g], 1))
        return F.interpolate(o, scale_factor=4.0, mode="bilinear")


def main() -> None:
    torch.manual_seed(0)
    m = Tiny()
    x = torch.randn(4, 3, 128, 128)
    tgt = torch.randint(0, 5, (4, 128, 128))
    opt = torch.optim.AdamW(m.parameters())
    for _ in range(2):
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
            loss = F.cross_entropy(m(x), tgt)
            loss.backward()
            opt.step()
            opt.zero_grad()
    p.export_chrome_trace(sys.argv[1])


if __name__ == "__main__":
    main()
