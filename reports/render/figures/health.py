"""How well the law and the runs held up: the loss law's residuals and backtest, throughput and MFU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import (
    count_axis,
    empty,
    fig_legend,
    finite_arrays,
    flops_axis,
    legend,
    log_labels,
)
from ladder.reports.render.figures.style import MUTED, VariantStyles, tx
from ladder.reports.render.fmt import fmt_count, num, ok


def draw_residuals(
    fig: FigureBase,
    residuals: Sequence[Mapping[str, Any]],
    backtest: Mapping[str, Any] | None,
    variant_of: Mapping[str, str],
    styles: VariantStyles,
) -> None:
    """Residuals of the loss law (percent, per variant) against compute, and the backtest: the largest rung's
    observed loss against the forecast of a fit made without it."""
    held = [r for r in (backtest or {}).get("held_out") or [] if ok(r.get("loss"), r.get("predicted"))]
    ax_l, ax_r = fig.subplots(1, 2)
    by_var: dict[str, list[Mapping[str, Any]]] = {}
    for r in residuals:
        by_var.setdefault(variant_of.get(str(r.get("run")), "?"), []).append(r)
    for variant in [n for n in styles.names if n in by_var] + [n for n in by_var if n not in styles.names]:
        st = styles[variant]
        xs, ys = finite_arrays([r.get("flops") for r in by_var[variant]], [r.get("pct") for r in by_var[variant]])
        ax_l.plot(
            xs,
            ys,
            linestyle="none",
            marker=st["marker"],
            color=st["color"],
            markersize=4,
            alpha=0.85,
            label=tx(variant),
        )
    ax_l.axhline(0, color="#444444", linewidth=0.8)
    flops_axis(ax_l)
    ax_l.set_ylabel("residual: (observed − fitted) / fitted (%)")
    ax_l.set_title("residuals of the loss law")
    if residuals:
        legend(ax_l, fontsize=6.5, ncols=2)
    else:
        empty(ax_l, "no residuals")
    if held:
        allv = [num(r["loss"]) for r in held] + [num(r["predicted"]) for r in held]
        lo, hi = min(allv), max(allv)
        mid, half = (lo + hi) / 2, max((hi - lo) / 2, 0.012 * (lo + hi) / 2)
        line = np.array([mid - 1.25 * half, mid + 1.25 * half])
        ax_r.fill_between(line, line * 0.99, line * 1.01, color=MUTED, alpha=0.15, linewidth=0, label="±1%")
        ax_r.plot(line, line, color="#444444", linewidth=0.8, label="forecast = observed")
        for r in held:
            st = styles[variant_of.get(str(r.get("run")), "?")]
            ax_r.plot(
                [num(r["predicted"])],
                [num(r["loss"])],
                linestyle="none",
                marker=st["marker"],
                color=st["color"],
                markersize=7,
                markeredgecolor="black",
                markeredgewidth=0.6,
                zorder=5,
            )
        ax_r.set_xlim(line)
        ax_r.set_ylim(line)
        ax_r.set_xlabel("forecast without the held-out rung (nats/token)")
        ax_r.set_ylabel("observed loss (nats/token)")
        ax_r.set_title(f"backtest: held-out {tx((backtest or {}).get('holdout') or 'size')} rung")
        legend(ax_r, fontsize=7, loc="lower right")
    else:
        empty(ax_r, (backtest or {}).get("skipped") or "no backtest")
        ax_r.set_title("backtest")


# ---------------------------------------------------------------------------------------------- health


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
