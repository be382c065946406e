"""Figures (matplotlib, Agg backend): what-if savings versus switch latency, the time–energy frontier, scaling."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_frontier", "plot_whatif", "plot_scaling"]


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
