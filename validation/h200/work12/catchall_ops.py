"""Which ops of the stored step traces reach ``kdvfs.work.op_work``'s last branch (or one of the rules this session
added), and their share of each step's kernel time (issue 12, session 12).

    python validation/h200/work12/catchall_ops.py          # ~3 min on the shared cores, from the repository root

The code is imported from the working directory, the traces read from this file's repository: run from a checkout
of cdb7e83 (``git worktree add /tmp/k cdb7e83 && cd /tmp/k && python /path/to/this/file``) for the ops before.

Imports every ``validation/h200/steps*/*.kineto.json.gz`` as ``kdvfs trace import`` does and prints, per op, the
steps where its kernels take at least 0.2 % of the kernel time (largest four). Run on the commit before this
session's rules (cdb7e83) it lists what the catch-all priced (``generic``); on this branch the same ops show their
new rule. Time shares, not energy shares: the breakdown (``breakdown_*.txt``) has the energy for steps12.
"""

from __future__ import annotations

import collections
import glob
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, os.getcwd())

from kdvfs.importers import import_kineto  # noqa: E402
from simulator.step_breakdown import op_family  # noqa: E402

WATCH = ("softmax", "pool", "upsample", "nll", "topk", "sort", "index", "scatter", "cat", "stack", "embedding",
         "col2im", "im2col", "bincount", "gather")


def main() -> int:
    res: dict = collections.defaultdict(dict)
    for f in sorted(glob.glob(str(ROOT / "validation/h200/steps*/*.kineto.json.gz"))):
        tr = import_kineto(f).trace
        tot = sum(t * r for t, r in zip(tr.times_s, tr.repeats))
        acc: collections.Counter = collections.Counter()
        for k, t, r in zip(tr.kernels, tr.times_s, tr.repeats):
            fam = op_family(k.op)
            if fam in ("generic", "upsample", "pool", "fold", "scatter") or (k.op and any(s in k.op for s in WATCH)):
                acc[(k.op, fam)] += t * r
        for (op, fam), t in acc.items():
            if t / tot >= 0.002:
                res[(op, fam)][f.split("validation/h200/")[1]] = round(100 * t / tot, 2)
    for (op, fam), d in sorted(res.items(), key=lambda x: -max(x[1].values())):
        top = sorted(d.items(), key=lambda x: -x[1])[:4]
        print(f"{op:42s} {fam:10s} max {max(d.values()):6.2f} %  " + ", ".join(f"{s} {v}" for s, v in top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
