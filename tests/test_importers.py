import json

import pytest
from conftest import DATA, run_cli

from kdvfs.errors import FormatError
from kdvfs.importers import categorize, import_kineto


def test_foreign_trace_gets_passes_for_95_percent():
    """A PyTorch profiler trace of a transformer training step recorded without kdvfs (nn.TransformerEncoder,
    autograd backward, AdamW; recorded on the lent H200 by scripts/h200_observe.py --only-foreign)."""
    imp = import_kineto(DATA / "foreign-transformer.kineto.json.gz")
    assert not imp.labelled
    assert imp.assigned_time_share >= 0.95
    assert {"forward", "backward", "optimizer"} <= set(imp.pass_time_s)
    assert imp.pass_time_s["backward"] > imp.pass_time_s["forward"]


def test_recorder_labels_set_segments_and_stages():
    imp = import_kineto(DATA / "gpt3xl-torch-h200-bf16.kineto.json.gz",
                        repeats={"forward_layer": 24, "backward_layer": 24, "optimizer": 24})
    names = [s.name for s in imp.trace.segments]
    assert names == ["forward_layer", "loss", "backward_layer", "optimizer"]
    assert imp.labelled and imp.assigned_time_share == 1.0
    ops = {k.op for k in imp.trace.kernels}
    assert "stage:fwd.qkv" in ops and "stage:optimizer" in ops
    assert imp.trace.segments[0].repeat == 24


def test_no_gpu_kernels(tmp_path):
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]}))
    with pytest.raises(FormatError, match="holds no GPU kernels"):
        import_kineto(p)


def test_negative_duration(tmp_path):
    p = tmp_path / "neg.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": -3, "args": {}}]}))
    with pytest.raises(FormatError, match="durations must be positive"):
        import_kineto(p)


@pytest.mark.parametrize("name, cat", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32", "gemm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)::{lambda()#2}>", "elementwise"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "norm"),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits>", "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<AdamFunctor>", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "collective"),
    ("Memcpy DtoD (Device -> Device)", "copy"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::sum_functor<float>>>", "reduction"),
])
def test_categories(name, cat):
    assert categorize(name) == cat


def test_trace_import_cli(tmp_path, capsys):
    out = tmp_path / "f.trace.json"
    code, o, _ = run_cli(["trace", "import", str(DATA / "foreign-transformer.kineto.json.gz"), "-o", str(out), "--json"], capsys)
    assert code == 0
    d = json.loads(o)
    assert d["assigned_time_share"] >= 0.95 and out.exists()


def test_default_trace_name_keeps_dots_inside_the_name():
    from kdvfs.importers import trace_stem

    assert trace_stem("runs/llama-0.5b.kineto.json.gz") == "llama-0.5b"
    assert trace_stem("step.pt.trace.json") == "step"
    assert trace_stem("gpt2.json") == "gpt2"
    assert trace_stem("model-v1.2.json.gz") == "model-v1.2"
