"""The loss on in-context repeats and on novel tokens: where the ladder stands in learning to copy from its
context, and each kind's forecast at the hero."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.fits.study.fit_json import CopyTrend, KindForecast, KindForecasts, SeedSpread
from ladder.reports.fits.study.table import of_variant
from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.in_context import draw_in_context
from ladder.reports.render.fmt import ABSENT, fmt_ci, fmt_count, fmt_g, fmt_loss, fmt_pct, fmt_times, num, ok
from ladder.reports.render.study import why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

MAX_ROWS = 40


ZERO_TOL = 1e-12  # a slope (or bound) this close to 0 is float noise: shown as 0, as the terminal does


def _noise_as_zero(x):
    return 0.0 if ok(x) and abs(float(x)) < ZERO_TOL else x


def in_context(ctx: Builder) -> Section:
    s = Section("in-context", "In-context repeats and novel tokens")
    fit = ctx.fit_json
    why = why_not(fit.in_context) if fit is not None else "no fit.json (run `ladder fit`)"
    if why:
        return s.missing(f"the loss is not split by token kind: {why}")
    sec = fit.in_context
    runs, fc, tr, seeds = (
        sec.runs,
        sec.forecasts or KindForecasts(),
        sec.trend or CopyTrend(),
        sec.seeds or SeedSpread(),
    )
    s.add(
        Para(
            f"{fmt_pct(100 * num(sec.repeat_share), 0)} of the evaluation targets repeat a trigram that already "
            "ended earlier in their window: a model that has learned to copy from its context (an induction head) "
            "predicts them far better. Small models learn that abruptly, at a step that depends on the seed, while the "
            "novel tokens move smoothly with scale; so a ladder whose copy ratio is still falling has not reached the "
            f"regime the hero will be in.{'' if not of_variant(sec.variant) else f' Variant {sec.variant}.'}"
        )
    )
    s.add(
        ctx.figure(
            "fig-in-context",
            "Loss on in-context repeats and on novel tokens",
            "Left: every run's loss on each kind of target against compute, with each kind forecast at the hero by "
            "its own weighted laws (90%) and any finished hero run's actual losses (hollow diamonds; never fitted). "
            "Right: the repeats' loss over the novel tokens' loss with its log-log trend.",
            3.4,
            lambda fig: draw_in_context(fig, runs, fc, _heroes(ctx)),
        )
    )
    s.add(
        KV(
            [
                (
                    "Copy ratio",
                    f"by its log-log trend (not a run's own, in the table below), "
                    f"{fmt_g(tr.ratio_at_smallest, 3)} at the smallest compute, "
                    f"{fmt_g(tr.ratio_at_largest, 3)} at the largest ({fmt_times(tr.compute_span)} apart in 6ND, not "
                    f"the ladder table's counted FLOPs); slope {fmt_g(_noise_as_zero(tr.slope), 3)} per e-fold of "
                    f"compute (6ND), 90% "
                    f"{fmt_ci([_noise_as_zero(x) for x in tr.ci90] if tr.ci90 else tr.ci90)}",
                ),
                (
                    "Seed spread (sd of log loss)",
                    f"repeats {fmt_g(seeds.repeats, 3)}, novel {fmt_g(seeds.novel, 3)} over "
                    f"{seeds.configurations} replicated configuration(s)"
                    if ok(seeds.repeats)
                    else "no seed replicates",
                ),
            ],
            "Where the ladder stands",
        )
    )
    rows = []
    for title, f in (("novel tokens", fc.novel), ("in-context repeats", fc.repeats), ("share-weighted", fc.combined)):
        f = f or KindForecast(available=False)
        if not f.available:
            rows.append([title, ABSENT, f.reason or ABSENT, ABSENT])
            continue
        rms = f.rollout_rms_pct
        rows.append(
            [
                title,
                fmt_loss(f.loss),
                f"{fmt_loss(f.lo)} – {fmt_loss(f.hi)}",
                fmt_pct(rms) + f" over {f.rollout_n} forecasts" if ok(rms) else ABSENT,
            ]
        )
    s.add(
        Table(
            ["Kind", "Forecast", "90% interval", "Rollout RMS error"],
            rows,
            "lrrr",
            title=f"Each kind forecast at {fmt_count(fc.params)} params × {fmt_count(fc.tokens)} tokens",
        )
    )
    for w in sec.warnings:
        s.add(Para(w, "warn"))
    table = [
        [
            fmt_count(r.params),
            fmt_count(r.tokens),
            fmt_g(r.seed, 3),
            fmt_loss(r.loss),
            fmt_loss(r.novel),
            fmt_loss(r.repeats),
            fmt_g(r.copy_ratio, 3),
        ]
        for r in runs[:MAX_ROWS]
    ]
    if table:
        s.add(
            Table(
                ["Params", "Tokens", "Seed", "Loss", "Novel", "Repeats", "Copy ratio"],
                table,
                "rrrrrrr",
                title="The runs" + (f" (first {MAX_ROWS} of {len(runs)})" if len(runs) > MAX_ROWS else ""),
            )
        )
    return s


def _heroes(ctx: Builder) -> list[dict]:
    """The finished hero runs' losses by kind (the forecast's checks: never fitted)."""
    r = ctx.runs
    if not len(r) or "role" not in r or "loss_novel" not in r or "loss_repeats" not in r:
        return []
    done = r[(r["role"].astype(str) == "hero") & (r["status"] == "done")]
    return [
        {"params": h["params"], "tokens": h["tokens"], "novel": h["loss_novel"], "repeats": h["loss_repeats"]}
        for _, h in done.iterrows()
    ]
