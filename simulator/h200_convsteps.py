"""Issue 12, session 9: where the convolutional steps' predicted energy is, and which kernel classes their deficit
most plausibly sits in (a diagnosis; nothing is fitted here and the bundled model is used as it is).

For each convolutional step checked on the H200 (EfficientNet-B0 in steps10, both leases; MobileNetV2 and ResNet-50
in steps9; ConvNeXt-T in steps7) the trace's kernels are put in classes by their names (batch norm statistics,
transform and backward; the depthwise convolutions' forward, input gradient and weight gradient; cuDNN's
convolutions; layout conversions; cuBLAS GEMMs; activations; pooling and reductions; the optimizer; the rest). Per
class: the kernels' measured time in the trace, the bundled model's energy for them (each kernel alone at the card's
own clocks, ``kdvfs.model.evaluate``; no limiter, no gaps: these steps run below the cap at 1980 MHz), its mean power,
the share of the card's resident-thread slots its launches fill (``kdvfs.occupancy``, time-weighted), and two
plausibility tests of "the step's deficit is in this class":

- ``uplift_to_close_w``: the extra watts this class's kernels would have to draw, over their predicted power, to
  carry the whole deficit (measured − predicted step energy, the check's ``limiter_with_gaps``), beside
  ``headroom_w``, the cap less their predicted power;
- ``zoo_implied_j``: the class's predicted energy times the power error of the zoo entries nearest to it
  (``ZOO_NEAREST``; measured ÷ predicted − 1 from ``kdvfs.calibrate_h200.check_h200_fit`` on the fit's files plus
  characterization12): what the zoo says the model misses in this class, if it misses it at these shapes as it does
  at the zoo's. Classes with no zoo entry near them are marked so: that is what the ``conv`` zoo set measures.

``convsteps_diagnosis`` returns the document; ``python -m scripts.h200_convsteps [-o
validation/h200/convsteps/convsteps.json]`` writes it and prints ``convsteps_lines``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

__all__ = ["CLASSES", "GROUPS", "STEPS", "ZOO_NEAREST", "classify", "convsteps_diagnosis", "convsteps_lines"]

# (set, check report, folder of the traces, steps)
STEPS = (("steps10", "validation/h200/steps10/steps_check.json", "validation/h200/steps10",
          ("efficientnet-b0", "efficientnet-b0-b512")),
         ("steps10 lease 2", "validation/h200/steps10/repeat_session9/steps_check.json", "validation/h200/steps10",
          ("efficientnet-b0", "efficientnet-b0-b512")),
         ("steps9", "validation/h200/steps9/steps_check_session9.json", "validation/h200/steps9",
          ("mobilenet-v2", "mobilenet-v2-b512", "resnet-50", "resnet-50-b32")),
         ("steps7", "validation/h200/steps7/steps_check.json", "validation/h200/steps7",
          ("convnext-tiny", "convnext-tiny-b256")))

# first match wins; kernel names as PyTorch 2.11 / cuDNN 9 write them in the steps' Kineto traces
CLASSES = (
    ("bn backward", r"batch_norm_backward"),
    ("bn statistics", r"batch_norm_collect_statistics|batch_norm_reduce_statistics|welford"),
    ("bn transform", r"batch_norm_transform_input|batch_norm_elemt|native_batch_norm"),
    ("layer norm", r"layer_norm|LayerNorm|RowwiseMoments|GammaBeta|ComputeFused|ln_"),
    ("dwconv forward", r"conv_depthwise2d_forward"),
    ("dwconv grad input", r"conv_depthwise2d_backward"),
    ("dwconv grad weight", r"conv_depthwise2d_grad_weight"),
    ("layout conversion", r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw"),
    ("cuDNN depthwise", r"c1_k1|grouped_direct"),
    ("cuDNN convolution", r"conv|xmma|implicit|wgrad|dgrad|fprop|convolve|winograd"),
    ("GEMM", r"gemm|nvjet|cutlass|cublas"),
    ("activation", r"silu|sigmoid|relu|hardtanh|clamp|threshold|gelu|hardswish|tanh"),
    ("pooling & reductions", r"reduce_kernel|pool|mean|Reduce"),
    ("optimizer", r"multi_tensor_apply|adam"),
)

# the zoo entries nearest to each class (by op and size); None: the zoo has nothing like it
ZOO_NEAREST = {
    "bn backward": None,
    "bn statistics": None,
    "bn transform": None,
    "layer norm": ("layer_norm_bf16_200704x96_graph16", "layer_norm_bf16_3136x768_graph256"),
    "dwconv forward": ("dwconv_bf16_64x96x56x56_k7_graph16", "dwconv_bf16_64x384x14x14_k7_graph64"),
    "dwconv grad input": None,
    "dwconv grad weight": None,
    "layout conversion": ("transpose_bf16_1024x1024_graph512", "transpose_bf16_16384x16384"),
    "cuDNN depthwise": ("dwconv_bf16_64x96x56x56_k7_graph16", "dwconv_bf16_64x384x14x14_k7_graph64"),
    "cuDNN convolution": None,
    "GEMM": ("gemm_bf16_128x4096x1024_graph256", "gemm_bf16_512_graph512", "gemm_bf16_1024_graph32_warm"),
    "activation": ("silu_bf16_256MiB", "gelu_bf16_256KiB_graph1024", "add_bf16_1MiB_graph512"),
    "pooling & reductions": ("sum_bf16_64KiB_graph2048", "sum_bf16_1GiB"),
    "optimizer": ("adamw_fp32_100M",),
    "other": ("add_bf16_1MiB_graph512", "add_bf16_256KiB_graph1024", "fill_bf16_1GiB"),
}
# classes summed: the share of the deficit each group would have to carry alone
GROUPS = {"batch norm": ("bn backward", "bn statistics", "bn transform"),
          "depthwise convolutions": ("dwconv forward", "dwconv grad input", "dwconv grad weight", "cuDNN depthwise"),
          "batch norm + depthwise": ("bn backward", "bn statistics", "bn transform", "dwconv forward",
                                     "dwconv grad input", "dwconv grad weight", "cuDNN depthwise")}
CHECK_FILES = ("characterization12.json.gz",)  # the fresh lease, checked but not fitted, beside the fit's own files


def classify(name: str, category: str) -> str:
    for cls, pat in CLASSES:
        if re.search(pat, name):
            return cls
    return "optimizer" if category == "optimizer" else "other"


def zoo_power_errors(root: Path, fit_path: str = "validation/h200/characterization/fit.json") -> dict[str, dict]:
    """Each zoo entry's measured and predicted power under the bundled fit (``check_h200_fit``)."""
    from kdvfs.calibrate_h200 import DEFAULT_DATA, check_h200_fit

    fit = json.loads((root / fit_path).read_text())
    data = [str(root / p) for p in DEFAULT_DATA] + [str(root / "validation/h200/characterization" / f)
                                                    for f in CHECK_FILES]
    doc = check_h200_fit(fit, data)
    return {r["name"]: {"measured_w": r["measured_power_w"], "predicted_w": r["predicted_power_w"],
                        "ratio": round(r["measured_power_w"] / r["predicted_power_w"], 4)}
            for r in doc["check"]["per_kernel"] if r.get("predicted_power_w")}


def step_classes(root: Path, folder: str, model: str) -> dict:
    """Per class of one step's trace: instances, time, predicted energy and power, thread-slot occupancy."""
    from kdvfs.gpus import get_gpu
    from kdvfs.importers import import_kineto
    from kdvfs.model import default_params, evaluate
    from kdvfs.occupancy import thread_occupancies

    spec = get_gpu("h200")
    tr = import_kineto(root / folder / f"{model}.kineto.json.gz", name=model).trace
    ev = evaluate(spec, default_params(tr, spec), np.array([0]), np.array([0]))
    ej = ev.energy_j[:, 0] * tr.repeats
    tj = np.array([k.time_s for k in tr.kernels]) * tr.repeats
    occ = thread_occupancies([k.grid for k in tr.kernels], [k.block for k in tr.kernels], 132)
    oc = np.array([1.0 if o is None else min(1.0, o) for o in occ])
    cls = np.array([classify(k.name, k.category) for k in tr.kernels])
    out = {}
    for c in [c for c, _ in CLASSES] + ["other"]:
        m = cls == c
        if not m.any():
            continue
        t, e = float(tj[m].sum()), float(ej[m].sum())
        cats = sorted({tr.kernels[i].category for i in np.flatnonzero(m)})
        out[c] = {"instances": int(tr.repeats[m].sum()), "time_ms": round(t * 1e3, 3),
                  "predicted_j": round(e, 3), "predicted_w": round(e / t, 1) if t > 0 else None,
                  "occupancy": round(float((oc[m] * tj[m]).sum() / t), 3) if t > 0 else None,
                  "time_below_half_occupancy": round(float(tj[m & (oc < 0.5)].sum() / t), 3) if t > 0 else None,
                  "trace_categories": cats}
    return {"kernel_time_ms": round(float(tj.sum()) * 1e3, 3), "predicted_kernel_j": round(float(ej.sum()), 3),
            "classes": out}


def convsteps_diagnosis(root: Path, command: str = "python -m scripts.h200_convsteps") -> dict:
    from kdvfs.gpus import get_gpu

    cap_w = float(get_gpu("h200").power_limit_w)
    zoo = zoo_power_errors(root)
    nearest = {c: ({n: zoo[n] for n in names if n in zoo} if names else None) for c, names in ZOO_NEAREST.items()}
    cache: dict[tuple[str, str], dict] = {}
    steps = []
    for tag, check, folder, models in STEPS:
        rows = {r["model"]: r for r in json.loads((root / check).read_text())["steps"]}
        for m in models:
            r = rows[m]
            meas, pred = r["measured"]["energy_j"], r["predicted"]["limiter_with_gaps"]["energy_j"]
            deficit = meas - pred
            sc = cache.setdefault((folder, m), step_classes(root, folder, m))
            classes = {}
            for c, v in sc["classes"].items():
                near = nearest.get(c)
                ratio = float(np.mean([z["ratio"] for z in near.values()])) if near else None
                t_s = v["time_ms"] * 1e-3
                classes[c] = dict(v, share_of_predicted=round(v["predicted_j"] / sc["predicted_kernel_j"], 3),
                                  uplift_to_close_w=round(deficit / t_s, 1) if t_s > 0 else None,
                                  headroom_w=round(cap_w - v["predicted_w"], 1) if v["predicted_w"] else None,
                                  # a class predicted above the cap alone is set by the limiter, not its power
                                  zoo_implied_j=round(v["predicted_j"] * (ratio - 1), 3)
                                  if ratio and v["predicted_w"] < cap_w else None)
            implied = sum(v["zoo_implied_j"] for v in classes.values() if v["zoo_implied_j"] is not None)
            unmeasured = sum(v["predicted_j"] for c, v in classes.items() if not nearest.get(c))
            groups = {}
            for g, members in GROUPS.items():
                t_s = sum(classes[c]["time_ms"] for c in members if c in classes) * 1e-3
                e = sum(classes[c]["predicted_j"] for c in members if c in classes)
                if t_s > 0:
                    groups[g] = {"time_ms": round(t_s * 1e3, 3), "predicted_j": round(e, 3),
                                 "predicted_w": round(e / t_s, 1), "uplift_to_close_w": round(deficit / t_s, 1),
                                 "uplift_pct_of_predicted": round(100 * deficit / e, 1)}
            steps.append({"set": tag, "model": m, "measured_j": round(meas, 3), "predicted_j": round(pred, 3),
                          "deficit_j": round(deficit, 3), "error_pct": round(r["error"]["limiter_with_gaps"]
                                                                             ["energy_pct"], 2),
                          "kernel_time_ms": sc["kernel_time_ms"], "predicted_kernel_j": sc["predicted_kernel_j"],
                          "zoo_implied_total_j": round(implied, 3),
                          "predicted_j_in_classes_without_zoo": round(unmeasured, 3),
                          "share_without_zoo": round(unmeasured / sc["predicted_kernel_j"], 3),
                          "groups": groups, "classes": classes})
    return {"format": "kdvfs-h200-convsteps/1", "command": command, "cap_w": round(cap_w, 1),
            "model": "the bundled h200 preset (traces/h200.fit.json), each kernel alone at auto",
            "zoo_check": "kdvfs.calibrate_h200.check_h200_fit(validation/h200/characterization/fit.json, DEFAULT_DATA"
                         " + characterization12)", "zoo_nearest": nearest, "steps": steps}


def convsteps_lines(doc: dict, top: int = 6) -> list[str]:
    out = []
    for s in doc["steps"]:
        out.append(f"{s['set']:16s} {s['model']:22s} measured {s['measured_j']:8.2f} J, predicted {s['predicted_j']:8.2f}"
                   f" J ({s['error_pct']:+.2f} %), deficit {s['deficit_j']:+.2f} J; zoo-implied {s['zoo_implied_total_j']:+.2f}"
                   f" J; kernels {s['kernel_time_ms']:.1f} ms, {s['predicted_kernel_j']:.2f} J, {100 * s['share_without_zoo']:.0f} %"
                   " of it in classes the zoo lacks")
        for g, v in s["groups"].items():
            out.append(f"    [{g}] {v['time_ms']:.2f} ms, {v['predicted_j']:.2f} J at {v['predicted_w']:.0f} W: alone it would"
                       f" need +{v['uplift_to_close_w']:.0f} W (+{v['uplift_pct_of_predicted']:.1f} % of its energy)")
        cl = sorted(s["classes"].items(), key=lambda kv: -kv[1]["predicted_j"])[:top]
        for c, v in cl:
            z = (f"{v['zoo_implied_j']:+8.2f} J" if v["zoo_implied_j"] is not None else "   (no zoo)"
                 if not doc["zoo_nearest"].get(c) else "  (at cap)")
            out.append(f"    {c:22s} {v['time_ms']:8.2f} ms {v['predicted_j']:8.2f} J {v['predicted_w']:6.0f} W"
                       f" occ {v['occupancy']:.2f} (<0.5: {100 * v['time_below_half_occupancy']:3.0f} %)"
                       f" uplift {v['uplift_to_close_w']:+7.0f} W of {v['headroom_w']:4.0f}; zoo {z}")
    return out
