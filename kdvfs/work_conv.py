"""The kernels of a convolution's backward, each priced by what it computes (issue 12, session 13).

``aten::convolution_backward`` launches more than its two gradient GEMMs, and the importer had split the op's work
over all of them by duration (``kdvfs.kernelwork.kernel_work``): a kernel that sums partial weight gradients took
tensor FLOPs at the GEMMs' rate and was priced as SIMT math at 126–410 TFLOP/s, 1 600–2 200 W (PoolFormer-S12's,
ResNet-50's, SqueezeBERT's ``reduce_wgrad_nchw_helper``), and the partial gradients it reads were counted nowhere.
What the kernels do (cuDNN 9 on the H200, the names and grids characterization16/17 and the stored steps recorded):

- **dgrad**: dx = dy ⋆ w, ``2 · N · Cout · out · Cin/groups · k`` FLOPs on the tensor cores; reads dy and w, writes
  dx (``kdvfs.work._conv_from``'s half).
- **wgrad**: dw = dy ⋆ x, the same FLOPs; reads dy and x. An NCHW 1 × 1 convolution's wgrad is a GEMM per image
  (characterization16: ``cutlass_80_tensorop_s16816gemm…_tn`` on grid [20, 1, 128], z = the batch of 128; the
  steps: [20, 1, 128] in PoolFormer-S12, nvjet's batched ``bz`` kernels in characterization17 and SqueezeBERT), each
  writing its own fp32 weight gradient; a split-K wgrad (CUTLASS's ``ImplicitGemmConvolution`` on grid [4, 1, 18])
  writes one fp32 partial per split. Where a reduction follows (below), the wgrad writes ``P × |w| × 4`` bytes of
  partials instead of dw.
- **wgrad reduction** (``cudnn::cnn::reduce_wgrad_nchw_helper``, CUTLASS's ``ReduceSplitK``): one thread per weight
  (characterization16: grid [3200] × 128 = the 1280 × 320 weights) sums the ``P`` partials and writes dw: reads
  ``P × |w| × 4`` bytes, ``P × |w|`` adds on the CUDA cores. ``P``: the largest grid z of the op's GEMM kernels where
  it exceeds 1 (the batch or the splits), else the batch. characterization16's 128 partials of 1280 × 320 are 210 MB,
  read in 57 µs: 3.7 TB/s, a memory-bound kernel.
- **bias** (``at::native::reduce_kernel`` summing dy over N, H, W; only where the op itself launched it, as the
  zoo's ``convolution_backward(…, [True, True, True])`` did: in a traced step the sum is its own ``aten::sum`` op):
  reads dy, writes Cout values, one add per element.
- **workspace** (``init_device_workspace_kernel``, one thread; ``Memset``): no FLOPs, a word per thread.
- **layout conversions** (``nchwToNhwc``/``nhwcToNchw``): ``kdvfs.kernelwork._layout_copy`` prices them.

``conv_backward_work`` is the sum of the parts, the work of the characterisation zoo's ``conv2d_bwd`` entries (a zoo
row is every kernel of one invocation; at one clock the model's power is linear in FLOPs and bytes per second, so the
parts' sum over the invocation's time is the time-weighted mean of the kernels' powers). ``conv_backward_kernel_works``
gives the importer each kernel's part.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from kdvfs.work import Work, _output_mask, _shape_list, _size, first_dtype

__all__ = ["RECORDED_LAUNCHES_MAX", "ROLES", "conv_backward_kernel_works", "conv_backward_parts", "conv_backward_role", "conv_backward_work",
           "recorded_conv_work"]

ROLES = ("layout", "wgrad_reduce", "workspace", "bias", "gemm")
"""What a kernel launched by ``convolution_backward`` does (``conv_backward_role``)."""

_WGRAD_REDUCE = re.compile(r"reduce_wgrad|ReduceSplitK|split_?k_?reduc", re.I)
_WORKSPACE = re.compile(r"init_device_workspace|^Memset\b", re.I)
_BIAS = re.compile(r"reduce_kernel<.*sum_functor", re.I)
RECORDED_LAUNCHES_MAX = 20
"""The most kernels ``hw_backend.zoo_torch`` keeps in an entry's ``launch_grids``: a list that long may be cut."""
_PARTIAL_BYTES = 4  # the partials are fp32 (cudnn::cnn::reduce_wgrad_nchw_helper<float, …>)


def conv_backward_role(name: str) -> str:
    """``layout``, ``wgrad_reduce``, ``workspace``, ``bias`` or ``gemm`` for a kernel ``convolution_backward``
    launched, by its name (``ROLES``)."""
    from kdvfs.work_passes import layout_direction

    if layout_direction(name) is not None:
        return "layout"
    if _WGRAD_REDUCE.search(name):
        return "wgrad_reduce"
    if _WORKSPACE.search(name.strip()):
        return "workspace"
    if _BIAS.search(name):
        return "bias"
    return "gemm"


def conv_backward_parts(g: Sequence[int], x: Sequence[int], w: Sequence[int], dtype: str = "bf16", *,
                        mask: Sequence[bool] = (True, True, False), partials: int = 0,
                        tensor: bool = True) -> dict[str, Work]:
    """The work of each kernel kind of one ``convolution_backward(grad_output g, input x, weight w, …)``, by role:
    ``dgrad`` and ``wgrad`` where ``mask`` (the op's output mask: dx, dw, db) asks for them, ``wgrad_reduce`` where
    ``partials`` > 0 (the wgrad then writes that many fp32 weight gradients, the reduction reads them), ``bias`` where
    the mask's third flag is set. Shapes are (N, C, spatial…), w (Cout, Cin/groups, k…). ``tensor``: the GEMMs run on
    tensor cores (16-bit operands)."""
    s = _size(dtype)
    ng, nx, nw = math.prod(g), math.prod(x), math.prod(w)
    macs = float(g[0]) * float(g[1]) * float(math.prod(g[2:])) * float(math.prod(w[1:]))
    want = list(mask) + [False] * (3 - len(mask))
    out: dict[str, Work] = {}
    if want[0]:
        out["dgrad"] = Work(2.0 * macs, float((ng + nw + nx) * s), dtype, tensor)
    if want[1]:
        dw = partials * nw * _PARTIAL_BYTES if partials > 0 else nw * s
        out["wgrad"] = Work(2.0 * macs, float((ng + nx) * s + dw), dtype, tensor)
        if partials > 0:
            out["wgrad_reduce"] = Work(float(partials * nw), float(partials * nw * _PARTIAL_BYTES + nw * s), dtype,
                                       False)
    if want[2]:
        out["bias"] = Work(float(ng), float(ng * s + g[1] * s), dtype, False)
    return out


def conv_backward_work(g: Sequence[int], x: Sequence[int], w: Sequence[int], dtype: str = "bf16", *,
                       mask: Sequence[bool] = (True, True, False), partials: int = 0, tensor: bool = True) -> Work:
    """The parts of ``conv_backward_parts`` summed: one invocation's work, as a zoo row measures it. The FLOPs are the
    GEMMs' (the tensor math); the reduction's and the bias's adds (``partials · |w| + |dy|``, under 1 % of them at the
    zoo's shapes) are left out, as they would otherwise be priced at the tensor cores' rate."""
    parts = conv_backward_parts(g, x, w, dtype, mask=mask, partials=partials, tensor=tensor)
    flops = sum(p.flops for k, p in parts.items() if k in ("dgrad", "wgrad"))
    return Work(flops, float(sum(p.bytes for p in parts.values())), dtype, tensor)


def _grid_z(grid: Sequence[int] | None) -> int:
    try:
        return int(grid[2]) if grid is not None and len(grid) > 2 else 1
    except (TypeError, ValueError):
        return 1


def _threads(grid: Sequence[int] | None, block: Sequence[int] | None) -> int:
    try:
        return max(1, math.prod(int(v) for v in (grid or ())) * math.prod(int(v) for v in (block or ())))
    except (TypeError, ValueError):
        return 1


def conv_backward_kernel_works(kernels: Sequence, op_for: Sequence[Mapping | None], *,
                               tf32: bool = False) -> dict[int, Work | None]:
    """Each kernel's work (index → ``Work``) for the ``convolution_backward`` ops whose kernels include a wgrad
    reduction, a workspace initialisation or the bias's sum (``conv_backward_role``): the ops whose split by duration
    gave those kernels the GEMMs' FLOPs. Layout conversions are left out (``kdvfs.kernelwork._layout_copy`` prices
    them; ``None`` where they have no grid: priced by name). The GEMM kernels take the dgrad's and the wgrad's work
    (the wgrad's with the partials it writes): kernels whose names say ``dgrad`` or ``wgrad`` their own part by
    duration where both are named, else all of them both parts by duration. ``kernels``: objects with ``name``,
    ``time_s``, ``grid`` and ``block``; ``op_for``: each kernel's launching op event (``kdvfs.kernelwork.op_of_kernel``).
    Ops whose shapes are not understood are left out (the split by duration stays). ``tf32``: fp32 GEMMs run on tf32
    tensor cores (as ``kdvfs.work.op_work`` takes it)."""
    by_op: dict[int, list[int]] = {}
    ops: dict[int, Mapping] = {}
    for i, o in enumerate(op_for):
        if o is not None and "convolution_backward" in str(o.get("name", "")):
            by_op.setdefault(id(o), []).append(i)
            ops[id(o)] = o
    out: dict[int, Work | None] = {}
    for key, idx in by_op.items():
        roles = {i: conv_backward_role(str(kernels[i].name)) for i in idx}
        if not any(r in ("wgrad_reduce", "bias") or (r == "workspace" and "Memset" not in str(kernels[i].name))
                   for i, r in roles.items()):
            continue
        a = ops[key].get("args") or {}
        shapes = _shape_list(a.get("Input Dims"))
        if len(shapes) < 3 or not all(len(s) >= 3 for s in shapes[:3]):
            continue
        g, x, w = shapes[0], shapes[1], shapes[2]
        dt = first_dtype(a.get("Input type"), ("bf16", "fp16", "fp32"))
        mask = _output_mask(a.get("Concrete Inputs"), 10) or [True, True, False]
        gemm = [i for i in idx if roles[i] == "gemm"]
        reduce = [i for i in idx if roles[i] == "wgrad_reduce"]
        z = max((_grid_z(kernels[i].grid) for i in gemm), default=1)
        partials = (z if z > 1 else int(g[0])) if reduce else 0
        gd = "tf32" if (dt == "fp32" and tf32) else dt  # the GEMMs' math, as kdvfs.work._conv_from has it
        parts = conv_backward_parts(g, x, w, dt, mask=mask, partials=partials, tensor=gd in ("bf16", "fp16", "tf32"))
        parts = {k: (Work(p.flops, p.bytes, gd, p.tensor) if k in ("dgrad", "wgrad") else p) for k, p in parts.items()}
        for i in idx:
            r = roles[i]
            if r == "layout":
                out[i] = None
            elif r == "workspace":
                out[i] = Work(0.0, 4.0 * _threads(kernels[i].grid, kernels[i].block), dt, False, "shapes")
            elif r in ("wgrad_reduce", "bias"):
                same = [j for j in idx if roles[j] == r]
                p = parts.get(r)
                out[i] = None if p is None else _share(p, kernels, i, same)
        from kdvfs.kernelwork import conv_gradient  # (it imports this module)

        named = {k: [i for i in gemm if conv_gradient(str(kernels[i].name)) == k] for k in ("dgrad", "wgrad")}
        if named["dgrad"] and named["wgrad"] and len(named["dgrad"]) + len(named["wgrad"]) == len(gemm):
            for k in ("dgrad", "wgrad"):
                for i in named[k]:
                    out[i] = _share(parts[k], kernels, i, named[k]) if k in parts else None
        else:
            both = [parts[k] for k in ("dgrad", "wgrad") if k in parts]
            tot = Work(sum(p.flops for p in both), sum(p.bytes for p in both), gd, gd in ("bf16", "fp16", "tf32"))
            for i in gemm:
                out[i] = _share(tot, kernels, i, gemm)
    return out


def _share(p: Work, kernels: Sequence, i: int, group: Sequence[int]) -> Work:
    """Kernel ``i``'s share of ``p`` among ``group`` by duration (evenly where they took no time)."""
    t = sum(float(kernels[j].time_s) for j in group)
    f = float(kernels[i].time_s) / t if t > 0 else 1.0 / len(group)
    return Work(p.flops * f, p.bytes * f, p.dtype, p.tensor, "shapes")


def recorded_conv_work(op: str, shape: Sequence[int], dtype: str, launches: Sequence[Mapping] | None) -> Work | None:
    """The work of one invocation of a zoo convolution entry (``conv2d`` / ``conv2d_bwd``: ``(N, Cin, H, W, Cout, k)``,
    stride 1, "same" padding, the backward with its bias's gradient) from the kernels the campaign recorded for it
    (``launch_grids``: name, µs, grid, block of one launch), priced as the importer prices a traced op's kernels
    (``kdvfs.kernelwork.kernel_work``: cuDNN's layout conversions as copies of the tensors their grids name, the
    backward's kernels by role), summed. cuDNN picks its kernels by shape: characterization16's 1 × 1 forward ran
    ``nchwToNhwc``, an NHWC GEMM and ``nhwcToNchw``, characterization17's one nvjet GEMM; PoolFormer-S12's backward
    ran per-image GEMMs and ``reduce_wgrad_nchw_helper`` at five of its eight shapes and NHWC xmma kernels with
    layout conversions at the other three (``validation/h200/work13/README.md``). The zoo's definition by shape alone
    (``hw_backend.zoo``) cannot know which; the record can. ``None`` without a record of at least one kernel with a
    name and a time, or with ``RECORDED_LAUNCHES_MAX`` of them (the campaign keeps no more: the list may be cut);
    then the definition by shape stands."""
    from kdvfs.kernelwork import kernel_work
    from kdvfs.trace import Kernel

    recs = [c for c in launches or [] if isinstance(c, Mapping) and c.get("name") and c.get("us")]
    if not recs or len(launches or []) >= RECORDED_LAUNCHES_MAX or op not in ("conv2d", "conv2d_bwd") \
            or len(shape) != 6:
        return None
    nb, ci, h, w, co, kk = (int(v) for v in shape)
    p = kk // 2
    t = {"bf16": "c10::BFloat16", "fp16": "c10::Half"}.get(dtype, "float")
    if op == "conv2d":
        # cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)
        ev = {"name": "aten::cudnn_convolution", "args": {
            "Input Dims": [[nb, ci, h, w], [co, ci, kk, kk]] + [[]] * 7, "Input type": [t, t],
            "Concrete Inputs": ["", "", f"[{p}, {p}]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"],
            "External id": 1}}
    else:
        ev = {"name": "aten::convolution_backward", "args": {
            "Input Dims": [[nb, co, h, w], [nb, ci, h, w], [co, ci, kk, kk]] + [[]] * 8, "Input type": [t, t, t],
            "Concrete Inputs": ["", "", "", f"[{co}]", "[1, 1]", f"[{p}, {p}]", "[1, 1]", "False", "[0, 0]", "1",
                                "[True, True, True]"], "External id": 1}}
    ks = []
    for c in recs:
        name = str(c["name"])
        role = conv_backward_role(name)
        cat = {"layout": "copy", "wgrad_reduce": "reduction", "bias": "reduction", "workspace": "other"}.get(role, "gemm")
        grid = tuple(int(v) for v in c["grid"]) if c.get("grid") else None
        block = tuple(int(v) for v in c["block"]) if c.get("block") else None
        ks.append(Kernel(name, cat, float(c["us"]) * 1e-6, grid=grid, block=block))
    out = kernel_work(ks, [{"args": {"External id": 1}}] * len(ks), {1: [ev]})
    if any(k.flops is None or k.bytes is None for k in out):
        return None
    tensor = dtype in ("bf16", "fp16")
    return Work(float(sum(k.flops for k in out if k.category == "gemm")), float(sum(k.bytes for k in out)), dtype,
                tensor, "shapes")
