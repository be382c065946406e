"""The two blind sets of real H200 steps recorded in session 7 (validation/h200/steps7, steps8): complete files, and
the stored checks report what their READMEs say (no simulation here: `kdvfs validate-steps` reruns them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.stepcheck import _checked_steps

ROOT = Path(__file__).resolve().parents[1] / "validation" / "h200"


# the checks stored are the session-9 fit's with session 10's work estimates (both sets seen since session 7; session
# 7's blind results, 5 and 2 of energy, session 8's, 3 and 3, and session 9's, 4 and 4, are in the folders' READMEs and
# git history; session 10's steps8 miss is Falcon at +3.19 %)
@pytest.mark.parametrize("folder, models, energy_met", [
    ("steps7", {"gemma-0.3b", "gemma-0.3b-b2", "bloom-560m", "bloom-560m-b16", "t5-base", "t5-base-b4",
                "convnext-tiny", "convnext-tiny-b256"}, 4),
    ("steps8", {"falcon-0.3b", "falcon-0.3b-b16", "deberta-base", "deberta-base-b4", "swin-tiny", "swin-tiny-b256"}, 3),
])
def test_blind_sets_are_complete_and_their_checks_stored(folder, models, energy_met):
    path = ROOT / folder / "steps.json"
    doc = json.loads(path.read_text())
    rows = _checked_steps(doc, path)  # every row measured, with its trace beside it
    assert {r["model"] for r in rows} == models and all("error" not in r for r in rows)
    assert doc["gpu"] == "NVIDIA H200" and all(r["step_energy_j"] > 0 for r in rows)
    chk = json.loads((ROOT / folder / "steps_check.json").read_text())
    assert chk["met"] == {"energy": energy_met, "clock": len(models), "of": len(models)}
