"""The headline: the hero's forecast (a projection until a forecast frozen from the same results is scored against
the hero's final loss: then a prediction, :mod:`ladder.reports.render.sections.forecast`), the
ladder's cost, how far the rollout showed the ladder sees, the runs' status and the recommended hero
configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.fits.recommend import tied_uncertainty
from ladder.reports.fits.study.fit_json import FitJson, Hero, written
from ladder.reports.fits.study.study_hero import NO_REACH, beyond_words, reaches_nowhere
from ladder.reports.render.blocks import Bullets, Headline, Para, Pre, Section, Tile
from ladder.reports.render.cost import ladder_cost
from ladder.reports.render.fmt import (
    ABSENT,
    cap,
    fmt_bool,
    fmt_ci,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_lr,
    fmt_pct,
    fmt_size,
    fmt_times,
    num,
    ok,
    pos,
    schedule_text,
    shape_text,
    share_of_hero,
)
from ladder.reports.render.sections.forecast import (
    FINAL,
    PARTIAL,
    as_scored,
    checked_words,
    is_prediction,
    score_state,
    unfinished,
)
from ladder.reports.render.sections.runs import hero_words
from ladder.reports.render.study import first, mapping, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def headline(ctx: Builder) -> Section:
    s = Section("headline", "Forecast for the hero run")
    fit = ctx.fit_json
    hero = fit.hero if fit is not None else Hero()
    rec = fit.recommendation if fit is not None and fit.recommendation.available else None
    plan_hero = mapping(ctx.d.plan.get("hero"))
    totals = mapping(ctx.d.plan.get("totals"))
    loss = first(hero.loss, rec and rec.loss)
    interval = (rec.loss_interval if rec is not None and rec.loss_interval else []) + [None, None]
    lo = first(hero.lo, interval[0])
    hi = first(hero.hi, interval[1])
    if ctx.d.stale_fit:
        s.add(Para(f"Warning: {ctx.d.stale_fit}", "warn"))
    tiles = []
    if ok(loss):
        ext = hero.extrapolation or {}
        ext_text = ""
        if ok(ext.get("params")):
            ext_text = (
                f"; {fmt_times(ext.get('params'))} the largest model fitted in parameters, "
                f"{fmt_times(ext.get('tokens'))} in tokens, {fmt_times(ext.get('compute_6nd'))} in compute (6ND)"
            )
        half = hero.half_width_pct
        kind = hero.kind or "projection"
        far = beyond_words(hero.beyond_tested, hero.beyond_reach)  # the stronger that holds, as fit's line says it
        beyond = f" {far.capitalize()}." if far else ""
        state = score_state(ctx)
        if state == FINAL:  # frozen from these results and scored against the hero's final loss
            kind = "prediction"
            beyond = f" Checked against the hero run: {checked_words(is_prediction(ctx))} (Forecast vs actual)."
        elif state == PARTIAL:
            beyond += f" Not checked yet: {unfinished(ctx)} (Forecast vs actual)."
        tiles.append(
            Tile(
                f"Forecast loss ({kind})",
                fmt_loss(loss, 3),
                f"nats/token; 90% interval {fmt_loss(lo, 3)} – {fmt_loss(hi, 3)}"
                + (f" (±{fmt_pct(half)})" if ok(half) else "")
                + ext_text
                + "."
                + beyond,
                "primary",
            )
        )
    else:
        tiles.append(
            Tile(
                "Forecast loss",
                ABSENT,
                "no forecast: "
                + ("run `ladder fit` first" if fit is None else (why_not(fit.loss) or "the fit has no hero loss")),
                "primary",
            )
        )
    cost = ladder_cost(hero.ladder_flops, ctx.runs, ctx.d.has_results, totals)
    hero_c = first(hero.compute, rec and rec.compute, plan_hero.get("compute"), totals.get("hero_flops"))
    pct = 100.0 * num(cost.flops) / num(hero_c) if ok(cost.flops) and pos(hero_c) else None
    shown, words = share_of_hero(pct)  # as `ladder fit` says it: a multiple of the hero's compute above 100%
    tiles.append(
        Tile(
            "Ladder cost",
            shown,
            f"{words} ({fmt_flops(cost.flops)} of {fmt_flops(hero_c)} FLOPs; {cost.counts})",
        )
    )
    tiles.append(_reach_tile(fit, hero))
    counts = ctx.status_counts()
    total = sum(counts.values())
    bad = ", ".join(f"{v} {k}" for k, v in counts.items() if k != "done" and v)
    heroes = hero_words(ctx)
    besides = f"; besides, {heroes}, not counted: no rung of the ladder" if heroes else ""
    tiles.append(
        Tile(
            "Runs",
            f"{counts.get('done', 0)} / {total}" if total else ABSENT,
            (
                f"of the ladder's runs done; {bad}"
                if bad
                else ("all the ladder's runs done" if total else "no runs collected")
            )
            + besides,
            "warn" if bad else "good",
        )
    )
    if rec is not None and rec.d_model is not None:
        shape, ffn, vocab, tied = shape_text(rec), rec.ffn_dim, rec.vocab_size, rec.tied
    else:
        planned = mapping(plan_hero.get("shape"))
        shape, ffn, vocab, tied = [shape_text(planned)] + [planned.get(k) for k in ("ffn_dim", "vocab_size", "tied")]
    src = rec.sources if rec is not None else {}
    params = first(rec and rec.params, hero.params, plan_hero.get("params"))
    tokens = first(rec and rec.tokens, hero.tokens, plan_hero.get("tokens"))
    conv = (rec and rec.param_convention) or (ctx.d.study.ladder.param_count if ctx.d.study is not None else None)
    tie_call = fit.tied_vs_untied.hero if fit is not None else None
    doubt = (
        tied_uncertainty(written(tie_call))
        if rec is not None and tie_call is not None and tie_call.winner == ("tied" if tied else "untied")
        else None
    )
    rec_flops = rec and getattr(rec, "flops", None)
    compute_source = src.get("compute", "")
    if ok(rec_flops) and pos(hero_c) and fmt_flops(rec_flops) != fmt_flops(hero_c):
        # the ladder cost's tile divides by the forecast's hero point: say why this row's figure is not that one
        compute_source = (
            f"this run's exact FLOPs: its {fmt_int(tokens)} tokens are whole steps of its batch; the forecast's "
            f"hero point, {fmt_int(first(hero.tokens, plan_hero.get('tokens')))} tokens, which the ladder cost is a "
            f"share of, is {fmt_flops(hero_c)} FLOPs"
        )
    config = [
        (
            "Parameters",
            f"{fmt_size(params)}" + (f" ({str(conv).replace('_', '-')})" if conv else ""),  # as `ladder fit`
            src.get("params", ""),
        ),
        ("Training tokens", fmt_size(tokens), src.get("tokens", "")),
        (
            "Tokens per parameter",
            fmt_g(num(tokens) / num(params)) if pos(tokens, params) else ABSENT,
            first(rec and rec.allocation, hero.allocation, plan_hero.get("allocation")) or "",
        ),
        # the recommended run's own exact FLOPs, as its params and tokens above and `ladder hero` give them (the
        # fit's hero point may ask for tokens the run rounds to whole steps: 320K -> 319.7K)
        ("Compute", f"{fmt_flops(first(rec_flops, hero_c))} FLOPs", compute_source),
        ("Shape", shape, src.get("shape", src.get("aspect_ratio", ""))),
        ("Feed-forward / vocabulary", f"{fmt_int(ffn)} / {fmt_int(vocab)}", ""),
        ("Tied embeddings", fmt_bool(tied) + (f" ({doubt})" if doubt else ""), src.get("tied", "")),
    ]
    if rec is not None:
        config += [
            ("Sequence length", fmt_int(rec.seq_len), ""),
            (
                "Batch size",
                f"{fmt_size(rec.batch_tokens)} tokens"  # as `ladder fit` and `ladder hero` give it
                + (f" (90%: {fmt_ci(rec.batch_tokens_ci90, fmt_size)})" if rec.batch_tokens_ci90 else ""),
                src.get("batch_tokens", src.get("batch", "")),
            ),
            (
                "Peak learning rate",
                fmt_lr(rec.lr) + (f" (90%: {fmt_ci(rec.lr_ci90, fmt_lr)})" if rec.lr_ci90 else ""),
                src.get("lr", ""),
            ),
            (
                "Warmup / schedule",
                f"{fmt_int(rec.warmup_steps)} steps / {schedule_text(rec.schedule)}",
                src.get("schedule", src.get("warmup_steps", "")),
            ),
        ]
    s.add(Headline(tiles, [(a, b, str(c)) for a, b, c in config]))
    if fit is None:
        s.missing("this study has no fit yet: run `ladder fit` on the study directory, then render the report again")
    elif rec is None:
        s.add(
            Para(
                "this study has no fitted recommendation; the configuration above is the planned hero"
                f" ({why_not(fit.recommendation)})",
                "missing",
            )
        )
    if rec is not None and rec.yaml:
        s.add(Pre(rec.yaml, "The recommendation as YAML (to paste into a training config)", collapsed=True))
    warnings = [as_scored(ctx, w) for w in (fit.warnings if fit is not None else [])] + ctx.d.problems
    if warnings:
        s.add(Bullets(cap(warnings), "Warnings", "warn"))
    notes = (fit.notes if fit is not None else []) + (rec.notes if rec is not None else [])
    if notes:
        s.add(Bullets(cap(notes), "Notes"))
    return s


def _reach_tile(fit: FitJson | None, hero: Hero) -> Tile:
    """How far the rollout's forecasts stayed within 2%, and whether their intervals covered."""
    law = fit.loss if fit is not None else None
    reach = hero.reach or (law.reach if law is not None else None) or {}
    cal = law.calibration if law is not None else None
    r2, tested = reach.get("2%"), reach.get("tested")
    if r2 is None or tested is None or not ok(r2.params_x, tested.params_x) or cal is None or not (cal.n or 0) > 0:
        if fit is None:
            why = "no fit yet: run `ladder fit` on the study directory, then render the report again"
        elif why_not(law):
            why = f"no loss law was fitted ({why_not(law)})"
        else:
            why = "the ladder has too few sizes or budgets to fit on the smaller and check on the larger"
        return Tile("Demonstrated reach", ABSENT, f"no rollout forecast: {why}")
    of = "them" if cal.n_judged in (None, cal.n) else f"the {fmt_int(cal.n_judged)} at the target's tokens/param"
    cov = f"; its 90% intervals covered {fmt_pct(100 * num(cal.coverage), 0)} of {of}" if ok(cal.coverage) else ""
    widened = f" (widened {fmt_times(cal.factor)})" if ok(cal.factor) and num(cal.factor) > 1 else ""
    tested_words = (
        f"tested up to {fmt_times(tested.params_x)} in parameters, {fmt_times(tested.tokens_x)} in tokens, "
        f"{fmt_times(tested.compute_x)} in compute, 6ND"
    )
    if reaches_nowhere(r2.params_x, r2.tokens_x, r2.compute_x):
        return Tile("Demonstrated reach", "none", f"{NO_REACH} ({tested_words}){cov}{widened}")
    return Tile(
        "Demonstrated reach",
        f"{fmt_times(r2.params_x)}",  # the digits `ladder fit` gives
        f"in parameters ({fmt_times(r2.tokens_x)} in tokens, {fmt_times(r2.compute_x)} in compute, 6ND): rollout "
        f"forecasts stayed within 2% up to this distance ({tested_words}){cov}{widened}",
    )
