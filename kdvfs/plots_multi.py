"""Figures for several GPUs: a schedule carried across per-GPU batch sizes and tensor-parallel degrees."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_carried"]


def plot_carried(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Two panels (batch sweep, tensor-parallel sweep): energy and time change against auto at each size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, exp, x, label in ((axes[0], "batch", "batch", "per-GPU batch size"),
                              (axes[1], "tp", "tp", "tensor-parallel degree")):
        sel = sorted((r for r in rows if r["experiment"] == exp), key=lambda r: r[x])
        xs = [r[x] for r in sel]
        ax.plot(xs, [r["energy_change_pct"] for r in sel], "o-", label="energy vs auto (%)")
        ax.plot(xs, [r["time_change_pct"] for r in sel], "s-", label="time vs auto (%)")
        if exp == "tp":
            ax.plot(xs, [r["kernels_energy_change_pct"] for r in sel], "o:", label="energy, kernels only (%)")
            ax.plot(xs, [r["kernels_time_change_pct"] for r in sel], "s:", label="time, kernels only (%)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label)
        ax.axhline(0, color="k", lw=0.6)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("change against auto at that size (%)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
