"""The user's own card from a one-minute anchor run: a few fixed zoo entries fit a few card parameters.

Two leases of the lent H200 handed out different physical cards, and the same training steps read energies up to
±9 % apart (``validation/h200/steps/lease2_session9/``): the second card ran warmer at the same power, drew more at
the same clock and, at the cap, ran at lower clocks. Those are card properties, not kernel properties, so a user
calibrates the bundled model to their own card by measuring the zoo set ``anchor`` on it (``kdvfs characterize
--backend nvml --set anchor``, observe-only, ~1 minute; ``ANCHOR_NAMES``) and fitting:

- ``static_w``: static power over the bundled fit's, watts, the same for every kernel and for the GPU idle between
  kernels (``GpuSpec.idle_power_w`` and the thermal gap line ``ThermalModel.gap_ref_w`` move together): a leakier
  (or warmer) die. The idle and gap entries pin it.
- ``core_scale``: a factor on the core dynamic power (``GpuSpec.core_power_w``): a die that draws more per unit of
  switching activity. The uncapped heavy entries (a 1024³ GEMM graph replay, a 1 GiB add) pin it together with the
  capped ones' clocks (at the cap, more power per clock means a lower clock).
- ``mem_scale``: a factor on the memory-traffic power (``GpuSpec.mem_traffic_power_w``): HBM stacks and their
  interface differ from card to card (lease A's card drew 9.7 % less than the bundled fit on the 1 GiB add and 4.5 %
  more on the 1024³ GEMM replay at the same clock: no single scale fits both). Fitted where the anchors hold a
  heavy GEMM and a heavy memory-bound kernel below the cap besides a light entry.
- ``ambient_shift_c`` (measured, not fitted to power): how much warmer the anchors ran than the bundled thermal
  operating point (``kdvfs.thermal``) at their measured power, the median difference. A step's gaps are priced at
  the gap power of the temperature its own predicted power holds on this card.

Loss: ``Σ ((P̂/P − 1)/0.03)²`` over every anchor plus ``Σ ((f̂/f − 1)/0.05)²`` over the capped ones (clock below the
top bin), the issue's two targets as scales, as ``kdvfs.calibrate_h200`` does; ``scipy.optimize.least_squares`` with
bounds. A capped anchor's power is the cap whatever the card, as long as the card still caps it: the first version
left it out (clock only), and on lease B a memory scale fitted to the 1 GiB add then took the capped GELU and
LayerNorm below the cap (power −3.1 and −3.5 %, the anchors 7 → 6 of 8 within both targets). Where the anchors
cannot separate a scale (no idle or gap entry, or no heavy entry of its kind below the cap) it stays 1.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kdvfs.errors import InputError
from kdvfs.gpus import GpuSpec

__all__ = ["ANCHOR_FORMAT", "ANCHOR_NAMES", "CHECK_FORMAT", "DEFAULT_PARAMS", "PARAMS", "CardAnchor", "LeaseRows",
           "adapted", "anchor_base", "check_file", "check_params", "fit_card_anchor", "load_card_anchor", "predict",
           "refuse_other_card", "split_lease"]

log = logging.getLogger(__name__)

ANCHOR_FORMAT = "kdvfs-card-anchor/1"
CHECK_FORMAT = "kdvfs-card-anchor-check/1"
ANCHOR_NAMES = ("idle_10ms", "gap_add_bf16_4KiB_100us", "gemm_bf16_1024_graph32", "add_bf16_1GiB",
                "layer_norm_bf16_16384x4096", "gemm_bf16_4096", "gemm_bf16_8192", "gelu_bf16_1GiB")
"""The zoo set ``anchor`` (``hw_backend.zoo``): idle and the GPU between sparse tiny kernels (static power), a GEMM
graph replay and a 1 GiB add that stay below the cap (dynamic power, core and memory), and four kernels at the cap
(the clock the cap allows them). Each is also in an earlier set, so every stored file holding some of them is an
anchor run of its lease."""

_REPEAT = re.compile(r"_(?:warm|cool|hot|heat)\d*$")
"""The suffix of an entry repeated under another name in the thermal and warm-cool sets (``gemm_bf16_8192_heat4``,
``gap_add_bf16_4KiB_100us_warm3``): the same kernel (op, shape, graph, gap) measured again."""

STATIC_BOUNDS_W = (-150.0, 150.0)
SCALE_BOUNDS = (0.5, 1.5)
AMBIENT_SHIFT_BOUNDS_C = (-105.0, 105.0)
"""The ambient shifts a report may hold: the median of the anchors' die temperatures (each within
``TEMPERATURE_RANGE_C``, 5–110 °C) less the bundled operating point's, so never beyond the range's width (a report
edited to +1e6 °C was taken by every ``--anchors`` verb, exit 0)."""
TOP_MARGIN_MHZ = 20.0
"""An anchor whose median clock is this far below the file's top clock ran at the cap: its clock is fitted."""
MIN_ANCHORS = 2
PARAMS = ("static", "core", "mem")
"""The card parameters a fit may take (``static_w``, ``core_scale``, ``mem_scale``); each is fitted where the anchors
separate it and allowed (``--anchor-params``), else it keeps the bundled fit's value."""
DEFAULT_PARAMS = PARAMS
"""All three (chosen on lease A's anchors before lease B was measured; ``validation/h200/card_anchor/README.md`` says
what lease B then showed)."""


def check_params(params) -> tuple[str, ...]:
    """``params`` (names of ``PARAMS``, or one string of them joined by commas) as a tuple; refused with the rule."""
    got = tuple(p.strip() for p in (params.split(",") if isinstance(params, str) else params) if p.strip())
    bad = [p for p in got if p not in PARAMS]
    twice = sorted({p for p in got if got.count(p) > 1})
    if twice:  # `static,static` fitted static alone without a word: a typo for another name (static,mem?)
        raise InputError(f"--anchor-params {','.join(got)!r}: {', '.join(twice)} given twice; name each card parameter "
                         f"once ({', '.join(PARAMS)}; e.g. --anchor-params static,core)")
    if bad or "static" not in got:
        raise InputError(f"--anchor-params {','.join(got)!r}: give 'static' and any of 'core', 'mem', joined by commas "
                         f"({', '.join(PARAMS)}; e.g. --anchor-params static,core); "
                         + (f"{', '.join(bad)} unknown" if bad else "'static' is always fitted"))
    return got


def anchor_base(name: str, variants: bool = True) -> str | None:
    """The anchor entry ``name`` measures, or None: the name itself, or (``variants``) with a repeat suffix removed."""
    if name in ANCHOR_NAMES:
        return name
    if variants:
        base = _REPEAT.sub("", name)
        if base != name and base in ANCHOR_NAMES:
            return base
    return None


@dataclass(frozen=True, slots=True)
class CardAnchor:
    """Card parameters fitted to one lease's anchor entries, applied over the bundled fit.

    Attributes:
        static_w: static power added to every kernel and to the idle GPU, watts.
        core_scale: factor on the core dynamic power (1 = the bundled fit's).
        ambient_shift_c: how much warmer this card holds a given power than the bundled operating point, °C.
        core_scale_fitted: whether the anchors separated ``core_scale`` from ``static_w`` (else it is 1).
        entries: the anchor entries fitted, as named in the file.
        source: the file (and its card's UUID) the parameters come from.
        loss: the fit's loss at the solution (and ``loss_before``: with no adaptation).
        loss_before: the loss of the bundled fit on the same anchors.
        mem_scale: factor on the memory-traffic power (1 = the bundled fit's).
        mem_scale_fitted: whether the anchors separated ``mem_scale`` (else it is 1).
        gpu: the kdvfs card the parameters adapt (``GpuSpec.name``), "" where not recorded (reports before it was).
        gpu_uuid: the UUID of the card the anchors ran on, "" where the file did not record it.
    """

    static_w: float
    core_scale: float
    ambient_shift_c: float
    core_scale_fitted: bool
    entries: tuple[str, ...]
    source: str
    loss: float
    loss_before: float
    mem_scale: float = 1.0
    mem_scale_fitted: bool = False
    gpu: str = ""
    gpu_uuid: str = ""

    def __post_init__(self) -> None:
        for k in ("static_w", "core_scale", "ambient_shift_c", "loss", "loss_before", "mem_scale"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
                raise InputError(f"card anchor: {k} must be a finite number, got {v!r}; refit it with `kdvfs "
                                 "card-anchor FILE -o card.json`")
        for k in ("core_scale", "mem_scale"):
            if getattr(self, k) <= 0:
                raise InputError(f"card anchor: {k} must be > 0, got {getattr(self, k)!r}; refit it with `kdvfs "
                                 "card-anchor FILE -o card.json`")
        object.__setattr__(self, "entries", tuple(str(e) for e in self.entries))

    def to_dict(self) -> dict:
        return {"format": ANCHOR_FORMAT, "static_w": self.static_w, "core_scale": self.core_scale,
                "ambient_shift_c": self.ambient_shift_c, "core_scale_fitted": self.core_scale_fitted,
                "mem_scale": self.mem_scale, "mem_scale_fitted": self.mem_scale_fitted,
                "entries": list(self.entries), "source": self.source, "loss": self.loss, "loss_before": self.loss_before,
                "gpu": self.gpu, "gpu_uuid": self.gpu_uuid}

    def header_items(self) -> tuple[tuple[str, str], ...]:
        """What a profile built with these parameters records of its card (``Profile.card``): the anchor run (file
        and card UUID) and the fitted parameters, as text."""
        src = self.source.removesuffix(f" (card {self.gpu_uuid})") if self.gpu_uuid else self.source
        # the numbers exactly (shortest round-trip): analyze --profile adapts the card from them (from_header)
        items = (("anchors", src), ("gpu_uuid", self.gpu_uuid), ("static_w", repr(float(self.static_w))),
                 ("core_scale", repr(float(self.core_scale))), ("mem_scale", repr(float(self.mem_scale))),
                 ("ambient_shift_c", repr(float(self.ambient_shift_c))))
        return tuple((k, v) for k, v in items if v)

    @classmethod
    def from_header(cls, items, gpu: str, where: str) -> CardAnchor:
        """The parameters a profile's header records (``header_items``), checked as a report's are (``from_dict``)."""
        fix = "rebuild the profile with `kdvfs profile build --anchors FILE`"
        d: dict[str, Any] = dict(items)
        # header_items writes all four numbers; a hand-edited header lacking one (mem_scale read as 1.0) or with a
        # misspelt key (card.mem_scal=0.5, ignored) planned with a card the profile's powers are not of, exit 0
        nums = ("static_w", "core_scale", "mem_scale", "ambient_shift_c")
        unknown = sorted(set(d) - set(nums) - {"anchors", "gpu_uuid"})
        missing = [k for k in nums if k not in d]
        if unknown or missing:
            what = (f"unknown key(s) {', '.join('card.' + k for k in unknown)}" if unknown else "") + \
                ("; " if unknown and missing else "") + \
                (f"card.{', card.'.join(missing)} missing" if missing else "")
            raise InputError(f"{where}: its header records the card it was built for as card.anchors, card.gpu_uuid, "
                             f"card.{', card.'.join(nums)}; {what}; {fix}")
        for k in nums:
            try:
                d[k] = float(d[k])
            except ValueError:
                raise InputError(f"{where}: card.{k}={d[k]!r} is not a number; {fix}") from None
        src = str(d.pop("anchors", ""))
        if d.get("gpu_uuid"):
            src += f" (card {d['gpu_uuid']})"
        try:
            return cls.from_dict(d | {"source": src, "gpu": gpu}, where)
        except InputError as e:  # from_dict's fix is a report's (`kdvfs card-anchor`); here the profile is rebuilt
            raise InputError(str(e).replace("write it with `kdvfs card-anchor FILE -o card.json`", fix)
                             .replace(f"{where}: ", f"{where}: card.", 1)) from None

    @classmethod
    def from_dict(cls, d: dict, where: str = "the card anchor") -> CardAnchor:
        fix = "write it with `kdvfs card-anchor FILE -o card.json`"
        missing = [k for k in ("static_w", "core_scale", "ambient_shift_c") if k not in d]
        if missing:
            raise InputError(f"{where}: a {ANCHOR_FORMAT} document needs static_w, core_scale and ambient_shift_c; "
                             f"{', '.join(missing)} missing; {fix}")
        for k in ("static_w", "core_scale", "ambient_shift_c", "loss", "loss_before", "mem_scale"):
            v = d.get(k, 0.0)  # float(True) is 1.0: a flag typed where a number goes was read as a scale of 1
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"{where}: {k} must be a finite number, got {v!r}; {fix}")
        # the fit's own bounds: a hand-edited report beyond them (static_w 1e9 W, mem_scale 100) built a profile
        for k, (lo, hi) in (("static_w", STATIC_BOUNDS_W), ("core_scale", SCALE_BOUNDS),
                            ("mem_scale", SCALE_BOUNDS), ("ambient_shift_c", AMBIENT_SHIFT_BOUNDS_C)):
            v = float(d.get(k, 1.0))
            if not lo <= v <= hi:
                raise InputError(f"{where}: {k} = {v!r} is outside the range the fit takes ({lo:g} to {hi:g}); "
                                 f"{fix}")
        return cls(float(d["static_w"]), float(d["core_scale"]), float(d["ambient_shift_c"]),
                   bool(d.get("core_scale_fitted", True)), tuple(d.get("entries") or ()), str(d.get("source", "")),
                   float(d.get("loss", 0.0)), float(d.get("loss_before", 0.0)), float(d.get("mem_scale", 1.0)),
                   bool(d.get("mem_scale_fitted", False)), str(d.get("gpu") or ""), str(d.get("gpu_uuid") or ""))


def adapted(spec: GpuSpec, thermal, anchor: CardAnchor | None):
    """(the card, its thermal model) with ``anchor``'s parameters applied; unchanged where ``anchor`` is None."""
    if anchor is None:
        return spec, thermal
    src = f"bundled fit adapted to {anchor.source} by `kdvfs card-anchor` (kdvfs.card_anchor)"
    sources = tuple((k, v) for k, v in spec.sources if k not in ("idle_power_w", "core_power_w", "mem_traffic_power_w"))
    sources += (("idle_power_w", f"{spec.source_of('idle_power_w')}; {anchor.static_w:+.1f} W {src}"),
                ("core_power_w", f"{spec.source_of('core_power_w')}; × {anchor.core_scale:.4f} {src}"),
                ("mem_traffic_power_w", f"{spec.source_of('mem_traffic_power_w')}; × {anchor.mem_scale:.4f} {src}"))
    card = replace(spec, idle_power_w=spec.idle_power_w + anchor.static_w,
                   core_power_w=spec.core_power_w * anchor.core_scale,
                   mem_traffic_power_w=spec.mem_traffic_power_w * anchor.mem_scale, sources=sources)
    th = None
    if thermal is not None:
        th = replace(thermal, gap_ref_w=thermal.gap_ref_w + anchor.static_w,
                     ambient_c=thermal.ambient_c + anchor.ambient_shift_c)
    return card, th


@dataclass(frozen=True, slots=True)
class LeaseRows:
    """One characterisation file split into its anchor entries and the rest.

    Attributes:
        anchors: anchor kernel rows (``kdvfs.calibrate_h200.zoo_rows``; role kernel, launch or duty).
        anchor_gaps: anchor gap rows (idle, a tiny kernel every 100 µs).
        others: the other kernel rows.
        other_gaps: the other gap rows.
        path: the file.
        gpu_uuid: the card's UUID where the file records it.
        gpu: the card's name as the file records it (``"gpu"``), or None.
    """

    anchors: tuple[dict, ...]
    anchor_gaps: tuple[dict, ...]
    others: tuple[dict, ...]
    other_gaps: tuple[dict, ...]
    path: str
    gpu_uuid: str | None
    gpu: str | None = None


def refuse_other_card(path: str | Path, gpu: str | None, spec: GpuSpec, what: str = "--anchors") -> None:
    """Refuse a characterisation file measured on another card than ``spec`` (its recorded ``gpu`` name)."""
    card = str(gpu or "")
    if card and spec.name not in re.sub(r"[\s_-]", "", card.lower()):
        raise InputError(f"{what} {str(path)!r} was measured on {card!r}, not on {spec.name} ({spec.full_name}): "
                         "the anchors adapt the card they ran on; give the anchor run of this card, or its --gpu")


TEMPERATURE_RANGE_C = (5.0, 110.0)
"""The die temperatures an anchor entry may record: a powered GPU in a room or rack reads above 5 °C, and the H200
slows down near 90 °C and shuts down before 110 °C (a value outside is a corrupt file, not a card)."""


def _check_anchor_entries(path, doc: dict, rows, variants: bool) -> None:
    """Each anchor entry once, with a finite temperature where it records one and its category (the fit reads both)."""
    names = [str(k.get("name")) for k in doc.get("kernels") or () if isinstance(k, dict)]
    twice = sorted({n for n in names if names.count(n) > 1 and anchor_base(n, variants) is not None})
    if twice:  # load_rows keeps a name's first measurement: the second was dropped without a word
        raise InputError(f"{str(path)!r}: anchor entr{'y' if len(twice) == 1 else 'ies'} {', '.join(twice)} measured "
                         "twice in one file (the fit would take the first and drop the other); keep one measurement "
                         "of each, or measure the anchors again (`kdvfs characterize --backend nvml --set anchor -o "
                         "anchors.json.gz`)")
    for r in rows:
        if anchor_base(r["name"], variants) is None:
            continue
        t = r.get("temperature_c")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and not (
                math.isfinite(t) and TEMPERATURE_RANGE_C[0] <= t <= TEMPERATURE_RANGE_C[1]):
            raise InputError(f"{str(path)!r}: anchor entry {r['name']!r}: temperature_c = {t!r}, not a die temperature "
                             f"a running GPU reports ({TEMPERATURE_RANGE_C[0]:g}–{TEMPERATURE_RANGE_C[1]:g} °C; the "
                             "card's thermal ambient is read from it); remove the field or measure the anchors again "
                             "(`kdvfs characterize --backend nvml --set anchor -o anchors.json.gz`)")
        if r["role"] != "gap" and not isinstance(r.get("category"), str):
            raise InputError(f"{str(path)!r}: anchor entry {r['name']!r} has no 'category' (gemm, elementwise, ...: "
                             "the fit tells compute from memory-bound anchors by it); write the file with `kdvfs "
                             "characterize --backend nvml --set anchor -o anchors.json.gz`")


def split_lease(path: str | Path, variants: bool = True) -> LeaseRows:
    """The rows of one characterisation file (one lease), anchors apart from the rest. Every anchor entry must
    have a window over which the energy counter advanced (``energy_j`` and ``window_s`` > 0)."""
    from kdvfs.calibrate_h200 import load_rows

    rows, gaps, _, docs = load_rows([path])
    _check_anchor_entries(path, docs[0], rows + gaps, variants)
    for r in rows + gaps:
        if anchor_base(r["name"], variants) is None:
            continue
        bad = [k for k in ("energy_j", "window_s") if k in r and not (isinstance(r[k], (int, float))
                                                                        and math.isfinite(r[k]) and r[k] > 0)]
        if bad:
            raise InputError(f"{str(path)!r}: anchor entry {r['name']!r}: the energy counter did not advance over its "
                             f"window ({bad[0]} = {r[bad[0]]!r}); measure the anchors again (`kdvfs characterize "
                             "--backend nvml --set anchor -o anchors.json.gz`) on a card whose counter steps")
    def isa(r):
        return anchor_base(r["name"], variants) is not None

    return LeaseRows(tuple(r for r in rows if isa(r)), tuple(g for g in gaps if isa(g)),
                     tuple(r for r in rows if not isa(r)), tuple(g for g in gaps if not isa(g)), str(path),
                     docs[0].get("gpu_uuid"), docs[0].get("gpu"))


def _bundled(spec: GpuSpec):
    from kdvfs.thermal import thermal_for

    th = thermal_for(spec)
    if th is None:
        raise InputError(f"card anchor: {spec.name} has no bundled thermal gap model (traces/{spec.name}.fit.json "
                         "with params.thermal): the anchors adapt a fitted card; fit one with `kdvfs calibrate-h200`")
    return th


def predict(spec: GpuSpec, thermal, rows, gaps) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(clock MHz, power W) predicted for the kernel rows, then for the gap rows, each at its recorded temperature:
    kernel rows as ``kdvfs.calibrate_h200.predict_zoo`` (their idle share at the gap power of their temperature),
    gap rows the thermal gap line at theirs (at the top clock)."""
    from kdvfs.calibrate_h200 import predict_zoo

    def t_of(r):
        return float(r["temperature_c"]) if isinstance(r.get("temperature_c"), (int, float)) else thermal.ref_c

    rows = [dict(r, gap_power_w=float(thermal.gap_power_w(t_of(r)))) for r in rows]
    if rows:
        gw = float(thermal.gap_power_w(float(np.median([t_of(r) for r in rows]))))
        f, p = predict_zoo(spec, rows, gap_w=gw)
    else:
        f, p = np.zeros(0), np.zeros(0)
    fg = np.full(len(gaps), float(spec.boost_core_mhz))
    pg = np.array([float(thermal.gap_power_w(t_of(g))) for g in gaps])
    return np.asarray(f, float), np.asarray(p, float), fg, pg


def _capped(rows, top_mhz: float) -> np.ndarray:
    return np.array([r["role"] != "gap" and float(r["sm_mhz_median"]) < top_mhz - TOP_MARGIN_MHZ for r in rows])


def _residuals(spec, thermal, rows, gaps, top_mhz) -> np.ndarray:
    """Every anchor's power error over 3 %, and each capped one's clock error over 5 % (see the module's loss)."""
    f, p, _, pg = predict(spec, thermal, rows, gaps)
    fm = np.array([float(r["sm_mhz_median"]) for r in rows])
    pm = np.array([float(r["power_w"]) for r in rows])
    cap = _capped(rows, top_mhz)
    rc = np.where(cap, (f / np.where(fm > 0, fm, 1.0) - 1) / 0.05, 0.0) if len(rows) else np.zeros(0)
    rp = (p / pm - 1) / 0.03 if len(rows) else np.zeros(0)
    rg = (pg / np.array([float(g["power_w"]) for g in gaps]) - 1) / 0.03 if gaps else np.zeros(0)
    return np.concatenate([rc, rp, rg])


def fit_card_anchor(spec: GpuSpec, thermal, rows, gaps, source: str = "", params=DEFAULT_PARAMS) -> CardAnchor:
    """``CardAnchor`` fitted to one lease's anchor kernel ``rows`` and gap ``gaps`` (``split_lease``) over ``spec``
    (the bundled card) and its ``thermal`` model; ``params``: which of ``PARAMS`` may be fitted."""
    from scipy.optimize import least_squares

    allowed = check_params(params)

    rows, gaps = list(rows), list(gaps)
    n = len(rows) + len(gaps)
    if n < MIN_ANCHORS:
        raise InputError(f"card anchor: {n} anchor entr{'y' if n == 1 else 'ies'} in {source or 'the file'}, at least "
                         f"{MIN_ANCHORS} needed ({', '.join(ANCHOR_NAMES)}); measure them with `kdvfs characterize "
                         "--backend nvml --set anchor -o anchors.json.gz`")
    top = max([float(r["sm_mhz_median"]) for r in rows + gaps] + [0.0])
    top = max(top, float(spec.boost_core_mhz))
    uncapped_heavy = [r for r in rows if not _capped([r], top)[0] and float(r["power_w"]) > 2 * spec.idle_power_w]
    # a scale separates from the static power only where static power is seen with little dynamic power (idle, gap
    # entries, light kernels) and that scale's power without the cap (a heavy kernel below it): else a direction of
    # the loss is unseen. The core scale takes any heavy entry; the memory scale a memory-bound one beside a GEMM's
    light = list(gaps) + [r for r in rows if float(r["power_w"]) < 2 * spec.idle_power_w]
    compute = [r for r in uncapped_heavy if r["category"] in ("gemm", "attention")]
    memory = [r for r in uncapped_heavy if r["category"] not in ("gemm", "attention")]
    free = ["static_w"] + (["core_scale"] if "core" in allowed and light and uncapped_heavy and n >= 3 else [])
    free += ["mem_scale"] if "mem" in allowed and light and compute and memory and n >= 4 else []
    x0_all = {"static_w": 0.0, "core_scale": 1.0, "mem_scale": 1.0}
    bounds = {"static_w": STATIC_BOUNDS_W, "core_scale": SCALE_BOUNDS, "mem_scale": SCALE_BOUNDS}
    scale = {"static_w": 20.0, "core_scale": 0.05, "mem_scale": 0.05}

    def card(x) -> CardAnchor:
        v = x0_all | dict(zip(free, map(float, x)))
        return CardAnchor(v["static_w"], v["core_scale"], 0.0, "core_scale" in free, (), "", 0.0, 0.0,
                          v["mem_scale"], "mem_scale" in free)

    def res(x):
        sp, th = adapted(spec, thermal, card(x))
        return _residuals(sp, th, rows, gaps, top)

    x0 = np.array([x0_all[k] for k in free])
    r0 = res(x0)
    sol = least_squares(res, x0, bounds=(np.array([bounds[k][0] for k in free]), np.array([bounds[k][1] for k in free])),
                        x_scale=np.array([scale[k] for k in free]), diff_step=1e-4)
    x = sol.x
    best = card(x)
    # the ambient shift: measured, the anchors' temperatures against the operating point at their measured power
    dt = [float(r["temperature_c"]) - float(thermal.operating_c(float(r["power_w"]))) for r in rows + gaps
          if isinstance(r.get("temperature_c"), (int, float))]
    shift = float(np.median(dt)) if dt else 0.0
    return replace(best, ambient_shift_c=shift, entries=tuple(r["name"] for r in rows + gaps), source=source, gpu=spec.name,
                   loss=float(np.sum(res(x) ** 2)), loss_before=float(np.sum(r0 ** 2)))


def load_card_anchor(path: str | Path, spec: GpuSpec, variants: bool = True, params=DEFAULT_PARAMS,
                     params_given: bool = False) -> CardAnchor:
    """The card parameters of ``path``: a ``kdvfs-card-anchor/1`` document (``kdvfs card-anchor -o``) as stored, or a
    characterisation file (``kdvfs characterize --set anchor``) whose anchor entries are fitted now. ``params``
    chooses what is fitted, so a stored document refuses them where the caller chose them (``params_given``)."""
    import gzip
    import json

    p = Path(path)
    try:
        raw = p.read_bytes()
        doc: Any = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"--anchors {str(path)!r}: cannot read it ({e}); give the file `kdvfs characterize --backend "
                         "nvml --set anchor -o anchors.json.gz` wrote") from None
    if isinstance(doc, dict) and doc.get("format") == CHECK_FORMAT and isinstance(doc.get("anchor"), dict):
        doc = doc["anchor"]  # the report of `kdvfs card-anchor -o`: its fitted parameters
    if isinstance(doc, dict) and doc.get("format") == ANCHOR_FORMAT:
        a = CardAnchor.from_dict(doc, f"--anchors {str(path)!r}")
        if params_given:  # `--anchor-params static` with a report fitted with core and mem used them, exit 0
            raise InputError(f"--anchor-params {','.join(params)} chooses what the anchors fit, and --anchors "
                             f"{str(path)!r} is a `kdvfs card-anchor` report, fitted already (static {a.static_w:+.1f} W,"
                             f" core × {a.core_scale:.3f}, memory-traffic × {a.mem_scale:.3f}): give the anchor run "
                             "itself to fit other parameters (or `card-anchor --anchor-params` for a new report), or "
                             "drop --anchor-params")
        # a report of another card (`card-anchor --gpu h200 -o card.json` then `profile build --gpu rtx3080ti
        # --anchors card.json`) adapted the RTX by the H200's parameters, exit 0; a report without its card's name
        # (written before it was recorded) is taken for a card the anchors can adapt (one with a thermal fit) only
        if a.gpu and a.gpu != spec.name:
            raise InputError(f"--anchors {str(path)!r} holds the card parameters of {a.gpu}, not of {spec.name}: the "
                             "anchors adapt the card they ran on; give that card's --gpu, or this card's anchor run")
        _bundled(spec)
        return a
    refuse_other_card(path, doc.get("gpu") if isinstance(doc, dict) else None, spec)
    lease = split_lease(p, variants)
    if not lease.anchors and not lease.anchor_gaps:
        raise InputError(f"--anchors {str(path)!r} holds no anchor entry ({', '.join(ANCHOR_NAMES)}); measure them "
                         "with `kdvfs characterize --backend nvml --set anchor -o anchors.json.gz`")
    src = p.name + (f" (card {lease.gpu_uuid})" if lease.gpu_uuid else "")
    return replace(fit_card_anchor(spec, _bundled(spec), lease.anchors, lease.anchor_gaps, src, params),
                   gpu_uuid=str(lease.gpu_uuid or ""))


def _entries(spec, thermal, rows, gaps) -> list[dict]:
    from kdvfs.calibrate_h200 import CLOCK_TOL, POWER_TOL

    f, p, fg, pg = predict(spec, thermal, rows, gaps)
    out = []
    for r, fi, pi in zip(list(rows) + list(gaps), np.concatenate([f, fg]), np.concatenate([p, pg])):
        ef, ep = float(fi / r["sm_mhz_median"] - 1), float(pi / r["power_w"] - 1)
        out.append({"name": r["name"], "role": r["role"], "measured_sm_mhz": r["sm_mhz_median"],
                    "predicted_sm_mhz": round(float(fi), 1), "clock_error_pct": round(100 * ef, 2),
                    "measured_power_w": round(float(r["power_w"]), 2), "predicted_power_w": round(float(pi), 2),
                    "power_error_pct": round(100 * ep, 2), "temperature_c": r.get("temperature_c"),
                    "meets_clock": abs(ef) <= CLOCK_TOL + 1e-12, "meets_power": abs(ep) <= POWER_TOL + 1e-12,
                    "meets_both": abs(ef) <= CLOCK_TOL + 1e-12 and abs(ep) <= POWER_TOL + 1e-12})
    return out


def _summary(e: list[dict]) -> dict:
    if not e:
        return {"entries": 0}
    return {"entries": len(e), "meet_clock": sum(o["meets_clock"] for o in e),
            "meet_power": sum(o["meets_power"] for o in e), "meet_both": sum(o["meets_both"] for o in e),
            "power_error_pct_median": float(np.median([o["power_error_pct"] for o in e])),
            "power_rms_error_pct": float(np.sqrt(np.mean([o["power_error_pct"] ** 2 for o in e]))),
            "clock_rms_error_pct": float(np.sqrt(np.mean([o["clock_error_pct"] ** 2 for o in e])))}


def check_file(path: str | Path, spec: GpuSpec, variants: bool = True, check: list | None = None,
               params=DEFAULT_PARAMS) -> dict:
    """A held-out check within one lease: the card parameters fitted to ``path``'s anchor entries only, then every
    other entry of the same file (or of the files ``check``, measured in the same lease) predicted with and without
    them (the bundled card). Fits nothing else."""
    thermal = _bundled(spec)
    lease = split_lease(path, variants)
    refuse_other_card(path, lease.gpu, spec, "card-anchor")  # `--anchors` refused it, card-anchor fitted it
    name = Path(path).name
    if not lease.anchors and not lease.anchor_gaps:
        raise InputError(f"{str(path)!r} holds no anchor entry ({', '.join(ANCHOR_NAMES)}, or one repeated as "
                         "NAME_warmN, _heatN, _cool, _hot); give a file with some")
    a = fit_card_anchor(spec, thermal, lease.anchors, lease.anchor_gaps,
                        name + (f" (card {lease.gpu_uuid})" if lease.gpu_uuid else ""), params)
    a = replace(a, gpu_uuid=str(lease.gpu_uuid or ""))
    sp, th = adapted(spec, thermal, a)
    others, other_gaps = list(lease.others), list(lease.other_gaps)
    seen = [Path(path).resolve()]
    cautions = []
    for c in check or ():
        # the anchor file itself, or one file twice, counted every held-out entry twice (24 → 48 checked), exit 0
        if Path(c).resolve() in seen:
            raise InputError(f"--also {str(c)!r} is " + ("the anchor file itself" if Path(c).resolve() == seen[0] else
                             "given twice") + ": its entries would be checked twice; give each other file of the "
                             "lease once (its own entries are checked without --also)")
        seen.append(Path(c).resolve())
        more = split_lease(c, variants)
        refuse_other_card(c, more.gpu, spec, "--also")
        if lease.gpu_uuid and more.gpu_uuid and str(more.gpu_uuid) != str(lease.gpu_uuid):
            # another card's entries read as held out within this card's lease, exit 0, without a word
            cautions.append(f"Caution: --also {Path(c).name} ran on card {more.gpu_uuid}, the anchors on card "
                            f"{lease.gpu_uuid}: its entries are checked against another card's parameters, not held "
                            "out within one lease; give the files measured in the anchors' lease")
        others += list(more.others)
        other_gaps += list(more.other_gaps)
    held = {"bundled": _entries(spec, thermal, others, other_gaps), "adapted": _entries(sp, th, others, other_gaps)}
    fitted = {"bundled": _entries(spec, thermal, lease.anchors, lease.anchor_gaps),
              "adapted": _entries(sp, th, lease.anchors, lease.anchor_gaps)}
    return ({"format": CHECK_FORMAT, "file": name, "checked": [name] + [Path(c).name for c in check or ()], "gpu_uuid": lease.gpu_uuid,
            "anchor": a.to_dict(),
            "anchors": {k: _summary(v) | {"per_entry": v} for k, v in fitted.items()},
            "held_out": {k: _summary(v) | {"per_entry": v} for k, v in held.items()},
            "note": "held out within one lease: the anchors and the entries checked were measured in the same lease"}
            | ({"caution": cautions} if cautions else {}))
