"""The loss on in-context repeats and on novel tokens: where the ladder stands in learning to copy from its
context, and each kind's forecast at the hero."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.in_context import draw_in_context
from ladder.reports.render.fmt import ABSENT, fmt_ci, fmt_count, fmt_g, fmt_loss, fmt_pct, num, ok
from ladder.reports.render.study import mapping, maps

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

MAX_ROWS = 40


def in_context(ctx: Builder) -> Section:
    s = Section("in-context", "In-context repeats and novel tokens")
    sec, why = ctx.entry("in_context", "no fit.json (run `ladder fit`)")
    if why:
        return s.missing(f"the loss is not split by token kind: {why}")
    runs, fc, tr, seeds = (
        maps(sec.get("runs")),
        mapping(sec.get("forecasts")),
        mapping(sec.get("trend")),
        mapping(sec.get("seeds")),
    )
    s.add(
        Para(
            f"{fmt_pct(100 * num(sec.get('repeat_share')), 0)} of the evaluation targets repeat a trigram that already "
            "ended earlier in their window: a model that has learned to copy from its context (an induction head) "
            "predicts them far better. Small models learn that abruptly, at a step that depends on the seed, while the "
            "novel tokens move smoothly with scale; so a ladder whose copy ratio is still falling has not reached the "
            f"regime the hero will be in. Variant {sec.get('variant')}."
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
                    f"{fmt_g(tr.get('ratio_at_smallest'), 3)} at the smallest compute, "
                    f"{fmt_g(tr.get('ratio_at_largest'), 3)} at the largest ({fmt_g(tr.get('compute_span'), 3)}× "
                    f"apart); slope {fmt_g(tr.get('slope'), 3)} per e-fold of compute, 90% "
                    f"{fmt_ci(tr.get('ci90'))}",
                ),
                (
                    "Seed spread (sd of log loss)",
                    f"repeats {fmt_g(seeds.get('repeats'), 3)}, novel {fmt_g(seeds.get('novel'), 3)} over "
                    f"{seeds.get('configurations')} replicated configuration(s)"
                    if ok(seeds.get("repeats"))
                    else "no seed replicates",
                ),
            ],
            "Where the ladder stands",
        )
    )
    rows = []
    for key, title in (("novel", "novel tokens"), ("repeats", "in-context repeats"), ("combined", "share-weighted")):
        f = mapping(fc.get(key))
        if not f.get("available"):
            rows.append([title, ABSENT, f.get("reason") or ABSENT, ABSENT])
            continue
        rms = f.get("rollout_rms_pct")
        rows.append(
            [
                title,
                fmt_loss(f.get("loss")),
                f"{fmt_loss(f.get('lo'))} – {fmt_loss(f.get('hi'))}",
                fmt_pct(rms) + f" over {f.get('rollout_n')} forecasts" if ok(rms) else ABSENT,
            ]
        )
    s.add(
        Table(
            ["Kind", "Forecast", "90% interval", "Rollout RMS error"],
            rows,
            "lrrr",
            title=f"Each kind forecast at {fmt_count(fc.get('params'))} params × {fmt_count(fc.get('tokens'))} tokens",
        )
    )
    for w in sec.get("warnings") or []:
        s.add(Para(str(w), "warn"))
    table = [
        [
            fmt_count(r.get("params")),
            fmt_count(r.get("tokens")),
            fmt_g(r.get("seed"), 3),
            fmt_loss(r.get("loss")),
            fmt_loss(r.get("novel")),
            fmt_loss(r.get("repeats")),
            fmt_g(r.get("copy_ratio"), 3),
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
