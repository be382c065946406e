"""The studies that were scripts: ``kdvfs.synthetic.crossval_study`` and ``hw_backend.sparse_study`` (the whole runs
take minutes; here their pieces and the documents' shape, on a small case)."""

import numpy as np
import pytest

from hw_backend.sparse_study import true_saving
from kdvfs.gpus import get_gpu
from kdvfs.model import default_params
from kdvfs.schedule import Schedule
from kdvfs.synthetic import CROSSVAL_SLOWDOWN_DRAWS, crossval_study


@pytest.mark.slow
def test_crossval_study_rows_and_summary():
    seen = []
    doc = crossval_study(3, on_row=seen.append)
    n = 2 * (len(CROSSVAL_SLOWDOWN_DRAWS) + 4)  # rotated and fixed, for every draw and four no-slowdown seeds
    assert len(doc["rows"]) == len(seen) == n and all("cpu_s" in r for r in seen)
    assert all("cpu_s" not in r for r in doc["rows"])  # the document stays free of timing
    assert doc["command"] == "python -m scripts.crossval_slowdown --kernels 3" and doc["train_points"] == 3
    assert set(doc["summary"]) == {"rotated, slowdown", "rotated, no slowdown", "fixed, slowdown", "fixed, no slowdown"}
    assert sum(s["sweeps"] for s in doc["summary"].values()) == n


def test_true_saving_of_auto_is_zero_and_of_a_lower_clock_is_a_saving(spaan_trace):
    g = get_gpu("rtx3080ti")
    truth = default_params(spaan_trace, g)
    n = len(spaan_trace.instances())
    auto = Schedule(trace=spaan_trace.name, gpu=g.name, core_mhz=np.zeros(n, int), mem_mhz=np.zeros(n, int))
    assert true_saving(auto, g, truth, spaan_trace) == (0.0, 0.0)
    low = Schedule(trace=spaan_trace.name, gpu=g.name, core_mhz=np.full(n, 1050), mem_mhz=np.full(n, 9501))
    de, dt = true_saving(low, g, truth, spaan_trace)
    assert dt > 0 and de < 0
