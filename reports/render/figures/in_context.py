"""The loss split into in-context repeats and novel tokens: both against compute, and the copy ratio."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.fits.study.fit_json import CopyRun, KindForecasts
from ladder.reports.render.figures.axes import empty, finite_arrays, flops_axis, interval_err, legend, loss_axis
from ladder.reports.render.figures.style import PALETTE
from ladder.reports.render.fmt import num, ok

KINDS = (("novel", "novel tokens", PALETTE[0], "o"), ("repeats", "in-context repeats", PALETTE[1], "^"))


def draw_in_context(
    fig: FigureBase,
    runs: Sequence[CopyRun],
    forecasts: KindForecasts,
    heroes: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Left: each run's loss on the novel tokens and on the repeats against 6ND compute, with each kind's
    forecast at the target (90%) and the finished hero runs' actual losses (hollow diamonds). Right: repeats'
    loss over the novel tokens' (1: nothing is copied)."""
    ax_l, ax_r = fig.subplots(1, 2)
    if not runs:
        empty(ax_l, "no runs carry the split")
        empty(ax_r, "")
        return
    c = [6.0 * num(r.params) * num(r.tokens) for r in runs]
    for key, label, color, marker in KINDS:
        xs, ys = finite_arrays(c, [getattr(r, key) for r in runs])
        ax_l.plot(xs, ys, linestyle="none", marker=marker, markersize=4.5, color=color, alpha=0.85, label=label)
        f = getattr(forecasts, key)
        if f is not None and f.available and ok(forecasts.params, forecasts.tokens, f.loss):
            x, y = 6.0 * num(forecasts.params) * num(forecasts.tokens), num(f.loss)
            ax_l.errorbar(
                [x],
                [y],
                yerr=interval_err(y, f.lo, f.hi),
                fmt="*",
                markersize=10,
                color=color,
                ecolor=color,
                elinewidth=1.2,
                capsize=4,
                label=f"{label}: forecast (90%)",
            )
        hx, hy = finite_arrays(
            [6.0 * num(h.get("params")) * num(h.get("tokens")) for h in heroes], [h.get(key) for h in heroes]
        )
        if len(hx):
            ax_l.plot(
                hx,
                hy,
                linestyle="none",
                marker="D",
                markersize=7,
                markerfacecolor="white",
                color=color,
                markeredgewidth=1.4,
                label=f"{label}: hero run (actual)",
            )
    flops_axis(ax_l, "compute 6ND (FLOPs)")
    loss_axis(ax_l)
    ax_l.set_title("loss by token kind")
    legend(ax_l, fontsize=6.5, loc="lower left")  # the runs fall from the top left, the forecasts sit at the right
    xs, ys = finite_arrays(c, [r.copy_ratio for r in runs])
    ax_r.plot(xs, ys, linestyle="none", marker="o", markersize=4.5, color=PALETTE[2])
    if len(xs) > 1:
        slope, icpt = np.polyfit(np.log(xs), np.log(ys), 1)
        grid = np.geomspace(xs.min(), xs.max(), 50)
        ax_r.plot(grid, np.exp(icpt + slope * np.log(grid)), color=PALETTE[2], linewidth=1, alpha=0.7)
    ax_r.axhline(1.0, color="#444444", linewidth=0.8, linestyle=":")
    flops_axis(ax_r, "compute 6ND (FLOPs)")
    ax_r.set_ylabel("repeats' loss / novel loss")
    ax_r.set_title("copy ratio (falls as copying is learned)")
