"""Verbs of the card's power limiter: ``limiter fit``, ``limiter whatif`` (before and after) and ``validate-steps``."""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from kdvfs.cli.common import load_profile_ref, load_trace
from kdvfs.console import make_console, print_json, table
from kdvfs.errors import InputError

__all__ = ["register"]


def _command() -> str:
    return "kdvfs " + " ".join(shlex.quote(x) for x in sys.argv[1:]) if sys.argv[1:] else "kdvfs"


def _write_json(doc: dict, path: str | Path) -> Path:
    from kdvfs.console import to_jsonable

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(to_jsonable(doc), indent=1) + "\n")
    return p


def cmd_limiter_fit(a) -> int:
    from kdvfs.bundled import bundled_dir
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import LIMITERS
    from kdvfs.limiter_fit import fit_limiter, load_step_responses

    spec = get_gpu(a.gpu)
    srs, given = load_step_responses(a.files)
    if a.only:
        keep = set(a.only)
        srs = [s for s in srs if s["name"] in keep]
    fit = fit_limiter(srs, spec, given, period_s=a.period, files=tuple(str(f) for f in a.files), cap=a.cap)
    doc = dict(fit.to_dict(), gpu=spec.name, command=_command())
    if a.output:
        _write_json(doc, a.output)
    if a.bundle:
        _write_json(doc, bundled_dir() / f"{spec.name}.limiter.json")
        LIMITERS.pop(spec.name, None)
    if a.json:
        print_json(doc)
        return 0
    m = fit.model
    c = make_console()
    c.print(f"{spec.name} limiter: window {1e3 * m.window_s:.1f} ms, gain {m.gain_mhz_per_ws:.3g} MHz/(W·s), slew "
            f"{m.slew_mhz_per_s:.0f} MHz/s, cap held {m.cap_for(spec):.1f} W (tick {1e3 * m.period_s:g} ms)")
    c.print(table("fit: ceiling − probe clock", ["step response", "probe clocks (5 ms medians)", "RMS (MHz)",
                                                 "median |error| (MHz)"],
                  [[k, fit.samples[k], f"{v:.1f}", f"{(fit.median_abs_mhz or {})[k]:.1f}"]
                   for k, v in fit.rms_mhz.items()]))
    return 0


def cmd_limiter_check(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter_fit import check_limiter, load_json, load_step_responses

    spec = get_gpu(a.gpu)
    srs, _ = load_step_responses(a.files)
    if a.only:
        srs = [s for s in srs if s["name"] in set(a.only)]
    fit = load_json(a.fit)
    if not isinstance(fit, dict) or not isinstance(fit.get("model"), dict):
        raise InputError(f"--fit {a.fit!r} is not a limiter fit (no \"model\" object); give the JSON that "
                         "`kdvfs limiter fit -o` wrote (or traces/GPU.limiter.json)")
    res = check_limiter(srs, spec, fit)
    doc = {"fit": a.fit, "files": a.files, "responses": res, "command": _command()}
    if a.output:
        _write_json(doc, a.output)
    if a.json:
        print_json(doc)
        return 0
    make_console().print(table(f"{a.fit} against step responses", ["step response", "probe clocks", "RMS (MHz)",
                                                                   "median |error| (MHz)"],
                               [[k, v["samples"], f"{v['rms_mhz']:.1f}", f"{v['median_abs_mhz']:.1f}"]
                                for k, v in res.items()]))
    return 0


def cmd_limiter_whatif(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter import limiter_for, limiter_params
    from kdvfs.optimize import Problem
    from simulator.limited_whatif import before_after

    spec = get_gpu(a.gpu)
    lim = limiter_for(spec)
    if lim is None:
        raise InputError(f"{spec.name} has no fitted limiter model; fit one with `kdvfs limiter fit --bundle` first")
    traces = []
    for ref in a.trace:
        t = load_trace(ref)
        traces.append((ref, Problem(t, load_profile_ref(t.name))))
    slacks = a.slack or [0.0, 1.0, 2.0, 5.0]
    mechs = a.mechanism or ["sync", "predictive"]
    doc: dict[str, Any] = {"gpu": spec.name, "limiter": lim.to_dict(), "cap_w": lim.cap_for(spec), "switch_model": spec.switch.source,
           "switch_latency_s": spec.switch.total_s, "command": _command(), "traces": {}}
    if a.evidence:  # the measurements beside the simulation: the step check and the limiter fit
        from kdvfs.limiter_fit import load_json

        doc["evidence"] = {f: load_json(f) for f in a.evidence}
    for ref, pb in traces:
        doc["traces"][pb.trace.name] = before_after(ref, pb, spec, limiter_params(pb.trace, spec, lim), lim, mechs, slacks)
    if a.output:
        _write_json(doc, a.output)
    if a.md:
        Path(a.md).write_text(whatif_markdown(doc))
    if a.json:
        print_json(doc)
        return 0
    make_console().print(whatif_markdown(doc))
    return 0


def whatif_markdown(doc: dict) -> str:
    """The before/after tables as markdown (numbers from the JSON document)."""
    lines = [f"# What the power limiter changes on the {doc['gpu']} (simulated)", "",
             f"Command: `{doc['command']}`. Limiter: window {1e3 * doc['limiter']['window_s']:.1f} ms, "
             f"cap held {doc['cap_w']:.1f} W ({doc['limiter']['source']}). Switching: "
             f"{1e3 * doc['switch_latency_s']:.3g} ms per switch ({doc['switch_model']}).", ""]
    for name, tr in doc["traces"].items():
        lines += [f"## {name}", "", f"Auto under the limiter: steady ceiling {tr['auto']['steady_ceiling_mhz']:.0f} MHz, "
                  f"median clock {tr['auto']['median_core_mhz']:.0f} MHz; step energy {tr['auto']['energy_j']:.4g} J "
                  f"against {tr['auto']['isolated_energy_j']:.4g} J isolated-and-summed "
                  f"({100 * (tr['auto']['energy_j'] / tr['auto']['isolated_energy_j'] - 1):+.1f} %).", "",
                  "| mechanism | slack % | policy | before: ΔE % / Δt % | after (limiter): ΔE % / Δt % | switches after |",
                  "|---|---|---|---|---|---|"]
        for r in tr["rows"]:
            b = (f"{r['before']['energy_change_pct']:+.2f} / {r['before']['time_change_pct']:+.2f}"
                 if r.get("before") else "—")
            lines.append(f"| {r['mechanism']} | {r['slack_pct']:g} | {r['policy']} | {b} | "
                         f"{r['energy_change_pct']:+.2f} / {r['time_change_pct']:+.2f} | {r['switches']} |")
        lines.append("")
    for name, ev in (doc.get("evidence") or {}).items():
        lines += _evidence_markdown(name, ev)
    return "\n".join(lines)


def _evidence_markdown(name: str, ev: dict) -> list[str]:
    if "steps" in ev:  # a validate-steps report
        judged = ev.get("judged_on", "limiter")
        iso = "isolated_with_gaps" if judged == "limiter_with_gaps" else "isolated"
        th = ev.get("thermal")
        gap = (f"at the gap power of the temperature each step's predicted power holds ({th['gap_ref_w']:.1f} W at "
               f"{th['ref_c']:.1f} °C, {th['gap_w_per_c']:+.2f} W/°C; kdvfs.thermal)" if isinstance(th, dict)
               else f"at {ev.get('gap_power_w') or 0:.1f} W")
        out = [f"## Measured: real training steps on the card (`{name}`)", "",
               f"`{ev.get('command', '')}`; host time between steps as GPU idle {gap}. "
               f"Targets ±{ev['targets']['energy_pct']} % energy, ±{ev['targets']['median_clock_pct']} % median clock: "
               f"met {ev['met']['energy']} / {ev['met']['of']} (energy), {ev['met']['clock']} / {ev['met']['of']} (clock).",
               "", "| step | measured J | measured median MHz | isolated ΔE % | limiter ΔE % | limiter Δclock % |",
               "|---|---|---|---|---|---|"]
        for r in ev["steps"]:
            if "measured" not in r:
                out.append(f"| {r['model']} | {r.get('skipped', '')} | | | | |")
                continue
            e = r["error"]
            out.append(f"| {r['model']} | {r['measured']['energy_j']:.4g} | {r['measured']['median_core_mhz']:.0f} | "
                       f"{e[iso]['energy_pct']:+.1f} | {e[judged]['energy_pct']:+.1f} | "
                       f"{e[judged]['median_clock_pct']:+.1f} |")
        return out + [""]
    if "model" in ev and "rms_mhz" in ev:  # a limiter fit
        m = ev["model"]
        return [f"## Measured: the limiter's step responses (`{name}`)", "",
                f"`{ev.get('command', '')}`: window {1e3 * m['window_s']:.1f} ms, gain {m['gain_mhz_per_ws']:.3g} "
                f"MHz/(W·s), slew {m['slew_mhz_per_s']:.0f} MHz/s; median |ceiling − probe clock| "
                + ", ".join(f"{k} {v:.0f} MHz" for k, v in (ev.get("median_abs_mhz") or {}).items()) + ".", ""]
    return []


def _refuse_inputs_as_outputs(a) -> None:
    """``-o`` or ``--plot`` naming an input (steps.json, a recorded trace, the --characterization file) would replace a
    measurement with the report: ``validate-steps DIR/steps.json -o DIR/steps.json`` did. Refused before any work."""
    import json
    from pathlib import Path

    d = Path(a.dir)
    steps = d if d.is_file() else d / "steps.json"
    inputs = {steps.resolve()}
    try:  # the traces it names; an unreadable steps.json is check_steps's to report
        doc = json.loads(steps.read_text())
        inputs |= {(steps.parent / str(st["trace"])).resolve() for st in doc.get("steps", [])
                   if isinstance(st, dict) and st.get("trace")}
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    if a.characterization:
        inputs.add(Path(a.characterization).resolve())
    if getattr(a, "anchors", None):
        inputs.add(Path(a.anchors).resolve())
    for opt, out in (("-o", a.output), ("--plot", a.plot)):
        if out and Path(out).resolve() in inputs:
            raise InputError(f"{opt} {out!r} is one of the measurements validate-steps reads; writing there would "
                             f"replace it: give a new file name (e.g. {opt} steps-check.{'json' if opt == '-o' else 'png'})")
    from kdvfs.cli.paths import FIGURE_SUFFIXES

    fig = Path(a.plot) if a.plot else None  # an existing file was left to the check above, then died in matplotlib
    if fig is not None and fig.suffix and fig.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"--plot {a.plot!r}: a figure is written as {', '.join(FIGURE_SUFFIXES)}, not "
                         f"{fig.suffix!r}; give e.g. --plot {str(fig.with_suffix('.png'))!r}")


def cmd_validate_steps(a) -> int:
    from kdvfs.bundled import bundled_dir
    from kdvfs.gpus import get_gpu
    from kdvfs.limiter_fit import load_json
    from simulator.stepcheck import check_steps

    spec = get_gpu(a.gpu)
    from kdvfs.filekind import describe, kind_of

    given = kind_of(a.dir)  # a profiler trace given for the folder was "not JSON ('utf-8' codec can't decode …)"
    if given is not None and given != "kdvfs-steps/1":
        raise InputError(f"{a.dir!r} is {describe(given)}, not a step measurement: give the folder `kdvfs "
                         "measure-steps` wrote (its steps.json and Kineto traces), or that steps.json")
    from kdvfs.cli.anchor import anchor_card
    from kdvfs.fileio import check_output_path

    if a.output:  # before the minutes of simulation, not after
        check_output_path(a.output, "report output", make_parents=True)
    if a.plot:
        check_output_path(a.plot, "--plot figure", make_parents=True)
    _refuse_inputs_as_outputs(a)
    from kdvfs.cli.paths import refuse_other_kinds

    refuse_other_kinds(a)  # after its own inputs' check, whose message names them (paths.py leaves this verb to it)
    # the card the steps ran on, where its anchor run is given: the bundled fit adapted to it (kdvfs.card_anchor)
    spec, anchored_thermal, anchor = anchor_card(spec, a.anchors, a.anchor_params)
    # the power of the GPU idle but clocked, from measurements apart from the steps checked: by default the card
    # fit's gap power (the zoo's gap entries: a tiny kernel every 100 µs / 1 ms, nothing launched; energy counter),
    # else the limiter fit's idle plant (NVML's instantaneous power in the step responses' idle phases)
    from kdvfs.limiter import gap_power_for

    alt = {}
    fit = bundled_dir() / f"{spec.name}.limiter.json"
    idle_plant = load_json(fit)["plants"].get("idle", {}).get("a_w") if fit.exists() else None
    if a.characterization:  # NVML's power right after the campaign, for comparison
        from hw_backend.characterize import load_characterization

        ch = load_characterization(a.characterization)
        ch_card = str(ch.get("gpu") or "an unnamed card")
        after = ch.get("idle_after")
        if not isinstance(after, dict) or not isinstance(after.get("power_w"), (int, float)):
            raise InputError(f"--characterization {a.characterization!r} has no 'idle_after' power (the campaign's "
                             "idle reading at its end); give the characterisation file of a full `kdvfs characterize` "
                             "run, or leave the option out")
        if after.get("settle_s") is None:
            # read before NVML's ~1 s power average had let go of the last entry: that entry's power, not idle
            last = next((k for k in reversed(ch.get("kernels") or []) if isinstance(k, dict) and "power_w" in k), {})
            idle = next((k for k in ch.get("kernels") or [] if isinstance(k, dict)
                         and str(k.get("name", "")).startswith("idle") and isinstance(k.get("power_w"), (int, float))),
                        None)
            raise InputError(
                f"--characterization {a.characterization!r}: its 'idle_after' power ({float(after['power_w']):.1f} W) "
                "was read right after the last entry"
                + (f" ({last.get('name')}, {float(last['power_w']):.1f} W)" if last else "")
                + ", while NVML's power average still held that entry: it is not the idle card's power (the rule: an "
                "idle reading taken after the card settled, 'settle_s'; `kdvfs characterize` writes one since "
                "session 10). "
                + (f"Its own {idle['name']} entry measured {float(idle['power_w']):.1f} W: give --gap-power "
                   f"{float(idle['power_w']):.1f} to check with that, or leave out --characterization"
                   if idle else "Give a newer file, or --gap-power W with a measured idle power, or leave the option "
                   "out"))
        alt["idle_after"] = float(after["power_w"])
    gap_default = gap_power_for(spec)  # the card fit's gap power, else the limiter fit's idle plant
    if idle_plant is not None and gap_default is not None and gap_default != idle_plant:
        alt["idle_plant"] = float(idle_plant)
    if a.gap_power is not None and not (math.isfinite(a.gap_power) and 0 < a.gap_power < spec.cap_w):
        raise InputError(f"--gap-power {a.gap_power!r} must be a positive number of watts below the card's cap "
                         f"({spec.cap_w:g} W: the GPU idle between steps); "
                         "e.g. --gap-power 117, or leave it out to use the measured value")
    if anchor is not None and gap_default is not None:  # the idle card draws the anchors' static power too
        gap_default += anchor.static_w
    if anchor is not None and "idle_plant" in alt:  # so does the limiter fit's idle plant, measured on another card
        alt["idle_plant"] += anchor.static_w
    gap_w = a.gap_power if a.gap_power is not None else gap_default
    # the bundled fit's thermal gap model (session 9), unless a gap power was given: each step's gaps at the gap
    # power of the temperature its own predicted average power holds
    thermal = anchored_thermal if a.gap_power is None else None
    from kdvfs.cli.common import stage_progress

    with stage_progress(make_console(sys.stderr), "validate-steps") as prog:  # ~1.5 s a step, silent before
        doc = dict(check_steps(a.dir, spec, gap_power_w=gap_w, alt_gap_powers=alt, thermal=thermal, progress=prog),
                   command=_command())
    caution = None
    if anchor is not None:
        doc["card_anchor"] = anchor.to_dict()
        from kdvfs.cli.anchor import other_card_caution

        d = Path(a.dir)
        try:  # the steps' card, where steps.json records it (check_steps has read the file by now)
            steps_uuid = json.loads((d if d.is_file() else d / "steps.json").read_text()).get("gpu_uuid")
        except (OSError, ValueError, AttributeError):
            steps_uuid = None
        caution = other_card_caution(anchor, steps_uuid)
        if caution:  # another lease's anchors gave no sign: the report read as the steps' own card
            doc["card_anchor_caution"] = caution
            make_console(sys.stderr).print(caution, markup=False)
    if a.output:
        _write_json(doc, a.output)
    if a.plot and doc["met"]["of"]:
        from kdvfs.plots import plot_step_check

        plot_step_check(doc, a.plot)
    if a.json:
        print_json(doc)
        return 0
    rows = []
    skipped = [r for r in doc["steps"] if "skipped" in r]
    for r in doc["steps"]:
        if "skipped" in r:
            rows.append([r["model"], "skipped (below)", "", "", "", ""])
            continue
        m, e = r["measured"], r["error"]
        g = "_with_gaps" if "limiter_with_gaps" in e else ""
        # a miss is marked: -2.0 printed for -2.01 % would read as within a ±2 % target
        rows.append([r["model"], f"{m['energy_j']:.4g}", f"{e['isolated' + g]['energy_pct']:+.1f}",
                     f"{e['limiter' + g]['energy_pct']:+.2f}" + ("" if r["energy_target_met"] else " miss"),
                     f"{m['median_core_mhz']:.0f}",
                     f"{e['limiter' + g]['median_clock_pct']:+.2f}" + ("" if r["clock_target_met"] else " miss")])
    c = make_console()
    c.print(table(f"steps on {spec.name}: predicted vs measured (targets ±{doc['targets']['energy_pct']} % "
                  f"energy, ±{doc['targets']['median_clock_pct']} % median clock)",
                  ["model", "energy (J)", "isolated ΔE %", "limiter ΔE %", "median MHz", "limiter Δclock %"], rows))
    met = doc["met"]
    c.print(f"within the targets ({doc['judged_on']}): energy {met['energy']} of {met['of']}, median clock "
            f"{met['clock']} of {met['of']}" + (f"; {len(skipped)} skipped" if skipped else ""))
    if anchor is not None:  # the table is this card's, not the bundled fit's: said on the screen, not only in -o
        from kdvfs.cli.anchor import card_line

        c.print("predicted for " + card_line(anchor), markup=False)
    for r in skipped:
        c.print(f"skipped {r['model']}: {r['skipped']}", markup=False)
    from kdvfs.importers import OVERLAP_NOTE_SHARE

    over = [(r["model"], r["predicted"].get("trace_overlap_pct", 0.0)) for r in doc["steps"] if "predicted" in r]
    over = [(m, p) for m, p in over if p > 100 * OVERLAP_NOTE_SHARE]
    if over:  # wav2vec 2.0 read +20 % and +48 % without a word of it
        c.print("note: the kernels of " + ", ".join(f"{m} (+{p:.0f} %)" for m, p in over) + " overlap on several "
                "streams: their times summed exceed the time the GPU was busy by that much, and the model runs a "
                "step's kernels one after another, so its time and energy read high there", markup=False)
    # the other gap powers' checks were only in the JSON: `--characterization F` printed nothing of F's
    what = {"idle_after": f"the idle power after the --characterization campaign, on {ch_card}" if a.characterization
            else "the idle power after a campaign", "idle_plant": "the limiter fit's idle plant"
            + (f" {idle_plant:.1f} W with the anchors' static power {anchor.static_w:+.1f} W" if anchor is not None
               and idle_plant is not None else "")}
    for name, sens in doc.get("gap_power_sensitivity", {}).items():
        sm = sens["met"]
        c.print(f"with the gap power at {sens['gap_power_w']:.1f} W ({what.get(name, name)}): energy {sm['energy']} "
                f"of {sm['of']}, median clock {sm['clock']} of {sm['of']} within the targets", markup=False)
    if not met["of"]:
        raise InputError(f"no step in {a.dir!r} could be checked (every one was skipped, reasons above); give the "
                         "folder `kdvfs measure-steps -o` wrote")
    return 0


def register(sub, j) -> None:
    sp = sub.add_parser("limiter", help="the card's power limiter: fit its dynamics, what it changes")
    lsub = sp.add_subparsers(dest="limiter_cmd", required=True)
    f = j(lsub.add_parser("fit", help="fit window, gain, slew and cap as held to step responses"))
    f.add_argument("files", nargs="+", help="characterisation JSON files with \"step_responses\"")
    f.add_argument("--gpu", required=True)
    f.add_argument("--only", action="append", help="fit only this step response (repeatable)")
    f.add_argument("--period", type=float, default=1e-3, help="the controller's tick in seconds")
    f.add_argument("--cap", choices=["preset", "zoo", "fit"], default="preset",
                   help="the power the model holds: the preset's cap_w (default), the zoo's energy-counter median, or "
                        "the cap fitted with the dynamics")
    f.add_argument("-o", "--output", help="write the fit as JSON")
    f.add_argument("--bundle", action="store_true", help="also install it as the preset's limiter (traces/GPU.limiter.json)")
    f.set_defaults(fn=cmd_limiter_fit)
    c = j(lsub.add_parser("check", help="a stored fit against step responses (e.g. ones held out of the fit)"))
    c.add_argument("files", nargs="+", help="characterisation JSON files with \"step_responses\"")
    c.add_argument("--gpu", required=True)
    c.add_argument("--fit", required=True, help="the fit JSON (kdvfs limiter fit -o)")
    c.add_argument("--only", action="append", help="check only this step response (repeatable)")
    c.add_argument("-o", "--output")
    c.set_defaults(fn=cmd_limiter_check)
    w = j(lsub.add_parser("whatif", help="policies against auto before and after the limiter (JSON + markdown)"))
    w.add_argument("--trace", action="append", required=True, help="bundled trace (repeatable); its bundled profile")
    w.add_argument("--gpu", required=True)
    w.add_argument("--slack", type=float, action="append", help="percent (repeatable; default 0, 1, 2, 5)")
    w.add_argument("--mechanism", action="append", choices=["sync", "callback", "predictive"])
    w.add_argument("-o", "--output")
    w.add_argument("--md", help="write the tables as markdown")
    w.add_argument("--evidence", action="append",
                   help="a validate-steps report or limiter fit JSON to show beside the tables (repeatable)")
    w.set_defaults(fn=cmd_limiter_whatif)

    sp = j(sub.add_parser("validate-steps", help="measured training steps against the model under the card's limiter"))
    sp.add_argument("dir", help="folder with steps.json and the Kineto traces (from the step measurement), or the "
                                "steps.json itself")
    sp.add_argument("--gpu", required=True)
    sp.add_argument("-o", "--output", help="write the report as JSON")
    sp.add_argument("--plot", metavar="PNG", help="also draw each step's energy and clock error against the targets")
    sp.add_argument("--gap-power", type=float, help="watts drawn in the host time between steps (GPU idle, clocked; "
                                                    "default: the bundled card fit's thermal gap line at the temperature "
                                                    "each step's predicted power holds (kdvfs.thermal), or its "
                                                    "gap_power_w, measured by the zoo's gap entries; else the "
                                                    "limiter fit's idle plant)")
    sp.add_argument("--characterization", help="also report the check with this characterisation's idle_after power")
    from kdvfs.cli.anchor import add_anchor_args

    add_anchor_args(sp, "; give the anchor run of the lease the steps were measured in")
    sp.set_defaults(fn=cmd_validate_steps)
