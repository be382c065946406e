"""A Hugging Face GPT-2 training step (built from config, random weights) on the lent H200: record it, or run it under
the kdvfs runtime with no-op clock writes.

    python -m scripts.hf_gpt2_step record  --out DIR [--layers 24 --hidden 2048 --batch 4 --seq 1024]
    python -m scripts.hf_gpt2_step runtime --out DIR --trace T.json --schedule S.json [...]
    python -m scripts.hf_gpt2_step record --out /tmp/x --tiny --device cpu     # dry run on a laptop

Never changes a clock: ``runtime`` uses the observe-only NVML backend in no-op mode (writes are recorded, not made).
The step and both modes are ``hw_backend.hf_step``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["record", "runtime"])
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="2 layers x 128, batch 1 x 64 (CPU dry run)")
    p.add_argument("--trace", help="kdvfs trace of the step (runtime mode)")
    p.add_argument("--schedule", help="kdvfs schedule(s), comma-separated (runtime mode)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds without/with the runtime (runtime mode)")
    args = p.parse_args()
    from hw_backend.hf_step import TINY, GPT2Size, record_step, runtime_overhead

    size = TINY if args.tiny else GPT2Size(args.layers, args.hidden, args.batch, args.seq)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.mode == "record":
        res = record_step(out, size, args.device, args.steps)
    else:
        def show(name: str, r: dict) -> None:
            print(name, {k: v for k, v in r.items() if not isinstance(v, list) or len(v) < 8}, flush=True)

        res = runtime_overhead(args.trace, args.schedule.split(","), size, args.device, args.steps, args.rounds, show)
    (out / f"{args.mode}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k not in ("steps", "schedules")}, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
