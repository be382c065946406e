"""Figures (matplotlib, Agg backend): what-if savings versus switch latency, the time–energy frontier, scaling."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_frontier", "plot_whatif", "plot_scaling"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_whatif(rows: list[dict], path: str | Path, markers: dict[str, float] | None = None, title: str = "") -> Path:
    """Energy saving against switch latency: one line per policy (and mechanism), preset latencies marked."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    keys = sorted({(r["policy"], r["mechanism"]) for r in rows})
    for pol, mech in keys:
        pts = sorted((r["switch_latency_s"], -r["energy_change_pct"]) for r in rows
                     if r["policy"] == pol and r["mechanism"] == mech)
        if not pts:
            continue
        xs, ys = zip(*pts)
        style = "--" if pol in ("auto", "ideal") else "-"
        ax.plot(xs, ys, style, marker="o", ms=3, label=f"{pol} ({mech})" if pol not in ("auto", "ideal") else pol)
    for name, lat in (markers or {}).items():
        ax.axvline(lat, color="grey", lw=0.8, ls=":")
        ax.text(lat, ax.get_ylim()[1], f" {name}", rotation=90, va="top", fontsize=8, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("clock-switch latency (s)")
    ax.set_ylabel("energy saving vs auto (%)")
    ax.set_title(title or "What survives the switch latency")
    ax.grid(alpha=0.3)
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
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_scaling(rows: list[dict], path: str | Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in sorted({r["parallel"] for r in rows}):
        rr = [r for r in rows if r["parallel"] == mode]
        ax.plot([r["gpus"] for r in rr], [r["energy_change_pct"] for r in rr], marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("energy change vs auto (%)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
