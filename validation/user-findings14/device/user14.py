"""A new user's own training steps (session 14): two Hugging Face models the project has no recipe for, built from
config, AdamW under bf16 autocast; one profiler step as the README's step 1 says, then the energy of steps measured
with the card's counter (hw_backend.measure, observe-only NVML). Usage: python user14.py OUTDIR [--small]"""
import gzip, json, os, shutil, sys, time
import torch
import transformers as tf
from torch.profiler import ProfilerActivity, profile, schedule

out, small = sys.argv[1], "--small" in sys.argv
dev = "cuda" if torch.cuda.is_available() else "cpu"
os.makedirs(out, exist_ok=True)


def electra():
    cfg = tf.ElectraConfig(hidden_size=64 if small else 768, num_hidden_layers=2 if small else 12,
                           num_attention_heads=4 if small else 12, intermediate_size=128 if small else 3072,
                           embedding_size=64 if small else 768)
    m = tf.ElectraForPreTraining(cfg)
    b, s = (2, 64) if small else (32, 512)
    ids = torch.randint(0, cfg.vocab_size, (b, s), device=dev)
    return m, dict(input_ids=ids, labels=torch.randint(0, 2, (b, s), device=dev))


def beit():
    cfg = tf.BeitConfig(hidden_size=64 if small else 768, num_hidden_layers=2 if small else 12,
                        num_attention_heads=4 if small else 12, intermediate_size=128 if small else 3072,
                        image_size=224, use_relative_position_bias=True)
    m = tf.BeitForImageClassification(cfg)
    b = 2 if small else 64
    return m, dict(pixel_values=torch.randn(b, 3, 224, 224, device=dev), labels=torch.randint(0, 2, (b,), device=dev))


results = {}
for name, make in (("electra-base", electra), ("beit-base", beit)):
    try:
        model, batch = make()
        model.to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()

        raw = os.path.join(out, f"{name}.json")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=0, warmup=2, active=1),
                     record_shapes=True, with_modules=True, with_stack=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(3):
                step()
                if dev == "cuda":
                    torch.cuda.synchronize()
                prof.step()
        with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(raw)
        entry = {"model": name, "batch": next(iter(batch.values())).shape[0], "torch": torch.__version__,
                 "transformers": tf.__version__}
        if dev == "cuda":
            from hw_backend.measure import measure_window
            from hw_backend.nvml import NvmlBackend
            be = NvmlBackend(observe_only=True)
            r = measure_window(step, torch.cuda.synchronize, be, window_s=10.0, warmup_s=2.0)
            entry.update(r.to_dict())
        results[name] = entry
    except Exception as e:  # a user's script keeps the other model's result
        results[name] = {"model": name, "error": f"{type(e).__name__}: {e}"}
    finally:
        model = opt = batch = None
        if dev == "cuda":
            torch.cuda.empty_cache()
with open(os.path.join(out, "measured.json"), "w") as f:
    json.dump(results, f, indent=1)
print({k: ("error" if "error" in v else "ok") for k, v in results.items()})
