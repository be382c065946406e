"""Random bad input to kdvfs.work.op_work (20,000 calls) and work_from_name (5,000): prints any exception or
negative/NaN work and the count. Run from anywhere: python validation/user-findings7b/fuzz_work.py"""
import math
import random
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from kdvfs.work import op_work, work_from_name
ops = ["aten::addmm","aten::mm","aten::bmm","aten::matmul","aten::linear","aten::native_layer_norm","aten::layer_norm",
 "aten::rms_norm","aten::_fused_rms_norm","aten::max","aten::amax","aten::sum","aten::mean","aten::softmax","aten::_softmax",
 "aten::_foreach_add_","aten::_foreach_sqrt","aten::_foreach_addcdiv_","aten::fill_","aten::zero_","aten::copy_","aten::mul",
 "aten::add","aten::where","aten::_scaled_dot_product_flash_attention","aten::_scaled_dot_product_efficient_attention",
 "aten::scaled_dot_product_attention","aten::convolution","aten::cudnn_convolution","aten::nll_loss_forward","aten::gather",
 "aten::native_layer_norm_backward","aten::_efficient_attention_backward","aten::embedding","aten::gelu","aten::silu","aten::to"]
vals = [[], [0], [-1], [1], [2,3], [0,4], [4,0], [1,2,3,4], [-3,5], [10**12, 10**12], [1,1,1,1,1], None, "x", [[]], [1.5, 2]]
types = [[], ["c10::BFloat16"], ["float","float"], None, ["Scalar"], ["", "c10::Half", "bool", "long int"], "str", [None]]
random.seed(1)
bad = 0
for i in range(20000):
    op = random.choice(ops)
    n = random.randint(0, 5)
    dims = [random.choice(vals) for _ in range(n)] if random.random() < 0.9 else random.choice([None, "x", 3, {}])
    ty = random.choice(types)
    conc = random.choice([None, [], ["True"], ["", "", "", "", "1"], "x", [None]])
    strides = random.choice([None, [], [[0, 1]], [[1]], "x", [None], [[-1, 0]]])
    try:
        w = op_work(op, dims, ty, backward=random.random() < 0.5, tf32=random.random() < 0.5,
                    autocast_dtype=random.choice([None, "bf16", "fp16", "weird"]), concrete=conc, strides=strides)
        if w is not None and not (math.isfinite(w.flops) and math.isfinite(w.bytes) and w.flops >= 0 and w.bytes >= 0):
            bad += 1
            if False: print("BAD WORK", op, dims, ty, w)
    except Exception as e:
        bad += 1
        print("EXC", op, dims, ty, conc, strides, type(e).__name__, e)
names = ["void at::native::elementwise_kernel<128, 2, foo>", "void at::native::vectorized_elementwise_kernel<0, x>",
 "void at::native::elementwise_kernel<0, 0, x>", "multi_tensor_apply_kernel<TensorListMetadata<0>, UnaryOpFunctor<float, 0, 0, 0>>",
 "multi_tensor_apply_kernel<TensorListMetadata<2>, BinaryOpScalarListFunctor<float, 9, 9, 9>>", "sm90_xmma_gemm_bf16bf16", "flash_fwd_kernel", "reduce_kernel<512, 1>", "", "<<<>>>",
 "void at::native::elementwise_kernel<99999999999999, 99999999999999, x>"]
for i in range(5000):
    nm = random.choice(names); cat = random.choice(["elementwise","gemm","attention","optimizer","reduction","memset","norm","other",""])
    grid = random.choice([None, [], [0,0,0], [1,1,1], [-1,1,1], [10**9, 10**9, 1], [2]]); block = random.choice([None, [], [0,1,1], [128,1,1], [-5, 1, 1]])
    t = random.choice([0.0, -1.0, 1e-5, float("nan"), float("inf"), 1.0])
    try:
        w = work_from_name(nm, cat, grid, block, t)
        if w is not None and not (math.isfinite(w.flops) and math.isfinite(w.bytes) and w.flops >= 0 and w.bytes >= 0):
            bad += 1
            print("BAD NAMEWORK", nm, cat, grid, block, t, w)
    except Exception as e:
        bad += 1
        print("EXC name", nm, cat, grid, block, t, type(e).__name__, e)
print("bad", bad)
