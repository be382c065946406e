"""``docs/results.md`` generated from the result files under ``validation/`` (``kdvfs results``).

Every number in the document is read from a JSON file written by the command that measured or computed it; the prose
around the tables names that command and what the numbers mean, and carries no numbers of its own, so it cannot drift
from the data. ``kdvfs results --check`` fails when the committed document is not what the files give (CI runs it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SECTIONS", "Section", "render_results"]

MAX_ROWS = 30


@dataclass(frozen=True, slots=True)
class Section:
    """One result file and what it is.

    Attributes:
        path: the JSON file, relative to the repository root.
        title: the section's heading.
        about: what was done and how to redo it (no numbers: those come from the file).
    """

    path: str
    title: str
    about: str


SECTIONS: tuple[Section, ...] = (
    Section("validation/h200/runtime/summary.json", "The runtime in a Hugging Face training loop (H200, no-op writes)",
            "A Hugging Face GPT-2 (24 layers × hidden 2048, random weights) trained on the lent H200 under "
            "`hw_backend.torch_runtime.KdvfsRuntime` with boundary-level switch-aware schedules; the writes were "
            "recorded, never sent. Commands and discussion: validation/h200/runtime/README.md."),
    Section("validation/h200/analysis-hf-gpt2/analysis.json", "`kdvfs analyze` on the recorded HF GPT-2 step",
            "`kdvfs analyze validation/h200/runtime/hf_gpt2_step.kineto.json.gz --gpu h200`: ideal (free switching), "
            "naive, switch-aware and module-boundary schedules at several slacks, from the H200's kernel model. "
            "Rows: policy × slack × mechanism."),
    Section("validation/benchmarks/import-200mb-400steps.json", "Importing a large trace",
            "`python benchmarks/bench_import.py --json …`: a synthetic 400-step Kineto trace imported with "
            "`kdvfs trace import --step all` in a child process; CPU time and peak resident memory."),
    Section("validation/benchmarks/real-trace-h200.json", "Profile build and optimisation on a real trace",
            "`python benchmarks/bench_real.py --json …`: the recorded HF GPT-2 step, as imported and flattened, × the "
            "H200's settings; each command in a child process."),
    Section("validation/h200/summary.json", "The GPT-3 XL block on the H200, observe-only",
            "`scripts/h200_observe.py` on the lent H200 and `kdvfs summarize h200` (no clock ever changed): "
            "measured step time and energy against the kernel model's prediction. See validation/h200/README.md."),
    Section("validation/h200/validate_live_noop.json", "Live validation with no-op writes (H200)",
            "`kdvfs validate --mode live` in observe-only mode on the H200: the schedule's boundaries replayed with "
            "every clock write skipped, against the simulator."),
    Section("validation/h200/measurement_noise.json", "Measurement scatter on the H200",
            "`scripts/h200_measurement_noise.py`: repeated energy-counter windows per stage."),
    Section("validation/h200/carryover.json", "Power carry-over between stages (H200)",
            "`scripts/h200_carryover.py`: does a heavy stage's power carry into the next one?"),
    Section("validation/rtx3080ti-calibration/calibration_report.json", "The RTX 3080 Ti calibration",
            "`kdvfs profile calibrate spaan2026 --json` (table method, the bundled fit): per-kernel targets, the "
            "pass-level sweep as the check, and Table 2 from the optimisers. The joint method and the trade-off: "
            "validation/rtx3080ti-calibration/README.md."),
    Section("validation/synthetic/crossval.json", "Fitting sweeps: cross-validation on synthetic data",
            "`python -m scripts.crossval_synthetic`: the model fitted on a few clock settings per kernel, tested on "
            "the rest."),
    Section("validation/fake/sparse_vs_exhaustive.json", "Sparse against exhaustive sweeps (fake device)",
            "`python -m scripts.sparse_vs_exhaustive`: the saving found from a sparse sweep against a full one."),
)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v) if len(v) <= 8 and all(not isinstance(x, (dict, list)) for x in v) \
            else f"({len(v)} values)"
    s = str(v).replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= 160 else s[:157] + "…"


def _scalar(v: Any) -> bool:
    return not isinstance(v, (dict, list)) or (isinstance(v, list) and len(v) <= 8
                                               and all(not isinstance(x, (dict, list)) for x in v))


def _flat(d: dict[str, Any], prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if _scalar(v):
            out.append((key, v))
        elif isinstance(v, dict) and depth < 2 and all(_scalar(x) for x in v.values()):
            out += _flat(v, key + ".", depth + 1)
    return out


def _table(rows: list[dict[str, Any]], first: str | None = None) -> list[str]:
    cols: list[str] = []
    for r in rows[:MAX_ROWS]:
        for k, _ in _flat(r):
            if k not in cols and k != "_key":
                cols.append(k)
    if not cols:
        return []
    if first is not None and len(rows) <= 4 and len(cols) > 6:  # few wide rows read better as columns
        lines = ["| field | " + " | ".join(_fmt(r.get("_key", "")) for r in rows) + " |",
                 "|" + "---|" * (len(rows) + 1)]
        flats = [dict(_flat(r)) for r in rows]
        for c in cols:
            lines.append(f"| {c} | " + " | ".join(_fmt(f[c]) if c in f else "" for f in flats) + " |")
        return lines
    head = ([first] if first else []) + cols
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows[:MAX_ROWS]:
        flat = dict(_flat(r))
        cells = ([_fmt(r.get("_key", ""))] if first else []) + [_fmt(flat[c]) if c in flat else "" for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > MAX_ROWS:
        lines.append(f"\n({len(rows) - MAX_ROWS} more rows in the file)")
    return lines


def _render(doc: Any, level: int = 3, name: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(doc, list):
        if doc and all(isinstance(x, dict) for x in doc):
            out += _table(doc) + [""]
        return out
    if not isinstance(doc, dict):
        return out
    if doc and all(isinstance(x, dict) for x in doc.values()) and name != "entries":
        return _render({"entries": doc}, level, "entries")
    scal = _flat(doc)
    if scal:
        out += ["| field | value |", "|---|---|"] + [f"| {k} | {_fmt(v)} |" for k, v in scal] + [""]
    for k, v in doc.items():
        if _scalar(v) or (isinstance(v, dict) and all(_scalar(x) for x in v.values())):
            continue
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            rows = [dict(x, _key=kk) for kk, x in v.items()]
            t = _table(rows, first="")
            if t:
                out += [f"{'#' * level} {k}", ""] + t + [""]
            if level < 5:  # one level of nested tables (e.g. each variant's Table 2)
                for kk, x in list(v.items())[:4]:
                    for k2, v2 in x.items():
                        if isinstance(v2, list) and v2 and all(isinstance(y, dict) for y in v2) and len(v2) <= MAX_ROWS:
                            out += [f"{'#' * (level + 1)} {k} / {kk} / {k2}", ""] + _table(v2) + [""]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            out += [f"{'#' * level} {k}", ""] + _table(v) + [""]
    return out


def render_results(root: str | Path) -> str:
    """The Markdown document, from the files under ``root`` (missing files are said to be missing)."""
    root = Path(root)
    lines = ["# Results", "",
             "Generated by `kdvfs results` from the JSON files under `validation/`; do not edit by hand. Each section "
             "names the command that wrote its file. Changes in % are against the driver's own clocks (auto) unless "
             "a column says otherwise; numbers labelled ideal assume free clock switching.", ""]
    for s in SECTIONS:
        lines += [f"## {s.title}", "", s.about, "", f"Source: `{s.path}`", ""]
        p = root / s.path
        if not p.exists():
            lines += ["(file not present in this checkout)", ""]
            continue
        lines += _render(json.loads(p.read_text()))
    return "\n".join(lines).rstrip() + "\n"
