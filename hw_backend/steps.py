"""Real training steps measured observe-only: the project's GPT-3-style block (bf16 and fp32) and Hugging Face models
built from config (random weights, no download), trained with AdamW under bf16 autocast.

For each model: one step recorded with ``torch.profiler`` (``record_shapes=True``, ``with_modules=True``; warm-up
steps excluded) and written as a gzipped Kineto trace; then the step run back to back over a window of at least
``window_s`` opened and closed at energy-counter steps, with the SM clock, memory clock and power sampled by a thread
every ~10 ms. Per step: time (window / steps, and the median of CUDA-event step times), energy (counter difference /
steps), power, SM clock median / p10 / p90. torch and transformers are imported inside the functions.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hw_backend.characterize import Sampler
from hw_backend.nvml import machine_identity, refuse_other_card
from kdvfs.errors import HardwareError, InputError
from kdvfs.fileio import write_atomic

__all__ = ["MODELS", "measure_steps", "parse_model"]

log = logging.getLogger(__name__)

MODELS = ("block-bf16", "block-fp32", "gpt2-medium", "llama-0.5b", "bert-large", "qwen2-0.5b", "opt-350m",
          "pythia-410m", "phi-1.5", "mistral-0.4b", "vit-base", "gemma-0.3b", "bloom-560m", "t5-base", "convnext-tiny",
          "falcon-0.3b", "deberta-base", "swin-tiny", "bart-base", "bigcode-0.3b", "resnet-50", "mobilenet-v2",
          "gpt-neo-125m", "whisper-base", "modernbert-base", "efficientnet-b0", "qwen3-0.6b", "wav2vec2-base",
          "regnet-y-1.6gf", "mobilevit-small", "mixtral-moe", "convbert-base", "segformer-b0", "poolformer-s12",
          "squeezebert", "funnel-base", "nystromformer-base", "levit-256", "xlnet-base", "albert-base", "cvt-13",
          "pvt-v2-b0", "roberta-base", "mpnet-base", "longformer-base", "fnet-base", "convnextv2-tiny")


def _hf(name: str, torch, small: bool, batch_override: int | None = None) -> tuple[Callable[[], None], dict]:
    import transformers as tf

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "gpt2-medium":
        cfg = tf.GPT2Config(n_layer=2 if small else 12, n_embd=128 if small else 1024, n_head=4 if small else 16,
                            n_positions=1024, vocab_size=50257)
        cls, batch, seq = tf.GPT2LMHeadModel, (2 if small else 16), (64 if small else 1024)
    elif name == "llama-0.5b":
        cfg = tf.LlamaConfig(hidden_size=128 if small else 2048, intermediate_size=256 if small else 5632,
                             num_hidden_layers=2 if small else 8, num_attention_heads=4 if small else 16,
                             num_key_value_heads=4 if small else 16, vocab_size=32000, max_position_embeddings=2048)
        cls, batch, seq = tf.LlamaForCausalLM, (2 if small else 8), (64 if small else 2048)
    elif name == "bert-large":
        cfg = tf.BertConfig(hidden_size=128 if small else 1024, num_hidden_layers=2 if small else 24,
                            num_attention_heads=4 if small else 16, intermediate_size=256 if small else 4096)
        cls, batch, seq = tf.BertForMaskedLM, (2 if small else 32), (64 if small else 512)
    elif name == "qwen2-0.5b":  # Qwen2-0.5B's shape (grouped-query attention, tied embeddings, 152k vocabulary)
        cfg = tf.Qwen2Config(hidden_size=64 if small else 896, intermediate_size=128 if small else 4864,
                             num_hidden_layers=2 if small else 24, num_attention_heads=4 if small else 14,
                             num_key_value_heads=2, vocab_size=151936, max_position_embeddings=2048,
                             tie_word_embeddings=True)
        cls, batch, seq = tf.Qwen2ForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "opt-350m":  # OPT-350m's shape (ReLU MLP, LayerNorm, learned positions, projected embeddings)
        cfg = tf.OPTConfig(hidden_size=128 if small else 1024, ffn_dim=256 if small else 4096,
                           num_hidden_layers=2 if small else 24, num_attention_heads=4 if small else 16,
                           word_embed_proj_dim=64 if small else 512, vocab_size=50272, max_position_embeddings=2048,
                           do_layer_norm_before=False)
        cls, batch, seq = tf.OPTForCausalLM, (2 if small else 16), (64 if small else 1024)
    elif name == "pythia-410m":  # Pythia-410m's shape (GPT-NeoX: parallel attention and MLP, partial rotary)
        cfg = tf.GPTNeoXConfig(hidden_size=128 if small else 1024, intermediate_size=512 if small else 4096,
                               num_hidden_layers=2 if small else 24, num_attention_heads=4 if small else 16,
                               vocab_size=50304, max_position_embeddings=2048, rotary_pct=0.25)
        cls, batch, seq = tf.GPTNeoXForCausalLM, (2 if small else 16), (64 if small else 1024)
    elif name == "phi-1.5":  # Phi-1.5's shape (partial rotary, GELU MLP, parallel blocks)
        cfg = tf.PhiConfig(hidden_size=128 if small else 2048, intermediate_size=512 if small else 8192,
                           num_hidden_layers=2 if small else 24, num_attention_heads=4 if small else 32,
                           vocab_size=51200, max_position_embeddings=2048, partial_rotary_factor=0.5)
        cls, batch, seq = tf.PhiForCausalLM, (2 if small else 4), (64 if small else 2048)
    elif name == "mistral-0.4b":  # a small Mistral (grouped-query attention, SiLU MLP, RMSNorm)
        cfg = tf.MistralConfig(hidden_size=128 if small else 1024, intermediate_size=256 if small else 3584,
                               num_hidden_layers=2 if small else 16, num_attention_heads=4 if small else 16,
                               num_key_value_heads=2 if small else 4, vocab_size=32000, max_position_embeddings=4096)
        cls, batch, seq = tf.MistralForCausalLM, (2 if small else 8), (64 if small else 2048)
    elif name == "gemma-0.3b":  # a small Gemma (GeGLU MLP, head dim 256, one KV head, 256k vocabulary)
        cfg = tf.GemmaConfig(hidden_size=128 if small else 1024, intermediate_size=256 if small else 4096,
                             num_hidden_layers=2 if small else 12, num_attention_heads=4 if small else 8,
                             num_key_value_heads=1, head_dim=32 if small else 256, vocab_size=256000,
                             max_position_embeddings=2048)
        cls, batch, seq = tf.GemmaForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "bloom-560m":  # BLOOM-560m's shape (ALiBi attention through baddbmm, 250k vocabulary)
        cfg = tf.BloomConfig(hidden_size=128 if small else 1024, n_layer=2 if small else 24,
                             n_head=4 if small else 16, vocab_size=250880)
        cls, batch, seq = tf.BloomForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "t5-base":  # T5-base's shape (encoder-decoder, relative position bias, ReLU MLP, RMS-style norm)
        cfg = tf.T5Config(d_model=128 if small else 768, d_ff=256 if small else 3072, d_kv=32 if small else 64,
                          num_layers=2 if small else 12, num_heads=4 if small else 12, vocab_size=32128,
                          decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        cls, batch, seq = tf.T5ForConditionalGeneration, (2 if small else 16), (64 if small else 512)
    elif name == "falcon-0.3b":  # a small Falcon (parallel attention and MLP, multi-query attention, GELU)
        cfg = tf.FalconConfig(hidden_size=128 if small else 1024, num_hidden_layers=2 if small else 16,
                              num_attention_heads=4 if small else 16, multi_query=True, parallel_attn=True,
                              new_decoder_architecture=False, vocab_size=65024)
        cls, batch, seq = tf.FalconForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "deberta-base":  # DeBERTa-v3-base's shape (disentangled relative attention, not fused; 128k vocabulary)
        cfg = tf.DebertaV2Config(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                                 num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                                 vocab_size=128100, relative_attention=True, position_buckets=256,
                                 pos_att_type=["p2c", "c2p"], max_relative_positions=-1)
        cls, batch, seq = tf.DebertaV2ForMaskedLM, (2 if small else 16), (64 if small else 512)
    elif name == "bart-base":  # BART-base's shape (encoder-decoder, learned positions, GELU, post-LayerNorm)
        cfg = tf.BartConfig(d_model=128 if small else 768, encoder_layers=2 if small else 6,
                            decoder_layers=2 if small else 6, encoder_attention_heads=4 if small else 12,
                            decoder_attention_heads=4 if small else 12, encoder_ffn_dim=256 if small else 3072,
                            decoder_ffn_dim=256 if small else 3072, vocab_size=50265, max_position_embeddings=1024)
        cls, batch, seq = tf.BartForConditionalGeneration, (2 if small else 16), (64 if small else 512)
    elif name == "bigcode-0.3b":  # a small StarCoder (GPTBigCode: multi-query attention, GELU MLP, 49k vocabulary)
        cfg = tf.GPTBigCodeConfig(n_embd=128 if small else 1024, n_layer=2 if small else 20,
                                  n_head=4 if small else 16, n_inner=512 if small else 4096, multi_query=True,
                                  vocab_size=49152, n_positions=2048, bos_token_id=0, eos_token_id=0)
        cls, batch, seq = tf.GPTBigCodeForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "gpt-neo-125m":  # GPT-Neo-125M's shape (global and local attention layers alternating, GELU MLP)
        cfg = tf.GPTNeoConfig(hidden_size=128 if small else 768, num_layers=2 if small else 12,
                              num_heads=4 if small else 12, attention_types=[[["global", "local"], 1 if small else 6]],
                              window_size=256, vocab_size=50257, max_position_embeddings=2048)
        cls, batch, seq = tf.GPTNeoForCausalLM, (2 if small else 16), (64 if small else 1024)
    elif name == "modernbert-base":  # ModernBERT-base's shape (GeGLU MLP, alternating local/global attention, rotary)
        cfg = tf.ModernBertConfig(hidden_size=128 if small else 768, intermediate_size=256 if small else 1152,
                                  num_hidden_layers=2 if small else 22, num_attention_heads=4 if small else 12,
                                  vocab_size=50368, max_position_embeddings=8192, local_attention=128)
        cls, batch, seq = tf.ModernBertForMaskedLM, (2 if small else 16), (64 if small else 1024)
    elif name == "qwen3-0.6b":  # Qwen3-0.6B's shape (grouped-query attention with per-head RMSNorm on q and k)
        cfg = tf.Qwen3Config(hidden_size=64 if small else 1024, intermediate_size=128 if small else 3072,
                             num_hidden_layers=2 if small else 28, num_attention_heads=4 if small else 16,
                             num_key_value_heads=2 if small else 8, head_dim=16 if small else 128, vocab_size=151936,
                             max_position_embeddings=2048, tie_word_embeddings=True)
        cls, batch, seq = tf.Qwen3ForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "mixtral-moe":  # a small Mixtral (sparse MoE MLP: 8 SiLU experts, top-2 routing; grouped-query attention)
        cfg = tf.MixtralConfig(hidden_size=64 if small else 1024, intermediate_size=128 if small else 1792,
                               num_hidden_layers=2 if small else 8, num_attention_heads=4 if small else 16,
                               num_key_value_heads=2 if small else 4, num_local_experts=4 if small else 8,
                               num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=4096)
        cls, batch, seq = tf.MixtralForCausalLM, (2 if small else 8), (64 if small else 1024)
    elif name == "convbert-base":  # ConvBERT-base's shape (span-based dynamic convolution heads beside self-attention)
        cfg = tf.ConvBertConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                                num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                                embedding_size=128 if small else 768, conv_kernel_size=9, head_ratio=2,
                                vocab_size=30522)
        cls, batch, seq = tf.ConvBertForMaskedLM, (2 if small else 16), (64 if small else 512)
    elif name == "squeezebert":  # SqueezeBERT's shape (grouped 1-D convolutions in place of the position-wise layers)
        cfg = tf.SqueezeBertConfig(hidden_size=128 if small else 768, embedding_size=128 if small else 768,
                                   num_hidden_layers=2 if small else 12, num_attention_heads=4 if small else 12,
                                   intermediate_size=256 if small else 3072, q_groups=4, k_groups=4, v_groups=4,
                                   post_attention_groups=1, intermediate_groups=4, output_groups=4, vocab_size=30528)
        cls, batch, seq = tf.SqueezeBertForMaskedLM, (2 if small else 32), (64 if small else 512)
    elif name == "funnel-base":  # Funnel-Transformer's shape (the sequence pooled between blocks, then upsampled back)
        cfg = tf.FunnelConfig(d_model=128 if small else 768, n_head=4 if small else 12, d_head=32 if small else 64,
                              d_inner=256 if small else 3072, block_sizes=[1, 1, 1] if small else [6, 6, 6],
                              num_decoder_layers=1 if small else 2, vocab_size=30522)
        cls, batch, seq = tf.FunnelForMaskedLM, (2 if small else 16), (64 if small else 512)
    elif name == "nystromformer-base":  # Nyströmformer's shape (attention through landmarks and an iterative pseudo-inverse)
        cfg = tf.NystromformerConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                                     num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                                     num_landmarks=64, segment_means_seq_len=64 if small else 1024,
                                     max_position_embeddings=(64 if small else 1024) + 2, vocab_size=30000)
        cls, batch, seq = tf.NystromformerForMaskedLM, (2 if small else 16), (64 if small else 1024)
    elif name == "xlnet-base":  # XLNet-base's shape (two-stream relative attention written as einsums, 12 layers)
        cfg = tf.XLNetConfig(d_model=128 if small else 768, n_layer=2 if small else 12, n_head=4 if small else 12,
                             d_inner=256 if small else 3072, vocab_size=32000)
        cls, batch, seq = tf.XLNetLMHeadModel, (2 if small else 8), (64 if small else 512)
    elif name == "albert-base":  # ALBERT-base's shape (one layer's weights shared by 12, factorised 128-d embeddings)
        cfg = tf.AlbertConfig(hidden_size=128 if small else 768, embedding_size=64 if small else 128,
                              num_hidden_layers=2 if small else 12, num_attention_heads=4 if small else 12,
                              intermediate_size=256 if small else 3072, vocab_size=30000)
        cls, batch, seq = tf.AlbertForMaskedLM, (2 if small else 32), (64 if small else 512)
    elif name == "roberta-base":  # RoBERTa-base's shape (BERT's encoder, 50k byte-level vocabulary, learned positions)
        cfg = tf.RobertaConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                               num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                               vocab_size=50265, max_position_embeddings=514, pad_token_id=1)
        cls, batch, seq = tf.RobertaForMaskedLM, (2 if small else 16), (64 if small else 512)
    elif name == "mpnet-base":  # MPNet-base's shape (BERT-like encoder with a relative position bias in every layer)
        cfg = tf.MPNetConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                             num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                             vocab_size=30527, max_position_embeddings=514, relative_attention_num_buckets=32)
        cls, batch, seq = tf.MPNetForMaskedLM, (2 if small else 16), (64 if small else 512)
    elif name == "longformer-base":  # Longformer-base's shape (sliding-window attention in chunks, 512-token window)
        cfg = tf.LongformerConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                                  num_attention_heads=4 if small else 12, intermediate_size=256 if small else 3072,
                                  attention_window=32 if small else 512, vocab_size=50265,
                                  max_position_embeddings=4098, pad_token_id=1)
        cls, batch, seq = tf.LongformerForMaskedLM, (2 if small else 4), (128 if small else 2048)
    elif name == "fnet-base":  # FNet-base's shape (token mixing by a 2-D Fourier transform in place of attention)
        cfg = tf.FNetConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                            intermediate_size=256 if small else 3072, vocab_size=32000, max_position_embeddings=512,
                            use_tpu_fourier_optimizations=False)
        cls, batch, seq = tf.FNetForMaskedLM, (2 if small else 32), (64 if small else 512)
    elif name == "wav2vec2-base":  # wav2vec 2.0 base's shape (seven 1-D convolutions over raw audio, 12 layers)
        return _wav2vec2(torch, dev, small, batch_override)
    elif name == "whisper-base":  # Whisper-base's shape (two 1-D convolutions over 80 mel bins, 6 + 6 layers, d 512)
        return _whisper(torch, dev, small, batch_override)
    elif name in ("vit-base", "convnext-tiny", "swin-tiny", "resnet-50", "mobilenet-v2", "efficientnet-b0",
                  "regnet-y-1.6gf", "mobilevit-small", "segformer-b0", "poolformer-s12", "levit-256", "cvt-13",
                  "pvt-v2-b0", "convnextv2-tiny"):
        return _vision(name, torch, dev, small, batch_override)
    else:
        raise InputError(f"model {name!r} is not one of {', '.join(MODELS)}")
    if name not in ("bloom-560m", "deberta-base", "gpt-neo-125m", "convbert-base", "squeezebert", "funnel-base",
                    "nystromformer-base", "xlnet-base", "mpnet-base", "longformer-base", "fnet-base"):
        # ALiBi, relative, local, conv heads, pooled blocks, landmarks, two-stream relative attention, MPNet's relative bias,
        # sliding-window attention, Fourier mixing: no SDPA path
        cfg._attn_implementation = "sdpa"
    batch = batch_override or batch
    model, g = _built(torch, cls, cfg, dev)
    if name == "fnet-base":  # cuFFT has no bf16 transform and autocast leaves the mixing's input in bf16 ("Unsupported
        # dtype BFloat16" on the H200, session 13): the Fourier mixing runs in fp32, as a user of FNet under autocast must
        for m in model.modules():
            if type(m).__name__ == "FNetBasicFourierTransform":
                m.register_forward_pre_hook(lambda _m, args: tuple(a.float() for a in args))
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev, generator=g)
    return _train_step(torch, model, dev, input_ids=x, labels=x), _info(name, cls, cfg, batch, seq, model, tf)


def _built(torch, cls, cfg, dev: str):
    """(model, input generator): a Hugging Face model built from ``cfg`` with seed 0 on ``dev``, in training mode, and
    a generator seeded 0 for its inputs."""
    torch.manual_seed(0)
    with torch.device(dev):
        model = cls(cfg)
    # parameters made by legacy constructors ignore the device context: XLNet's torch.FloatTensor attention weights
    # stayed on the CPU and its step failed on the H200 ("mat2 is on cpu", session 12); a no-op for the others
    model.to(dev)
    model.train()
    return model, torch.Generator(device=dev).manual_seed(0)


def _info(name: str, cls, cfg, batch: int, seq: int, model, tf) -> dict:
    """What steps.json records of a Hugging Face model's step: its class, scalar config, batch, sequence, size."""
    return {"model": name, "class": cls.__name__, "config": {k: v for k, v in cfg.to_dict().items()
                                                            if isinstance(v, (int, float, str, bool))},
            "batch": batch, "seq": seq, "parameters": sum(p.numel() for p in model.parameters()),
            "precision": "bf16 autocast, fp32 weights, AdamW (foreach)", "transformers": tf.__version__}


def _train_step(torch, model, dev: str, **inputs) -> Callable[[], None]:
    """One training step of a Hugging Face model on fixed inputs: forward under bf16 autocast, backward, AdamW."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = torch.autocast(dev, dtype=torch.bfloat16)

    def step() -> None:
        with autocast:
            loss = model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step.module = model  # type: ignore[attr-defined]  # _record marks its modules (hw_backend.module_ranges)
    return step


def _vision(name: str, torch, dev: str, small: bool,
            batch_override: int | None = None) -> tuple[Callable[[], None], dict]:
    """ViT-B/16 (a convolution patch embedding, then a transformer), Swin-T, ResNet-50, MobileNetV2, EfficientNet-B0,
    RegNetY, MobileViT-S, PoolFormer-S12, LeViT-256 or ConvNeXt-T (depthwise 7×7 convolutions, channels-last LayerNorm,
    GELU MLPs) classifying images into 1 000 labels, or SegFormer-B0 labelling every pixel of 512×512 images."""
    import transformers as tf

    if name == "vit-base":
        cfg = tf.ViTConfig(hidden_size=64 if small else 768, intermediate_size=128 if small else 3072,
                           num_hidden_layers=2 if small else 12, num_attention_heads=4 if small else 12,
                           image_size=32 if small else 224, patch_size=16, num_labels=1000)
        cfg._attn_implementation = "sdpa"
        size = cfg.image_size
        cls, batch, seq = tf.ViTForImageClassification, 128, (size // 16) ** 2 + 1
    elif name == "resnet-50":  # ResNet-50 (bottleneck 1×1/3×3 convolutions, batch norm, ReLU)
        cfg = tf.ResNetConfig(depths=[1, 1, 1, 1] if small else [3, 4, 6, 3],
                              hidden_sizes=[32, 64, 128, 256] if small else [256, 512, 1024, 2048],
                              embedding_size=16 if small else 64, layer_type="bottleneck", num_labels=1000)
        size = 32 if small else 224
        cls, batch, seq = tf.ResNetForImageClassification, 128, (size // 32) ** 2
    elif name == "mobilenet-v2":  # MobileNetV2 (inverted residuals: depthwise 3×3 convolutions, batch norm, ReLU6)
        cfg = tf.MobileNetV2Config(depth_multiplier=0.25 if small else 1.0, image_size=32 if small else 224,
                                   num_labels=1000)
        size = cfg.image_size
        cls, batch, seq = tf.MobileNetV2ForImageClassification, 128, (size // 32) ** 2
    elif name == "swin-tiny":  # Swin-T (shifted-window attention over 7 × 7 patches, patch merging)
        cfg = tf.SwinConfig(image_size=32 if small else 224, embed_dim=24 if small else 96,
                            depths=[1, 1] if small else [2, 2, 6, 2], num_heads=[2, 4] if small else [3, 6, 12, 24],
                            window_size=2 if small else 7, num_labels=1000)
        size = cfg.image_size
        cls, batch, seq = tf.SwinForImageClassification, 64, (size // 32) ** 2
    elif name == "efficientnet-b0":  # EfficientNet-B0 (MBConv: depthwise convolutions, squeeze-excitation, SiLU)
        cfg = tf.EfficientNetConfig(width_coefficient=1.0, depth_coefficient=0.25 if small else 1.0, hidden_dim=1280,
                                    image_size=32 if small else 224, num_labels=1000)
        size = cfg.image_size
        cls, batch, seq = tf.EfficientNetForImageClassification, 128, (size // 32) ** 2
    elif name == "regnet-y-1.6gf":  # RegNetY-1.6GF (grouped 3×3 convolutions, squeeze-excitation, batch norm, ReLU)
        cfg = tf.RegNetConfig(layer_type="y", embedding_size=32, hidden_sizes=[8, 16, 32, 64] if small else
                              [48, 120, 336, 888], depths=[1, 1, 1, 1] if small else [2, 6, 17, 2],
                              groups_width=8 if small else 24, num_labels=1000)
        size = 32 if small else 224
        cls, batch, seq = tf.RegNetForImageClassification, 128, (size // 32) ** 2
    elif name == "mobilevit-small":  # MobileViT-S (MobileNetV2 blocks, then transformers over unfolded 2×2 patches)
        cfg = tf.MobileViTConfig(image_size=64 if small else 256, num_labels=1000)
        size = cfg.image_size
        cls, batch, seq = tf.MobileViTForImageClassification, 128, (size // 32) ** 2
    elif name == "segformer-b0":  # SegFormer-B0 (512² segmentation into 150 classes; efficient attention, MixFFN)
        cfg = tf.SegformerConfig(num_labels=150, depths=[1, 1, 1, 1] if small else [2, 2, 2, 2],
                                 decoder_hidden_size=64 if small else 256)
        size, batch = (64 if small else 512), 16
        cls, seq = tf.SegformerForSemanticSegmentation, (size // 32) ** 2
    elif name == "levit-256":  # LeViT-256 (a convolution stem, attention with batch norm and hardswish, shrinking stages)
        cfg = tf.LevitConfig(image_size=64 if small else 224, hidden_sizes=[32, 48, 64] if small else [256, 384, 512],
                             num_attention_heads=[2, 3, 4] if small else [4, 6, 8], depths=[1, 1, 1] if small else
                             [4, 4, 4], key_dim=[16, 16, 16] if small else [32, 32, 32], num_labels=1000)
        size, batch = cfg.image_size, 256
        cls, seq = tf.LevitForImageClassification, (size // 16) ** 2
    elif name == "poolformer-s12":  # PoolFormer-S12 (average pooling as the token mixer, group norm, 1×1 MLPs)
        cfg = tf.PoolFormerConfig(depths=[1, 1, 1, 1] if small else [2, 2, 6, 2],
                                  hidden_sizes=[16, 32, 64, 128] if small else [64, 128, 320, 512], num_labels=1000)
        size, batch = (32 if small else 224), 128
        cls, seq = tf.PoolFormerForImageClassification, (size // 32) ** 2
    elif name == "cvt-13":  # CvT-13 (convolutional token embeddings; depthwise-convolution projections of q, k, v)
        cfg = tf.CvtConfig(embed_dim=[16, 32, 64] if small else [64, 192, 384], depth=[1, 2, 3] if small else
                           [1, 2, 10], num_heads=[1, 2, 4] if small else [1, 3, 6], num_labels=1000)
        size, batch = (64 if small else 224), 64
        cls, seq = tf.CvtForImageClassification, (size // 16) ** 2
    elif name == "pvt-v2-b0":  # PVTv2-B0 (overlapping patch embeddings, spatial-reduction attention, depthwise MLP)
        cfg = tf.PvtV2Config(depths=[1, 1, 1, 1] if small else [2, 2, 2, 2], num_labels=1000)
        size, batch = (64 if small else 224), 128
        cls, seq = tf.PvtV2ForImageClassification, (size // 32) ** 2
    elif name == "convnextv2-tiny":  # ConvNeXt V2-T (ConvNeXt's blocks with global response normalisation)
        cfg = tf.ConvNextV2Config(depths=[1, 1, 1, 1] if small else [3, 3, 9, 3],
                                  hidden_sizes=[8, 16, 32, 64] if small else [96, 192, 384, 768], num_labels=1000)
        size = 32 if small else 224
        cls, batch, seq = tf.ConvNextV2ForImageClassification, 128, (size // 32) ** 2
    else:
        cfg = tf.ConvNextConfig(depths=[1, 1, 1, 1] if small else [3, 3, 9, 3],
                                hidden_sizes=[8, 16, 32, 64] if small else [96, 192, 384, 768], num_labels=1000)
        size = 32 if small else 224
        cls, batch, seq = tf.ConvNextForImageClassification, 64, (size // 32) ** 2  # the last stage's positions
    model, g = _built(torch, cls, cfg, dev)
    batch = batch_override or (2 if small else batch)
    x = torch.randn((batch, 3, size, size), device=dev, generator=g)
    shape = (batch, size, size) if name == "segformer-b0" else (batch,)  # a label per pixel, else per image
    y = torch.randint(0, cfg.num_labels, shape, device=dev, generator=g)
    return _train_step(torch, model, dev, pixel_values=x, labels=y), _info(name, cls, cfg, batch, seq, model, tf)


def _whisper(torch, dev: str, small: bool, batch_override: int | None = None) -> tuple[Callable[[], None], dict]:
    """Whisper-base's shape (speech to text): 30 s of 80 mel bins (3 000 frames) through two 1-D convolutions into a
    6-layer encoder, and a 6-layer decoder over 448 label tokens; random features and labels."""
    import transformers as tf

    cfg = tf.WhisperConfig(d_model=64 if small else 512, encoder_layers=2 if small else 6,
                           decoder_layers=2 if small else 6, encoder_attention_heads=4 if small else 8,
                           decoder_attention_heads=4 if small else 8, encoder_ffn_dim=128 if small else 2048,
                           decoder_ffn_dim=128 if small else 2048, num_mel_bins=80, vocab_size=51865,
                           max_source_positions=1500, max_target_positions=448)
    cfg._attn_implementation = "sdpa"
    cls = tf.WhisperForConditionalGeneration
    model, g = _built(torch, cls, cfg, dev)
    batch, seq = batch_override or (2 if small else 16), (64 if small else 448)
    feats = torch.randn((batch, 80, 3000), device=dev, generator=g)
    labels = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev, generator=g)
    return (_train_step(torch, model, dev, input_features=feats, labels=labels),
            _info("whisper-base", cls, cfg, batch, seq, model, tf))


def _wav2vec2(torch, dev: str, small: bool, batch_override: int | None = None) -> tuple[Callable[[], None], dict]:
    """wav2vec 2.0 base's shape (speech recognition fine-tuning): 10 s of 16 kHz audio through seven 1-D convolutions
    with group norm into 499 frames, a convolutional position embedding, 12 transformer layers (d 768), and a CTC loss
    over 100 random labels of a 32-letter vocabulary. Time masking and layer drop are off, so every step is the same."""
    import transformers as tf

    cfg = tf.Wav2Vec2Config(hidden_size=64 if small else 768, num_hidden_layers=2 if small else 12,
                            num_attention_heads=4 if small else 12, intermediate_size=128 if small else 3072,
                            vocab_size=32, mask_time_prob=0.0, layerdrop=0.0, ctc_loss_reduction="mean")
    cfg._attn_implementation = "sdpa"
    cls = tf.Wav2Vec2ForCTC
    model, g = _built(torch, cls, cfg, dev)
    batch, samples, seq = batch_override or (2 if small else 16), (16_000 if small else 160_000), (20 if small else 100)
    audio = torch.randn((batch, samples), device=dev, generator=g)
    labels = torch.randint(1, cfg.vocab_size, (batch, seq), device=dev, generator=g)
    return (_train_step(torch, model, dev, input_values=audio, labels=labels),
            _info("wav2vec2-base", cls, cfg, batch, seq, model, tf))


def _block(name: str, torch, small: bool, batch_override: int | None = None) -> tuple[Callable[[], None], dict]:
    from hw_backend.workloads import BlockConfig, BlockWorkload

    prec = name.split("-")[1]
    kw: dict = {"hidden": 128, "heads": 4, "batch": 2, "seq": 64} if small else {}
    if batch_override:
        kw["batch"] = batch_override
    cfg = BlockConfig(precision=prec, **kw)
    wl = BlockWorkload(cfg, device="cuda" if torch.cuda.is_available() else "cpu")
    info = {"model": name, "class": "hw_backend.workloads.BlockWorkload", "config": {
        "hidden": cfg.hidden, "heads": cfg.heads}, "batch": cfg.batch, "seq": cfg.seq, "precision": prec,
        "parameters": sum(p.numel() for p in wl.p.values()), "note": "one GPT-3 XL layer; kdvfs record's workload"}
    return (lambda: wl.step(label=True)), info


_BATCH = re.compile(r"^(?P<base>.+)-b(?P<batch>\d+)$")


def parse_model(spec: str) -> tuple[str, int | None]:
    """``llama-0.5b`` → (``llama-0.5b``, None); ``llama-0.5b-b2`` → (``llama-0.5b``, 2): a model of ``MODELS`` at
    another batch size (per GPU). ``InputError`` for anything else."""
    if spec in MODELS:
        return spec, None
    m = _BATCH.match(spec)
    if m and m["base"] in MODELS:
        if int(m["batch"]) < 1:
            raise InputError(f"model {spec!r} is not one of the runnable names: the batch size after '-b' must be a "
                             f"whole number of at least 1, got {m['batch']}; e.g. {m['base']}-b2")
        return m["base"], int(m["batch"])
    raise InputError(f"model {spec!r} is not one of {', '.join(MODELS)}, nor one of them with a batch size as "
                     "'-b<N>' (e.g. llama-0.5b-b2)")


def build(name: str, small: bool = False):
    """(step function, info) of one model (``parse_model``: a name, optionally ``-b<N>`` for another batch size);
    ``small`` shrinks it for CPU dry runs."""
    import torch

    base, batch = parse_model(name)
    step, info = _block(base, torch, small, batch) if base.startswith("block-") else _hf(base, torch, small, batch)
    if batch:
        info = dict(info, model=name, base_model=base)
    return step, info


def _record(step, out: Path, torch, warmup: int = 3) -> dict:
    acts = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sched = torch.profiler.schedule(wait=0, warmup=warmup, active=1, repeat=1)
    from hw_backend.module_ranges import module_ranges

    # the model's modules as kdvfs.module: ranges, so analyze can switch at its layers (only while recording)
    with (module_ranges(getattr(step, "module", None), torch.profiler.record_function),
          torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True, with_modules=True) as prof):
        for _ in range(warmup + 1):
            step()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            prof.step()
    import tempfile

    tmp = Path(tempfile.mkdtemp()) / "trace.json"  # not beside the output: a killed run leaves no stray file there
    prof.export_chrome_trace(str(tmp))
    raw = tmp.read_bytes()
    out.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    tmp.unlink()
    tmp.parent.rmdir()
    return {"trace": out.name, "trace_bytes_gz": out.stat().st_size, "trace_bytes_raw": len(raw)}


def _window(step, be, torch, window_s: float, warmup_s: float, max_s: float = 120.0) -> dict:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup_s:
        step()
        sync()
    e0 = be.energy_mj()
    while (e_open := be.energy_mj()) == e0:
        step()
        sync()
        if time.perf_counter() - t0 > max_s:
            raise HardwareError(f"the energy counter of {be.name} did not advance in {max_s:.0f} s: no usable "
                                "energy counter, so a step's energy cannot be measured")
    t_open = time.perf_counter()
    steps, last, per = 0, e_open, []
    with Sampler(be, time.perf_counter, threaded=True) as smp:
        while True:
            if torch.cuda.is_available():
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                step()
                b.record()
                b.synchronize()
                per.append(a.elapsed_time(b) / 1000.0)
            else:
                s = time.perf_counter()
                step()
                per.append(time.perf_counter() - s)
            steps += 1
            e = be.energy_mj()
            if e != last:
                last = e
                t_close = time.perf_counter()
                if t_close - t_open >= window_s:
                    break
            if time.perf_counter() - t_open > max_s:
                t_close = time.perf_counter()
                break
    span = t_close - t_open
    energy = (last - e_open) / 1000.0
    rows = smp.rows
    cl = np.array([r[1] for r in rows], dtype=float)
    pw = np.array([r[3] for r in rows], dtype=float)
    inst = [r[4] for r in rows if r[4] is not None]
    temp = be.temperature_c() if hasattr(be, "temperature_c") else None
    return {"steps": steps, "window_s": span, "energy_window_j": energy, "step_time_s": span / steps,
            "step_time_gpu_median_s": float(statistics.median(per)), "step_energy_j": energy / steps,
            "power_w": energy / span, "sm_mhz_median": float(np.median(cl)), "sm_mhz_p10": float(np.percentile(cl, 10)),
            "sm_mhz_p90": float(np.percentile(cl, 90)), "mem_mhz": int(np.median([r[2] for r in rows])),
            "power_nvml_w_median": float(np.median(pw)),
            "power_instant_w_median": float(np.median(inst)) if inst else None,
            "power_instant_w_p10": float(np.percentile(inst, 10)) if inst else None,
            "power_instant_w_p90": float(np.percentile(inst, 90)) if inst else None,
            "clock_samples": len(rows), "temperature_c": temp}


def measure_steps(be, out_dir: str | Path, *, models=MODELS, window_s: float = 10.0, warmup_s: float = 2.0,
                  small: bool = False, command: str = "", progress: Callable[[str], None] | None = None) -> dict:
    """Record and measure each model's training step; ``steps.json`` in ``out_dir`` is rewritten after each model
    (models already measured in it are skipped: resumable; a model whose row is an error is tried again, and its
    row replaced)."""
    import torch

    if not getattr(be, "observe_only", False):
        raise InputError("measure_steps only observes: give it an observe-only backend")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "steps.json"
    say = progress or (lambda s: None)
    doc = json.loads(path.read_text()) if path.exists() else {
        "format": "kdvfs-steps/1", "gpu": be.name, "power_limit_w": be.capabilities().power_limit_w,
        "torch": torch.__version__, "command": command, "window_s": window_s, "warmup_s": warmup_s,
        **machine_identity(be), "steps": []}
    refuse_other_card(path, doc, be, "steps")  # resumed on another card, its steps were filed under the first's UUID
    have = {s["model"] for s in doc["steps"] if "error" not in s}
    for name in models:
        if name in have:
            continue
        t0 = time.perf_counter()
        try:
            step, info = build(name, small)
            rec = _record(step, out_dir / f"{name}.kineto.json.gz", torch)
            meas = _window(step, be, torch, window_s, warmup_s)
            row = {**info, **rec, **meas}
        except Exception as e:  # noqa: BLE001 — one model failing must not lose the others
            log.exception("step %s failed", name)
            row = {"model": name, "error": f"{type(e).__name__}: {e}"}
        doc["steps"] = [s for s in doc["steps"] if s["model"] != name] + [row]  # a failed try is replaced
        write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode(), "steps file")
        if "error" in row:
            say(f"{name}: FAILED {row['error']}")
        else:
            say(f"{name}: {row['step_time_s'] * 1e3:.2f} ms/step {row['step_energy_j']:.3f} J/step "
                f"{row['power_w']:.1f} W SM {row['sm_mhz_median']:.0f} ({row['sm_mhz_p10']:.0f}-{row['sm_mhz_p90']:.0f}) "
                f"MHz trace {row['trace_bytes_gz'] / 1e6:.2f} MB [{time.perf_counter() - t0:.1f} s]")
        step = None  # free the model before the next one
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return doc
