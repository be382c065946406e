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
    assert all(parse_model(m) == (m, None) for m in MODELS)
    for bad in ("gpt3", "llama-0.5b-b0", "llama-0.5b-bx", "llama-0.5b-b", "-b2"):
        with pytest.raises(InputError, match="is not one of"):
            parse_model(bad)


def test_measure_steps_refuses_an_unknown_model_before_touching_a_gpu(capsys, tmp_path):
    code, _, err = run_cli(["measure-steps", "-o", str(tmp_path / "s"), "--models", "llama-0.5b-b2,gpt3"], capsys)
    assert code == 2 and "--models" in err and "'gpt3'" in err and "-b<N>" in err
    assert not (tmp_path / "s").exists()
