"""Loss curves: every run's training and evaluation loss against tokens and against compute."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase
from matplotlib.lines import Line2D

from ladder.reports.render.figures.axes import (
    count_axis,
    fig_legend,
    finite_arrays,
    flops_axis,
    loss_axis,
)
from ladder.reports.render.figures.style import MUTED, VariantStyles, tx


def _joined(frames: Iterable[Any], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """Several runs' (x, y) as one NaN-separated polyline: one artist per variant, not per run."""
    xs, ys = [], []
    for f in frames:
        a, b = finite_arrays(f[x], f[y])
        keep = (a > 0) & (b > 0)
        if keep.any():
            xs.extend([a[keep], [np.nan]])
            ys.extend([b[keep], [np.nan]])
    if not xs:
        return np.array([]), np.array([])
    return np.concatenate(xs), np.concatenate(ys)


def draw_curves(fig: FigureBase, curves: Any, variant_of: Mapping[str, str], styles: VariantStyles) -> None:
    """Every run's training loss (lines) and evaluation loss (markers) against tokens and against FLOPs."""
    axes = fig.subplots(1, 2, sharey=True)
    by_variant: dict[str, list[tuple[Any, Any]]] = {}
    for run_id, g in curves.groupby("run_id", sort=False):
        tr = g[g["kind"] == "train"].sort_values("step")
        ev = g[g["kind"] == "eval"].sort_values("step")
        by_variant.setdefault(variant_of.get(str(run_id), "?"), []).append((tr, ev))
    names = [n for n in styles.names if n in by_variant] + [n for n in by_variant if n not in styles.names]
    for variant in names:
        st = styles[variant]
        runs = by_variant[variant]
        for ax, x in zip(axes, ("tokens", "flops")):
            xs, ys = _joined((tr for tr, _ in runs), x, "loss")
            if len(xs):
                ax.plot(xs, ys, color=st["color"], linestyle=st["linestyle"], linewidth=0.8, alpha=0.55)
            xe, ye = _joined((ev for _, ev in runs), x, "eval_loss")
            if len(xe):
                ax.plot(xe, ye, linestyle="none", marker=st["marker"], markersize=2.8, color=st["color"], alpha=0.85)
    count_axis(axes[0], "tokens seen")
    flops_axis(axes[1], "compute (FLOPs)")
    loss_axis(axes[0])
    axes[1].tick_params(labelleft=True)
    axes[0].set_title("loss vs tokens")
    axes[1].set_title("loss vs compute")
    handles = [styles.handle(n) for n in names] + [
        Line2D([], [], color=MUTED, linewidth=0.9),
        Line2D([], [], color=MUTED, marker="o", linestyle="none", ms=3),
    ]
    fig_legend(fig, handles, [tx(n) for n in names] + ["train loss", "eval loss"])
