"""Verb ``summarize``: the summaries under validation/ computed again from their measurement files
(``simulator.summaries``); run from the checkout's root."""

from __future__ import annotations

from pathlib import Path

from kdvfs.console import make_console, print_json

__all__ = ["register"]

# what: (default folder, default output file name in it)
_WHAT = {"h200": ("validation/h200", "summary.json"), "hf-runtime": ("validation/h200/runtime", "summary.json"),
         "h200x2": ("validation/h200x2", "comparison.json")}


def cmd_summarize(a) -> int:
    from simulator import summaries

    folder = Path(a.folder or _WHAT[a.what][0])
    if not folder.is_dir():  # the input first: outside a checkout the message blamed the output's folder
        from kdvfs.errors import InputError

        raise InputError(f"summarize {a.what}: the measurement folder {str(folder)!r} "
                         + ("is not a folder" if folder.exists() else "does not exist")
                         + ("" if a.folder else " (the default, relative to the checkout's root)")
                         + "; run from the checkout's root or give --folder DIR")
    out = Path(a.output) if a.output else folder / _WHAT[a.what][1]
    if a.what == "h200x2" and not a.output:
        # a replay other than the default gets its own file, never the kept comparison.json
        # (the README's `--limiter off` used to overwrite it with the isolated replay)
        extra = ((["measured_collectives"] if a.measured_collectives else [])
                 + ([f"limiter_{a.limiter}"] if a.limiter != "auto" else [])
                 + ([f"gpu_{a.gpu}"] if a.gpu != "h200" else []))
        out = folder / ("_".join(["comparison"] + extra) + ".json")
    # h200x2 also writes the imported multi-rank trace: into the folder, or beside -o when that is elsewhere
    ranks_trace = None
    if a.what == "h200x2":
        same = out.parent.resolve() == folder.resolve()
        ranks_trace = folder / "ranks.trace.json.gz" if same else out.with_name(out.name.split(".")[0] +
                                                                                ".ranks.trace.json.gz")
    _check_writable([out] + ([ranks_trace] if ranks_trace else []), folder, a.output is None)
    if a.what == "h200":
        from kdvfs.bundled import resolve_trace_path

        doc = summaries.h200_summary(folder, resolve_trace_path(a.trace))
        lines = [f"step measured {1e3 * doc['measured_step_time_s']:.3f} ms / {doc['measured_step_energy_j']:.3f} J; "
                 f"isolated-and-summed {1e3 * doc['predicted_step_time_s']:.3f} ms / "
                 f"{doc['predicted_step_energy_j']:.3f} J ({doc['time_error_pct']:+.2f} % time, "
                 f"{doc['energy_error_pct']:+.2f} % energy)"]
        lines += [f"live {k} no-op switch: +{1e6 * v['measured_extra_time_per_switch_s']:.0f} µs, "
                  f"{v['measured_extra_energy_per_switch_j']:+.4f} J per switch (simulated "
                  f"+{1e6 * v['simulated_extra_time_per_switch_s']:.0f} µs, "
                  f"{v['simulated_extra_energy_per_switch_j']:+.4f} J)"
                  for k, v in doc["live_noop_switching"]["per_switch"].items()]
    elif a.what == "hf-runtime":
        doc = summaries.hf_runtime_summary(folder)
        lines = [f"{name}: {s['steps_with_expected_count']}/{s['steps']} steps with the expected switches, overhead "
                 f"{s['measured']['overhead_pct']:+.2f} % measured" for name, s in doc["schedules"].items()]
    else:
        mc = " --measured-collectives" if a.measured_collectives else ""
        lm = "" if a.limiter == "auto" else f" --limiter {a.limiter}"
        lm += "" if a.gpu == "h200" else f" --gpu {a.gpu}"  # the command must rebuild this document
        doc = summaries.h200x2_comparison(folder, a.gpu, command=f"kdvfs summarize h200x2 --folder {folder}{mc}{lm}",
                                          measured_collectives=a.measured_collectives,
                                          limiter={"auto": None, "on": True, "off": False}[a.limiter],
                                          ranks_trace=ranks_trace)
        lines = [f"rank {r['rank']}: step {1e3 * r['measured_step_time_s']:.2f} ms measured, "
                 f"{1e3 * r['simulated_step_time_s']:.2f} ms simulated ({r['time_error_pct']:+.2f} %); "
                 f"{r['measured_step_energy_j']:.2f} J measured, {r['simulated_step_energy_j']:.2f} J simulated "
                 f"({r['energy_error_pct']:+.2f} %)" for r in doc["ranks"]]
    summaries.write_summary(doc, out)
    if a.json:
        print_json(doc)
        return 0
    c = make_console()
    for line in lines + [f"wrote {out}"] + ([f"wrote {ranks_trace}"] if ranks_trace else []):
        c.print(line)
    return 0


def _check_writable(paths: list[Path], folder: Path, default_out: bool) -> None:
    """Refuse, before the work, to write where it cannot (a read-only copy of a validation folder)."""
    import os

    from kdvfs.errors import InputError

    for p in paths:
        d = p.parent
        if not d.is_dir():
            raise InputError(f"cannot write {p}: folder {str(d)!r} does not exist; create it or give -o FILE in an "
                             "existing folder")
        if not os.access(d, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
            hint = (f"summarize writes its results into the measurement folder {str(folder)!r} by default; give "
                    "-o FILE in a writable folder, or copy the folder") if default_out else "give -o FILE elsewhere"
            raise InputError(f"cannot write {p}: not writable; {hint}")


def register(sub, j) -> None:
    sp = j(sub.add_parser("summarize", help="a validation summary computed again from its measurement files"))
    sp.add_argument("what", choices=sorted(_WHAT), help="h200: the observe-only H200 session; hf-runtime: the runtime "
                    "on the recorded GPT-2 step; h200x2: the DDP step on two H200s against the multi-rank replay")
    sp.add_argument("--folder", help="the measurement folder (default: validation/h200, validation/h200/runtime or "
                                     "validation/h200x2, from the checkout's root)")
    sp.add_argument("--trace", default="gpt3xl-torch-h200-bf16", help="h200: the bf16 trace recorded in the session")
    sp.add_argument("--gpu", default="h200", help="h200x2: the card")
    sp.add_argument("--measured-collectives", action="store_true",
                    help="h200x2: NCCL kernels at the collective-alone powers measured in the same run (--extra "
                         "windows) instead of the model's collective category (default: off)")
    sp.add_argument("--limiter", choices=["auto", "on", "off"], default="auto",
                    help="h200x2: replay under the card's windowed power limiter (auto: where the card has one) or "
                         "each kernel throttled alone (off); the other is reported beside it")
    sp.add_argument("-o", "--output", help="file to write (default: summary.json or comparison.json in the folder, "
                                           "h200x2's other replays comparison_<options>.json, e.g. "
                                           "comparison_limiter_off.json; h200x2 also writes the imported multi-rank trace, ranks.trace.json.gz, "
                                           "into the folder, or beside -o as STEM.ranks.trace.json.gz when -o is "
                                           "elsewhere)")
    sp.set_defaults(fn=cmd_summarize)
