"""Task accuracy forecasts: the two-step forecast of every evaluated task at the hero, and step 1's law forms
(fitted by the same engine as the loss laws) with their rollout weights, calibration and reach."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ladder.reports.render.blocks import Bullets, Para, Section, Table
from ladder.reports.render.figures.tasks import draw_task
from ladder.reports.render.fmt import (
    MAX_NOTES,
    fmt_ci,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_pct,
    num,
    ok,
    slug,
)
from ladder.reports.render.study import g, mapping, maps, seq

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def tasks(ctx: Builder) -> Section:
    s = Section("tasks", "Task accuracy forecasts")
    tk, why = ctx.entry("tasks")
    fits = (tk or {}).get("tasks") if not why else None
    errors = (tk or {}).get("errors") if not why else None
    if why or (not fits and not errors):
        reason = why if why and why != "not in fit.json" else "no task evaluations (run `ladder eval`, then collect)"
        return s.missing(f"this study has no task accuracy forecasts: {reason}")
    rows, law_rows = [], []
    for name, t in mapping(fits).items():
        if not isinstance(t, Mapping):
            continue
        h = mapping(t.get("hero"))
        s.add(
            ctx.figure(
                f"fig-task-{slug(name)}",
                f"Task forecast: {name}",
                f"Two-step forecast of {name}: task loss against compute (step 1, {g(t, 'step1', 'formula') or 'fit'}) "
                f"and accuracy against task loss (step 2, {g(t, 'step2', 'formula') or 'no accuracy'}), "
                "with the hero's forecast and 90% intervals.",
                3.3,
                lambda fig, t=t: draw_task(fig, t),
            )
        )
        rows.append(
            [
                str(name),
                str(t.get("loss_metric") or ""),
                fmt_int(t.get("n_runs")),
                fmt_loss(h.get("loss")),
                fmt_ci(h.get("loss_interval"), fmt_loss),
                fmt_loss(h.get("acc"), 3),
                fmt_ci(h.get("acc_interval"), lambda v: fmt_loss(v, 3)),
                fmt_ci(h.get("acc_prediction_interval"), lambda v: fmt_loss(v, 3)),
            ]
        )
        law_rows.append(_law_row(str(name), mapping(t.get("step1")), h))
    if rows:
        s.add(
            Table(
                [
                    "Task",
                    "Loss metric",
                    "Runs",
                    "Hero task loss",
                    "90%",
                    "Hero accuracy",
                    "90% (curve)",
                    "90% (prediction)",
                ],
                rows,
                "llrrrrrr",
                title="Forecasts at the hero",
            )
        )
    if law_rows:
        s.add(
            Table(
                [
                    "Task",
                    "Step-1 forms (weight)",
                    "Rollout RMS error",
                    "Forecasts",
                    "Coverage",
                    "Factor",
                    "Reach 2% (params x)",
                    "Hero (params x)",
                ],
                law_rows,
                "llrrrrrr",
                title="Task loss laws (step 1): forms weighted by rollout error",
            )
        )
    for name, err in mapping(errors).items():
        s.add(Para(f"{name}: no forecast ({err})", "missing"))
    warns = [f"{n}: {w}" for n, t in mapping(fits).items() if isinstance(t, Mapping) for w in seq(t.get("warnings"))]
    if warns:
        s.add(Bullets(warns[:MAX_NOTES], "Notes"))
    return s


def _law_row(name: str, step1: Mapping, hero: Mapping) -> list:
    """One task's step-1 forms with their weights; the weighted mixture's rollout error (RMS of its forecasts of
    the larger runs from the smaller), the interval's coverage there and its calibration factor; the reach."""
    forms = mapping(step1.get("forms"))
    weighted = sorted(((k, num(mapping(f).get("weight"))) for k, f in forms.items()), key=lambda kv: -kv[1])
    text = ", ".join(f"{k} {w:.2f}" for k, w in weighted if w > 0) or str(step1.get("primary") or "")
    errs = [num(r.get("err_pct")) for r in maps(g(step1, "rollout", "mixture"))]
    errs = [e for e in errs if ok(e)]
    rms_text = fmt_pct(math.sqrt(sum(e * e for e in errs) / len(errs))) if errs else "no rollout"
    cal = mapping(step1.get("calibration"))
    return [
        name,
        text,
        rms_text,
        fmt_int(cal.get("n")),
        fmt_pct(100 * num(cal.get("coverage")), 0),
        fmt_g(cal.get("factor")),
        fmt_g(g(step1, "reach", "2%", "params_x")),
        fmt_g(hero.get("params_x")),
    ]
