"""The inputs of the runtime validation on the H200: the imported trace of the recorded GPT-2 step and two
boundary-level switch-aware schedules (slack 1 %): one under the H200's switch model (catalog: ~6 ms), one under a
hypothetical 10 µs switch (many more switches, to load the runtime).

    python -m scripts.hf_runtime_inputs     # writes validation/h200/runtime/{hf-gpt2-h200.trace.json,schedule-*.json}
"""

from __future__ import annotations

from pathlib import Path

from kdvfs.gpus import SwitchModel, get_gpu
from kdvfs.importers import import_kineto
from kdvfs.model import default_params
from kdvfs.optimize import Problem
from kdvfs.profile import build_profile
from kdvfs.runtime_plan import boundary_schedule
from kdvfs.schedule import save_schedule
from kdvfs.trace import save_trace

ROOT = Path(__file__).resolve().parents[1]

D = ROOT / "validation/h200/runtime"


def main() -> int:
    tr = import_kineto(D / "hf_gpt2_step.kineto.json.gz", name="hf-gpt2-h200").trace
    save_trace(tr, D / "hf-gpt2-h200.trace.json")
    g = get_gpu("h200")
    pb = Problem(tr, build_profile(tr, g, default_params(tr, g)))
    for tag, sw in (("h200", g.switch), ("10us", SwitchModel.from_latency(1e-5))):
        s = boundary_schedule(pb, sw, "predictive", 1.0)
        save_schedule(s, D / f"schedule-boundary-{tag}-slack1.json")
        print(tag, s.switches, s.predicted)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
