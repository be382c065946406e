import torch, torch.nn as nn, torch.nn.functional as F, sys
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
class Tiny(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Conv2d(3, 16, 7, stride=4, padding=3)
        s.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)   # PoolFormer token mixer
        s.mp = nn.MaxPool2d(3, 2, 1, ceil_mode=True)
        s.unfold = nn.Unfold(3, padding=1)
        s.proj = nn.Linear(16 * 9, 32)
        s.norm = nn.LayerNorm(32)
        s.head = nn.Conv2d(32 + 16, 5, 1)
    def forward(s, x):
        y = F.gelu(s.stem(x))                      # [N,16,16,16]
        y = y + s.pool(y) - y
        z = s.mp(y)                                # [N,16,8,8]
        cols = s.unfold(z).transpose(1, 2)          # [N,64,144]
        t = s.norm(s.proj(cols)).transpose(1, 2).reshape(x.shape[0], 32, *z.shape[-2:])
        t = F.interpolate(t, size=y.shape[-2:], mode="bilinear", align_corners=False)
        g = F.adaptive_avg_pool2d(y, 1)
        o = s.head(torch.cat([t, y * g], 1))
        return F.interpolate(o, scale_factor=4.0, mode="bilinear")
m = Tiny()
x = torch.randn(4, 3, 128, 128)
tgt = torch.randint(0, 5, (4, 128, 128))
opt = torch.optim.AdamW(m.parameters())
for i in range(2):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        loss = F.cross_entropy(m(x), tgt)
        loss.backward(); opt.step(); opt.zero_grad()
p.export_chrome_trace(sys.argv[1])
