"""Structural terms of the joint RTX 3080 Ti calibration (issue 11, session 7), off unless asked for.

``kdvfs.calibrate_joint`` fits them with the card and the kernels when ``JointOptions.structure`` names them
(``--fit-option structure=memtraffic,passcap,passboost``); ``docs/model.md`` ("Structural terms") says why each exists
and ``validation/rtx3080ti-calibration/README.md`` ("Session 7") what the fits gave. Each is a card-level term acting on
every setting, none on a single one:

- ``memtraffic``: memory traffic power per memory clock (``GpuSpec.mem_traffic_scale``), 3 shares;
- ``passcap``: the cap a kernel meets inside a pass (the pass-level sums only), 1 value;
- ``passboost``: the top core clock inside a pass, a share of the boost clock, 1 value.
- ``leak``: static power that follows the core voltage (``GpuSpec.leak_w``, ∝ V² unless ``leakexp`` fits the
  exponent too), 1 value (+1);
- ``vflow``: the voltage below the knee falls towards the lowest clock (``GpuSpec.vf_low_drop``), 1 value;
- ``slowcore``: core time growing faster than 1/f at low clocks, ``× (1 + (f_slow/f)^k)`` (``GpuSpec.slow_core_mhz``,
  ``slow_exponent``), 2 values.
- ``limiter`` (session 10): each pass as a mixed step under the card's power limiter in its steady state
  (``kdvfs.limiter_pass``): one clock ceiling for the whole pass, where its average power is the cap; 0 values.
  ``limitcap``: the same with the average power held in a pass fitted (``limit_cap_w``, 300–350 W: the card's limit is
  350 W), 1 value; ``limitcapwide``, a diagnosis, the same up to ``passcap``'s 520 W. The per-kernel rows stay isolated.

Also here: the band loss of the per-kernel targets (``kernel_loss=band``) and the diagnostic ``pass_drop``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.passweep import study_settings

__all__ = ["BAND_SLOPE", "CARD_SHAPE_TERMS", "KERNEL_LOSSES", "LIMITER_TERMS", "STRUCTURE_TERMS", "apply_structure",
           "band_residual", "parse_drop", "parse_structure", "pass_eval", "pass_requests", "structure_params"]

KERNEL_LOSSES = ("hinge", "band")
BAND_SLOPE = 4.0
# structural card terms (``JointOptions.structure``): name → its parameters (name, lower, upper, start)
STRUCTURE_TERMS: dict[str, tuple[tuple[str, float, float, float], ...]] = {
    "memtraffic": (("traffic_share_9251", 0.5, 1.0, 0.97), ("traffic_share_5001", 0.1, 1.0, 0.7),
                   ("traffic_share_low", 0.1, 1.0, 0.7)),
    "passcap": (("pass_cap_w", 330.0, 520.0, 360.0),),
    "passboost": (("pass_boost_share", 0.9, 1.0, 0.98),),
    # session 8: the voltage/frequency and static-power shape, and the low-clock time form (``docs/model.md``)
    "leak": (("leak_w", 0.0, 150.0, 30.0),),
    "leakexp": (("leak_exponent", 1.0, 4.0, 2.0),),
    "vflow": (("vf_low_drop", 0.0, 0.6, 0.1),),
    "slowcore": (("slow_core_mhz", 0.0, 600.0, 100.0), ("slow_exponent", 1.0, 6.0, 2.0)),
    # session 10: the passes under the windowed limiter's steady state (the kernels alone stay isolated)
    "limiter": (),
    "limitcap": (("limit_cap_w", 300.0, 350.0, 340.0),),
    # a diagnosis: the held cap free up to passcap's bound, beyond the card's 350 W limit
    "limitcapwide": (("limit_cap_w", 300.0, 520.0, 360.0),),
}
# the terms that put the passes under the limiter; the table method may take ``limiter`` (it changes only the check)
LIMITER_TERMS = ("limiter", "limitcap", "limitcapwide")
# the terms that only change the card's own fields (no pass-only quantity): the table method may fit them too
CARD_SHAPE_TERMS = ("leak", "leakexp", "vflow", "slowcore")
# their GpuSpec fields (leak_w, leak_exponent, vf_low_drop, slow_core_mhz, slow_exponent), which apply_structure sets
_CARD_SHAPE_FIELDS = tuple(f[0] for t in CARD_SHAPE_TERMS for f in STRUCTURE_TERMS[t])


def parse_structure(text: str) -> tuple[str, ...]:
    """``memtraffic,passcap`` → the structural terms; an unknown name is an ``InputError``."""
    names = tuple(t.strip() for t in (text or "").split(",") if t.strip() and t.strip() != "none")
    for t in names:
        if t not in STRUCTURE_TERMS:
            raise InputError(f"--fit-option structure: {t!r} is not one of {', '.join(STRUCTURE_TERMS)}; give a comma "
                             "list of them (or none)")
    both = [t for t in ("passcap", "passboost") if t in names]
    if both and any(t in LIMITER_TERMS for t in names):
        raise InputError(f"--fit-option structure={text}: {', '.join(both)} and the limiter are two models of how a "
                         "pass meets the cap; give one of them")
    if "limitcap" in names and "limitcapwide" in names:
        raise InputError(f"--fit-option structure={text}: limitcap and limitcapwide fit the same held cap within "
                         "different bounds; give one of them")
    return tuple(dict.fromkeys(names))


def parse_drop(text: str) -> tuple[tuple[int, int], ...]:
    """``auto/9501,1890/9251`` → settings of the study's 66; anything else is an ``InputError``."""
    out = []
    for item in (t.strip() for t in (text or "").split(",") if t.strip()):
        c, _, m = item.partition("/")
        try:
            st = tuple(AUTO if v.strip() == "auto" else int(v) for v in (c, m))
        except ValueError:
            st = ()
        if st not in study_settings():
            raise InputError(f"--fit-option pass_drop: {item!r} is not one of the study's settings; give core/memory "
                             "pairs such as auto/9501 or 1890/9251, comma-separated")
        out.append(st)
    return tuple(out)


def structure_params(terms: tuple[str, ...]) -> tuple[tuple[str, float, float, float], ...]:
    return tuple(p for t in STRUCTURE_TERMS if t in terms for p in STRUCTURE_TERMS[t])


def pass_requests(core_mhz: np.ndarray, values: dict, boost_mhz: float) -> np.ndarray:
    """The core clocks the kernels of a pass are asked for: with ``pass_boost_share``, auto and any request above
    ``pass_boost_share · boost_mhz`` run at that clock (GPU Boost's top clock in a sustained pass, below the one a
    kernel reaches in its own loop); otherwise as given."""
    if "pass_boost_share" not in values:
        return core_mhz
    f = values["pass_boost_share"] * boost_mhz
    return np.where(core_mhz == AUTO, f, np.minimum(core_mhz, f))


def apply_structure(spec: GpuSpec, values: dict) -> GpuSpec:
    """The card with the structural terms' values set (``pass_cap_w`` is not the card's: it acts on pass sums)."""
    if "traffic_share_9251" in values:
        s9251 = values["traffic_share_9251"]
        s5001 = s9251 * values["traffic_share_5001"]
        low = s5001 * values["traffic_share_low"]
        spec = replace(spec, mem_traffic_scale=(low, low, s5001, s9251, 1.0))
    shape: dict[str, Any] = {k: float(values[k]) for k in _CARD_SHAPE_FIELDS if k in values}
    return replace(spec, **shape) if shape else spec


def band_residual(e, tol):
    """No penalty inside 90 % of the tolerance, steep (``BAND_SLOPE``) beyond: the target as a band."""
    return BAND_SLOPE * np.sign(e) * np.maximum(np.abs(e) - 0.9 * tol, 0.0) / tol


def pass_eval(spec: GpuSpec, params, core_mhz: np.ndarray, mem_mhz: np.ndarray, values: dict, weights: np.ndarray):
    """Every kernel's time and energy, (kernels, settings), as it runs inside its pass: under the limiter's steady
    state where ``values`` has ``pass_limiter`` (``kdvfs.limiter_pass``; ``weights``, (2, kernels), the invocations
    per pass), else alone at the pass's requests and cap (``passboost``, ``passcap``); plus the limiter's state or None.
    """
    from kdvfs.model import evaluate

    if values.get("pass_limiter"):
        from kdvfs.limiter_pass import solve_passes

        st = solve_passes(spec, params, core_mhz, mem_mhz, weights, values.get("limit_cap_w"))
        return st.time_s, st.energy_j, st
    ev = evaluate(spec, params, pass_requests(core_mhz, values, spec.boost_core_mhz), mem_mhz,
                  cap_w=values.get("pass_cap_w"))
    return ev.time_s, ev.energy_j, None
