"""The tied-vs-untied ablation: each variant's loss per rung and their difference along the ladder."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import (
    empty,
    finite_arrays,
    flops_axis,
    geom_grid,
    hero_point,
    legend,
    loss_axis,
)
from ladder.reports.render.figures.style import FIT_COLOR, MUTED, PALETTE, VariantStyles
from ladder.reports.render.fmt import num, ok, pos


def _law_c(law: Mapping[str, Any] | None, cs: np.ndarray) -> np.ndarray | None:
    if not law or not ok(law.get("E"), law.get("C0"), law.get("g")):
        return None
    return num(law["E"]) + (num(law["C0"]) / cs) ** num(law["g"])


def _trend_value(trend: Mapping[str, Any], cs: np.ndarray) -> np.ndarray | None:
    if not trend or not ok(trend.get("intercept"), trend.get("slope")):
        return None
    a, b = num(trend["intercept"]), num(trend["slope"])
    if trend.get("form") == "saturating" and ok(trend.get("g"), trend.get("c_ref")):
        return a + b * (cs / num(trend["c_ref"])) ** (-num(trend["g"]))
    return a + b * np.log10(cs)


def draw_tie(fig: FigureBase, tie: Mapping[str, Any], styles: VariantStyles, tied_name: str, untied_name: str) -> None:
    """Tied vs untied embeddings per rung (losses at matched compute, each variant's law) and their difference
    along the ladder with the fitted trend extrapolated to the hero."""
    ax_l, ax_r = fig.subplots(1, 2)
    rows = [r for r in tie.get("scales") or [] if pos(r.get("flops"))]
    hero_c = num(tie.get("hero_flops"))
    for name, key, vname in (("tied", "loss_tied", tied_name), ("untied", "loss_untied", untied_name)):
        st = styles[vname]
        xs, ys = finite_arrays([r.get("flops") for r in rows], [r.get(key) for r in rows])
        ax_l.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=6,
                  label=f"{name} (best per rung)")
        if len(xs):
            top = max(xs.max(), hero_c) if pos(hero_c) else xs.max()
            cs = geom_grid(xs.min() / 1.3, top)
            yl = _law_c(((tie.get("laws") or {}).get(name)), cs)
            if yl is not None:
                ax_l.plot(cs, yl, color=st["color"], linestyle=st["linestyle"], linewidth=1.2, label=f"{name}: L(C) fit")
    flops_axis(ax_l)
    loss_axis(ax_l, "loss at matched compute (nats/token)")
    ax_l.set_title("loss per variant")
    legend(ax_l, fontsize=7)

    good = [r for r in rows if ok(r.get("diff"))]
    xs = np.array([num(r["flops"]) for r in good])
    ys = np.array([num(r["diff"]) for r in good])
    if len(good):
        se = np.array([1.645 * num(r.get("diff_se")) if ok(r.get("diff_se")) else 0.0 for r in good])
        ax_r.errorbar(xs, ys, yerr=se, fmt="o", color=PALETTE[2], capsize=3, markersize=5,
                      label="untied − tied per rung (90%)")
    trend = tie.get("trend") or {}
    if len(good):
        top = max(xs.max(), hero_c) if pos(hero_c) else xs.max() * 3
        cs = geom_grid(xs.min() / 1.3, top)
        yv = _trend_value(trend, cs)
        if yv is not None:
            ax_r.plot(cs, yv, color=FIT_COLOR, linewidth=1.3, label="trend")
        alt = _trend_value(tie.get("trend_loglinear") or {}, cs)
        if alt is not None:
            ax_r.plot(cs, alt, color=MUTED, linewidth=1.0, linestyle="--", label="trend, linear in log C")
    h = tie.get("hero") or {}
    ci = h.get("diff_ci90") or [None, None]
    hero_point(ax_r, h.get("flops", hero_c), h.get("diff"), ci[0] if ci else None, ci[1] if ci else None)
    ax_r.axhline(0, color="#444444", linewidth=0.8)
    cross = tie.get("crossover") or {}
    if cross.get("status") in ("within_range", "beyond_range") and pos(cross.get("flops")):
        ax_r.axvline(num(cross["flops"]), color=PALETTE[1], linestyle=":", linewidth=1.2, label="crossover")
    if not len(good):
        empty(ax_r, tie.get("reason") or "no rung has both variants")
    flops_axis(ax_r)
    ax_r.set_ylabel("loss(untied) − loss(tied) (nats/token)\n> 0: tied better")
    ax_r.set_title("difference along the ladder")
    legend(ax_r, fontsize=7)

