"""Learning rate and batch size: the sweeps per rung, the optima's power laws (in N and D, or compute) and their
values at the hero, every number as fit.json holds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ladder.reports.fits.study.fit_json import HparamLaw, HparamRollout, HparamsAtHero, SweepOptimum
from ladder.reports.render.blocks import KV, Bullets, Para, Section, Table
from ladder.reports.render.figures.sweeps import draw_trends
from ladder.reports.render.fmt import (
    ABSENT,
    cap,
    fmt_ci,
    fmt_count,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_lr,
    fmt_times,
    num,
    status_cell,
)
from ladder.reports.render.study import no_section, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def _at_hero(value: float | None, ci: list | None, f: Callable[[Any], str], unit: str = "") -> str:
    if value is None:
        return ABSENT
    return f"{f(value)}{unit} (90%: {fmt_ci(ci, f)})"


def _penalty(value: float | None, ci: list | None) -> str:
    return f"{fmt_loss(value)} nats/token (90%: {fmt_ci(ci, fmt_loss)})"


def _law_items(law: HparamLaw | None, name: str) -> list[tuple[str, str]]:
    """The law's formula with its constants and their 90% intervals, or why there is none; its notes."""
    law = law or HparamLaw()
    fitted = law.law
    if fitted is None:
        return [(f"{name} law", law.reason or ABSENT)]
    ci = fitted.ci90 or {}
    consts = "; ".join(f"{k} = {fmt_g(v, 4)} (90%: {fmt_ci(ci.get(k))})" for k, v in (fitted.params or {}).items())
    out = [(f"{name} law", f"{law.formula}: {consts}; {fmt_int(fitted.n)} rungs")]
    if law.rollout is not None:
        out.append((f"{name} law backtest", backtest_text(law.rollout)))
    out += [(f"{name} law note", n) for n in law.notes]
    return out


def backtest_text(ro: HparamRollout) -> str:
    """The rollout of an optimum's law in one line, as fit.json holds it."""
    return (
        f"fitted on the smaller rungs, {fmt_int(ro.n)} forecasts of larger rungs' optima: RMS error "
        f"{fmt_g(ro.rms_pct, 2)}%, max {fmt_g(ro.max_abs_pct, 2)}%, "
        f"{fmt_g(100 * num(ro.coverage), 3)}% inside their 90% intervals; reach "
        + (f"{fmt_times(ro.reach)} in compute" if ro.reach is not None else "none (the nearest forecast missed)")
        + (f" (within 10% up to {fmt_times(ro.reach_within_10pct)})" if ro.reach_within_10pct is not None else "")
    )


def _positive(ci: Any) -> Any:
    """A one-sided interval of an LR or a batch (an optimum beyond the grid's low end) starts at 0, never −∞."""
    if isinstance(ci, (list, tuple)) and len(ci) >= 2 and ci[0] is None and ci[1] is not None:
        return [0, ci[1]]
    return ci


def hparams(ctx: Builder) -> Section:
    s = Section("hparams", "Learning rate and batch size")
    fit = ctx.fit_json
    hp = fit.hparams if fit is not None else None
    why = why_not(hp) if fit is not None else "no fit.json"
    if why:
        return s.missing(no_section("LR sweep", why) if "LR sweep" not in why else why)
    scales = hp.scales
    if not hp.has_lr_sweep:
        reason = (hp.lr.reason if hp.lr is not None else None) or "no rung has 3 or more learning rates"
        s.missing(no_section("LR sweep", reason))
    else:
        s.add(
            *ctx.small_multiples(
                "fig-lr-sweeps",
                "Learning-rate sweeps per rung",
                "Final loss against peak learning rate at each rung (filled: inside the fit window), the fitted "
                "parabola in log LR, its optimum (dashed) and the optimum's 90% interval (shaded).",
                [sc for sc in scales if sc.points],
                "lr",
            )
        )
    if hp.has_batch_sweep:
        s.add(
            *ctx.small_multiples(
                "fig-batch-sweeps",
                "Batch-size sweeps per rung",
                "Final loss against batch size at each rung and the fitted profile (the LR re-tuned at every batch), "
                "its optimum and 90% interval.",
                [sc for sc in scales if sc.batch is not None],
                "batch",
            )
        )
    elif hp.has_lr_sweep:
        reason = (hp.batch.reason if hp.batch is not None else None) or "no rung has 3 or more batch sizes"
        s.add(Para(no_section("batch sweep", reason), "missing"))
    panels = []
    if hp.has_lr_sweep:
        panels.append((hp.lr, "optimal peak learning rate", "LR* vs compute"))
    if hp.has_batch_sweep:
        panels.append((hp.batch, "optimal batch size (tokens)", "B* vs compute"))
    if panels:
        s.add(
            ctx.figure(
                "fig-hparam-laws",
                "Hyperparameter laws",
                "Optimum per rung (90% interval) against compute, and its power law with the 90% band along the hero's "
                "tokens/param, extrapolated (dashed) to the hero (star: the law's value and 90% interval there); "
                "for a law in N and D, crosses mark the law at each rung's own (N, D).",
                3.2,
                lambda fig: draw_trends(fig, panels),
            )
        )
    if scales:
        rows = []
        for sc in scales:
            lr, b = sc.lr or SweepOptimum(), sc.batch
            rows.append(
                [
                    str(sc.scale),
                    fmt_flops(sc.flops),
                    fmt_count(sc.params),
                    fmt_int(sc.n_runs),
                    fmt_lr(lr.opt),
                    fmt_ci(_positive(lr.ci90), fmt_lr),
                    status_cell(lr.status or ("skipped" if sc.skipped else "")),
                    fmt_loss(lr.penalty_2x),
                    fmt_count(b.opt) if b is not None else ABSENT,
                    fmt_ci(_positive(b.ci90), fmt_count) if b is not None else ABSENT,
                ]
            )
        s.add(
            Table(
                ["Rung", "Compute", "Params", "Runs", "LR*", "90%", "Status", "Cost of 2× LR", "B*", "90%"],
                rows,
                "lrrrrrlrrr",
                title="Optimum per rung (cost: loss increase when the LR is off by 2×)",
            )
        )
    h = hp.hero or HparamsAtHero()
    if hp.has_lr_sweep:
        items = [("Learning rate at the hero", _at_hero(h.lr, h.lr_ci90, fmt_lr))]
        items += _law_items(hp.lr, "LR*")
        if hp.has_batch_sweep:
            items.append(
                ("Batch size at the hero", _at_hero(h.batch_tokens, h.batch_tokens_ci90, fmt_count, " tokens"))
            )
            items += _law_items(hp.batch, "B*")
        if h.lr_penalty_2x is not None:
            items.append(("Cost of a 2× LR error at the hero", _penalty(h.lr_penalty_2x, h.lr_penalty_2x_ci90)))
        if h.batch_penalty_2x is not None:
            items.append(
                ("Cost of a 2× batch error at the hero", _penalty(h.batch_penalty_2x, h.batch_penalty_2x_ci90))
            )
        s.add(KV(items, "At the hero"))
    if hp.notes:
        s.add(Bullets(cap(list(hp.notes)), "Notes"))
    if hp.method:
        s.add(Para(f"Method: {hp.method}.", "note"))
    return s
