"""The ladder's runs: the table of every planned run and the loss curves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.render.blocks import Para, Section, Table
from ladder.reports.render.cost import ladder_cost
from ladder.reports.render.figures.curves import draw_curves
from ladder.reports.render.fmt import (
    fmt_count,
    fmt_flops,
    fmt_loss,
    fmt_lr,
    shape_text,
    slug,
)
from ladder.reports.render.study import mapping

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def ladder(ctx: Builder) -> Section:
    s = Section("ladder", "The ladder")
    runs = ctx.runs
    if not len(runs):
        return s.missing("this study has no runs yet: plan it with `ladder plan`, train and `ladder collect`")
    if not ctx.d.has_results:
        s.add(
            Para(
                "this study has no collected results (no results.parquet): run `ladder collect`; the planned "
                "runs are listed",
                "missing",
            )
        )
    rows = []
    for _, r in runs.iterrows():
        status = str(r.get("status") or "unknown")
        rows.append(
            [
                (str(r.get("run_id")), "mono"),
                str(r.get("variant")),
                str(r.get("scale") or ""),
                shape_text(r),
                fmt_count(r.get("params")),
                fmt_count(r.get("tokens")),
                fmt_flops(r.get("flops")),
                fmt_count(r.get("batch_tokens")),
                fmt_lr(r.get("lr")),
                fmt_loss(r.get("final_train_loss")),
                fmt_loss(r.get("final_eval_loss", r.get("loss"))),
                (status, f"status-{slug(status)}"),
            ]
        )
    counts = ctx.status_counts()
    cost = ladder_cost(
        ctx.fit_json.hero.ladder_flops if ctx.fit_json else None,
        runs,
        ctx.d.has_results,
        mapping(ctx.d.plan.get("totals")),
    )
    branches = "trunk_run_id" in runs and runs["trunk_run_id"].notna().any()
    rungs = ctx.ladder_runs
    s.add(
        Para(
            f"{len(rungs)} runs in {rungs['variant'].nunique() if len(rungs) else 0} variant(s): "
            + (", ".join(f"{v} {k}" for k, v in counts.items()) or "none yet")
            + hero_runs_text(ctx)
            + f"; the ladder costs {fmt_flops(cost.flops)} FLOPs ({cost.counts}). The FLOPs column is each "
            + "run's point C (flops_per_token x its tokens"
            + (
                "; a branch's includes its trunk's prefix, so the column adds up to more than the cost"
                if branches
                else ""
            )
            + "). Parameters are counted "
            + (f"{ctx.d.study.ladder.param_count.replace('_', '-')}" if ctx.d.study is not None else "as planned")
            + "; losses in nats/token."
        )
    )
    s.add(
        Table(
            [
                "Run",
                "Variant",
                "Rung",
                "Shape",
                "Params",
                "Tokens",
                "FLOPs",
                "Batch",
                "LR",
                "Train loss",
                "Eval loss",
                "Status",
            ],
            rows,
            "llllrrrrrrrl",
            mono=(0,),
            compact=True,
        )
    )
    return s


def hero_words(ctx: Builder) -> str:
    """The hero runs and their statuses ("1 hero run (done)", "3 hero runs (2 done, 1 interrupted)"); empty
    without one. They check the forecast: no rung or variant of the ladder, and fit leaves them out."""
    counts = ctx.hero_counts()
    n = sum(counts.values())
    if not n:
        return ""
    statuses = next(iter(counts)) if n == 1 else ", ".join(f"{v} {k}" for k, v in counts.items())
    return f"{n} hero run{'s' if n > 1 else ''} ({statuses})"


def hero_runs_text(ctx: Builder) -> str:
    """The hero runs, said apart from the ladder's runs: empty without one."""
    words = hero_words(ctx)
    if not words:
        return ""
    one = sum(ctx.hero_counts().values()) == 1
    return (
        f"; besides, {words} in the table: no rung of the ladder and never fitted, "
        f"{'it checks' if one else 'they check'} the forecast"
    )


def curves(ctx: Builder) -> Section:
    s = Section("curves", "Loss curves")
    c = ctx.d.curves
    need = {"run_id", "kind", "tokens", "flops", "loss", "step"}
    if not len(c) or not need <= set(c.columns):
        return s.missing(
            "this study has no loss curves (no curves.parquet with per-step metrics: run `ladder collect`)"
        )
    if "eval_loss" not in c:
        c = c.assign(eval_loss=float("nan"))
    ids = set(c["run_id"].astype(str))
    heroes = ids & set(ctx.hero_runs["run_id"].astype(str)) if len(ctx.hero_runs) else set()
    n = len(ids - heroes)
    who = f"{n} ladder runs" + (f" and {len(heroes)} hero run{'s' if len(heroes) > 1 else ''}" if heroes else "")
    s.add(
        ctx.figure(
            "fig-curves",
            "Loss curves of every run",
            f"Training loss (lines) and evaluation loss (markers) of {who} against tokens seen and against "
            "compute, both on log axes. One colour, marker and line style per variant.",
            3.7,
            lambda fig: draw_curves(fig, c, ctx.variant_of, ctx.styles),
        )
    )
    return s
