"""The loss law against the runs (compute and parameters, extrapolated to the hero) and the IsoFLOP profiles."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.fits.study.fit_json import Hero, Isoflop, IsoflopResidual, IsoflopShape, Point
from ladder.reports.render.figures.axes import (
    count_axis,
    finite_arrays,
    flops_axis,
    geom_grid,
    hero_point,
    legend,
    log_labels,
    loss_axis,
    merged_legend,
)
from ladder.reports.render.figures.style import (
    ACTUAL,
    FIT_COLOR,
    HERO,
    PALETTE,
    VariantStyles,
    budget_colors,
    tx,
)
from ladder.reports.render.fmt import fmt_count, fmt_flops, num, ok, pos


def draw_scaling(
    fig: FigureBase,
    runs: Any,
    hero: Hero | None,
    styles: VariantStyles,
    *,
    in_law: set[str] | None = None,
    band: Sequence[Point] | None = None,
    actual: Mapping[str, Any] | None = None,
) -> None:
    """Final loss against compute and against parameters; the forecast (the weighted law forms) along the hero's
    tokens per parameter with its calibrated 90% interval, extrapolated to the hero; ``actual``: the hero run's
    real final loss (``loss``, ``params``, ``flops`` or ``tokens``) beside the forecast."""
    ax_c, ax_n = fig.subplots(1, 2, sharey=True)
    done = runs[(runs["status"] == "done")] if "status" in runs else runs
    in_law = in_law or set()
    for variant, g in done.groupby("variant", sort=False):
        st = styles[variant]
        used = g["run_id"].astype(str).isin(in_law) if "run_id" in g else np.zeros(len(g), dtype=bool)
        for ax, x in ((ax_c, "flops"), (ax_n, "params")):
            if in_law:  # the runs the laws were fitted to stand out; the others (untuned, other variants) recede
                xs, ys = finite_arrays(g.loc[~used, x], g.loc[~used, "loss"])
                ax.plot(
                    xs,
                    ys,
                    linestyle="none",
                    marker=st["marker"],
                    color=st["color"],
                    markersize=3.5,
                    alpha=0.35,
                    markeredgewidth=0,
                )
                xs, ys = finite_arrays(g.loc[used, x], g.loc[used, "loss"])
                ax.plot(
                    xs,
                    ys,
                    linestyle="none",
                    marker=st["marker"],
                    color=st["color"],
                    markersize=5.5,
                    markeredgecolor="black",
                    markeredgewidth=0.7,
                    zorder=5,
                )
                ax.plot(
                    [], [], linestyle="none", marker=st["marker"], color=st["color"], markersize=5, label=tx(variant)
                )
            else:
                xs, ys = finite_arrays(g[x], g["loss"])
                ax.plot(
                    xs,
                    ys,
                    linestyle="none",
                    marker=st["marker"],
                    color=st["color"],
                    markersize=4.5,
                    alpha=0.85,
                    markeredgecolor="white",
                    markeredgewidth=0.4,
                    label=tx(variant),
                )
    if in_law:
        ax_c.plot(
            [],
            [],
            linestyle="none",
            marker="o",
            markerfacecolor="white",
            markeredgecolor="black",
            markeredgewidth=0.7,
            label="runs in the fit (outlined)",
        )
    hero = hero or Hero()
    k_ladder = _flops_ratio(done)
    hn, hd = num(hero.params), num(hero.tokens)
    hc = num(hero.flops) if ok(hero.flops) else (6 * hn * hd * k_ladder if pos(hn, hd) else math.nan)
    if band:
        bn, bd, bl, lo, hi = finite_arrays(
            [b.params for b in band],
            [b.tokens for b in band],
            [b.loss for b in band],
            [b.lo for b in band],
            [b.hi for b in band],
        )
        if len(bn) >= 2:
            bc = 6 * bn * bd * _k_interp(bn, done, k_ladder, hn, hc, hd)
            label = f"forecast at {hd / hn:.3g} tokens/param" if pos(hn, hd) else "forecast"
            for ax, x in ((ax_c, bc), (ax_n, bn)):
                ax.plot(x, bl, color=FIT_COLOR, linewidth=1.6, label=label, zorder=4)
                ax.fill_between(x, lo, hi, color=FIT_COLOR, alpha=0.13, linewidth=0, label="calibrated 90% interval")
    hero_point(ax_c, hc, hero.loss, hero.lo, hero.hi)
    hero_point(ax_n, hn, hero.loss, hero.lo, hero.hi)
    if actual and ok(actual.get("loss")) and pos(actual.get("params")):
        an = num(actual["params"])
        ac = (
            num(actual.get("flops"))
            if pos(actual.get("flops"))
            else (6 * an * num(actual.get("tokens")) * k_ladder if pos(actual.get("tokens")) else math.nan)
        )
        for ax, x in ((ax_c, ac), (ax_n, an)):
            if pos(x):
                ax.plot([x], [num(actual["loss"])], linestyle="none", label="hero run (actual)", **ACTUAL)
    flops_axis(ax_c)
    count_axis(ax_n, "parameters (N)")
    loss_axis(ax_c, "final eval loss (nats/token)")
    ax_n.tick_params(labelleft=True)
    ax_c.set_title("loss vs compute")
    ax_n.set_title("loss vs parameters")
    merged_legend(fig, (ax_c, ax_n))


def _flops_ratio(runs: Any) -> float:
    """The ladder's FLOPs over 6 N D (attention and embeddings make it > 1 for small models)."""
    try:
        r = np.asarray(runs["flops"], float) / (
            6 * np.asarray(runs["params"], float) * np.asarray(runs["tokens"], float)
        )
        r = r[np.isfinite(r) & (r > 0)]
        return float(np.median(r)) if len(r) else 1.0
    except (KeyError, TypeError, ValueError):
        return 1.0


def _k_interp(ns: np.ndarray, runs: Any, k_ladder: float, hn: float, hc: float, hd: float) -> np.ndarray:
    """FLOPs / 6ND along a curve: the ladder's ratio up to its largest model, moving (in log N) to the hero's."""
    if not pos(hn, hc, hd):
        return np.full_like(ns, k_ladder)
    k_hero = hc / (6 * hn * hd)
    n_top = float(np.nanmax(runs["params"])) if len(runs) else hn
    if not pos(n_top) or hn <= n_top:
        return np.full_like(ns, k_ladder)
    t = np.clip((np.log(ns) - math.log(n_top)) / (math.log(hn) - math.log(n_top)), 0.0, 1.0)
    return np.exp((1 - t) * math.log(k_ladder) + t * math.log(k_hero))


# ---------------------------------------------------------------------------------------------- IsoFLOP


def draw_isoflop(fig: FigureBase, iso: Isoflop, hero: Hero | None) -> None:
    """Loss against model size per compute budget with the fitted IsoFLOP curves and their minima; the optimal
    parameters and tokens against compute with their power laws, extrapolated to the hero's compute."""
    ax_l, ax_r = fig.subplots(1, 2)
    budgets = [b for b in iso.budgets if pos(b.flops)]
    colors = budget_colors(len(budgets))
    bl = np.log([num(b.flops) for b in budgets]) if budgets else np.array([])
    groups: dict[int, list[IsoflopResidual]] = {}
    for r in iso.residuals:
        if not pos(r.flops, r.params, r.loss) or not len(bl):
            continue
        j = int(np.argmin(np.abs(bl - math.log(num(r.flops)))))
        if abs(bl[j] - math.log(num(r.flops))) < 0.25:
            groups.setdefault(j, []).append(r)
    for j, b in enumerate(budgets):
        col = colors[j]
        rows = groups.get(j, [])
        label = f"C = {fmt_flops(b.flops)} FLOPs"  # as the tables give it, never 1.2e+11
        if rows:
            xs, ys = finite_arrays([r.params for r in rows], [r.loss for r in rows])
            ax_l.plot(xs, ys, linestyle="none", marker="o", markersize=3.5, color=col, alpha=0.7)
            curve = _isoflop_curve(rows, iso.shape, iso.method)
            if curve is not None:
                ax_l.plot(curve[0], curve[1], color=col, linewidth=1.4, label=label)
        ci = b.ci90.params_opt if b.ci90 is not None else None
        xerr = None
        if ci and ok(ci[0], ci[1]) and pos(b.params_opt):
            xerr = [[max(0, num(b.params_opt) - num(ci[0]))], [max(0, num(ci[1]) - num(b.params_opt))]]
        if pos(b.params_opt, b.loss_opt):
            ax_l.errorbar(
                [num(b.params_opt)],
                [num(b.loss_opt)],
                xerr=xerr,
                fmt="D",
                color=col,
                markeredgecolor="black",
                markeredgewidth=0.7,
                markersize=6,
                capsize=3,
                zorder=5,
                label=None if rows else label,
            )
    ax_l.plot([], [], "D", color="white", markeredgecolor="black", label="fitted minimum (90%)")
    count_axis(ax_l, "parameters (N)")
    loss_axis(ax_l, "final eval loss (nats/token)")
    ax_l.set_title("IsoFLOP profiles")
    legend(ax_l, fontsize=7)

    hc = num(hero.compute) if hero is not None else math.nan
    xs = np.array([num(b.flops) for b in budgets])
    drew = False
    for opts, cis, law, marker, name, color in (
        (
            [b.params_opt for b in budgets],
            [b.ci90 and b.ci90.params_opt for b in budgets],
            iso.n_opt,
            "o",
            "N_opt (parameters)",
            PALETTE[0],
        ),
        (
            [b.tokens_opt for b in budgets],
            [b.ci90 and b.ci90.tokens_opt for b in budgets],
            iso.d_opt,
            "s",
            "D_opt (tokens)",
            PALETTE[1],
        ),
    ):
        ys = np.array([num(v) for v in opts])
        good = np.isfinite(ys) & (ys > 0)
        if not good.any():
            continue
        lo = [num((ci or [None, None])[0]) for ci in cis]
        hi = [num((ci or [None, None])[1]) for ci in cis]
        yerr = np.array(
            [
                [max(0, y - low) if ok(low) else 0 for y, low in zip(ys, lo)],
                [max(0, h - y) if ok(h) else 0 for y, h in zip(ys, hi)],
            ]
        )
        ax_r.errorbar(
            xs[good], ys[good], yerr=yerr[:, good], fmt=marker, color=color, markersize=5, capsize=3, label=name
        )
        if law is not None and ok(law.k, law.a):
            top = max(xs[good].max(), hc) if pos(hc) else xs[good].max() * 3
            grid = geom_grid(xs[good].min() / 1.5, top)
            ax_r.plot(
                grid,
                num(law.k) * grid ** num(law.a),
                color=color,
                linewidth=1.2,
                linestyle="-",
                label=f"{name.split()[0]} = {num(law.k):.3g} C^{num(law.a):.3f}",
            )
            if pos(hc):
                v = num(law.k) * hc ** num(law.a)
                ax_r.plot(
                    [hc], [v], marker=marker, color=color, markersize=9, markeredgecolor="black", linestyle="none"
                )
                drew = True
    if drew:
        ax_r.axvline(hc, color=HERO["color"], linewidth=0.8, linestyle=":", label="hero compute")
    flops_axis(ax_r)
    ax_r.set_yscale("log")
    ax_r.set_ylabel("parameters / tokens")
    log_labels(ax_r.yaxis, fmt_count)
    ax_r.set_title("compute-optimal N and D")
    legend(ax_r, fontsize=7)


def _isoflop_curve(
    rows: list[IsoflopResidual], shape: IsoflopShape | None, method: str | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The fitted curve of one budget, recovered exactly from its fitted values (3 linear coefficients)."""
    x, y = finite_arrays([r.params for r in rows], [r.predicted for r in rows])
    if len(np.unique(np.round(np.log(x), 9))) < 3:
        return None
    lx = np.log(x)
    grid = np.linspace(lx.min() - 0.15, lx.max() + 0.15, 100)
    m = lx.mean()
    if method == "shape" and shape is not None and ok(shape.alpha, shape.beta):
        a, b = num(shape.alpha), num(shape.beta)
        basis = lambda t: np.stack([np.ones_like(t), np.exp(-a * (t - m)), np.exp(b * (t - m))], axis=1)  # noqa: E731
    else:
        basis = lambda t: np.stack([np.ones_like(t), t - m, (t - m) ** 2], axis=1)  # noqa: E731
    coef, *_ = np.linalg.lstsq(basis(lx), y, rcond=None)
    return np.exp(grid), basis(grid) @ coef
