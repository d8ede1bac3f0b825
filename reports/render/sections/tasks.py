"""Task accuracy forecasts: the two-step forecast of every evaluated task at the hero, and step 1's law forms
(fitted by the same engine as the loss laws) with their rollout weights, calibration and reach."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ladder.reports.fits.study.fit_json import TaskHero, TaskLossLaw
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
from ladder.reports.render.study import no_section, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def tasks(ctx: Builder) -> Section:
    s = Section("tasks", "Task accuracy forecasts")
    fit = ctx.fit_json
    why = why_not(fit.tasks) if fit is not None else "no fit.json"
    if fit is None or why or not (fit.tasks.tasks or fit.tasks.errors):
        reason = why or "no task evaluations (run `ladder eval`, then collect)"
        return s.missing(no_section("task accuracy forecasts", reason))
    fits, errors = fit.tasks.tasks, fit.tasks.errors
    rows, law_rows = [], []
    for name, t in fits.items():
        h = t.hero or TaskHero()
        step1_formula = t.step1.formula if t.step1 is not None else None
        step2_formula = t.step2.formula if t.step2 is not None else None
        s.add(
            ctx.figure(
                f"fig-task-{slug(name)}",
                f"Task forecast: {name}",
                f"Two-step forecast of {name}: task loss against compute (step 1, {step1_formula or 'fit'}) "
                f"and accuracy against task loss (step 2, {step2_formula or 'no accuracy'}), "
                "with the hero's forecast and 90% intervals.",
                3.3,
                lambda fig, t=t: draw_task(fig, t),
            )
        )
        rows.append(
            [
                name,
                t.loss_metric or "",
                fmt_int(t.n_runs),
                fmt_loss(h.loss),
                fmt_ci(h.loss_interval, fmt_loss),
                fmt_loss(h.acc, 3),
                fmt_ci(h.acc_interval, lambda v: fmt_loss(v, 3)),
                fmt_ci(h.acc_prediction_interval, lambda v: fmt_loss(v, 3)),
            ]
        )
        law_rows.append(_law_row(name, t.step1 or TaskLossLaw(), h))
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
        note = _runs_note(fit, fits)
        if note:
            s.add(Para(note, "note"))
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
    for name, err in errors.items():
        s.add(Para(f"{name}: no forecast ({str(err).removeprefix(f'task {name!r}: ')})", "missing"))
    warns = [f"{n}: {w}" for n, t in fits.items() for w in t.warnings]
    if warns:
        s.add(Bullets(warns[:MAX_NOTES], "Notes"))
    return s


def _runs_note(fit, fits: dict) -> str | None:
    """Why a task's runs outnumber the loss laws' (the default study: 18 beside the laws' 17): the task laws fit
    every run of the hero's variant, the loss laws leave out those far from their compute's optimum."""
    law = fit.loss
    left = law.left_out_runs() if law is not None else []
    if not left or law.n_runs is None:
        return None
    more = sorted({t.n_runs for t in fits.values() if t.n_runs is not None and t.n_runs > law.n_runs})
    if not more:
        return None
    return (
        f"Runs: the task laws are fitted on the hero's variant's runs ({', '.join(map(str, more))}), with the "
        f"{len(left)} the loss laws left out ({(law.left_out.get('why') or 'far from their optimum').split(' (')[0]}); the loss laws "
        f"fit {law.n_runs}."
    )


def _law_row(name: str, step1: TaskLossLaw, hero: TaskHero) -> list:
    """One task's step-1 forms with their weights; the weighted mixture's rollout error (RMS of its forecasts of
    the larger runs from the smaller), the interval's coverage there and its calibration factor; the reach."""
    weighted = sorted(((k, num(f.weight)) for k, f in step1.forms.items()), key=lambda kv: -kv[1])
    text = ", ".join(f"{k} {w:.2f}" for k, w in weighted if w > 0) or (step1.primary or "")
    errs = [num(r.err_pct) for r in (step1.rollout.mixture if step1.rollout is not None else [])]
    errs = [e for e in errs if ok(e)]
    rms_text = fmt_pct(math.sqrt(sum(e * e for e in errs) / len(errs))) if errs else "no rollout"
    cal = step1.calibration
    reach2 = (step1.reach or {}).get("2%")
    return [
        name,
        text,
        rms_text,
        fmt_int(cal.n if cal is not None else None),
        fmt_pct(100 * num(cal.coverage if cal is not None else None), 0),
        fmt_g(cal.factor if cal is not None else None),
        fmt_g(reach2.params_x if reach2 is not None else None),
        fmt_g(hero.params_x),
    ]
