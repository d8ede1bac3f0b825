"""Forecast vs actual: the frozen forecast (``ladder forecast freeze``) against the hero run
(``ladder forecast score``). The report opens with it when a freeze has a score; without one there is no such
section, and the headline calls its forecast a projection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.fmt import ABSENT, fmt_g, fmt_int, fmt_loss, fmt_pct, fmt_point, ok
from ladder.reports.render.study import mapping, maps

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

DATA_CHANGED = (
    "the data changed after this forecast: the study's results are not the ones it was fitted on, so "
    "this is no longer the forecast the fit shows"
)


def scores(rec: Mapping) -> list[Mapping]:
    return maps(rec.get("scores"))


def lead(ctx: Builder) -> tuple[Mapping, Mapping] | None:
    """(freeze, score) the report leads with: the latest final score of the latest freeze that has one, else the
    latest score of any kind; None when nothing was scored."""
    for want_final in (True, False):
        for rec in reversed(ctx.d.forecasts):
            got = [s for s in scores(rec) if bool(s.get("final")) or not want_final]
            if got:
                return rec, got[-1]
    return None


def data_changed(ctx: Builder, rec: Mapping) -> bool:
    now = ctx.d.results_sha256
    return now is not None and rec.get("results_sha256") != now


def is_prediction(ctx: Builder) -> dict | None:
    """The final score of the fit's own hero forecast (frozen from the same results the fit shows), if any:
    the headline is then a prediction checked against the hero, not a projection."""
    got = lead(ctx)
    if got is None or not got[1].get("final") or got[1].get("point", "hero") != "hero":
        return None
    rec, score = got
    if rec.get("results_sha256") != (ctx.fit_json.meta.results_sha256 if ctx.fit_json is not None else None):
        return None
    return dict(score)


def actual_point(ctx: Builder) -> dict | None:
    """Where the hero's real loss goes in the scaling figure: the hero run's params and exact FLOPs (its row of
    the results), else the frozen point's."""
    got = lead(ctx)
    if got is None or not got[1].get("final") or not ok(got[1].get("actual")):
        return None
    rec, score = got
    src = mapping(score.get("source"))
    point = (
        mapping(rec.get("hero"))
        if score.get("point", "hero") == "hero"
        else next((p for p in maps(rec.get("predictions")) if p.get("label") == score.get("point")), {})
    )
    out = {
        "loss": score["actual"],
        "params": point.get("params"),
        "flops": point.get("flops"),
        "tokens": point.get("tokens"),
    }
    runs = ctx.runs
    if src.get("run_id") and len(runs) and "run_id" in runs:
        row = runs[runs["run_id"].astype(str) == str(src["run_id"])]
        if len(row):
            out.update({k: row.iloc[0].get(k) for k in ("params", "tokens", "flops") if ok(row.iloc[0].get(k))})
    return out


def _interval(p: Mapping) -> str:
    return f"{fmt_loss(p.get('lo'))} – {fmt_loss(p.get('hi'))}" if ok(p.get("lo"), p.get("hi")) else ABSENT


def _inside(v: Any) -> str:
    return {True: "inside", False: "outside"}.get(v, ABSENT)


def _source(score: Mapping) -> str:
    src = mapping(score.get("source"))
    kind = src.get("kind")
    if kind == "run":
        return f"the study's hero run {src.get('run_id')} (its final eval loss)"
    if kind == "curve":
        return f"the loss curve {src.get('file')}" + (f" of hero run {src['run_id']}" if src.get("run_id") else "")
    return "a loss given with --loss (a hero trained elsewhere)"


def _score_text(score: Mapping | None) -> str:
    if not score:
        return "not scored"
    if score.get("final"):
        return (
            f"actual {fmt_loss(score.get('actual'))}: error {fmt_pct(score.get('error_pct'), signed=True)}, "
            f"{_inside(score.get('inside'))}, z {fmt_g(score.get('z'), 2)}"
        )
    p = mapping(score.get("partial"))
    if not p.get("available"):
        return f"hero still training: {p.get('reason') or 'no partial forecast'}"
    return (
        f"hero at {fmt_pct(100 * float(p.get('fraction') or 0), 0)} of its tokens: heads for "
        f"{fmt_loss(p.get('final_forecast'))}"
    )


def forecast_vs_actual(ctx: Builder) -> Section | None:
    got = lead(ctx)
    if got is None:
        return None
    rec, score = got
    s = Section("forecast", "Forecast vs actual")
    point = score if score.get("final") else mapping(mapping(score.get("partial")).get("vs_frozen"))
    frozen = f"{fmt_loss(point.get('forecast'))} nats/token (90% interval {_interval(point)})"
    before = score.get("frozen_before_training")
    when = f"forecast {rec.get('number')}, frozen at {rec.get('frozen_at')} UTC" + {
        True: ", before the hero was submitted",
        False: ", AFTER the hero was first submitted: not a forecast made before the run",
    }.get(before, "")
    if score.get("final"):
        s.add(
            Para(
                f"A prediction checked against a real run. The frozen forecast ({when}) "
                f"was {frozen}; the hero's final eval loss is {fmt_loss(score.get('actual'))}: the forecast is "
                f"{fmt_pct(score.get('error_pct'), signed=True)} off it, {_inside(score.get('inside'))} its "
                f"interval (z = {fmt_g(score.get('z'), 2)}).",
                "ok" if score.get("inside") else "warn",
            )
        )
    else:
        p = mapping(score.get("partial"))
        text = f"The hero is still training, so the headline stays a projection. Frozen ({when}): {frozen}. "
        if p.get("available"):
            text += (
                f"At {fmt_pct(100 * float(p.get('fraction') or 0), 0)} of its tokens its curve heads for a "
                f"final loss of {fmt_loss(p.get('final_forecast'))} (90% {_interval(p)}, from the curves of "
                f"{len(maps(p.get('references')))} finished rungs): the frozen forecast is "
                f"{fmt_pct(point.get('error_pct'), signed=True)} off it, {_inside(point.get('inside'))} its "
                "interval."
            )
        else:
            text += f"No forecast of its final loss yet: {p.get('reason')}."
        s.add(Para(text, "warn" if point.get("inside") is False else "note"))
    if data_changed(ctx, rec):
        s.add(Para(DATA_CHANGED, "warn"))
    label = score.get("point", "hero")
    if label == "hero":
        hero_point = mapping(rec.get("hero"))
        of = f"hero: {fmt_point(None, hero_point.get('params'), hero_point.get('tokens'))}"
    else:  # a --predict point: its label is params:tokens in full (397680:7999488)
        pred = next((p for p in maps(rec.get("predictions")) if p.get("label") == label), {})
        of = f"prediction {fmt_point(label, pred.get('params'), pred.get('tokens'))}"
    items = [("Frozen forecast", frozen), ("Forecast of", of)]
    if score.get("final"):
        items += [
            ("Actual", f"{fmt_loss(score.get('actual'))} nats/token"),
            ("Error (forecast − actual)", f"{fmt_pct(score.get('error_pct'), signed=True)} of the actual"),
            ("Inside the 90% interval", _inside(score.get("inside"))),
            ("z", f"{fmt_g(score.get('z'), 3)} (log error over the half-width in normal sd)"),
        ]
        reps = mapping(score.get("replicates"))
        if reps:
            vs = mapping(reps.get("vs_mean"))
            items += [
                (
                    "Seed replicates of the hero",
                    f"{fmt_int(reps.get('n'))} done: "
                    + ", ".join(f"seed {r.get('seed')} {fmt_loss(r.get('final'))}" for r in maps(reps.get("runs")))
                    + f"; spread {fmt_pct(reps.get('sd_log_pct'))} (sd of log loss)",
                ),
                (
                    "Error against their mean",
                    f"{fmt_pct(vs.get('error_pct'), signed=True)} of "
                    f"{fmt_loss(reps.get('mean'))}, {_inside(vs.get('inside'))} the interval",
                ),
            ]
            by_kind = mapping(reps.get("sd_log_pct_by_kind"))
            if by_kind:
                items.append(
                    (
                        "Their spread by kind of target",
                        f"{fmt_pct(by_kind.get('repeats'))} on the in-context "
                        f"repeats, {fmt_pct(by_kind.get('novel'))} on the novel tokens (sd of log loss)",
                    )
                )
        ic = mapping(score.get("in_context"))
        for kind, label in (("novel", "novel tokens"), ("repeats", "in-context repeats")):
            actual, vs = mapping(ic.get("actual")).get(kind), mapping(ic.get(kind))
            if actual is not None:
                items.append(
                    (
                        f"Loss on the {label}",
                        fmt_loss(actual)
                        + (
                            f" (forecast {fmt_loss(vs.get('forecast'))}, error {fmt_pct(vs.get('error_pct'), signed=True)}, "
                            f"{_inside(vs.get('inside'))} its interval)"
                            if vs
                            else ""
                        ),
                    )
                )
    items += [
        ("Frozen at", f"{rec.get('frozen_at')} UTC"),
        ("Scored at", f"{score.get('scored_at')} UTC"),
        ("Scored against", _source(score)),
        ("Frozen before the hero was submitted", {True: "yes", False: "no"}.get(before, "unknown")),
    ]
    if rec.get("note"):
        items.append(("Note", str(rec["note"])))
    s.add(KV(items, "The forecast on record and the hero"))
    rows = []
    for r in ctx.d.forecasts:
        latest = scores(r)[-1] if scores(r) else None
        h = mapping(r.get("hero"))
        rows.append(
            [
                str(r.get("number")),
                str(r.get("frozen_at")),
                fmt_loss(h.get("loss")),
                _interval(h),
                _score_text(latest),
                "yes" if data_changed(ctx, r) else "no",
            ]
        )
    s.add(
        Table(
            ["#", "Frozen at (UTC)", "Hero forecast", "90% interval", "Latest score", "Data changed since"],
            rows,
            "lllrll",
            title="Every frozen forecast of the study",
        )
    )
    return s
