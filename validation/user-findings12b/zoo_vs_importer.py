"""The zoo set ``light-ops2`` against the Kineto importer (tester12b, session 12): each upsampling, log-softmax,
copy, pooling and col2im entry run on CPU torch as ``hw_backend/zoo_torch.py`` runs it (batch 1, at most 8
channels), its profiler record priced by ``kdvfs.work.op_work`` and compared with the zoo's ``_step_op_work`` at the
same shape. Prints one line per record, ``OK`` or ``DIFF``.

    /work/venv-torch/bin/python validation/user-findings12b/zoo_vs_importer.py
"""

import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hw_backend.zoo import ZOO_SETS, _step_op_work  # noqa: E402
from kdvfs.work import op_work  # noqa: E402

aten = torch.ops.aten
DT = {"bf16": torch.bfloat16, "fp32": torch.float32}
SKIP = ("conv2d", "conv2d_bwd", "group_norm", "group_norm_bwd")


def records(fn, tmp: Path) -> list[dict]:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        fn()
    p.export_chrome_trace(str(tmp))
    return [e for e in json.loads(tmp.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]


def call(op: str, s: tuple, dt: torch.dtype):
    """(the zoo_torch call at shape s, the aten op whose record prices it)."""
    def r(*a):
        return torch.randn(*a, dtype=dt)

    if op == "upsample_bilinear":
        nb, c, h, w, sc = s
        x = r(nb, c, h, w).contiguous(memory_format=torch.channels_last)
        return (lambda: F.interpolate(x, scale_factor=sc, mode="bilinear", align_corners=False)), \
            "aten::upsample_bilinear2d"
    if op == "upsample_bilinear_bwd":
        nb, c, h, w, sc = s
        gy = r(nb, c, h * sc, w * sc)
        return (lambda: aten.upsample_bilinear2d_backward(gy, [h * sc, w * sc], [nb, c, h, w], False)), \
            "aten::upsample_bilinear2d_backward"
    if op == "log_softmax_ch":
        x = r(*s)
        return (lambda: torch.log_softmax(x, dim=1)), "aten::_log_softmax"
    if op == "log_softmax_ch_bwd":
        y, gy = torch.log_softmax(r(*s), 1), r(*s)
        return (lambda: aten._log_softmax_backward_data(gy, y, 1, y.dtype)), "aten::_log_softmax_backward_data"
    if op == "copy_nhwc":
        a, out = r(*s).contiguous(memory_format=torch.channels_last), torch.empty(*s, dtype=dt)
        return (lambda: out.copy_(a)), "aten::copy_"
    if op == "avg_pool2d":
        kk, x = s[4], r(*s[:4])
        return (lambda: F.avg_pool2d(x, kk, 1, kk // 2, count_include_pad=False)), "aten::avg_pool2d"
    if op == "avg_pool2d_bwd":
        kk, x, gy = s[4], r(*s[:4]), r(*s[:4])
        p = kk // 2
        return (lambda: aten.avg_pool2d_backward(gy, x, [kk, kk], [1, 1], [p, p], False, False, None)), \
            "aten::avg_pool2d_backward"
    nb, c, length, kk = s  # col2im
    cols = r(nb, c * kk, length)
    return (lambda: F.fold(cols, (length, 1), (kk, 1), padding=(kk // 2, 0))), "aten::col2im"


def main() -> None:
    tmp = Path(tempfile.mkdtemp()) / "rec.json"
    for k in ZOO_SETS["light-ops2"]():
        if k.op in SKIP:
            continue
        s = list(k.shape)
        s[0] = 1
        if k.op != "col2im":
            s[1] = min(s[1], 8)
        fn, want = call(k.op, tuple(s), DT[k.dtype])
        zw = _step_op_work(k.op, tuple(s), k.dtype)
        for e in (e for e in records(fn, tmp) if e["name"] == want):
            a = e["args"]
            w = op_work(e["name"], a.get("Input Dims"), a.get("Input type"), concrete=a.get("Concrete Inputs"),
                        strides=a.get("Input Strides"))
            ok = w is not None and abs(w.flops - zw.flops) <= 1e-9 * max(1.0, zw.flops) and \
                abs(w.bytes - zw.bytes) <= 1e-9 * zw.bytes
            print("OK  " if ok else "DIFF", k.name, want, a.get("Concrete Inputs"),
                  "importer", w and (w.flops, w.bytes), "zoo", (zw.flops, zw.bytes))


if __name__ == "__main__":
    main()
