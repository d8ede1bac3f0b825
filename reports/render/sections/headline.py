"""The headline: the hero's forecast (a projection until a forecast frozen from the same results is scored against
the hero's final loss: then a prediction, :mod:`ladder.reports.render.sections.forecast`), the
ladder's cost, how far the rollout showed the ladder sees, the runs' status and the recommended hero
configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.fits.recommend import tied_uncertainty
from ladder.reports.render.blocks import Bullets, Headline, Para, Pre, Section, Tile
from ladder.reports.render.cost import ladder_cost
from ladder.reports.render.fmt import (
    ABSENT,
    cap,
    fmt_bool,
    fmt_ci,
    fmt_count,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_lr,
    fmt_pct,
    num,
    ok,
    pos,
    schedule_text,
    shape_text,
)
from ladder.reports.render.sections.forecast import is_prediction
from ladder.reports.render.study import first, mapping, seq, unavailable

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def headline(ctx: Builder) -> Section:
    s = Section("headline", "Forecast for the hero run")
    fit, hero = ctx.fit, ctx.hero
    rec = fit.get("recommendation") if not unavailable(fit.get("recommendation")) else {}
    plan_hero = mapping(ctx.d.plan.get("hero"))
    totals = mapping(ctx.d.plan.get("totals"))
    loss = first(hero.get("loss"), rec.get("loss"), rec.get("predicted_loss"))
    interval = seq(rec.get("loss_interval")) + [None, None]
    lo = first(hero.get("lo"), rec.get("lo"), interval[0])
    hi = first(hero.get("hi"), rec.get("hi"), interval[1])
    tiles = []
    if ok(loss):
        ext = mapping(hero.get("extrapolation"))
        ext_text = ""
        if ok(ext.get("params")):
            ext_text = (
                f"; {fmt_g(ext.get('params'), 2)}× the ladder's largest model in parameters, "
                f"{fmt_g(ext.get('compute_6nd'), 3)}× in compute"
            )
        half = hero.get("half_width_pct")
        kind = "projection" if hero.get("kind", "projection") == "projection" else str(hero.get("kind"))
        beyond = " Beyond the ladder's demonstrated reach." if hero.get("beyond_reach") else ""
        checked = is_prediction(ctx)
        if checked is not None:  # frozen from these results and scored against the hero's final loss
            kind = "prediction"
            beyond = (
                f" Checked against the hero run: actual {fmt_loss(checked.get('actual'), 3)}, error "
                f"{fmt_pct(checked.get('error_pct'), signed=True)}, "
                f"{'inside' if checked.get('inside') else 'outside'} the interval (Forecast vs actual)."
            )
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
                + (
                    "run `ladder fit` first"
                    if not fit
                    else (unavailable(fit.get("loss")) or "the fit has no hero loss")
                ),
                "primary",
            )
        )
    cost = ladder_cost(hero, ctx.runs, ctx.d.has_results, totals)
    hero_c = first(hero.get("compute"), rec.get("compute"), plan_hero.get("compute"), totals.get("hero_flops"))
    pct = 100.0 * num(cost.flops) / num(hero_c) if ok(cost.flops) and pos(hero_c) else None
    shown = (fmt_pct(pct, 1) if pct >= 1 else f"{fmt_g(pct, 2)}%") if ok(pct) else ABSENT
    tiles.append(
        Tile(
            "Ladder cost",
            shown,
            f"of the hero's compute ({fmt_flops(cost.flops)} of {fmt_flops(hero_c)} FLOPs; {cost.counts})",
        )
    )
    reach = mapping(hero.get("reach")) or mapping(mapping(fit.get("loss")).get("reach"))
    cal = mapping(mapping(fit.get("loss")).get("calibration"))
    r2 = mapping(reach.get("2%"))
    if ok(r2.get("params_x")) and ok(mapping(reach.get("tested")).get("params_x")) and num(cal.get("n") or 0) > 0:
        cov = (
            f"; its 90% intervals covered {fmt_pct(100 * num(cal.get('coverage')), 0)} of them"
            if ok(cal.get("coverage"))
            else ""
        )
        widened = (
            f" (widened {fmt_g(cal.get('factor'), 3)}×)" if ok(cal.get("factor")) and num(cal.get("factor")) > 1 else ""
        )
        tiles.append(
            Tile(
                "Demonstrated reach",
                f"{fmt_g(r2.get('params_x'), 2)}×",
                f"in parameters ({fmt_g(r2.get('compute_x'), 2)}× in compute): rollout forecasts stayed "
                f"within 2% up to this distance (tested up to "
                f"{fmt_g(mapping(reach.get('tested')).get('params_x'), 2)}× in parameters, "
                f"{fmt_g(mapping(reach.get('tested')).get('compute_x'), 2)}× in compute){cov}{widened}",
            )
        )
    else:
        tiles.append(
            Tile(
                "Demonstrated reach",
                ABSENT,
                "no rollout forecast: the ladder has too few sizes or "
                "budgets to fit on the smaller and check on the larger",
            )
        )
    counts = ctx.status_counts()
    total = sum(counts.values())
    bad = ", ".join(f"{v} {k}" for k, v in counts.items() if k != "done" and v)
    tiles.append(
        Tile(
            "Runs",
            f"{counts.get('done', 0)} / {total}" if total else ABSENT,
            f"done; {bad}" if bad else ("all runs done" if total else "no runs collected"),
            "warn" if bad else "good",
        )
    )
    shape = rec if rec.get("d_model") is not None else (mapping(plan_hero.get("shape")))
    src = mapping(rec.get("sources"))
    params = first(rec.get("params"), hero.get("params"), plan_hero.get("params"))
    tokens = first(rec.get("tokens"), hero.get("tokens"), plan_hero.get("tokens"))
    conv = rec.get("param_convention") or (ctx.d.study.ladder.param_count if ctx.d.study is not None else None)
    tie_call = mapping(mapping(fit.get("tied_vs_untied")).get("hero"))
    doubt = (
        tied_uncertainty(dict(tie_call))
        if rec and tie_call.get("winner") == ("tied" if shape.get("tied") else "untied")
        else None
    )
    config = [
        (
            "Parameters",
            f"{fmt_count(params)}" + (f" ({str(conv).replace('_', '-')})" if conv else ""),
            src.get("params", ""),
        ),
        ("Training tokens", fmt_count(tokens), src.get("tokens", "")),
        (
            "Tokens per parameter",
            fmt_g(num(tokens) / num(params)) if pos(tokens, params) else ABSENT,
            first(rec.get("allocation"), hero.get("allocation"), plan_hero.get("allocation")) or "",
        ),
        ("Compute", f"{fmt_flops(hero_c)} FLOPs", src.get("compute", "")),
        ("Shape", shape_text(shape), src.get("shape", src.get("aspect_ratio", ""))),
        ("Feed-forward / vocabulary", f"{fmt_int(shape.get('ffn_dim'))} / {fmt_int(shape.get('vocab_size'))}", ""),
        ("Tied embeddings", fmt_bool(shape.get("tied")) + (f" ({doubt})" if doubt else ""), src.get("tied", "")),
    ]
    if rec:
        config += [
            ("Sequence length", fmt_int(rec.get("seq_len")), ""),
            (
                "Batch size",
                f"{fmt_count(rec.get('batch_tokens'))} tokens"
                + (
                    f" (90%: {fmt_ci(rec.get('batch_tokens_ci90'), fmt_count)})" if rec.get("batch_tokens_ci90") else ""
                ),
                src.get("batch_tokens", src.get("batch", "")),
            ),
            (
                "Peak learning rate",
                fmt_lr(rec.get("lr")) + (f" (90%: {fmt_ci(rec.get('lr_ci90'), fmt_lr)})" if rec.get("lr_ci90") else ""),
                src.get("lr", ""),
            ),
            (
                "Warmup / schedule",
                f"{fmt_int(rec.get('warmup_steps'))} steps / {schedule_text(rec.get('schedule'))}",
                src.get("schedule", src.get("warmup_steps", "")),
            ),
        ]
    s.add(Headline(tiles, [(a, b, str(c)) for a, b, c in config]))
    if not fit:
        s.missing("this study has no fit yet: run `ladder fit` on the study directory, then render the report again")
    elif not rec:
        s.add(
            Para(
                "this study has no fitted recommendation; the configuration above is the planned hero"
                + (f" ({unavailable(fit.get('recommendation'))})" if fit.get("recommendation") else ""),
                "missing",
            )
        )
    if rec.get("yaml"):
        s.add(Pre(str(rec["yaml"]), "The recommendation as YAML (to paste into a training config)", collapsed=True))
    warnings = [str(w) for w in seq(fit.get("warnings"))] + ctx.d.problems
    if warnings:
        s.add(Bullets(cap(warnings), "Warnings", "warn"))
    notes = [str(n) for n in seq(fit.get("notes"))] + [str(n) for n in seq(rec.get("notes"))]
    if notes:
        s.add(Bullets(cap(notes), "Notes"))
    return s
