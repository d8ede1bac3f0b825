"""The ablations' figures: tied vs untied (each variant's loss per rung with its L(C) law; the gap per rung
with its noise, the rollout-weighted trend's calibrated band, the hero and the crossover; the effective-compute
multiplier), and depth vs width (loss against aspect ratio per rung; the best aspect ratio and the 2x penalty
across scale with their trend band and the hero)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.fits.study.fit_json import (
    AblationBand,
    AspectAtHero,
    AspectOptimum,
    AspectRung,
    Crossover,
    CurveLaw,
    DepthVsWidth,
    TiedCall,
    TiedVsUntied,
)
from ladder.reports.render.figures.axes import (
    empty,
    finite_arrays,
    fit_window_points,
    flops_axis,
    geom_grid,
    hero_point,
    legend,
    log_labels,
    loss_axis,
    merged_legend,
    plain_formatter,
)
from ladder.reports.render.figures.style import (
    FIT_COLOR,
    MUTED,
    PALETTE,
    VariantStyles,
    tx,
)
from ladder.reports.render.fmt import fmt_flops, num, ok, pos

Z90 = 1.6448536269514722
FLAGS = {"edge": "optimum beyond the sweep", "no_minimum": "no minimum"}  # a rung's fit status, on its panel


def _law_loss(law: CurveLaw | None, cs: np.ndarray) -> np.ndarray | None:
    """A variant's L(C) from fit.json (``E + A C^-alpha``, or ``exp(a) C^b``)."""
    p = law.params if law is not None else None
    if p is None:
        return None
    if ok(p.E, p.A, p.alpha):
        return num(p.E) + num(p.A) * cs ** -num(p.alpha)
    if ok(p.a, p.b):
        return np.exp(num(p.a)) * cs ** num(p.b)
    return None


def _band(ax: Any, band: AblationBand | None, label: str) -> None:
    b = band or AblationBand()
    xs, ys, lo, hi = finite_arrays(b.compute, b.point, b.lo, b.hi)
    if len(xs) > 1:
        ax.fill_between(xs, lo, hi, color=FIT_COLOR, alpha=0.12, linewidth=0, label="trend, 90% (calibrated)")
        ax.plot(xs, ys, color=FIT_COLOR, linewidth=1.3, label=label)


def _interval_bar(ax: Any, x: float, y: float, lo: Any, hi: Any, **kw: Any) -> None:
    err = [[max(0.0, y - num(lo))], [max(0.0, num(hi) - y)]] if ok(lo, hi) else None
    ax.errorbar([x], [y], yerr=err, **kw)


def draw_tie(fig: FigureBase, tie: TiedVsUntied, styles: VariantStyles) -> None:
    """Left: each variant's best loss per rung and its L(C) law. Middle: the gap ``ln L_untied - ln L_tied``
    per rung (90% noise bars), the trend's calibrated band to the hero, the crossover. Right: the
    effective-compute multiplier per rung and at the hero."""
    ax_l, ax_g, ax_m = fig.subplots(1, 3)
    rows = [r for r in tie.scales if pos(r.flops)]
    hero = tie.hero or TiedCall(flops=tie.hero_flops)  # without a call, still the hero's compute
    hero_c = num(hero.flops)
    for name, losses in (("tied", [r.loss_tied for r in rows]), ("untied", [r.loss_untied for r in rows])):
        st = styles[name]
        xs, ys = finite_arrays([r.flops for r in rows], losses)
        ax_l.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=5.5, label=name)
        if len(xs):
            cs = geom_grid(xs.min() / 1.3, max(xs.max(), hero_c) if pos(hero_c) else xs.max() * 1.3)
            yl = _law_loss((tie.laws or {}).get(name), cs)
            if yl is not None:
                ax_l.plot(cs, yl, color=st["color"], linestyle=st["linestyle"], linewidth=1.1, label=f"{name}: L(C)")
    flops_axis(ax_l)
    loss_axis(ax_l, "best loss per rung (nats/token)")
    ax_l.set_title("loss per variant")
    legend(ax_l, fontsize=6.5)

    good = [r for r in rows if ok(r.gap)]
    for r in good:
        se = num(r.gap_se)
        _interval_bar(
            ax_g,
            num(r.flops),
            num(r.gap),
            num(r.gap) - Z90 * se,
            num(r.gap) + Z90 * se,
            fmt="o",
            color=PALETTE[2],
            markersize=4.5,
            capsize=2.5,
        )
    ax_g.plot([], [], "o", color=PALETTE[2], label="per rung (90% noise)")
    _band(ax_g, tie.band, "trend (rollout-weighted forms)")
    ci = hero.gap_ci90 or [None, None]
    hero_point(ax_g, hero_c, hero.gap, ci[0], ci[1] if len(ci) > 1 else None, label="hero (90%)")
    ax_g.axhline(0, color="#444444", linewidth=0.8)
    cross = tie.crossover or Crossover()
    if cross.status in ("within_range", "beyond_range") and pos(cross.flops):
        ax_g.axvline(num(cross.flops), color=PALETTE[1], linestyle=":", linewidth=1.2, label="crossover")
    if not good:
        empty(ax_g, tie.reason or "no rung has both variants")
    else:
        flops_axis(ax_g)
        ax_g.set_ylabel("ln L_untied − ln L_tied  (> 0: tied better)")
    ax_g.set_title("gap along the ladder")
    legend(ax_g, fontsize=6.5)

    mr = [r for r in rows if pos(r.compute_multiplier)]
    for r in mr:
        c = r.compute_multiplier_ci90 or [None, None]
        _interval_bar(
            ax_m,
            num(r.flops),
            num(r.compute_multiplier),
            c[0],
            c[1] if len(c) > 1 else None,
            fmt="s",
            color=PALETTE[0],
            markersize=4.5,
            capsize=2.5,
        )
    mci = hero.compute_multiplier_ci90 or [None, None]
    hero_point(ax_m, hero_c, hero.compute_multiplier, mci[0], mci[1] if len(mci) > 1 else None, label="hero (90%)")
    if not mr and not pos(hero.compute_multiplier):
        empty(ax_m, "no multiplier: the untied variant has no loss-vs-compute law")
    else:
        ax_m.axhline(1, color="#444444", linewidth=0.8)
        flops_axis(ax_m)
        ax_m.set_yscale("log")
        log_labels(ax_m.yaxis)
        ax_m.set_ylabel("untied compute to reach tied's loss, ×")
    ax_m.set_title("effective compute")


def _quad_curve(poly: Sequence[Any], lo: float, hi: float) -> tuple[np.ndarray, np.ndarray] | None:
    if not poly or len(poly) < 3 or not ok(*poly) or not pos(lo, hi):
        return None
    xs = geom_grid(lo, hi, 80)
    lx = np.log(xs)
    return xs, np.exp(num(poly[0]) + num(poly[1]) * lx + num(poly[2]) * lx**2)


def draw_aspects(fig: FigureBase, scales: Sequence[AspectRung]) -> None:
    """Small multiples, one per rung: loss (moved to the rung's compute) against aspect ratio, the fitted
    quadratic of ln loss in ln aspect, the optimum and its 90% interval."""
    shown = [s for s in scales if s.points]
    if not shown:
        empty(fig.add_subplot(), "no rung has points to show")
        return
    ncols = min(3, len(shown))
    axes = fig.subplots(math.ceil(len(shown) / ncols), ncols, squeeze=False)
    for ax, s in zip(axes.flat, shown):
        pts = s.points
        fit_window_points(ax, pts, lambda p: p.aspect_ratio, lambda p: p.loss_compared)
        xs_all = [num(p.aspect_ratio) for p in pts if pos(p.aspect_ratio)]
        if not xs_all:
            empty(ax, "no finite values")
            continue
        lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
        f = s.fit or AspectOptimum()
        cv = _quad_curve(f.poly or [], lo, hi)
        if cv:
            ax.plot(*cv, color=PALETTE[0], linewidth=1.3, label="fit (quadratic of ln L in ln aspect)")
        if pos(f.opt):
            o = num(f.opt)
            c = list(f.ci90 or [None, None]) + [None, None]
            if ok(c[0], c[1]) and max(num(c[0]), lo) < min(num(c[1]), hi):
                ax.axvspan(
                    max(num(c[0]), lo),
                    min(num(c[1]), hi),
                    color=PALETTE[0],
                    alpha=0.10,
                    linewidth=0,
                    label="optimum, 90% interval",
                )
            if lo <= o <= hi:
                ax.axvline(o, color=PALETTE[0], linestyle="--", linewidth=1.0, label="optimum")
        flag = FLAGS.get(f.status)
        if s.skipped or flag:
            ax.text(0.03, 0.03, flag or "not fitted", transform=ax.transAxes, fontsize=7, color=PALETTE[1])
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        log_labels(ax.xaxis)
        ax.yaxis.set_major_formatter(plain_formatter())
        ax.set_title(f"{tx(s.scale, 18)} · C = {fmt_flops(s.flops)}", fontsize=8.5)  # as the tables give it
        ax.set_xlabel("aspect ratio (d_model / n_layers)")
        if ax in axes[:, 0]:
            ax.set_ylabel("loss at the rung's compute")
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_axis_off()
    merged_legend(fig, axes.flat)


def draw_aspect_trend(fig: FigureBase, dw: DepthVsWidth) -> None:
    """Left: the best aspect ratio per rung (90%), the trend's calibrated band and the hero. Right: the loss
    cost of a 2x wrong aspect ratio per rung and at the hero."""
    ax_a, ax_p = fig.subplots(1, 2)
    scales = [s for s in dw.scales if pos(s.flops) and s.fit is not None and s.fit.opt]
    hero = dw.hero or AspectAtHero()
    excluded = dw.excluded or {}
    for s in scales:
        f = s.fit
        c = f.ci90 or [None, None]
        kept = s.scale not in excluded
        _interval_bar(
            ax_a,
            num(s.flops),
            num(f.opt),
            c[0],
            c[1] if len(c) > 1 else None,
            fmt="o",
            color=PALETTE[0] if kept else MUTED,
            markersize=4.5,
            capsize=2.5,
        )
        pc = f.penalty_2x_ci90 or [None, None]
        if pos(f.penalty_2x):
            _interval_bar(
                ax_p,
                num(s.flops),
                num(f.penalty_2x),
                pc[0],
                pc[1] if len(pc) > 1 else None,
                fmt="s",
                color=PALETTE[2],
                markersize=4.5,
                capsize=2.5,
            )
    ax_a.plot([], [], "o", color=PALETTE[0], label="best per rung (90%)")
    _band(ax_a, dw.aspect_band, "trend (rollout-weighted forms)")
    ci = hero.aspect_ratio_ci90 or [None, None]
    hero_point(ax_a, hero.flops, hero.aspect_ratio, ci[0], ci[1] if len(ci) > 1 else None, label="hero (90%)")
    pci = hero.penalty_2x_ci90 or [None, None]
    hero_point(ax_p, hero.flops, hero.penalty_2x, pci[0], pci[1] if len(pci) > 1 else None, label="hero (90%)")
    for ax, ylabel, title in (
        (ax_a, "best aspect ratio (d_model / n_layers)", "aspect* vs compute"),
        (ax_p, "loss cost of a 2× wrong aspect (nats)", "cost vs compute"),
    ):
        if not scales:
            empty(ax, dw.reason or "no rung has an optimum")
            continue
        flops_axis(ax)
        ax.set_yscale("log")
        log_labels(ax.yaxis)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        legend(ax, fontsize=6.5)
