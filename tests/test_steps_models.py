"""The models `kdvfs measure-steps` knows, and their batch-size variants (no GPU, no torch: names only)."""

import pytest
from conftest import run_cli

from hw_backend.steps import MODELS, parse_model
from kdvfs.errors import InputError


def test_parse_model_names_and_batch_variants():
    assert parse_model("llama-0.5b") == ("llama-0.5b", None)
    assert parse_model("llama-0.5b-b2") == ("llama-0.5b", 2)
    assert parse_model("mistral-0.4b-b16") == ("mistral-0.4b", 16)  # "0.4b" is part of the name, "-b16" the batch
    assert parse_model("block-bf16-b4") == ("block-bf16", 4)
    assert parse_model("gemma-0.3b-b2") == ("gemma-0.3b", 2)  # session 7's architectures (validation/h200/steps7)
    assert parse_model("convnext-tiny-b256") == ("convnext-tiny", 256)
    assert {"gemma-0.3b", "bloom-560m", "t5-base", "convnext-tiny", "falcon-0.3b", "deberta-base", "swin-tiny"} <= set(MODELS)
    assert {"mixtral-moe", "convbert-base", "segformer-b0", "poolformer-s12"} <= set(MODELS)  # session 11's blind set
    assert parse_model("segformer-b0-b4") == ("segformer-b0", 4)  # "b0" belongs to the name, "-b4" is the batch
    assert {"squeezebert", "funnel-base", "nystromformer-base", "levit-256"} <= set(MODELS)  # session 11's sealed set
    assert {"xlnet-base", "albert-base", "cvt-13", "pvt-v2-b0"} <= set(MODELS)  # session 12's sealed set
    assert parse_model("pvt-v2-b0") == ("pvt-v2-b0", None) and parse_model("pvt-v2-b0-b32") == ("pvt-v2-b0", 32)
    assert all(parse_model(m) == (m, None) for m in MODELS)
    for bad in ("gpt3", "llama-0.5b-b0", "llama-0.5b-bx", "llama-0.5b-b", "-b2"):
        with pytest.raises(InputError, match="is not one of"):
            parse_model(bad)


def test_measure_steps_refuses_an_unknown_model_before_touching_a_gpu(capsys, tmp_path):
    code, _, err = run_cli(["measure-steps", "-o", str(tmp_path / "s"), "--models", "llama-0.5b-b2,gpt3"], capsys)
    assert code == 2 and "--models" in err and "'gpt3'" in err and "-b<N>" in err
    assert not (tmp_path / "s").exists()


def test_measure_steps_tries_a_failed_model_again(tmp_path, monkeypatch):
    """A model whose row in steps.json is an error (a crash, out of memory) is measured again on the next run and its
    row replaced; a measured model is skipped (tester7b: a failed model used to count as done)."""
    import json
    import sys
    import types

    import hw_backend.steps as st

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="fake", cuda=types.SimpleNamespace(
        is_available=lambda: False, empty_cache=lambda: None)))
    calls = []

    def build(name, small=False):
        calls.append(name)
        return (lambda: None), {"model": name}

    monkeypatch.setattr(st, "build", build)
    monkeypatch.setattr(st, "_record", lambda step, out, torch: {"trace": out.name})
    monkeypatch.setattr(st, "_window", lambda *a, **k: {"step_time_s": 0.1, "step_energy_j": 1.0, "power_w": 10.0,
                                                        "sm_mhz_median": 1980.0, "sm_mhz_p10": 1980.0,
                                                        "sm_mhz_p90": 1980.0, "trace_bytes_gz": 1})
    be = types.SimpleNamespace(observe_only=True, name="fake", capabilities=lambda: types.SimpleNamespace(
        power_limit_w=700.0))
    (tmp_path / "steps.json").write_text(json.dumps({"format": "kdvfs-steps/1", "gpu": "fake", "steps": [
        {"model": "llama-0.5b", "error": "OutOfMemoryError: ..."}, {"model": "gpt2-medium", "step_time_s": 0.2}]}))
    doc = st.measure_steps(be, tmp_path, models=("llama-0.5b", "gpt2-medium"))
    assert calls == ["llama-0.5b"]  # the measured one is skipped, the failed one tried again
    rows = {r["model"]: r for r in doc["steps"]}
    assert len(doc["steps"]) == 2 and "error" not in rows["llama-0.5b"] and rows["gpt2-medium"]["step_time_s"] == 0.2
    assert json.loads((tmp_path / "steps.json").read_text()) == doc
