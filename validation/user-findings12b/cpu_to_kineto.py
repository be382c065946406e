"""Turn a CPU-only PyTorch profiler trace (``record_shapes=True``) into a synthetic Kineto trace with one CUDA kernel
per op that would launch one on a GPU, so the importer's CLI path can be walked without a GPU (tester12b, session 12).

Each leaf CPU op (no op nested inside it on its thread) that is not a view or an allocation gets a
``cudaLaunchKernel`` runtime event and a kernel event carrying the op's ``External id`` (CPU-only oneDNN ops such as
``mkldnn_convolution`` hand theirs to the parent ``aten::_convolution``, as a CUDA build launches cuDNN under it). The
kernel's name is ATen's CUDA kernel for that op where this script knows it, else a generic elementwise one; its
duration is a roofline of a nominal card (``--tflops``, ``--tbps``; at least 3 µs) over the work ``kdvfs.work.op_work``
gives the op, so the kernels' times are made up and only their work is the trace's. Deterministic: same input, same
output.

    python validation/user-findings12b/cpu_to_kineto.py CPU.json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kdvfs.work import op_work  # noqa: E402

NO_KERNEL = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::as_strided_",
             "aten::view", "aten::transpose", "aten::t", "aten::detach", "detach", "aten::reshape", "aten::select",
             "aten::slice", "aten::narrow", "aten::_reshape_alias", "aten::_unsafe_view", "aten::resize_",
             "aten::item", "aten::_local_scalar_dense", "aten::expand", "aten::resolve_conj", "aten::permute",
             "aten::unsqueeze", "aten::squeeze", "aten::alias", "aten::lift_fresh", "aten::result_type")
NAMES = {  # ATen's CUDA kernels (PyTorch 2.x) for the ops the tiny net runs
    "aten::upsample_bilinear2d": "void at::native::(anonymous namespace)::upsample_bilinear2d_out_frame<float, float>"
                                 "(int, float, float, bool, at::GenericPackedTensorAccessor<float, 4ul>, "
                                 "at::GenericPackedTensorAccessor<float, 4ul>)",
    "aten::upsample_bilinear2d_backward": "void at::native::(anonymous namespace)::upsample_bilinear2d_backward_out_"
                                          "frame<float, float>(unsigned long, int, int, int, int, int, int, float, "
                                          "float, bool, float*, float const*)",
    "aten::avg_pool2d": "void at::native::(anonymous namespace)::avg_pool2d_out_cuda_frame<float, float, false, true>"
                        "(int, float const*, long, long, long, long, long, long, int, int, int, int, int, int, "
                        "float*, int, bool)",
    "aten::avg_pool2d_backward": "void at::native::(anonymous namespace)::avg_pool2d_backward_out_cuda_frame<float, "
                                 "float, int, false, true>(int, float const*, long, long, long, long, long, long, "
                                 "int, int, int, int, int, int, float*, int, bool)",
    "aten::max_pool2d_with_indices": "void at::native::(anonymous namespace)::max_pool_forward_nchw<float>(int, float "
                                     "const*, long, long, long, long, long, int, int, int, int, int, int, int, int, "
                                     "float*, long*)",
    "aten::max_pool2d_with_indices_backward": "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, "
                                              "float>(float const*, long const*, int, long, long, long, long, long, "
                                              "int, int, int, int, int, int, int, int, float*)",
    "aten::im2col": "void at::native::im2col_kernel<float>(long, float const*, long, long, long, long, long, long, "
                    "long, long, long, long, long, long, float*)",
    "aten::col2im": "void at::native::col2im_kernel<float, float>(long, float const*, long, long, long, long, long, "
                    "long, long, long, long, long, long, long, float*)",
    "aten::_convolution": "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32_"
                          "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn",
    "aten::convolution_backward": "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32"
                                  "_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn",
    "aten::mm": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
                "_kernel__5x_cublas",
    "aten::native_layer_norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
                               "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    "aten::_log_softmax": "void at::native::(anonymous namespace)::cunn_SpatialSoftMaxForward<float, float, float, "
                          "LogSoftMaxForwardEpilogue>(float*, float const*, unsigned int, unsigned int, unsigned int)",
    "aten::mean": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
                  "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
                  "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
    "aten::sum": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float,"
                 " at::native::sum_functor<float, float, float>::operator()>, unsigned int, float, 4> >(...)",
    "aten::copy_": "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
                   "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}> >(int, ...)",
    "aten::fill_": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                   "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
}
# ops that launch their own kernel beside those of the ops they call (a backward's fill_ of its gradient first)
OWN_KERNEL = {op for op in NAMES if op not in ("aten::_convolution", "aten::convolution_backward", "aten::mm",
                                                 "aten::copy_", "aten::fill_", "aten::sum", "aten::mean")}
GENERIC = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, "
           "3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cpu_trace")
    ap.add_argument("out")
    ap.add_argument("--tflops", type=float, default=2.0)
    ap.add_argument("--tbps", type=float, default=0.2)
    a = ap.parse_args()
    doc = json.loads(Path(a.cpu_trace).read_text())
    ops = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    parent: dict[int, dict] = {}
    stack: list[dict] = []
    for e in ops:  # nesting on each thread: an op lies inside the last open op that ends after it
        while stack and (stack[-1]["tid"] != e["tid"] or stack[-1]["ts"] + stack[-1]["dur"] < e["ts"] + e["dur"]):
            stack.pop()
        if stack:
            parent[id(e)] = stack[-1]
        stack.append(e)

    def launches(e: dict) -> bool:
        return e["name"].startswith("aten::") and e["name"] not in NO_KERNEL

    # an op launches the kernel where no op below it would (its children are views and allocations)
    busy = {id(parent[id(e)]) for e in ops if id(e) in parent and launches(e)}
    # an overload that calls its base op (upsample_bilinear2d.vec → upsample_bilinear2d) launches nothing itself
    wraps = {id(parent[id(e)]) for e in ops if id(e) in parent and parent[id(e)]["name"] == e["name"]}
    for e in ops:  # CPU autograd runs the backward on the calling thread; a CUDA build, on its own device thread
        q = e
        while id(q) in parent and not q["name"].startswith("autograd::engine::evaluate_function"):
            q = parent[id(q)]
        if q["name"].startswith("autograd::engine::evaluate_function"):
            e["tid"] = e["tid"] + 1
    gpu_ts, corr, out = 0.0, 0, list(doc["traceEvents"])
    for e in sorted(ops, key=lambda e: e["ts"]):
        if not launches(e) or id(e) in busy and (e["name"] not in OWN_KERNEL or id(e) in wraps):
            continue
        owner = e
        while owner["name"].startswith("aten::mkldnn") and id(owner) in parent:
            owner = parent[id(owner)]  # oneDNN's CPU op: on a GPU its parent launches cuDNN
        args = owner.get("args", {})
        w = op_work(owner["name"], args.get("Input Dims"), args.get("Input type"),
                    concrete=args.get("Concrete Inputs"), strides=args.get("Input Strides"))
        if w is None:
            print(f"no work from shapes: {owner['name']} {args.get('Input Dims')} {args.get('Concrete Inputs')}")
        dur_us = 3.0 if w is None else max(3.0, w.flops / (a.tflops * 1e6), w.bytes / (a.tbps * 1e6))
        corr += 1
        grid = 1 if w is None else max(1, min(132 * 16, int(w.bytes // (4 * 256 * 4))))  # 4 elements a thread
        ext = args.get("External id")
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": e["pid"], "tid": e["tid"],
                    "ts": e["ts"], "dur": 2.0, "args": {"correlation": corr, "External id": ext}})
        gpu_ts = max(gpu_ts, e["ts"] + 5.0)
        out.append({"ph": "X", "cat": "kernel", "name": NAMES.get(owner["name"], GENERIC), "pid": 0, "tid": 7,
                    "ts": gpu_ts, "dur": round(dur_us, 3),
                    "args": {"correlation": corr, "External id": ext, "device": 0, "stream": 7,
                             "grid": [grid, 1, 1], "block": [256, 1, 1]}})
        gpu_ts += dur_us + 1.0
    doc["traceEvents"] = out
    Path(a.out).write_text(json.dumps(doc))
    print(f"{corr} kernels written to {a.out}")


if __name__ == "__main__":
    main()
