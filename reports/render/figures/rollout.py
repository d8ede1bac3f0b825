"""The rollout backtest: how far off each law form was, at each extrapolation distance, and whether the
weighted forecast's 90% intervals covered the runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import empty, finite_arrays, legend, log_labels
from ladder.reports.render.figures.style import MUTED, PALETTE, tx
from ladder.reports.render.fmt import num, ok

if TYPE_CHECKING:
    from ladder.reports.fits.study.fit_json import FormForecast, RolloutForecast

MARKERS = ("o", "s", "^", "D", "v", "P")


def draw_rollout(
    fig: FigureBase,
    rows: Sequence[FormForecast],
    mixture: Sequence[RolloutForecast],
    weights: Mapping[str, float],
) -> None:
    """Left: |error| of every form's rollout forecast against the distance in parameters (weighted forms
    solid, the others hollow). Right: the weighted forecast's error with its 90% interval (relative to the
    observed loss): a bar that crosses zero covered the run."""
    ax_l, ax_r = fig.subplots(1, 2, sharex=True)
    forms = sorted({str(r.form) for r in rows})
    for i, form in enumerate(forms):
        mine = [r for r in rows if str(r.form) == form]
        xs, ys = finite_arrays([r.params_x for r in mine], [abs(num(r.err_pct)) for r in mine])
        weighted = num(weights.get(form, 0.0)) > 0
        color = PALETTE[i % len(PALETTE)]
        ax_l.plot(
            xs,
            ys,
            linestyle="none",
            marker=MARKERS[i % len(MARKERS)],
            markersize=5,
            color=color,
            markerfacecolor=color if weighted else "white",
            markeredgecolor=color,
            alpha=0.9,
            label=f"{tx(form)}" + (f" (weight {num(weights.get(form)):.2f})" if weighted else " (no weight)"),
        )
    for tol in (1.0, 2.0):
        ax_l.axhline(tol, color=MUTED, linestyle=":" if tol == 1.0 else "--", linewidth=0.9)
    ax_l.set_xscale("log")
    log_labels(ax_l.xaxis)
    ax_l.set_xlabel("distance: parameters / largest fitted (×)")
    ax_l.set_ylabel("|forecast − observed| / observed (%)")
    ax_l.set_title("every form's rollout forecasts")
    if rows:
        legend(ax_l, fontsize=6.5)
    else:
        empty(ax_l, "no rollout forecasts")
    good = [m for m in mixture if ok(m.params_x, m.err_pct, m.actual)]
    if good:
        x = np.array([num(m.params_x) for m in good])
        e = np.array([num(m.err_pct) for m in good])
        a = np.array([num(m.actual) for m in good])
        lo = np.array([100 * (num((m.interval or [np.nan, np.nan])[0]) - num(m.actual)) for m in good]) / a
        hi = np.array([100 * (num((m.interval or [np.nan, np.nan])[1]) - num(m.actual)) for m in good]) / a
        inside = np.array([bool(m.inside) for m in good])
        jitter = np.exp(np.linspace(-0.03, 0.03, len(x))) if len(x) > 1 else np.ones(1)
        for mask, color, label in (
            (inside, PALETTE[0], "interval covered the run"),
            (~inside, "#c0392b", "interval missed the run"),
        ):
            if mask.any():
                ax_r.errorbar(
                    x[mask] * jitter[mask],
                    e[mask],
                    yerr=[e[mask] - lo[mask], hi[mask] - e[mask]],
                    fmt="o",
                    markersize=4,
                    color=color,
                    ecolor=color,
                    elinewidth=0.9,
                    capsize=2,
                    label=label,
                )
        ax_r.axhline(0, color="#444444", linewidth=0.8)
        ax_r.set_xscale("log")
        log_labels(ax_r.xaxis)
        legend(ax_r, fontsize=6.5)
    else:
        empty(ax_r, "no weighted rollout forecasts")
    ax_r.set_xlabel("distance: parameters / largest fitted (×)")
    ax_r.set_ylabel("forecast error and 90% interval (% of observed)")
    ax_r.set_title("weighted forecast")
