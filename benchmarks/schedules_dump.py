"""Planned schedules over a grid as canonical JSON lines, for checking that a speed-up left every plan as it was.

    python benchmarks/schedules_dump.py sa > new.jsonl        # in this checkout
    (cd /tmp/base && PYTHONPATH=. python /path/to/benchmarks/schedules_dump.py sa > old.jsonl)
    cmp old.jsonl new.jsonl

``sa``: ``switch_aware`` on the three bundled traces × slacks 0, 0.3, 1, 2, 5 % × four switch models × sync, callback,
predictive (174 schedules; predictive under the 20 µs switch only up to 1 %, its slowest cases). ``coarse``:
``coarse_switch_aware`` (pass level) on the same traces × slacks 0, 1, 3, 10 % × models × mechanisms (144). ``many``:
``switch_aware_many`` with 24 requests per trace at 1 % (72). Each plan starts from a fresh problem (nothing memoised).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from kdvfs.bundled import load_trace_by_name, resolve_profile_path
from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.optimize import Problem, coarse_switch_aware, switch_aware
from kdvfs.optimize.switchaware import switch_aware_many
from kdvfs.profile import load_profile
from kdvfs.switching import SwitchCosts

TRACES = ("gpt3xl-llmc-rtx3080ti", "gpt3xl-torch-h200-bf16", "gpt3xl-torch-h200-fp32")


def _models() -> dict[str, SwitchModel]:
    return {"hopper": dataclasses.replace(get_gpu("h200").switch, spread=0.0), "fast": SwitchModel.from_latency(2e-5),
            "slow": SwitchModel.from_latency(0.05, 0.1837), "mid": SwitchModel.from_latency(1e-3)}


def _line(*key, s) -> None:
    print(json.dumps([list(key), s.to_dict()], sort_keys=True))


def main(which: str) -> None:
    models = _models()
    for tn in TRACES:
        t, prof = load_trace_by_name(tn), load_profile(resolve_profile_path(tn))
        costs = SwitchCosts.for_gpu(get_gpu(prof.gpu))
        if which == "many":
            reqs = [(sw, m, c) for sw in models.values() for m in ("sync", "callback", "predictive") for c in (None, costs)]
            for i, s in enumerate(switch_aware_many(Problem(t, prof), reqs, 1.0)):
                _line(tn, i, s=s)
            continue
        for slack in ((0.0, 0.3, 1.0, 2.0, 5.0) if which == "sa" else (0.0, 1.0, 3.0, 10.0)):
            for name, sw in models.items():
                for mech in ("sync", "callback", "predictive"):
                    if which == "sa":
                        if mech == "predictive" and name == "fast" and slack > 1:
                            continue
                        _line(tn, slack, name, mech, s=switch_aware(Problem(t, prof), sw, mech, slack, costs))
                    else:
                        _line(tn, slack, name, mech, s=coarse_switch_aware(Problem(t, prof), "pass", sw, mech, slack,
                                                                           costs))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("sa", "coarse", "many"):
        raise SystemExit("usage: python benchmarks/schedules_dump.py sa|coarse|many")
    main(sys.argv[1])
