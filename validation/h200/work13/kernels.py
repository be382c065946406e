"""Session 13 (helper i13b): one measured step's kernels under the ops a pattern names, grouped by kernel name: count,
share of the step's kernel time, predicted power at the limiter's steady ceiling, FLOP and byte rates, grid and block
(``simulator.step_breakdown.kernel_rows``, the parameters ``validate-steps`` uses). The "us" column is the group's
time over its rows (repeats included); the grid and block are the group's last row's.

    PYTHONPATH=. python validation/h200/work13/kernels.py validation/h200/steps12 poolformer-s12 'convolution_backward'
"""

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from kdvfs.gpus import get_gpu
from kdvfs.importers import import_kineto
from kdvfs.limiter import limiter_for
from simulator.step_breakdown import kernel_rows


def main(argv: list[str]) -> int:
    d, model, oprx = Path(argv[0]), argv[1], re.compile(argv[2])
    spec = get_gpu("h200")
    doc = json.loads((d / "steps.json").read_text())
    st = next(s for s in doc["steps"] if s["model"] == model)
    tr = import_kineto(d / st["trace"], name=model).trace
    rows, f = kernel_rows(tr, spec, limiter_for(spec))
    agg: dict = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, None, None])
    for r, k in zip(rows, tr.kernels):
        if not oprx.search(r["op"] or ""):
            continue
        a = agg[(r["op"], re.sub(r"\(.*", "", r["name"])[:110], k.math, r["work_source"])]
        a[0] += 1
        a[1] += r["time_s"]
        a[2] += r["energy_j"]
        a[3] += r["flops"]
        a[4] += r["bytes"]
        a[5], a[6] = r["grid"], k.block
    tot_t = sum(r["time_s"] for r in rows)
    print(model, "ceiling", f, "kernel time", tot_t)
    for key, a in sorted(agg.items(), key=lambda x: -x[1][1]):
        print(f"{key[0][:28]:28s} {key[1]:110s} {key[2]:8s} {a[0]:5d}  t {100 * a[1] / tot_t:6.2f}% "
              f"{1e6 * a[1] / a[0]:7.1f}us  {a[2] / a[1]:4.0f}W  {a[3] / a[1] / 1e12:6.1f} TF/s  "
              f"{a[4] / a[1] / 1e12:5.2f} TB/s grid {a[5]} blk {a[6]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
