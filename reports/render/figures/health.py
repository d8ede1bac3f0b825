"""How well the runs held up: throughput and MFU against model size."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import (
    count_axis,
    fig_legend,
    finite_arrays,
    log_labels,
)
from ladder.reports.render.figures.style import VariantStyles, tx
from ladder.reports.render.fmt import fmt_count


def draw_health(fig: FigureBase, runs: Any, styles: VariantStyles) -> None:
    """Throughput and model FLOPs utilisation against model size, per variant; runs that did not finish marked."""
    ax_l, ax_r = fig.subplots(1, 2)
    for variant, g in runs.groupby("variant", sort=False):
        st = styles[variant]
        for ax, col, scale in ((ax_l, "tokens_per_s", 1.0), (ax_r, "mfu", 100.0)):
            if col not in g:
                continue
            xs, ys = finite_arrays(g["params"], g[col])
            ax.plot(
                xs,
                ys * scale,
                linestyle="none",
                marker=st["marker"],
                color=st["color"],
                markersize=4.5,
                alpha=0.85,
                label=tx(variant),
            )
    if "status" in runs:
        bad = runs[runs["status"] != "done"]
        for ax, col, scale in ((ax_l, "tokens_per_s", 1.0), (ax_r, "mfu", 100.0)):
            if col in bad and len(bad):
                xs, ys = finite_arrays(bad["params"], bad[col])
                if len(xs):
                    ax.plot(
                        xs,
                        ys * scale,
                        linestyle="none",
                        marker="x",
                        color="#C00000",
                        markersize=8,
                        markeredgewidth=1.6,
                        label="diverged / failed",
                    )
    count_axis(ax_l, "parameters (N)")
    count_axis(ax_r, "parameters (N)")
    ax_l.set_yscale("log")
    log_labels(ax_l.yaxis, fmt_count)
    ax_l.set_ylabel("throughput (tokens/s)")
    ax_r.set_ylabel("MFU (%)")
    ax_r.set_ylim(bottom=0)
    ax_l.set_title("throughput")
    ax_r.set_title("model FLOPs utilisation")
    handles, labels = ax_l.get_legend_handles_labels()
    fig_legend(fig, handles, labels)
