"""Two-step task forecasts: task loss against compute, accuracy against task loss."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import FigureBase

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


def draw_task(fig: FigureBase, task: Mapping[str, Any]) -> None:
    """Two-step task forecast: task loss against compute (step 1) and accuracy against task loss (step 2), with
    the hero's forecast and intervals."""
    ax_l, ax_r = fig.subplots(1, 2)
    pts = task.get("points") or []
    hero = task.get("hero") or {}
    xs, ys = finite_arrays([p.get("flops") for p in pts], [p.get("loss") for p in pts])
    ax_l.plot(xs, ys, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8, label="ladder runs")
    curves = (task.get("curves") or {}).get("step1") or []
    colors = budget_colors(len(curves)) if len(curves) > 1 else [FIT_COLOR]
    for c, col in zip(curves, colors):
        cx, cy = finite_arrays(c.get("flops") or [], c.get("loss") or [])
        if len(cx):
            ax_l.plot(cx, cy, color=col, linewidth=1.3, label=tx(c.get("label") or "fit"))
        bx, blo, bhi = finite_arrays(c.get("flops") or [], c.get("loss_lo") or [], c.get("loss_hi") or [])
        if len(bx) > 1:
            ax_l.fill_between(bx, blo, bhi, color=col, alpha=0.12, linewidth=0)
    li = hero.get("loss_interval") or [None, None]
    hero_point(ax_l, hero.get("flops"), hero.get("loss"), li[0], li[1] if len(li) > 1 else None)
    forms = _forms_text(task.get("step1") or {})
    if forms:
        ax_l.text(0.02, 0.02, forms, transform=ax_l.transAxes, fontsize=6, va="bottom", ha="left", color="0.3")
    flops_axis(ax_l)
    loss_axis(ax_l, f"task loss ({tx(task.get('loss_metric') or 'bpb', 20)}, bits/byte)")
    ax_l.set_title("step 1: task loss vs compute")
    legend(ax_l, fontsize=7)

    ax_, ay_ = finite_arrays([p.get("loss") for p in pts], [p.get("acc") for p in pts])
    s2 = (task.get("curves") or {}).get("step2") or {}
    if len(ax_) or s2:
        ax_r.plot(
            ax_, ay_, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8, label="ladder runs"
        )
        cx, cy = finite_arrays(s2.get("loss") or [], s2.get("acc") or [])
        if len(cx):
            ax_r.plot(cx, cy, color=FIT_COLOR, linewidth=1.3, label="sigmoid fit")
        bx, blo, bhi = finite_arrays(s2.get("loss") or [], s2.get("acc_lo") or [], s2.get("acc_hi") or [])
        if len(bx) > 1:
            ax_r.fill_between(bx, blo, bhi, color=FIT_COLOR, alpha=0.12, linewidth=0, label="90% interval")
        ai = hero.get("acc_interval") or [None, None]
        if ok(hero.get("loss"), hero.get("acc")):
            xerr = interval_err(num(hero["loss"]), li[0], li[1] if len(li) > 1 else None)
            yerr = interval_err(num(hero["acc"]), ai[0], ai[1] if len(ai) > 1 else None)
            ax_r.errorbar(
                [num(hero["loss"])],
                [num(hero["acc"])],
                xerr=xerr,
                yerr=yerr,
                fmt="none",
                ecolor=HERO["color"],
                capsize=3,
                elinewidth=1.2,
                zorder=5,
            )
            ax_r.plot([num(hero["loss"])], [num(hero["acc"])], linestyle="none", label="hero forecast (90%)", **HERO)
        ax_r.set_xlabel("task loss (bits/byte)")
        ax_r.set_ylabel(f"accuracy ({tx(task.get('acc_metric') or 'acc', 20)})")
        ax_r.set_title("step 2: accuracy vs task loss")
        legend(ax_r, fontsize=7)
    else:
        empty(ax_r, "no accuracy metric: loss forecast only")


def _forms_text(step1: Mapping[str, Any]) -> str:
    """The step-1 forms with their rollout weights, e.g. ``forms: overtrain 0.47, ratio 0.29``."""
    forms = step1.get("forms") if isinstance(step1.get("forms"), Mapping) else {}
    w = sorted(
        ((str(k), num((f or {}).get("weight"))) for k, f in forms.items() if isinstance(f, Mapping)),
        key=lambda kv: -kv[1] if ok(kv[1]) else 0.0,
    )
    parts = [f"{tx(k, 12)} {v:.2f}" for k, v in w if ok(v) and v > 0]
    return "forms: " + ", ".join(parts) if parts else ""
