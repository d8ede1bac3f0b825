"""Hyperparameter sweeps: small multiples of loss against LR, batch size or aspect ratio per rung, and the
power laws of the per-rung optimum (``trend`` dicts of ``fit.json``) extrapolated to the hero."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import (
    empty,
    finite_arrays,
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
from ladder.reports.render.fmt import fmt_count, num, ok, pos

MAX_BATCH_COLORS = 8


def _poly_curve(fitted: Mapping[str, Any], lo: float, hi: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The fitted loss over [lo, hi] from a ``poly`` in ln x (of ln loss when ``poly_of`` says so)."""
    poly = fitted.get("poly") or []
    if not poly or len(poly) < 3 or not ok(*poly) or not pos(lo, hi):
        return None
    xs = geom_grid(lo, hi, 80)
    lx = np.log(xs)
    y = num(poly[0]) + num(poly[1]) * lx + num(poly[2]) * lx**2
    if fitted.get("poly_of") == "ln loss":
        with np.errstate(over="ignore"):
            y = np.exp(np.minimum(y, 700.0))
    return xs, y


def draw_sweeps(fig: FigureBase, scales: Sequence[Mapping[str, Any]], axis: str) -> None:
    """Small multiples, one per rung: loss against the swept value (``lr``, ``batch_tokens`` or
    ``aspect_ratio``), the fitted parabola in log x, the optimum and its 90% interval."""
    key = {"lr": "lr", "batch": "batch_tokens", "aspect": "aspect_ratio"}[axis]
    shown = [s for s in scales if s.get("points")]
    if not shown:
        empty(fig.add_subplot(), "no rung has points to show")
        return
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    xlabel = {
        "lr": "peak learning rate",
        "batch": "batch size (tokens)",
        "aspect": "aspect ratio (d_model / n_layers)",
    }[axis]
    # one colour per batch size across all panels (LR parabolas at several batch sizes); when the rungs sweep
    # batches of their own (multipliers of a rule), one colour per rank within the rung, or the legend floods
    batches = (
        sorted(
            {
                num(c.get("batch_tokens"))
                for s in shown
                for c in (s.get("lr_curves") or [])
                if pos(c.get("batch_tokens"))
            }
        )
        if axis == "lr"
        else []
    )
    by_rank = len(batches) > MAX_BATCH_COLORS
    n_rank = max((len(s.get("lr_curves") or []) for s in shown), default=0)
    batch_color = dict(zip(batches, budget_colors(len(batches)))) if not by_rank else {}
    rank_color = budget_colors(n_rank) if by_rank else []
    for ax, s in zip(axes.flat, shown):
        pts = s.get("points") or []
        yk = "loss_compared" if axis == "aspect" else "loss"
        for used, face in ((True, FIT_COLOR), (False, "white")):
            group = [p for p in pts if bool(p.get("used")) == used]
            xs, ys = finite_arrays([p.get(key) for p in group], [p.get(yk) for p in group])
            if len(xs):
                ax.plot(
                    xs,
                    ys,
                    linestyle="none",
                    marker="o",
                    markersize=4.5,
                    markerfacecolor=face,
                    markeredgecolor=FIT_COLOR,
                    markeredgewidth=0.8,
                    zorder=4,
                    label="in fit window" if used else "outside the fit window",
                )
        xs_all = [num(p.get(key)) for p in pts if pos(p.get(key))]
        if not xs_all:
            empty(ax, "no finite values")
            continue
        lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
        opt = (s.get("lr") if axis == "lr" else (s.get("batch") if axis == "batch" else s.get("fit"))) or {}
        curves = (s.get("lr_curves") or []) if axis == "lr" else []
        if len(curves) > 1:
            ordered = sorted(curves, key=lambda c: num(c.get("batch_tokens")))
            for i, c in enumerate(ordered):
                cv = _poly_curve(c, lo, hi)
                if not cv:
                    continue
                if by_rank:
                    color, label = rank_color[i], f"fit at the rung's batch #{i + 1} (smallest first)"
                else:
                    color = batch_color.get(num(c.get("batch_tokens")), PALETTE[0])
                    label = f"fit at batch {fmt_count(c.get('batch_tokens'))} tokens"
                ax.plot(*cv, color=color, linewidth=1.2, label=label)
        else:
            cv = _poly_curve(opt, lo, hi)
            if cv:
                ax.plot(*cv, color=PALETTE[0], linewidth=1.4, label="fit (parabola in log x)")
        ys_all = [num(p.get(yk)) for p in pts if ok(p.get(yk))]
        if ys_all:
            span = (max(ys_all) - min(ys_all)) or abs(max(ys_all)) * 0.01 or 0.01
            ax.set_ylim(min(ys_all) - 0.25 * span, max(ys_all) + 0.25 * span)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        if pos(opt.get("opt")):
            o = num(opt["opt"])
            ci = list(opt.get("ci90") or [None, None]) + [None, None]
            if ok(ci[0]) or ok(ci[1]):
                a = max(num(ci[0]) if ok(ci[0]) else lo, lo)
                b = min(num(ci[1]) if ok(ci[1]) else hi, hi)
                if a < b:
                    ax.axvspan(a, b, color=PALETTE[0], alpha=0.10, linewidth=0, label="optimum, 90% interval")
            if lo <= o <= hi:
                ax.axvline(o, color=PALETTE[0], linestyle="--", linewidth=1.0, label="fitted optimum")
            else:
                ax.annotate(
                    f"optimum {fmt_num(o)} {'→' if o > hi else '←'}",
                    xy=(0.97 if o > hi else 0.03, 0.95),
                    xycoords="axes fraction",
                    ha="right" if o > hi else "left",
                    va="top",
                    fontsize=7,
                    color=PALETTE[1],
                )
        status = "skipped" if s.get("skipped") else opt.get("status")
        flag = {"edge": "optimum at the grid's edge", "no_minimum": "no minimum", "skipped": "not fitted"}.get(status)
        if flag:
            ax.text(0.03, 0.03, flag, transform=ax.transAxes, fontsize=7, color=PALETTE[1], va="bottom")
        ax.set_title(f"{tx(s.get('scale'), 18)} · C = {num(s.get('flops')):.2g}", fontsize=8.5)
        log_labels(ax.xaxis, fmt_count if axis == "batch" else fmt_num)
        ax.set_xlabel(xlabel)
        if ax in axes[:, 0]:
            ax.set_ylabel("loss (nats/token)")
        ax.yaxis.set_major_formatter(plain_formatter())
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_axis_off()
    merged_legend(fig, axes.flat)


def _law_line(ax: Any, trend: Mapping[str, Any], xs: np.ndarray, hx: float) -> None:
    """The law: its ``curve`` with the 90% band (solid over the ladder, dashed beyond), or ``y = k x^a``."""
    curve = [c for c in (trend.get("curve") or []) if pos(c.get("flops"), c.get("y"))]
    law = trend.get("law") or {}
    top = xs.max() * 1.05
    if curve:
        cx = np.array([num(c["flops"]) for c in curve])
        cy = np.array([num(c["y"]) for c in curve])
        lo = np.array([num(c.get("lo")) if pos(c.get("lo")) else np.nan for c in curve])
        hi = np.array([num(c.get("hi")) if pos(c.get("hi")) else np.nan for c in curve])
        inside = cx <= top
        label = f"fit: {trend.get('formula') or 'power law'}"
        ax.plot(cx[inside], cy[inside], color=FIT_COLOR, linewidth=1.4, label=label)
        if (~inside).any():
            j = max(0, int(np.argmax(~inside)) - 1)
            ax.plot(cx[j:], cy[j:], color=FIT_COLOR, linewidth=1.2, linestyle="--", label="extrapolation")
        band = np.isfinite(lo) & np.isfinite(hi)
        if band.any():
            ax.fill_between(
                cx[band], lo[band], hi[band], color=FIT_COLOR, alpha=0.12, linewidth=0, label="law, 90% band"
            )
    elif ok(law.get("k"), law.get("a")):
        k, a = num(law["k"]), num(law["a"])
        g1 = geom_grid(xs.min() / 1.3, top, 40)
        var = "C" if (trend.get("versus") or "flops") == "flops" else "N"
        ax.plot(g1, k * g1**a, color=FIT_COLOR, linewidth=1.4, label=f"fit: {k:.3g} {var}^{a:.3f}")
        if pos(hx) and hx > xs.max():
            g2 = geom_grid(xs.max(), hx, 40)
            ax.plot(g2, k * g2**a, color=FIT_COLOR, linewidth=1.2, linestyle="--", label="extrapolation")


def draw_trends(fig: FigureBase, panels: Sequence[tuple[Mapping[str, Any] | None, str, str]]) -> None:
    """Side-by-side power laws of a per-rung optimum against compute: the hyperparameter laws of ``fit.json``
    (points with ``flops``, the law's ``curve`` and band along the hero's tokens/param, ``fitted`` at each
    rung) or a ``y = k x^a`` trend (``x``, ``law.k``, ``law.a``), extrapolated to the hero."""
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (trend, ylabel, title) in zip(axes, panels):
        trend = trend or {}
        pts = trend.get("points") or []
        law = trend.get("law") or {}
        versus = trend.get("versus") or "flops"
        xkey = "flops" if any("flops" in p for p in pts) else "x"
        xs, ys = finite_arrays([p.get(xkey) for p in pts], [p.get("y") for p in pts])
        if not len(xs) and not law:
            empty(ax, trend.get("reason") or "no data")
            ax.set_title(title)
            continue
        for p in pts:
            if not pos(p.get(xkey), p.get("y")):
                continue
            ci = p.get("y_ci90") or [None, None]
            yerr = interval_err(num(p["y"]), ci[0] if ci else None, ci[1] if ci and len(ci) > 1 else None)
            ax.errorbar([num(p[xkey])], [num(p["y"])], yerr=yerr, fmt="o", color=PALETTE[0], markersize=5, capsize=3)
        ax.plot([], [], "o", color=PALETTE[0], label="per rung (90%)")
        if (trend.get("form") or "compute") != "compute":
            fx, fy = finite_arrays([p.get(xkey) for p in pts], [p.get("fitted") for p in pts])
            if len(fx):
                ax.plot(fx, fy, "x", color=FIT_COLOR, markersize=5, label="law at each rung's (N, D)")
        h = trend.get("hero") or {}
        hx = num(h.get("flops")) if h else num(trend.get("hero_x"))
        if len(xs):
            _law_line(ax, trend, xs, hx)
        hci = trend.get("hero_ci90") or [None, None]
        hero_point(
            ax,
            hx,
            trend.get("hero_value"),
            hci[0] if hci else None,
            hci[1] if hci and len(hci) > 1 else None,
            label="hero (90% interval of the law)",
        )
        if trend.get("reason") and not law:
            ax.text(
                0.02,
                0.02,
                wrap(tx(trend["reason"], 200), 60),
                transform=ax.transAxes,
                fontsize=6.5,
                color="#666666",
                va="bottom",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute (FLOPs)" if versus == "flops" else "parameters (N)")
        log_labels(ax.xaxis, fmt_pow if versus == "flops" else fmt_count)
        ax.set_ylabel(ylabel)
        log_labels(ax.yaxis, fmt_count if "batch" in ylabel else fmt_num)
        ax.set_title(title)
        legend(ax, fontsize=7)
