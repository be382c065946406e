"""Verb ``card-anchor``: the card parameters of one lease's anchor run, and the held-out check within that lease.

The other verbs take the same file with ``--anchors`` (``validate-steps``, ``profile build``); ``anchor_card`` is
what they share.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["ANCHORS_HELP", "add_anchor_args", "anchor_card", "card_line", "other_card_caution", "profile_card",
           "register"]

ANCHORS_HELP = ("the card's anchor run (`kdvfs characterize --backend nvml --set anchor -o anchors.json.gz`, "
                "observe-only, ~1 minute) or a `kdvfs card-anchor -o` report: the bundled fit adapted to that card "
                "(static power, core dynamic-power scale, thermal ambient; docs/characterization.md)")


def add_anchor_args(sp, extra_help: str = "") -> None:
    """``--anchors FILE`` and ``--anchor-params`` on a verb's parser."""
    from kdvfs.card_anchor import DEFAULT_PARAMS

    sp.add_argument("--anchors", metavar="FILE", help=ANCHORS_HELP + extra_help)
    # no default here: given without --anchors it is refused (`validate-steps DIR --anchor-params static,core` with
    # --anchors forgotten checked the bundled fit without a word); anchor_card takes None as DEFAULT_PARAMS
    sp.add_argument("--anchor-params", default=None, metavar="LIST",
                    help="with --anchors: the card parameters the anchors may fit, of static (always), core (core "
                         "dynamic-power scale), mem (memory-traffic power scale), joined by commas (default: "
                         f"{','.join(DEFAULT_PARAMS)}; each is fitted only where the anchors separate it)")


def anchor_card(spec, path: str | None, params=None):
    """(card, its thermal model, the ``CardAnchor`` or None): ``spec`` and its bundled thermal model, adapted to the
    anchor file ``path`` where one is given (``params``: which card parameters it may fit)."""
    from kdvfs.card_anchor import DEFAULT_PARAMS, adapted, check_params, load_card_anchor
    from kdvfs.thermal import thermal_for

    # refused also without --anchors: a typo is not ignored; '' is refused as card-anchor refuses it (it was the default)
    params_given = params is not None
    params = check_params(DEFAULT_PARAMS if params is None else params)
    th = thermal_for(spec)
    if not path:
        if params_given:
            raise InputError(f"--anchor-params {','.join(params)} chooses what the card's anchors fit, and no --anchors "
                             "was given: add --anchors FILE (the card's anchor run), or drop --anchor-params")
        return spec, th, None
    a = load_card_anchor(path, spec, params=params, params_given=params_given)
    card, th2 = adapted(spec, th, a)
    return card, th2, a


def profile_card(spec, prof, where: str = "--profile", say: bool = True):
    """(card, ``CardAnchor`` or None): ``spec`` adapted to the card a profile was built for (``profile build
    --anchors`` records it in the header, ``Profile.card``), so the idle power of the limiter, the gaps and the
    switch stalls is that card's as the profile's kernel powers are; ``spec`` itself for a profile of the bundled fit.
    ``say``: one line on stderr naming the card."""
    if prof is None or not prof.card:
        return spec, None
    if not prof.gpu:  # profile build --anchors always names it; without it optimize and compare adapted rtx3080ti
        raise InputError(f"{where}: its header records the card it was built for (card.anchors=…) but not which GPU "
                         f"that is (gpu= is empty), so the card's anchors would be applied to {spec.name}'s fit; put "
                         "the GPU back in the header (gpu=h200) or rebuild the profile with `kdvfs profile build "
                         "--anchors FILE`")
    from kdvfs.card_anchor import CardAnchor, adapted

    pa = CardAnchor.from_header(prof.card, spec.name, where)
    card, _ = adapted(spec, None, pa)
    if say:
        make_console(sys.stderr).print("Card: the profile was built (`profile build --anchors`) for " + card_line(pa),
                                       markup=False)
    return card, pa


def card_line(anchor) -> str:
    """One line naming the card a command used: the anchor run (and its card's UUID) and its fitted parameters."""
    return (f"the card of {anchor.source}: static {anchor.static_w:+.1f} W, core dynamic power × "
            f"{anchor.core_scale:.3f}, memory-traffic power × {anchor.mem_scale:.3f}, "
            f"{anchor.ambient_shift_c:+.1f} °C ambient (bundled fit adapted by its anchors)")


def other_card_caution(anchor, steps_uuid) -> str | None:
    """A caution where the anchors and the steps checked with them record different cards' UUIDs (the anchors
    correct the card they ran on, measured in the same lease: docs/characterization.md), else None."""
    if anchor is None or not anchor.gpu_uuid or not steps_uuid or anchor.gpu_uuid == str(steps_uuid):
        return None
    return (f"Caution: the anchors ran on card {anchor.gpu_uuid}, the steps on card {steps_uuid}: the anchors correct "
            "the card they ran on (its leakage, temperature, HBM), so these predictions are of another card than "
            "the one measured; give the anchor run of the steps' lease")


def cmd_card_anchor(a) -> int:
    from kdvfs.card_anchor import check_file
    from kdvfs.fileio import check_output_path
    from kdvfs.gpus import get_gpu

    if a.output:
        check_output_path(a.output, "report output", make_parents=True)
    spec = get_gpu(a.gpu)
    doc = check_file(a.file, spec, check=a.also or [], params=a.anchor_params)
    doc["command"] = "kdvfs " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    for line in doc.get("caution", ()):  # on stderr, so --json's stdout stays one document
        make_console(sys.stderr).print(line, markup=False)
    if a.output:
        from kdvfs.console import to_jsonable

        Path(a.output).write_text(json.dumps(to_jsonable(doc), indent=1) + "\n")
    if a.json:
        print_json(doc)
        return 0
    c = make_console()
    p = doc["anchor"]
    c.print(f"{doc['file']}: {len(p['entries'])} anchor entries → static {p['static_w']:+.1f} W, core dynamic power "
            f"× {p['core_scale']:.3f}" + ("" if p["core_scale_fitted"] else " (not fitted)")
            + f", memory-traffic power × {p['mem_scale']:.3f}" + ("" if p["mem_scale_fitted"] else " (not fitted)")
            + f", {p['ambient_shift_c']:+.1f} °C warmer than the bundled operating point; loss "
            f"{p['loss_before']:.3g} → {p['loss']:.3g}", markup=False)
    rows = []
    for part in ("anchors", "held_out"):
        for k in ("bundled", "adapted"):
            s = doc[part][k]
            if s["entries"]:
                rows.append([part.replace("_", " "), k, s["entries"], s["meet_clock"], s["meet_power"], s["meet_both"],
                             f"{s['power_error_pct_median']:+.2f}", f"{s['power_rms_error_pct']:.2f}"])
    c.print(table(f"{spec.name}: bundled fit and adapted to {doc['file']} (targets: clock ±5 %, power ±3 %)",
                  ["entries", "card", "n", "clock ok", "power ok", "both", "median ΔP %", "rms ΔP %"], rows))
    if not doc["held_out"]["bundled"]["entries"]:
        c.print("no other entry in the lease to check (give the lease's other files with --also)", markup=False)
    return 0


def register(sub, j) -> None:
    sp = j(sub.add_parser("card-anchor", help="adapt the bundled card fit to your card from a one-minute anchor run"))
    sp.add_argument("file", help="a characterisation file with anchor entries (`kdvfs characterize --backend nvml "
                                 "--set anchor -o anchors.json.gz`)")
    sp.add_argument("--gpu", required=True)
    sp.add_argument("--also", action="append", metavar="FILE",
                    help="another characterisation file of the same lease whose entries are checked too (repeatable)")
    sp.add_argument("-o", "--output", help="write the report as JSON (usable as --anchors elsewhere)")
    from kdvfs.card_anchor import DEFAULT_PARAMS

    sp.add_argument("--anchor-params", default=",".join(DEFAULT_PARAMS), metavar="LIST",
                    help="the card parameters to fit, of static (always), core, mem, joined by commas (default: "
                         "%(default)s)")
    sp.set_defaults(fn=cmd_card_anchor)
