"""The card constants a fit produced are read from its output, never copied by hand (issue 15, item 5).

The rtx3080ti preset takes its fitted constants from the bundled calibration (``traces/gpt3xl-llmc-rtx3080ti
.calibration.json``, its ``card``), the h200 preset from the bundled fit (``traces/h200.fit.json``). The values written
in ``kdvfs/gpus.py`` for the 3080 Ti serve only when the calibration file is missing; they must be the file's, or a
missing file would silently change the card."""

import json
import shutil

import numpy as np

from kdvfs import gpus
from kdvfs.bundled import bundled_dir


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def test_the_rtx3080ti_preset_is_the_bundled_calibration():
    card = json.loads((bundled_dir() / gpus.RTX3080TI_CALIBRATION_FILE).read_text())["card"]
    for f in gpus._RTX_FIT_FIELDS:
        assert _same(getattr(gpus.RTX3080TI, f), card[f]), f
        assert _same(getattr(gpus.RTX3080TI_WRITTEN, f), card[f]), f"gpus.py's fallback {f} is not the calibration's"


def test_the_presets_follow_their_files(tmp_path, monkeypatch):
    """A changed calibration or fit file changes the preset: nothing of it is a copy."""
    src = json.loads((bundled_dir() / gpus.RTX3080TI_CALIBRATION_FILE).read_text())
    src["card"]["cap_w"] = 300.0
    (tmp_path / gpus.RTX3080TI_CALIBRATION_FILE).write_text(json.dumps(src))
    shutil.copy(bundled_dir() / gpus.H200_FIT_FILE, tmp_path / gpus.H200_FIT_FILE)
    doc = json.loads((tmp_path / gpus.H200_FIT_FILE).read_text())
    key = next(k for k, v in doc["params"].items() if isinstance(v, float) and v > 0)
    doc["params"][key] *= 1.5
    (tmp_path / gpus.H200_FIT_FILE).write_text(json.dumps(doc))
    monkeypatch.setattr("kdvfs.bundled.bundled_dir", lambda: tmp_path)
    assert gpus._rtx3080ti_fitted(gpus.RTX3080TI_WRITTEN).cap_w == 300.0
    assert gpus._h200_fitted(gpus.H200_UNFITTED) != gpus.H200
