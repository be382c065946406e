"""Verbs ``gpu list|show`` and ``profile build|fit|crossval|calibrate|diagnose``."""

from __future__ import annotations

from kdvfs.cli.common import load_trace, out
from kdvfs.console import print_json, table

__all__ = ["register"]

def cmd_gpu_list(a) -> int:
    from kdvfs.gpus import PRESETS

    rows = [g.to_dict() for g in PRESETS.values()]
    if a.json:
        print_json(rows)
        return 0
    out(a).print(table("GPU presets", ["name", "card", "clocks", "limit (W)", "switch (ms)"],
                        [[g.name, g.full_name, g.describe_clocks(), g.power_limit_w, 1e3 * g.switch.total_s]
                         for g in PRESETS.values()]))
    return 0


def cmd_gpu_show(a) -> int:
    from kdvfs.gpus import get_gpu

    d = get_gpu(a.name).to_dict()
    if a.json:
        print_json(d)
    else:
        c = out(a)
        for k, v in d.items():
            if k != "sources":
                c.print(f"{k:>20}: {v}")
        c.print("sources:")
        for k, v in d["sources"].items():
            c.print(f"  {k}: {v}")
    return 0




def cmd_profile_build(a) -> int:
    from kdvfs.fileio import check_output_path
    from kdvfs.gpus import get_gpu
    from kdvfs.model import default_params
    from kdvfs.profile import build_profile, save_profile

    check_output_path(a.output, "profile output")
    t, g = load_trace(a.trace), get_gpu(a.gpu)
    from kdvfs.cli.anchor import anchor_card
    from kdvfs.cli.common import note_other_card

    note_other_card(t, g)
    g, _, anchor = anchor_card(g, a.anchors, a.anchor_params)
    p = build_profile(t, g, default_params(t, g))
    if anchor is not None:  # the CSV says whose card its powers are, not only the screen (session 10's leftover)
        import dataclasses

        p = dataclasses.replace(p, card=anchor.header_items())
    save_profile(p, a.output)
    doc = {"output": str(a.output), "kernels": len(p.keys), "settings": len(p.settings), "source": "model"}
    if anchor is not None:
        doc["card_anchor"] = anchor.to_dict()
    if a.json:
        from kdvfs.profile import clock_table

        print_json(doc | {"clocks": clock_table(t, p)})
    else:
        out(a).print(f"wrote {a.output}: {len(p.keys)} kernels × {len(p.settings)} settings (model"
                     + (f", the card of {anchor.source}: static {anchor.static_w:+.1f} W, core dynamic power × "
                        f"{anchor.core_scale:.3f}, memory-traffic power × {anchor.mem_scale:.3f}" if anchor is not None else "") + ")", markup=False)
    return 0


def cmd_profile_fit(a) -> int:
    import dataclasses

    from kdvfs.fileio import check_output_path
    from kdvfs.fit import fit_profile, read_sweep
    from kdvfs.gpus import get_gpu
    from kdvfs.identity import check_sweep_card, file_header
    from kdvfs.profile import save_profile

    check_output_path(a.output, "profile output")
    sw = read_sweep(a.sweep)
    spec = get_gpu(a.gpu)
    check_sweep_card(a.sweep, sw, spec)
    head = file_header(a.sweep)
    p = fit_profile(sw, spec, trace_name=a.trace_name or head.get("trace", ""))
    if head.get("trace_sha") and (not a.trace_name or a.trace_name == head.get("trace")):
        p = dataclasses.replace(p, trace_sha=head["trace_sha"])
    save_profile(p, a.output)
    doc = {"output": str(a.output), "kernels": len(p.keys), "settings": len(p.settings), "source": "fitted"}
    print_json(doc) if a.json else out(a).print(f"wrote {a.output}: {len(p.keys)} kernels × {len(p.settings)} settings (fitted)")
    return 0


def cmd_profile_crossval(a) -> int:
    from kdvfs.fit import crossval, read_sweep
    from kdvfs.gpus import get_gpu

    sweep = read_sweep(a.sweep)
    spec = get_gpu(a.gpu) if a.gpu else None
    if spec is not None:  # a catalog card must have the sweep's memory clocks, or its model predicts other settings
        from kdvfs.errors import InputError

        mems = sorted({int(p.mem_mhz) for ps in sweep.points.values() for p in ps if p.mem_mhz})
        bad = [m for m in mems if m not in spec.mem_clocks_mhz]
        if bad:
            raise InputError(f"--gpu {spec.name}: the sweep has memory clock(s) {', '.join(map(str, bad))} MHz that "
                             f"{spec.name} lacks ({spec.describe_clocks()}); give the card it was measured on, or "
                             "leave out --gpu to fit a card built from the sweep")
    r = crossval(sweep, a.train_points, spec)
    if a.json:
        print_json(r)
        return 0
    c = out(a)
    c.print(table(f"cross-validation, {a.train_points} training settings per kernel ({r['card']} card)",
                  ["kernel", "test points", "time MAPE %", "power MAPE %", "energy MAPE %"],
                  [[k["kernel"], k["test"], k["time_mape_pct"], k["power_mape_pct"], k["energy_mape_pct"]] for k in r["kernels"]]))
    c.print(f"overall: time {r['time_mape_pct']:.2f} %, power {r['power_mape_pct']:.2f} %, energy {r['energy_mape_pct']:.2f} %")
    if r["slow_core_mhz"]:
        c.print(f"low-clock slowdown learnt: core time × (1 + ({r['slow_core_mhz']:.0f} MHz / f)^{r['slow_exponent']:.2f})")
    return 0


def cmd_profile_calibrate(a) -> int:
    import sys
    from pathlib import Path

    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.calibrate_spaan2026 import calibrate_spaan2026
    from kdvfs.cli.common import progress
    from kdvfs.console import make_console
    from kdvfs.errors import InputError

    if a.study != "spaan2026":
        raise InputError(f"unknown study {a.study!r}; known: spaan2026")
    if a.out and a.check:
        raise InputError("--check writes nothing; drop --out or --check")
    from kdvfs.bundled import bundled_dir

    if a.method == "joint" and not (a.out or a.check):
        raise InputError("--method joint does not replace the bundled profile (its held-out checks fail: "
                         "validation/rtx3080ti-calibration/README.md); give --out DIR or --check")
    out_dir = None if a.check else (a.out or bundled_dir())
    if a.fit_option and a.method == "table":
        if any(not o.startswith(("structure=", "emin_tol_pct=")) for o in a.fit_option):
            raise InputError("--fit-option sets the joint method's weights; the table method has none (it takes only "
                             "structure= of leak, leakexp, vflow, slowcore and emin_tol_pct=): add --method joint or "
                             "drop --fit-option")
        if out_dir is not None and Path(out_dir) == bundled_dir():
            raise InputError("--method table with --fit-option is a variant, not the bundled fit; give --out DIR or "
                             "--check")
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise InputError(f"--out {str(out_dir)!r} is a file; give a folder for the profile and calibration JSON")
    opts = JointOptions(loss_pass=a.loss_pass, method=a.method, **_fit_options(a.fit_option or []))
    err = make_console(sys.stderr)
    if a.method == "table":
        rep = calibrate_spaan2026(a.table, a.sweep, out_dir, opts, started=lambda: err.print(
            "calibrating on the per-kernel table (a few minutes; the pass-level sweep is the check)"))
    else:
        with progress(err, opts.prefit_nfev + opts.max_nfev, "calibrating (iterations)") as prog:
            task = prog.add_task("fit", total=opts.prefit_nfev + opts.max_nfev)
            rep = calibrate_spaan2026(a.table, a.sweep, out_dir, opts,
                                      progress=lambda n, tot: prog.update(task, completed=n))
    if a.json:
        print_json({k: v for k, v in rep.items() if k not in ("kernels", "passes")})
        return 0
    c = out(a)
    pl, kn = rep["pass_level"], rep["kernel"]
    n = kn["kernels"]
    c.print(table("per kernel (Spaan et al. 2026, Table 1 / Figure 5)", ["check", "result", "target"], [
        ["auto time and energy within 1 %", f"{kn['auto_within_1pct']}/{n}", f"{n}/{n}"],
        ["best setting within 1 pt time / 2 pt energy", f"{kn['best_within_target']}/{n} = {100 * kn['best_share']:.0f} %",
         "≥ 80 %"],
        ["extremes within 25 %", f"{kn['extremes_within_25pct']}/{n}", f"{n}/{n}"],
        ["every kernel at its minimum energy", f"{kn['min_energy_mix_pct']:+.1f} %",
         f"check: table {kn['min_energy_mix_paper_pct']:+.1f} %"]]))
    o = pl[f"with_loss_in_{'forward' if pl['loss_pass'] == 'backward' else 'backward'}"]
    c.print(table(f"pass level (Figures 3/4; loss kernels in the {pl['loss_pass']} pass)", ["error, points", "time",
                  "energy", "target", "loss on the other side (t / E)"], [
        ["median |error|, 66 settings × 2 passes", f"{pl['median_abs_time_err']:.2f}", f"{pl['median_abs_energy_err']:.2f}",
         "≤ 1.5", f"{o['median_abs_time_err']:.2f} / {o['median_abs_energy_err']:.2f}"],
        ["worst, core ≥ 630 & memory ≥ 5001 or auto", f"{pl['worst_main_time_err']:.2f}",
         f"{pl['worst_main_energy_err']:.2f}", "≤ 5", f"{o['worst_main_time_err']:.2f} / {o['worst_main_energy_err']:.2f}"]]))
    from kdvfs.cli.optimize import print_table2

    print_table2(c, rep["table2"], "Table 2 from the optimisers on the fitted profile (held out, not fitted)")
    c.print(f"fit ({a.method} method): " + (f"{rep['evaluations']} iterations, " if a.method == "joint" else "")
            + f"loss {rep['cost']:.4g}, {rep['seconds']:.0f} s")
    c.print("card constants: " + preset_source_short(rep))
    if rep["written"]:
        c.print("wrote " + ", ".join(rep["written"]))
    if not rep["preset_matches"]:
        c.print("these card constants differ from the rtx3080ti preset now in use; the preset reads the bundled "
                "calibration (traces/gpt3xl-llmc-rtx3080ti.calibration.json) when kdvfs starts"
                + (", so the next command uses them" if rep["written"] and out_dir == bundled_dir() else
                   "; to make them the preset's, run without --out"))
    return 0


def _fit_options(items: list[str]) -> dict:
    """``--fit-option NAME=VALUE`` pairs as ``JointOptions`` fields (the joint method's weights and stages)."""
    import dataclasses
    import math

    from kdvfs.calibrate_joint import JointOptions
    from kdvfs.errors import InputError

    kinds = {f.name: f.type for f in dataclasses.fields(JointOptions) if f.name not in ("method", "loss_pass")}
    # the rule each number must meet: weights may be 0 (off), tolerances and scales must be positive, iterations ≥ 1
    positive = {"emin_tol_pct", "time_sigma_floor"}
    at_least_one = {"max_nfev"}
    out: dict = {}
    for it in items:
        name, eq, val = it.partition("=")
        if not eq or name not in kinds:
            raise InputError(f"--fit-option {it!r} must be NAME=VALUE with NAME one of {', '.join(sorted(kinds))}")
        kind = str(kinds[name])
        if kind == "str":
            out[name] = val
            continue
        try:
            v = int(val) if kind == "int" else float(val)
        except ValueError:
            raise InputError(f"--fit-option {it!r}: {name} takes a number ({kind}); e.g. {name}=1") from None
        low = 1 if name in at_least_one else 0
        if not math.isfinite(v) or v < low or (name in positive and v <= 0):
            rule = "a finite number > 0" if name in positive else f"a finite number ≥ {low}"
            raise InputError(f"--fit-option {it!r}: {name} must be {rule}; e.g. {name}=1")
        out[name] = v
    return out


def preset_source_short(rep: dict) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in rep["card_vector"].items())


def cmd_profile_diagnose(a) -> int:
    from kdvfs.diagnosis import best_setting_diagnosis, write_diagnosis

    doc = best_setting_diagnosis(a.fits)
    if a.out:
        write_diagnosis(doc, a.out)
    if a.json:
        print_json(doc)
        return 0
    c = out(a)
    for d in doc["locked_memory"]:
        c.print(f"(auto, 9501) {d['pass']:8s} {d['counted']:12s}: kernels {len(d['kernels'])}, {d['time_share_pct']:.1f} % of "
                f"the time, their own change {d['their_time_change_pct']['min']:+.2f} … {d['their_time_change_pct']['max']:+.2f} "
                f"% time, {d['their_energy_change_pct']['min']:+.2f} … {d['their_energy_change_pct']['max']:+.2f} % energy; "
                f"sweep {d['sweep_time_change_pct']:+.2f} / {d['sweep_energy_change_pct']:+.2f} %; the rest must average "
                f"{d['rest_time_change_pct']:+.2f} / {d['rest_energy_change_pct']:+.2f} %", markup=False, highlight=False,
                soft_wrap=True)
    for f in doc["fits"]:
        lines = [f"{f['fit']}: best missed {f['best_missed']}/46; pass time share of the misses "
                 f"forward {f['best_missed_time_share_pct']['forward']:.1f} %, "
                 f"backward {f['best_missed_time_share_pct']['backward']:.1f} %"]
        lines += [f"  {g:30s}: {d['best_missed']}/{d['kernels']} best missed; time share fwd "
                  f"{d['time_share_pct']['forward']:.1f} % bwd {d['time_share_pct']['backward']:.1f} %; model − table "
                  f"dt {d['dt_err_pt']['min']:+.2f} … {d['dt_err_pt']['max']:+.2f} (median {d['dt_err_pt']['median']:+.2f}) "
                  f"dE {d['de_err_pt']['min']:+.2f} … {d['de_err_pt']['max']:+.2f} (median {d['de_err_pt']['median']:+.2f})"
                  for g, d in f["groups"].items()]
        for k in f["kernels"]:
            if not k["misses"]:
                continue
            a_, b_ = k["model_at_auto"], k["model_at_best"]
            lines.append(
                f"  {k['id']:2d} {k['name'][:14]:14s} {k['pass'][:3]} {k['pass_time_share_pct']:5.1f}% "
                f"best {k['best']:10s} dt {k['best_time_change']['model']:+6.2f} ({k['best_time_change']['table']:+6.2f}) "
                f"dE {k['best_energy_change']['model']:+6.2f} ({k['best_energy_change']['table']:+6.2f}) "
                f"| P {a_['power_w']:.0f}->{b_['power_w']:.0f} W (table {k['table_power_w']['auto']:.0f}->"
                f"{k['table_power_w']['best']:.0f}) f {a_['core_mhz']:.0f}->{b_['core_mhz']:.0f} "
                f"| {', '.join(k['misses'])} | moves dE: "
                + ", ".join(f"{n} {v:+.2f}" for n, v in k["moves_best_energy"].items()))
        for line in lines:
            c.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def register(sub, j) -> None:
    g = sub.add_parser("gpu", help="the GPU catalog").add_subparsers(dest="gpu_cmd", required=True)
    j(g.add_parser("list")).set_defaults(fn=cmd_gpu_list)
    sp = j(g.add_parser("show"))
    sp.add_argument("name")
    sp.set_defaults(fn=cmd_gpu_show)

    pr = sub.add_parser("profile", help="build, fit and cross-validate profiles").add_subparsers(dest="profile_cmd", required=True)
    sp = j(pr.add_parser("build", help="a profile from the model"))
    sp.add_argument("--trace", required=True)
    sp.add_argument("--gpu", required=True)
    sp.add_argument("-o", "--output", required=True)
    from kdvfs.cli.anchor import add_anchor_args

    add_anchor_args(sp)
    sp.set_defaults(fn=cmd_profile_build)
    sp = j(pr.add_parser("fit", help="fit the model to a measured sweep and complete the grid"))
    sp.add_argument("sweep")
    sp.add_argument("--gpu", required=True)
    sp.add_argument("--trace-name")
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_profile_fit)
    sp = j(pr.add_parser(
        "crossval", help="fit on K settings per kernel, predict the rest",
        description="Fit the model on K settings per kernel and predict the others. Each kernel trains on its top "
                    "setting, a low end in the lowest 10 % of its range and K-2 interior settings; the low end and "
                    "the interior move from kernel to kernel so that the card's shared constants see every clock "
                    "(docs/fit.md). Without --gpu the card is built from the sweep and learns a voltage curve, idle "
                    "power and a low-clock slowdown. --json gives every point's signed error, training points "
                    "marked (\"train\": true)."))
    sp.add_argument("sweep")
    sp.add_argument("--train-points", type=int, default=3, help="settings per kernel to fit on (default 3)")
    sp.add_argument("--gpu", help="a catalog card (default: a card built from the sweep)")
    sp.set_defaults(fn=cmd_profile_crossval)
    sp = j(pr.add_parser("calibrate", help="fit the RTX 3080 Ti model to a study's data and rewrite the bundled profile"))
    sp.add_argument("study", help="spaan2026")
    sp.add_argument("--table", help="the per-kernel table (default: the bundled copy)")
    sp.add_argument("--sweep", help="the pass-level sweep (default: the bundled copy)")
    sp.add_argument("--out", help="folder for the profile and calibration JSON (default: the bundled traces/)")
    sp.add_argument("--check", action="store_true", help="fit and report only; write nothing")
    sp.add_argument("--method", choices=["table", "joint"], default="table",
                    help="table: fit the per-kernel table, check on the pass-level sweep (the bundled fit); joint: fit "
                         "both together (needs --out or --check) (default: table)")
    sp.add_argument("--fit-option", action="append", metavar="NAME=VALUE",
                    help="a weight or stage of the joint method (kdvfs.calibrate_joint.JointOptions, e.g. pass_weight=0.5, "
                         "hull_weight=1, emin_tol_pct=5); the table method takes only structure= (leak, leakexp, vflow, "
                         "slowcore) and emin_tol_pct=, with --out or --check; repeatable (default: none)")
    sp.add_argument("--loss-pass", choices=["forward", "backward"], default="backward",
                    help="which pass the loss kernels belong to in the pass-level sweep (default: backward, llm.c's)")
    sp.set_defaults(fn=cmd_profile_calibrate)
    sp = j(pr.add_parser(
        "diagnose", help="why an RTX 3080 Ti calibration misses the per-kernel table's best settings",
        description="For each calibration JSON (`profile calibrate spaan2026 --out DIR` writes one) and every kernel of "
                    "the per-kernel table: the targets it misses, the model's power terms at auto and at the best "
                    "setting, and which card parameter moves its best-setting change most; beside them the model-free "
                    "groups of kernels by best setting against the pass-level sweep. Nothing is fitted."))
    sp.add_argument("fits", nargs="+", help="calibration JSON files (card_vector and params)")
    sp.add_argument("--out", help="write the whole diagnosis here as JSON (floats to 5 significant digits)")
    sp.set_defaults(fn=cmd_profile_diagnose)
