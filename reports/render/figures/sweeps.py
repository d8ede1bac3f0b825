"""Hyperparameter sweeps: small multiples of loss against LR or batch size per rung, and the power laws of the
per-rung optimum (fit.json's ``hparams`` laws) extrapolated to the hero."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.fits.study.fit_json import HparamLaw, HparamRung, SweepOptimum, SweepParabola, SweepPoint
from ladder.reports.render.figures.axes import (
    empty,
    finite_arrays,
    fit_window_points,
    fmt_num,
    fmt_pow,
    geom_grid,
    hero_point,
    interval_err,
    legend,
    log_labels,
    merged_legend,
    plain_formatter,
    wrap,
)
from ladder.reports.render.figures.style import FIT_COLOR, PALETTE, budget_colors, tx
from ladder.reports.render.fmt import fmt_count, fmt_flops, fmt_lr, num, ok, pos

MAX_BATCH_COLORS = 8


def _poly_curve(fitted: SweepParabola, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The fitted loss over [lo, hi] from a ``poly`` in ln x (of ln loss when ``poly_of`` says so)."""
    poly = fitted.poly or []
    if not poly or len(poly) < 3 or not ok(*poly) or not pos(lo, hi):
        return None
    xs = geom_grid(lo, hi, 80)
    lx = np.log(xs)
    y = num(poly[0]) + num(poly[1]) * lx + num(poly[2]) * lx**2
    if fitted.poly_of == "ln loss":
        with np.errstate(over="ignore"):
            y = np.exp(np.minimum(y, 700.0))
    return xs, y


def _swept(p: SweepPoint, axis: str) -> float | None:
    return p.lr if axis == "lr" else p.batch_tokens


def draw_sweeps(fig: FigureBase, scales: Sequence[HparamRung], axis: str) -> None:
    """Small multiples, one per rung: loss against the swept value (``lr`` or ``batch``), the fitted parabola in
    log x, the optimum and its 90% interval."""
    shown = [s for s in scales if s.points]
    if not shown:
        empty(fig.add_subplot(), "no rung has points to show")
        return
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    xlabel = {"lr": "peak learning rate", "batch": "batch size (tokens)"}[axis]
    # one colour per batch size across all panels (LR parabolas at several batch sizes); when the rungs sweep
    # batches of their own (multipliers of a rule), one colour per rank within the rung, or the legend floods
    batches = (
        sorted({num(c.batch_tokens) for s in shown for c in s.lr_curves if pos(c.batch_tokens)}) if axis == "lr" else []
    )
    by_rank = len(batches) > MAX_BATCH_COLORS
    n_rank = max((len(s.lr_curves) for s in shown), default=0)
    batch_color = dict(zip(batches, budget_colors(len(batches)))) if not by_rank else {}
    rank_color = budget_colors(n_rank) if by_rank else []
    for ax, s in zip(axes.flat, shown):
        pts = s.points
        fit_window_points(ax, pts, lambda p: _swept(p, axis), lambda p: p.loss)
        xs_all = [num(_swept(p, axis)) for p in pts if pos(_swept(p, axis))]
        if not xs_all:
            empty(ax, "no finite values")
            continue
        lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
        opt = (s.lr if axis == "lr" else s.batch) or SweepOptimum()
        curves = s.lr_curves if axis == "lr" else []
        if len(curves) > 1:
            ordered = sorted(curves, key=lambda c: num(c.batch_tokens))
            for i, c in enumerate(ordered):
                cv = _poly_curve(c, lo, hi)
                if not cv:
                    continue
                if by_rank:
                    color, label = rank_color[i], f"fit at the rung's batch #{i + 1} (smallest first)"
                else:
                    color = batch_color.get(num(c.batch_tokens), PALETTE[0])
                    label = f"fit at batch {fmt_count(c.batch_tokens)} tokens"
                ax.plot(*cv, color=color, linewidth=1.2, label=label)
        else:
            cv = _poly_curve(opt, lo, hi)
            if cv:
                ax.plot(*cv, color=PALETTE[0], linewidth=1.4, label="fit (parabola in log x)")
        ys_all = [num(p.loss) for p in pts if ok(p.loss)]
        if ys_all:
            span = (max(ys_all) - min(ys_all)) or abs(max(ys_all)) * 0.01 or 0.01
            ax.set_ylim(min(ys_all) - 0.25 * span, max(ys_all) + 0.25 * span)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        if pos(opt.opt):
            o = num(opt.opt)
            ci = list(opt.ci90 or [None, None]) + [None, None]
            if ok(ci[0]) or ok(ci[1]):
                a = max(num(ci[0]) if ok(ci[0]) else lo, lo)
                b = min(num(ci[1]) if ok(ci[1]) else hi, hi)
                if a < b:
                    ax.axvspan(a, b, color=PALETTE[0], alpha=0.10, linewidth=0, label="optimum, 90% interval")
            if lo <= o <= hi:
                ax.axvline(o, color=PALETTE[0], linestyle="--", linewidth=1.0, label="fitted optimum")
            else:
                ax.annotate(  # in the digits of the per-rung table (it gave 2.6e-4 for the table's 0.00026)
                    f"optimum {(fmt_count if axis == 'batch' else fmt_lr)(o)} {'→' if o > hi else '←'}",
                    xy=(0.97 if o > hi else 0.03, 0.95),
                    xycoords="axes fraction",
                    ha="right" if o > hi else "left",
                    va="top",
                    fontsize=7,
                    color=PALETTE[1],
                )
        status = "skipped" if s.skipped else opt.status
        flag = {"edge": "optimum at the grid's edge", "no_minimum": "no minimum", "skipped": "not fitted"}.get(status)
        if flag:
            ax.text(0.03, 0.03, flag, transform=ax.transAxes, fontsize=7, color=PALETTE[1], va="bottom")
        ax.set_title(f"{tx(s.scale, 18)} · C = {fmt_flops(s.flops)}", fontsize=8.5)  # as the tables give it
        log_labels(ax.xaxis, fmt_count if axis == "batch" else fmt_num)
        ax.set_xlabel(xlabel)
        if ax in axes[:, 0]:
            ax.set_ylabel("loss (nats/token)")
        ax.yaxis.set_major_formatter(plain_formatter())
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_axis_off()
    merged_legend(fig, axes.flat)


def _law_line(ax: Any, trend: HparamLaw, xs: np.ndarray) -> None:
    """The law: its ``curve`` with the 90% band, solid over the ladder and dashed beyond."""
    curve = [c for c in trend.curve if pos(c.flops, c.y)]
    if not curve:
        return
    top = xs.max() * 1.05
    cx = np.array([num(c.flops) for c in curve])
    cy = np.array([num(c.y) for c in curve])
    lo = np.array([num(c.lo) if pos(c.lo) else np.nan for c in curve])
    hi = np.array([num(c.hi) if pos(c.hi) else np.nan for c in curve])
    inside = cx <= top
    label = f"fit: {trend.formula or 'power law'}"
    ax.plot(cx[inside], cy[inside], color=FIT_COLOR, linewidth=1.4, label=label)
    if (~inside).any():
        j = max(0, int(np.argmax(~inside)) - 1)
        ax.plot(cx[j:], cy[j:], color=FIT_COLOR, linewidth=1.2, linestyle="--", label="extrapolation")
    band = np.isfinite(lo) & np.isfinite(hi)
    if band.any():
        ax.fill_between(cx[band], lo[band], hi[band], color=FIT_COLOR, alpha=0.12, linewidth=0, label="law, 90% band")


def draw_trends(fig: FigureBase, panels: Sequence[tuple[HparamLaw | None, str, str]]) -> None:
    """Side-by-side power laws of a per-rung optimum against compute, as fit.json's hyperparameter laws hold
    them: the rungs' optima (90%), the law's ``curve`` and band along the hero's tokens/param, the law at each
    rung's own (N, D) (``fitted``), extrapolated to the hero."""
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (trend, ylabel, title) in zip(axes, panels):
        trend = trend or HparamLaw()
        pts = trend.points
        xs, ys = finite_arrays([p.flops for p in pts], [p.y for p in pts])
        if not len(xs) and trend.law is None:
            empty(ax, trend.reason or "no data")
            ax.set_title(title)
            continue
        for p in pts:
            if not pos(p.flops, p.y):
                continue
            ci = p.y_ci90 or [None, None]
            yerr = interval_err(num(p.y), ci[0] if ci else None, ci[1] if ci and len(ci) > 1 else None)
            ax.errorbar([num(p.flops)], [num(p.y)], yerr=yerr, fmt="o", color=PALETTE[0], markersize=5, capsize=3)
        ax.plot([], [], "o", color=PALETTE[0], label="per rung (90%)")
        if (trend.form or "compute") != "compute":
            fx, fy = finite_arrays([p.flops for p in pts], [p.fitted for p in pts])
            if len(fx):
                ax.plot(fx, fy, "x", color=FIT_COLOR, markersize=5, label="law at each rung's (N, D)")
        hx = num(trend.hero.flops) if trend.hero is not None else math.nan
        if len(xs):
            _law_line(ax, trend, xs)
        hci = trend.hero_ci90 or [None, None]
        hero_point(
            ax,
            hx,
            trend.hero_value,
            hci[0] if hci else None,
            hci[1] if hci and len(hci) > 1 else None,
            label="hero (90% interval of the law)",
        )
        if trend.reason and trend.law is None:
            ax.text(
                0.02,
                0.02,
                wrap(tx(trend.reason, 200), 60),
                transform=ax.transAxes,
                fontsize=6.5,
                color="#666666",
                va="bottom",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute (FLOPs)")
        log_labels(ax.xaxis, fmt_pow)
        ax.set_ylabel(ylabel)
        log_labels(ax.yaxis, fmt_count if "batch" in ylabel else fmt_num)
        ax.set_title(title)
        legend(ax, fontsize=7)
