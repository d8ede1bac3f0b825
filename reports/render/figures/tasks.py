"""Two-step task forecasts: task loss against compute, accuracy against task loss."""

from __future__ import annotations

from matplotlib.figure import FigureBase

from ladder.reports.fits.study.fit_json import TaskAccuracyCurve, TaskCurves, TaskFit, TaskHero, TaskLossLaw
from ladder.reports.render.figures.axes import (
    empty,
    finite_arrays,
    flops_axis,
    hero_point,
    interval_err,
    legend,
    loss_axis,
)
from ladder.reports.render.figures.style import (
    FIT_COLOR,
    HERO,
    PALETTE,
    budget_colors,
    tx,
)
from ladder.reports.render.fmt import num, ok


def draw_task(fig: FigureBase, task: TaskFit) -> None:
    """Two-step task forecast: task loss against compute (step 1) and accuracy against task loss (step 2), with
    the hero's forecast and intervals."""
    ax_l, ax_r = fig.subplots(1, 2)
    pts = task.points
    hero = task.hero or TaskHero()
    curves = task.curves or TaskCurves()
    xs, ys = finite_arrays([p.flops for p in pts], [p.loss for p in pts])
    ax_l.plot(xs, ys, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8, label="ladder runs")
    colors = budget_colors(len(curves.step1)) if len(curves.step1) > 1 else [FIT_COLOR]
    for c, col in zip(curves.step1, colors):
        cx, cy = finite_arrays(c.flops, c.loss)
        if len(cx):
            ax_l.plot(cx, cy, color=col, linewidth=1.3, label=tx(c.label or "fit"))
        bx, blo, bhi = finite_arrays(c.flops, c.loss_lo, c.loss_hi)
        if len(bx) > 1:
            ax_l.fill_between(bx, blo, bhi, color=col, alpha=0.12, linewidth=0)
    li = hero.loss_interval or [None, None]
    hero_point(ax_l, hero.flops, hero.loss, li[0], li[1] if len(li) > 1 else None)
    forms = _forms_text(task.step1)
    if forms:
        ax_l.text(0.02, 0.02, forms, transform=ax_l.transAxes, fontsize=6, va="bottom", ha="left", color="0.3")
    flops_axis(ax_l)
    loss_axis(ax_l, f"task loss ({tx(task.loss_metric or 'bpb', 20)}, bits/byte)")
    ax_l.set_title("step 1: task loss vs compute")
    legend(ax_l, fontsize=7)

    ax_, ay_ = finite_arrays([p.loss for p in pts], [p.acc for p in pts])
    s2 = curves.step2
    if len(ax_) or s2 is not None:
        ax_r.plot(
            ax_, ay_, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8, label="ladder runs"
        )
        s2 = s2 or TaskAccuracyCurve()
        cx, cy = finite_arrays(s2.loss, s2.acc)
        if len(cx):
            ax_r.plot(cx, cy, color=FIT_COLOR, linewidth=1.3, label="sigmoid fit")
        bx, blo, bhi = finite_arrays(s2.loss, s2.acc_lo, s2.acc_hi)
        if len(bx) > 1:
            ax_r.fill_between(bx, blo, bhi, color=FIT_COLOR, alpha=0.12, linewidth=0, label="90% interval")
        ai = hero.acc_interval or [None, None]
        if ok(hero.loss, hero.acc):
            loss, acc = num(hero.loss), num(hero.acc)
            xerr = interval_err(loss, li[0], li[1] if len(li) > 1 else None)
            yerr = interval_err(acc, ai[0], ai[1] if len(ai) > 1 else None)
            ax_r.errorbar(
                [loss],
                [acc],
                xerr=xerr,
                yerr=yerr,
                fmt="none",
                ecolor=HERO["color"],
                capsize=3,
                elinewidth=1.2,
                zorder=5,
            )
            ax_r.plot([loss], [acc], linestyle="none", label="hero forecast (90%)", **HERO)
        ax_r.set_xlabel("task loss (bits/byte)")
        ax_r.set_ylabel(f"accuracy ({tx(task.acc_metric or 'acc', 20)})")
        ax_r.set_title("step 2: accuracy vs task loss")
        legend(ax_r, fontsize=7)
    else:
        empty(ax_r, "no accuracy metric: loss forecast only")


def _forms_text(step1: TaskLossLaw | None) -> str:
    """The step-1 forms with their rollout weights, e.g. ``forms: overtrain 0.47, ratio 0.29``."""
    forms = step1.forms if step1 is not None else {}
    w = sorted(
        ((k, num(f.weight)) for k, f in forms.items()),
        key=lambda kv: -kv[1] if ok(kv[1]) else 0.0,
    )
    parts = [f"{tx(k, 12)} {v:.2f}" for k, v in w if ok(v) and v > 0]
    return "forms: " + ", ".join(parts) if parts else ""
