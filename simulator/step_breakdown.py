"""A measured step's predicted energy split by op and by how each kernel's work was priced (issue 12's diagnosis of
the blind set steps12, ``validation/h200/step_breakdown/``).

For each step of a ``kdvfs-steps/1`` folder this imports the trace and builds the parameters as ``validate-steps``
does (``simulator.stepcheck``), anchors the recorded durations at the limiter's steady ceiling of the step with its
host gaps (``kdvfs.limiter.anchor_to_limiter``), and reads every kernel's time and power there
(``CeilingTables.at``). The sum is the step's ``limiter`` energy of ``validate-steps`` up to the limiter's dynamics
(the blind steps ran at a steady 1980 MHz, where the two agree within 0.1 %). Each kernel is labelled with:

- its launching op (``Kernel.op``), and the op's *family* (the rule of ``kdvfs.work.op_work`` that priced it);
- its *work source*: ``shapes`` by an op formula, ``shapes-generic`` (the op has no formula of its own and was priced
  by ``op_work``'s last branch, "an elementwise op over its largest operand": avg_pool2d, upsample, im2col, topk and
  the like), ``name`` (kernel name and launch grid), ``category`` (no work: the category priors);
- whether the op is in a zoo set (``ZOO_OPS``): an op the zoo never measured alone has nothing that checked its
  activity (``op_unknown`` where the trace does not name the op: no op, or a recorder's stage label).

Only the prediction is split: the measurement is one number per step. ``implied_power_w`` says what a family's kernels
would have to draw for the whole measured-minus-predicted energy to be theirs (a family whose implied power is above
the cap cannot carry the gap alone). Nothing is fitted.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from kdvfs import work as _work
from kdvfs.errors import FormatError, InputError

__all__ = ["MATCH_TIME_TOLERANCE", "SHARE_KEYS", "ZOO_OPS", "association", "breakdown_steps", "by_power_band",
           "check_rows", "kernel_rows", "measured_substitution", "op_family", "step_ops_pricing", "summary_rows",
           "work_source"]

log = logging.getLogger(__name__)

# aten ops (without the ``aten::`` prefix) that some zoo set of hw_backend.zoo runs alone, by the zoo op that runs
# them (zoo_torch's closures): gemm/bmm (mm, bmm; linear/addmm/matmul reach the same cuBLAS kernels), sdpa and
# sdpa_bwd, add/mul, gelu/silu/relu/sigmoid (forward only: no activation backward is in the zoo), avg_pool (a global
# mean), batch_norm(_bwd), sum, amax, layer_norm, rms_norm, softmax (forward only), copy/transpose/cast, fill, dwconv
# and gconv1d (a depthwise or grouped convolution and its backward: dense convolutions share the op names, so
# ``convolution`` counts as zoo'd only for those kernels, see ``_zoo_conv``), adamw (the foreach ops)
ZOO_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "_addmm_activation",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_forward", "_flash_attention_backward",
    "_efficient_attention_forward", "_efficient_attention_backward",
    "add", "add_", "mul", "mul_", "gelu", "silu", "relu", "relu_", "sigmoid", "mean",
    "native_batch_norm", "_native_batch_norm_legit", "native_batch_norm_backward", "cudnn_batch_norm",
    "cudnn_batch_norm_backward", "sum", "amax", "layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm",
    "softmax", "_softmax", "copy_", "_to_copy", "to", "clone", "contiguous", "transpose", "fill_", "zero_", "zeros",
    "_conv_depthwise2d", "_foreach_add_", "_foreach_mul_", "_foreach_addcmul_", "_foreach_addcdiv_", "_foreach_div_",
    "_foreach_sqrt", "_foreach_lerp_", "_foreach_add", "_foreach_mul", "_fused_adamw_",
})

# ops the catch-all prices correctly: one pass over the operands, a few operations per element
_ELEMENTWISE = re.compile(
    r"aten::(add|sub|rsub|mul|div|neg|exp|log|log1p|pow|sqrt|rsqrt|tanh|tanh_backward|where|clamp|clamp_min|abs|"
    r"sign|erf|reciprocal|eq|ne|lt|le|gt|ge|logical_\w+|bitwise_\w+|isinf|isnan|isfinite|native_dropout|"
    r"native_dropout_backward|bernoulli|addcmul|addcdiv|lerp|maximum|minimum|gelu|silu|sigmoid|relu|"
    r"gelu_backward|silu_backward|sigmoid_backward|threshold_backward|hardtanh|masked_fill|cos|sin|square|"
    r"mish|hardswish|hardsigmoid|leaky_relu|elu|softplus)_?$", re.I)


def op_family(op: str | None) -> str:
    """The rule of ``kdvfs.work.op_work`` that prices an op's kernels (``kdvfs.work.op_rule``: one of
    ``kdvfs.work.OP_RULES``), with its last branch split in two: ``elementwise`` (a true elementwise op: the
    catch-all fits it) or ``generic`` (the catch-all applied to an op that is not elementwise). ``none`` without an op, ``stage`` for a recorder's stage label
    (``stage:fwd.qkv``: the bundled block's traces), which hides the op."""
    if not op:
        return "none"
    if op.startswith("stage:"):  # the project's recorder labels its stages: the launching aten op is not kept
        return "stage"
    full = op if "::" in op else f"aten::{op}"
    rule = _work.op_rule(full)
    if rule != "elementwise":
        return rule
    return "elementwise" if _ELEMENTWISE.match(full) else "generic"


def work_source(k) -> str:
    """How a kernel's work was priced: ``shapes``, ``shapes-generic`` (shapes, by ``op_work``'s catch-all on an op
    that is not elementwise), ``name``, ``category`` or ``given``."""
    src = k.work_source or "given"
    if src == "shapes" and op_family(k.op) == "generic":
        return "shapes-generic"
    return src


def _short(op: str | None) -> str:
    return (op or "(no op)").split("::")[-1]


def _in_zoo(k) -> bool | None:
    if not k.op or k.op.startswith("stage:"):
        return None  # the op is not known
    op = _short(k.op)
    if op in ("convolution", "_convolution", "conv1d", "conv2d", "cudnn_convolution", "convolution_backward"):
        # the zoo's convolutions are depthwise (ATen's own kernels) and grouped 1-D (cuDNN); a dense one's cuDNN or
        # CUTLASS implicit GEMM was never run alone
        return "depthwise" in k.name or "conv_depthwise" in k.name
    return op in ZOO_OPS


def kernel_rows(trace, spec, lim, gap: tuple[float, float] | None = None) -> tuple[list[dict], float]:
    """Per kernel of ``trace`` (its repeats summed): name, op, family, category, work source, zoo coverage, time and
    predicted energy at the limiter's steady ceiling of the step with ``gap`` ((seconds, watts) of host gaps), with
    the parameters ``validate-steps`` uses; and that ceiling (MHz)."""
    from kdvfs.gpus import AUTO
    from kdvfs.limiter import CeilingTables, anchor_to_limiter
    from simulator.stepcheck import _params_as_profile_build

    params = _params_as_profile_build(trace, spec)
    p, f = anchor_to_limiter(spec, params, trace.times_s, trace.repeats, lim, gap)
    t, pw = CeilingTables.from_params(spec, p, [(AUTO, AUTO)]).at(f)
    reps = np.asarray(trace.repeats, dtype=float)
    rows = []
    for i, k in enumerate(trace.kernels):
        ts = float(t[i, 0] * reps[i])
        rows.append({"name": k.name, "grid": list(k.grid) if k.grid else None, "time_one_s": float(t[i, 0]),
                     "op": _short(k.op), "family": op_family(k.op), "category": k.category,
                     "work_source": work_source(k), "in_zoo": _in_zoo(k), "time_s": ts,
                     "energy_j": float(ts * pw[i, 0]), "flops": (k.flops or 0.0) * reps[i],
                     "bytes": (k.bytes or 0.0) * reps[i]})
    return rows, float(f)


def _group(rows: Iterable[dict], key, total_e: float, total_t: float) -> list[dict]:
    acc: dict = {}
    for r in rows:
        g = acc.setdefault(key(r), {"time_s": 0.0, "energy_j": 0.0, "kernels": 0})
        g["time_s"] += r["time_s"]
        g["energy_j"] += r["energy_j"]
        g["kernels"] += 1
    out = []
    for k, g in acc.items():
        out.append({"key": k, **g, "power_w": g["energy_j"] / g["time_s"] if g["time_s"] > 0 else 0.0,
                    "energy_share": g["energy_j"] / total_e if total_e else 0.0,
                    "time_share": g["time_s"] / total_t if total_t else 0.0})
    return sorted(out, key=lambda g: -g["energy_j"])


def _step_entry(rows: list[dict], ceiling: float, st: dict | None, gap_s: float, gap_w: float, top: int) -> dict:
    e_k = sum(r["energy_j"] for r in rows)
    t_k = sum(r["time_s"] for r in rows)
    out: dict = {"ceiling_mhz": ceiling, "kernel_time_s": t_k, "kernel_energy_j": e_k, "gap_s": gap_s,
                 "gap_power_w": gap_w, "gap_energy_j": gap_s * gap_w, "predicted_energy_j": e_k + gap_s * gap_w}
    dE = None
    if st is not None:
        out["measured_energy_j"] = float(st["step_energy_j"])
        out["measured_time_s"] = float(st["step_time_s"])
        dE = out["measured_energy_j"] - out["predicted_energy_j"]
        out["gap_j"] = dE
        out["error_pct"] = 100 * (out["predicted_energy_j"] / out["measured_energy_j"] - 1)
    views = {"by_source": lambda r: r["work_source"], "by_family": lambda r: r["family"],
             "by_zoo": lambda r: {True: "in_zoo", False: "not_in_zoo"}.get(r["in_zoo"], "op_unknown"),
             "by_op": lambda r: f"{r['op']} [{r['family']}, {r['work_source']}]",
             "by_category": lambda r: r["category"]}
    for name, key in views.items():
        gs = _group(rows, key, e_k, t_k)
        for g in gs:
            if dE is not None and g["time_s"] > 0:
                # what this group's kernels would draw if the whole measured-minus-predicted energy were theirs
                g["implied_power_w"] = (g["energy_j"] + dE) / g["time_s"]
        out[name] = gs[:top] if name == "by_op" else gs
    return out


def breakdown_steps(steps_dir: str | Path, spec, lim=None, *, gap_power_w: float | None = None, top: int = 25,
                    models: Iterable[str] | None = None, checks: Mapping[str, dict] | None = None) -> dict:
    """The breakdown of every measured step in ``steps_dir`` (a ``kdvfs-steps/1`` folder): per step, its predicted
    energy by work source, op family, zoo coverage, category and op (the ``top`` ops by energy), with the measured
    step's energy beside it. ``gap_power_w``: the host gaps' power (default: the card fit's, ``gap_power_for``);
    ``checks``: model → that step's row of a ``validate-steps`` report (``check_rows``): its gaps' power is used, and
    its judged energy and error are set beside the breakdown's."""
    from kdvfs.importers import import_kineto
    from kdvfs.limiter import gap_power_for, limiter_for
    from simulator.stepcheck import _checked_steps

    d = Path(steps_dir)
    path = d / "steps.json"
    if not path.is_file():
        raise InputError(f"{str(path)!r} does not exist; give a folder `kdvfs measure-steps -o` wrote (steps.json and "
                         "the Kineto traces)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise FormatError(f"{str(path)!r} is not JSON ({e})") from None
    lim = lim or limiter_for(spec)
    if lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit` first")
    gap_w = gap_power_w if gap_power_w is not None else (gap_power_for(spec) or 0.0)
    want = set(models) if models is not None else None
    steps = {}
    for st in _checked_steps(doc, path):
        if "error" in st or (want is not None and st["model"] not in want):
            continue
        imp = import_kineto(d / st["trace"], name=st["model"])
        trace = imp.trace
        busy = float(trace.repeats @ trace.times_s)
        gap_s = max(float(st["step_time_s"]) - busy, 0.0)
        chk = (checks or {}).get(st["model"]) or {}
        gw = float(chk["gap_power_w"]) if chk.get("gap_power_w") is not None else gap_w
        rows, ceil = kernel_rows(trace, spec, lim, (gap_s, gw) if gap_s > 0 else None)
        steps[st["model"]] = _step_entry(rows, ceil, st, gap_s, gw, top)
        if chk:
            steps[st["model"]]["check"] = {"energy_j": chk.get("energy_j"), "error_pct": chk.get("error_pct")}
    return {"format": "kdvfs-step-breakdown/1", "steps_dir": str(steps_dir), "gpu": spec.name,
            "gap_power_w": gap_w, "steps": steps}


def check_rows(report: str | Path) -> dict[str, dict]:
    """model → what a ``validate-steps`` report used and found for that step: ``gap_power_w`` (its thermal gap power,
    else the report's), ``energy_j`` and ``error_pct`` (the judged prediction, ``limiter_with_gaps``), so that the
    breakdown's gaps are the check's and its sum can be set beside the check's."""
    try:
        doc = json.loads(Path(report).read_text())
    except (OSError, ValueError) as e:
        raise FormatError(f"{str(report)!r} is not a readable validate-steps report ({e})") from None
    out: dict[str, dict] = {}
    for row in doc.get("steps") or [] if isinstance(doc, dict) else []:
        pred = row.get("predicted") if isinstance(row, dict) else None
        if not isinstance(pred, dict):
            continue
        w = (pred.get("thermal") or {}).get("gap_power_w", doc.get("gap_power_w"))
        judged = pred.get("limiter_with_gaps") or {}
        err = ((row.get("error") or {}).get("limiter_with_gaps") or {}).get("energy_pct")
        out[str(row.get("model"))] = {"gap_power_w": float(w) if isinstance(w, (int, float)) else None,
                                      "energy_j": judged.get("energy_j"), "error_pct": err}
    return out


SHARE_KEYS = (("by_source", "shapes-generic"), ("by_source", "name"), ("by_source", "category"),
              ("by_zoo", "not_in_zoo"))


def summary_rows(doc: dict) -> list[dict]:
    """One row per step of a breakdown (``breakdown_steps``): the measured and predicted energy, the error of the
    whole step and of its kernels alone (the host gaps' predicted energy taken from both sides), and the share of the
    kernels' predicted energy in each of ``SHARE_KEYS`` (work priced by the catch-all, by the kernel's name, by the
    category; ops in no zoo set)."""
    rows = []
    for model, st in doc["steps"].items():
        r = {"model": model, "measured_energy_j": st.get("measured_energy_j"),
             "predicted_energy_j": st["predicted_energy_j"], "error_pct": st.get("error_pct"),
             "gap_share": st["gap_s"] / st["measured_time_s"] if st.get("measured_time_s") else None,
             "ceiling_mhz": st["ceiling_mhz"]}
        r["kernel_power_w"] = st["kernel_energy_j"] / st["kernel_time_s"] if st["kernel_time_s"] > 0 else None
        if st.get("measured_energy_j") is not None and st["kernel_energy_j"] > 0:
            # the kernels' error if the gaps were exact: (measured − predicted gaps) against the predicted kernels
            r["kernel_error_pct"] = 100 * (st["kernel_energy_j"] / (st["measured_energy_j"] - st["gap_energy_j"]) - 1)
            r["measured_power_w"] = st["measured_energy_j"] / st["measured_time_s"]
            # the power the kernels lack on average, were the gaps exact
            r["missing_power_w"] = (st["measured_energy_j"] - st["gap_energy_j"] - st["kernel_energy_j"]) \
                / st["kernel_time_s"]
            ce = (st.get("check") or {}).get("energy_j")
            if ce is not None:  # the same from the check's own prediction (the limiter's dynamics, not its steady state)
                kc = ce - st["gap_energy_j"]
                r["check_kernel_error_pct"] = 100 * (kc / (st["measured_energy_j"] - st["gap_energy_j"]) - 1)
                r["check_missing_power_w"] = (st["measured_energy_j"] - st["gap_energy_j"] - kc) / st["kernel_time_s"]
        for view, key in SHARE_KEYS:
            g = next((g for g in st[view] if g["key"] == key), None)
            r[f"{key}_share"] = g["energy_share"] if g else 0.0
        rows.append(r)
    return rows


def association(rows: list[dict], share: str, error: str = "kernel_error_pct") -> dict:
    """How a step's error goes with a share over a set of steps: the least-squares line ``error = a + b · share``, its
    correlation, and the mean error of the steps above and at-or-below the median share. A description of the
    stored checks, not a fit of anything in the model."""
    pts = [(r[share], r[error]) for r in rows if r.get(error) is not None and r.get(share) is not None]
    if len(pts) < 3:
        return {"steps": len(pts)}
    x, y = np.array(pts).T
    b, a = np.polyfit(x, y, 1) if np.ptp(x) > 0 else (0.0, float(np.mean(y)))
    r = float(np.corrcoef(x, y)[0, 1]) if np.ptp(x) > 0 and np.ptp(y) > 0 else 0.0
    med = float(np.median(x))
    hi, lo = y[x > med], y[x <= med]
    return {"steps": len(pts), "intercept_pct": float(a), "slope_pct_per_share": float(b), "correlation": r,
            "median_share": med, "mean_error_above_median_pct": float(hi.mean()) if hi.size else None,
            "mean_error_at_or_below_median_pct": float(lo.mean()) if lo.size else None}


def _traced_strides(k) -> list | None:
    """The ``Input Strides`` the steps12 traces recorded with a ``step-ops`` entry's op, where the importer reads
    them: the channels-last copy's ``copy_(contiguous, channels-last)`` (SegFormer's loss head at [4, 150, 512, 512]:
    [[39321600, 262144, 512, 1], [39321600, 1, 76800, 150], []])."""
    if k.op != "copy_nhwc":
        return None
    from kdvfs.work_copies import channels_last_strides, contiguous_strides

    return [contiguous_strides(k.shape), channels_last_strides(k.shape), []]


def _as_traced(k) -> tuple[str, list, list, list | None]:
    """The aten op, ``Input Dims``, ``Input type`` and ``Concrete Inputs`` with which the steps12 traces recorded a
    ``step-ops`` zoo entry's op (one launch), so that the importer's pricing of it can be set beside the entry's."""
    s = k.shape
    t = {"fp32": "float", "bf16": "c10::BFloat16"}[k.dtype]
    if k.op == "upsample_bilinear":
        out = f"[{s[2] * s[4]}, {s[3] * s[4]}]"
        return ("aten::upsample_bilinear2d", [list(s[:4]), [], [], [], []], [t, "ScalarList", "Scalar", "", ""],
                ["", out, "False", "", ""])
    if k.op == "upsample_bilinear_bwd":
        big = [s[0], s[1], s[2] * s[4], s[3] * s[4]]
        return ("aten::upsample_bilinear2d_backward", [big, [], [], [], [], []], [t],
                ["", f"[{big[2]}, {big[3]}]", str(list(s[:4])), "False", "", ""])
    if k.op == "log_softmax_ch":
        return "aten::_log_softmax", [list(s), [], []], [t, "Scalar", "Scalar"], ["", "1", "False"]
    if k.op == "log_softmax_ch_bwd":
        return "aten::_log_softmax_backward_data", [list(s), list(s), [], []], [t, t, "Scalar", "Scalar"], ["", "", "1", "6"]
    if k.op == "copy_nhwc":
        return "aten::copy_", [list(s), list(s), []], [t, t, "Scalar"], None
    win = f"[{s[-1]}, {s[-1]}]" if k.op.startswith("avg_pool2d") else ""
    pad = f"[{s[-1] // 2}, {s[-1] // 2}]"
    if k.op == "avg_pool2d":
        return "aten::avg_pool2d", [list(s[:4])] + [[]] * 6, [t], ["", win, "[1, 1]", pad, "False", "False", ""]
    if k.op == "avg_pool2d_bwd":
        return ("aten::avg_pool2d_backward", [list(s[:4]), list(s[:4])] + [[]] * 6, [t, t],
                ["", "", win, "[1, 1]", pad, "False", "False", ""])
    if k.op == "group_norm":
        c = [s[1]]
        return "aten::native_group_norm", [list(s[:4]), c, c] + [[]] * 5, [t, t, t], None
    if k.op == "group_norm_bwd":
        nb, c = s[0], s[1]
        conc = ["", "", "", "", "", str(nb), str(c), str(s[2] * s[3]), str(s[4]), "[True, True, True]"]
        return ("aten::native_group_norm_backward", [list(s[:4]), list(s[:4]), [nb, 1], [nb, 1], [c]] + [[]] * 5,
                [t] * 5, conc)
    if k.op == "col2im":
        nb, c, length, kk = s
        return ("aten::col2im", [[nb, c * kk, length]] + [[]] * 5, [t],
                ["", f"[{length}, 1]", f"[{kk}, 1]", "[1, 1]", f"[{kk // 2}, 0]", "[1, 1]"])
    nb, ci, h, w, co, kk = s
    if k.op == "conv2d":
        conc = ["", "", f"[{kk // 2}, {kk // 2}]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]
        return "aten::cudnn_convolution", [[nb, ci, h, w], [co, ci, kk, kk]] + [[]] * 7, [t, t], conc
    conc = ["", "", "", f"[{co}]", "[1, 1]", f"[{kk // 2}, {kk // 2}]", "[1, 1]", "False", "[0, 0]", "1",
            "[True, True, True]"]
    return ("aten::convolution_backward", [[nb, co, h, w], [nb, ci, h, w], [co, ci, kk, kk]] + [[]] * 8, [t, t, t],
            conc)


def step_ops_pricing() -> list[dict]:
    """For each entry of the ``step-ops`` zoo set: its work from the op's arithmetic (the zoo's definition, one
    launch) beside what ``kdvfs.work.op_work`` gives the same op at the same shapes as the steps12 traces recorded it
    (the importer's pricing of that op in a step), and the importer's family for it (``generic``: the catch-all)."""
    from hw_backend.zoo import ZOO_SETS

    out = []
    for k in ZOO_SETS["step-ops"]():
        w = k.work
        g = max(1, k.graph)
        op, dims, types, conc = _as_traced(k)
        iw = _work.op_work(op, dims, types, concrete=conc, backward=op.endswith("_backward"), strides=_traced_strides(k))
        zf, zb = w.flops / g, w.bytes / g
        row: dict = {"entry": k.name, "op": op, "family": op_family(op), "zoo_flops": zf, "zoo_bytes": zb,
                     "importer_flops": iw.flops if iw else None, "importer_bytes": iw.bytes if iw else None}
        if iw:
            row["flops_ratio"] = iw.flops / zf if zf else None
            row["bytes_ratio"] = iw.bytes / zb if zb else None
        out.append(row)
    return out


def by_power_band(rows: list[dict], edges_w: Sequence[float] = (0.0, 450.0, 550.0, 650.0, 1e9), *,
                  check: bool = False) -> list[dict]:
    """The steps grouped by their kernels' predicted average power (``kernel_power_w``): per band, how many steps,
    the mean and median kernel error, the median power the kernels lack (``missing_power_w``) and how many steps meet
    the 3 % energy target. ``check``: the errors and missing power from the check's own predictions
    (``check_kernel_error_pct``), not the breakdown's steady state. A description of the stored checks."""
    ek, mk, tk = ("check_kernel_error_pct", "check_missing_power_w", "check_error_pct") if check else \
        ("kernel_error_pct", "missing_power_w", "error_pct")
    out = []
    for lo, hi in zip(edges_w[:-1], edges_w[1:]):
        sel = [r for r in rows if r.get(ek) is not None and lo <= r["kernel_power_w"] < hi]
        if not sel:
            continue
        e = np.array([r[ek] for r in sel])
        out.append({"from_w": lo, "to_w": hi if hi < 1e9 else None, "steps": len(sel), "mean_kernel_error_pct":
                    float(e.mean()), "median_kernel_error_pct": float(np.median(e)),
                    "median_missing_power_w": float(np.median([r[mk] for r in sel])),
                    "within_3pct": int(sum(abs(r[tk]) <= 3.0 for r in sel)),
                    "models": [r["model"] for r in sel]})
    return out


MATCH_TIME_TOLERANCE = 0.15
"""A step kernel is the zoo's kernel only where its duration is within this share of the one the entry launched:
name and grid alone match the spatial log-softmax of batch 4 to the entry of batch 16 (its grid is fixed)."""


def measured_substitution(steps_dir: str | Path, spec, characterization: dict, *, lim=None,
                          checks: Mapping[str, dict] | None = None, models: Iterable[str] | None = None,
                          static_offset_w: float = 0.0) -> dict:
    """What each step's prediction becomes where its kernels are ones a zoo file measured alone: a step kernel whose
    name and launch grid equal one the entry launched (``launch_grids``: the same ATen kernel at the same size) takes
    that entry's measured power (less ``static_offset_w``: the zoo's card's idle power above the steps' card's) over its
    own predicted duration, in place of the model's power, where its duration is the entry's kernel's within
    ``MATCH_TIME_TOLERANCE``. A substitution of
    measurements, not a fit: it says how much of a step's miss the measured ops carry. The zoo's windows hold each op
    alone for seconds (a warmer die than a light step's: the thermal fit's ~0.76 W/°C), and a multi-kernel entry's
    power is its kernels' average."""
    from kdvfs.importers import import_kineto
    from kdvfs.limiter import gap_power_for, limiter_for
    from simulator.stepcheck import _checked_steps

    table: dict[tuple[str, tuple], tuple[str, float, float]] = {}
    for e in characterization.get("kernels") or []:
        if not isinstance(e, dict) or not isinstance(e.get("power_w"), (int, float)):
            continue
        for g in e.get("launch_grids") or []:
            if isinstance(g, dict) and g.get("name") and g.get("grid"):
                us = g.get("us")
                if isinstance(us, (int, float)) and us > 0:
                    table[(str(g["name"])[:200], tuple(g["grid"]))] = (str(e["name"]),
                                                                      float(e["power_w"]) - static_offset_w, 1e-6 * us)
    d = Path(steps_dir)
    path = d / "steps.json"
    if not path.is_file():
        raise InputError(f"{str(path)!r} does not exist; give a folder `kdvfs measure-steps -o` wrote")
    doc = json.loads(path.read_text())
    lim = lim or limiter_for(spec)
    want = set(models) if models is not None else None
    out = {}
    for st in _checked_steps(doc, path):
        if "error" in st or (want is not None and st["model"] not in want):
            continue
        trace = import_kineto(d / st["trace"], name=st["model"]).trace
        busy = float(trace.repeats @ trace.times_s)
        gap_s = max(float(st["step_time_s"]) - busy, 0.0)
        chk = (checks or {}).get(st["model"]) or {}
        gw = float(chk["gap_power_w"]) if chk.get("gap_power_w") is not None else float(gap_power_for(spec) or 0.0)
        rows, _ = kernel_rows(trace, spec, lim, (gap_s, gw) if gap_s > 0 else None)
        pred = sum(r["energy_j"] for r in rows) + gap_s * gw
        by_entry: dict[str, dict] = {}
        for r in rows:
            hit = table.get((r["name"][:200], tuple(r["grid"] or ())))
            if hit is None or abs(r["time_one_s"] / hit[2] - 1) > MATCH_TIME_TOLERANCE:
                continue
            g = by_entry.setdefault(hit[0], {"time_s": 0.0, "predicted_j": 0.0, "measured_power_w": hit[1]})
            g["time_s"] += r["time_s"]
            g["predicted_j"] += r["energy_j"]
        dE = sum(g["time_s"] * g["measured_power_w"] - g["predicted_j"] for g in by_entry.values())
        meas = float(st["step_energy_j"])
        out[st["model"]] = {"predicted_energy_j": pred, "measured_energy_j": meas,
                            "error_pct": 100 * (pred / meas - 1), "substituted_energy_j": pred + dE,
                            "substituted_error_pct": 100 * ((pred + dE) / meas - 1),
                            "matched_time_s": sum(g["time_s"] for g in by_entry.values()),
                            "kernel_time_s": sum(r["time_s"] for r in rows),
                            "entries": {n: dict(g, predicted_power_w=g["predicted_j"] / g["time_s"])
                                        for n, g in sorted(by_entry.items()) if g["time_s"] > 0}}
    return out
