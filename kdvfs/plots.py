"""Figures (matplotlib, Agg backend): what-if savings versus switch latency, the time–energy frontier, scaling."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_frontier", "plot_pass_level", "plot_scaling", "plot_step_check", "plot_whatif"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, ax, path: str | Path) -> Path:
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_whatif(rows: list[dict], path: str | Path, markers: dict[str, float] | None = None, title: str = "") -> Path:
    """Energy saving (top) and time change (bottom) against switch latency: one line per policy and mechanism
    (auto and ideal once: they do not depend on the mechanism), preset latencies marked."""
    plt = _plt()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8.5, 6.8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    keys = sorted({(r["policy"], r["mechanism"]) for r in rows})
    seen: set[str] = set()
    for pol, mech in keys:
        if pol in ("auto", "ideal"):
            if pol in seen:
                continue
            seen.add(pol)
        pts = sorted((r["switch_latency_s"], -r["energy_change_pct"], r["time_change_pct"]) for r in rows
                     if r["policy"] == pol and r["mechanism"] == mech)
        if not pts:
            continue
        xs, ys, ts = zip(*pts)
        style = "--" if pol in ("auto", "ideal") else "-"
        label = pol if pol in ("auto", "ideal") else f"{pol} ({mech})"
        line, = ax.plot(xs, ys, style, marker="o", ms=3, label=label)
        bx.plot(xs, ts, style, marker="o", ms=3, color=line.get_color())
    for a in (ax, bx):
        for lat in (markers or {}).values():
            a.axvline(lat, color="grey", lw=0.8, ls=":")
        a.grid(alpha=0.3)
    for name, lat in (markers or {}).items():
        ax.text(lat, 1.0, f" {name}", rotation=90, va="top", fontsize=8, color="grey", transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    lo = min(-r["energy_change_pct"] for r in rows)
    if lo < -5:  # a naive schedule at long latencies can lose far more than the others save: keep them readable
        ax.set_ylim(bottom=-5)
        ax.text(0.99, 0.02, f"lowest {lo:.0f} % (off the axis)", ha="right", fontsize=7, color="grey", transform=ax.transAxes)
    bx.set_xlabel("clock-switch latency (s)")
    ax.set_ylabel("energy saving vs auto (%)")
    bx.set_ylabel("time change vs auto (%)")
    bx.set_yscale("symlog", linthresh=1.0)
    ax.set_title(title or "What survives the switch latency")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_frontier(curves: dict[str, list[dict]], path: str | Path, title: str = "") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for label, rows in curves.items():
        ax.plot([r["slack_pct"] for r in rows], [r["energy_change_pct"] for r in rows], marker="o", ms=3, label=label)
    ax.set_xlabel("tolerated slowdown τ (%)")
    ax.set_ylabel("energy change vs auto (%)")
    ax.set_title(title or "Relaxed waste reduction")
    return _save(plt, fig, ax, path)


def plot_scaling(rows: list[dict], path: str | Path, title: str = "") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in sorted({r["parallel"] for r in rows}):
        rr = [r for r in rows if r["parallel"] == mode]
        ax.plot([r["gpus"] for r in rr], [r["energy_change_pct"] for r in rr], marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("energy change vs auto (%)")
    ax.set_title(title or "Savings as the number of GPUs grows")
    return _save(plt, fig, ax, path)


def plot_pass_level(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """The study's Figures 3/4 layout: energy change against time change of the whole forward and backward pass, one
    line per memory clock through the core clocks; the study solid with dots, the model dashed with crosses.

    ``rows``: one per pass and setting with ``pass``, ``mem_mhz``, ``core_mhz`` and the model's and the study's
    ``*_time_change_pct`` / ``*_energy_change_pct`` (``kdvfs.calibrate_spaan2026.joint_report``'s ``passes``)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    mems = list(dict.fromkeys(r["mem_mhz"] for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes, ("forward", "backward")):
        for i, m in enumerate(mems):
            rr = [r for r in rows if r["pass"] == name and r["mem_mhz"] == m]
            col = colours[i % len(colours)]
            ax.plot([r["study_time_change_pct"] for r in rr], [r["study_energy_change_pct"] for r in rr], "-o", ms=3,
                    color=col, label=f"memory {m} (study)")
            ax.plot([r["model_time_change_pct"] for r in rr], [r["model_energy_change_pct"] for r in rr], "--x", ms=4,
                    color=col, alpha=0.8, label=f"memory {m} (model)")
        ax.set_xscale("symlog", linthresh=10.0)
        ax.axhline(0, color="grey", lw=0.6)
        ax.axvline(0, color="grey", lw=0.6)
        ax.set_xlabel("time change vs auto (%)")
        ax.set_ylabel("energy change vs auto (%)")
        ax.set_title(f"{name} pass")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle(title or "Pass-level sweep: study (solid) and model (dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_step_check(doc: dict, path: str | Path, title: str = "") -> Path:
    """A step check (``simulator.stepcheck.check_steps``): per step, the predicted energy's and median clock's error
    against the measurement (the judged prediction), with the targets shaded; misses in red."""
    plt = _plt()
    which = doc.get("judged_on", "limiter")
    rows = [r for r in doc["steps"] if "error" in r]
    names = [r["model"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.32 * len(rows) + 1.6), sharey=True)
    for ax, key, tgt, label in ((axes[0], "energy_pct", doc["targets"]["energy_pct"], "step energy error (%)"),
                                (axes[1], "median_clock_pct", doc["targets"]["median_clock_pct"],
                                 "median SM clock error (%)")):
        v = [r["error"][which][key] for r in rows]
        ax.axvspan(-tgt, tgt, color="tab:green", alpha=0.15, label=f"target ±{tgt:g} %")
        ax.barh(range(len(v)), v, color=["tab:blue" if abs(x) <= tgt else "tab:red" for x in v])
        ax.axvline(0, color="black", lw=0.8)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3, axis="x")
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_yticks(range(len(names)), names, fontsize=8)
    axes[0].invert_yaxis()
    met = doc.get("met", {})
    fig.suptitle(title or f"{doc.get('gpu', '')}: predicted vs measured steps ({which}); energy {met.get('energy')} "
                          f"and clock {met.get('clock')} of {met.get('of')} within target", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)

