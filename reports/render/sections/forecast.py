"""Forecast vs actual: the frozen forecast (``ladder forecast freeze``) against the hero run
(``ladder forecast score``). The report opens with it when a freeze has a score; without one there is no such
section, and the headline calls its forecast a projection."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ladder.layout import JOBS
from ladder.reports.fits.scoring import offset_words, pct_of_tokens, same_digits
from ladder.reports.fits.study.forecast_json import Comparison, FrozenForecast, Interval, Partial, Score
from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.fmt import ABSENT, fmt_int, fmt_loss, fmt_pct, fmt_point, num, ok

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

DATA_CHANGED = (
    "the data changed after this forecast: the study's results are not the ones it was fitted on, so "
    "this is no longer the forecast the fit shows"
)


def late(rec: FrozenForecast, score: Score) -> bool:
    """Frozen after the hero had trained or begun to (``after_hero``, or after its first submission): no
    prediction made before the run."""
    return (rec.model_extra or {}).get("after_hero") is True or score.frozen_before_training is False


def lead(ctx: Builder) -> tuple[FrozenForecast, Score] | None:
    """(freeze, score) the report leads with: the latest final score of the earliest freeze made before the hero
    (of those frozen from the study's results now, when one is: the forecast the fit shows, which `forecast show`
    then calls a prediction, not one of data since changed), else the latest final score of the latest freeze that
    has one, else the latest score of any kind; None when nothing was scored."""
    for current_only in (True, False):
        for rec in ctx.d.forecasts:
            if current_only and (ctx.d.results_sha256 is None or data_changed(ctx, rec)):
                continue
            got = [s for s in rec.scores if s.final and not late(rec, s)]
            got = [s for s in got if s.point == "hero"] or got  # with several heroes scored: the fit's own hero
            if got:
                return rec, got[-1]
    for want_final in (True, False):
        for rec in reversed(ctx.d.forecasts):
            got = [s for s in rec.scores if s.final or not want_final]
            if got:
                return rec, got[-1]
    return None


def data_changed(ctx: Builder, rec: FrozenForecast) -> bool:
    now = ctx.d.results_sha256
    return now is not None and rec.results_sha256 not in (now, ctx.d.results_sha256_older)


def is_prediction(ctx: Builder) -> Score | None:
    """The final score of the fit's own hero forecast (frozen from the same results the fit shows), if any:
    the headline is then a prediction checked against the hero, not a projection."""
    got = lead(ctx)
    if got is None or not got[1].final or got[1].point != "hero":
        return None
    rec, score = got
    if late(rec, score):  # frozen after the hero had trained: a check of the fit, no prediction
        return None
    fitted_on = ctx.fit_json.meta.results_sha256 if ctx.fit_json is not None else None
    if rec.results_sha256 != fitted_on and not (fitted_on == ctx.d.results_sha256 and not data_changed(ctx, rec)):
        return None  # frozen from other results than the fit's (an older ladder's freeze of them passes)
    if not same_hero(rec, ctx):  # the study's hero moved since the freeze (hero.params edited): another point
        return None
    return score


def same_hero(rec: FrozenForecast, ctx: Builder) -> bool:
    """Whether the freeze's hero is the fit's hero (the same params and tokens): a study file whose hero section
    was edited after the freeze fits the same results for another hero, which no score of the old one checks."""
    hero = ctx.fit_json.hero if ctx.fit_json is not None else None
    if hero is None or hero.params is None or hero.tokens is None:
        return False
    return math.isclose(rec.hero.params, hero.params, rel_tol=1e-6) and math.isclose(
        rec.hero.tokens, hero.tokens, rel_tol=1e-6
    )


FINAL, PARTIAL, NONE = "final", "partial", "none"
UNCHECKED = {  # how fit.json's words end when they call the hero's forecast unchecked (study_hero.reach_warnings),
    # and what they say once the hero run's final loss has checked it
    ": a projection, not a checked prediction": ": a projection when fitted, since checked against the hero run",
    ", unchecked": ", unchecked by the ladder; since checked against the hero run",
}


def score_state(ctx: Builder) -> str:
    """What the hero run has checked of the fit's forecast, one answer for every section: ``final`` (its final loss
    scored the forecast frozen from these results: :func:`is_prediction`), ``partial`` (the hero is still training:
    only its curve is scored) or ``none`` (nothing scored, or a score of another forecast)."""
    if is_prediction(ctx) is not None:
        return FINAL
    got = lead(ctx)
    return PARTIAL if got is not None and not got[1].final else NONE


def unfinished(ctx: Builder) -> str:
    """Why the hero's forecast is not checked yet while only a partial curve is scored, as a clause: a hero run of
    the study still trains; a curve given with ``--curve`` (a hero trained elsewhere) only stops early, and
    nothing here knows whether that run goes on."""
    got = lead(ctx)
    score = got[1] if got is not None else None
    if score is not None and score.source.kind == "curve":
        at = pct_of_tokens(score.partial.fraction or 0) if score.partial is not None else "part"
        return f"the hero's curve (--curve) stops at {at} of its tokens, before its final loss"
    return "the hero run is still training"


def checked_words(score: Score) -> str:
    """The check in one clause: the actual, the error and the interval (what Forecast vs actual shows)."""
    return (
        f"actual {fmt_loss(score.actual, 3)}, error {fmt_pct(score.error_pct, signed=True)}, "
        f"{_inside(score.inside)} the interval"
    )


def as_scored(ctx: Builder, text: str) -> str:
    """fit.json's words about the hero's forecast as of the score: once the hero run's final loss has checked the
    forecast, a warning written at fit time no longer calls it unchecked (it was, when fitted); while the hero
    trains, it says so."""
    state = score_state(ctx)
    if state == NONE:
        return text
    for phrase, checked in UNCHECKED.items():
        if text.endswith(phrase):
            if state == FINAL:
                return f"{text[: -len(phrase)]}{checked} (Forecast vs actual)"
            return f"{text} until the hero's final loss is scored: {unfinished(ctx)} (Forecast vs actual)"
    return text


def actual_point(ctx: Builder) -> dict | None:
    """Where the hero's real loss goes in the scaling figure: the hero run's params and exact FLOPs (its row of
    the results), else the frozen point's."""
    got = lead(ctx)
    if got is None or not got[1].final or not ok(got[1].actual):
        return None
    rec, score = got
    point = rec.point(score.point)
    out = {
        "loss": score.actual,
        "params": point.params if point is not None else None,
        "flops": getattr(point, "flops", None),
        "tokens": point.tokens if point is not None else None,
    }
    runs = ctx.runs
    run_id = score.source.run_id
    if run_id and len(runs) and "run_id" in runs:
        row = runs[runs["run_id"].astype(str) == str(run_id)]
        if len(row):
            out.update({k: row.iloc[0].get(k) for k in ("params", "tokens", "flops") if ok(row.iloc[0].get(k))})
    return out


def _interval(p: Interval | Comparison | Partial) -> str:
    return f"{fmt_loss(p.lo)} – {fmt_loss(p.hi)}" if ok(p.lo, p.hi) else ABSENT


def _heads_for(p: Partial) -> tuple[str, str]:
    """A partial curve's forecast and its 90% interval (``lo – hi``), in one precision with enough digits to tell
    them apart (the report's 4 decimals, more where they would print 3.5000 (90% 3.4990 – 3.5000))."""
    if not ok(p.final_forecast) or not ok(p.lo, p.hi):
        return fmt_loss(p.final_forecast), _interval(p)
    heads, lo, hi = same_digits(p.final_forecast, p.lo, p.hi, digits=5)
    return heads, f"{lo} – {hi}"


def _inside(v: bool | None) -> str:
    return {True: "inside", False: "outside"}.get(v, ABSENT)


def _source(score: Score) -> str:
    src = score.source
    if src.kind == "run":  # a partial score read the curve so far: its final loss does not exist yet
        what = "its final eval loss" if score.final else "its eval curve so far"
        return f"the study's hero run {src.run_id} ({what})"
    if src.kind == "curve":
        return f"the loss curve {src.file}" + (f" of hero run {src.run_id}" if src.run_id else "")
    return "a loss given with --loss (a hero trained elsewhere)"


def _after_what(rec: FrozenForecast) -> str:
    """What a late freeze came after: the hero runs it saw trained (``after_hero``), else the hero's first
    submission (jobs.json)."""
    extra = rec.model_extra or {}
    if extra.get("after_hero") is True:
        runs = [str(r) for r in extra.get("hero_runs_started") or []]
        return f"hero run{'s' if len(runs) > 1 else ''} {', '.join(runs) or '(unnamed)'} had trained or begun to"
    return "the hero was first submitted"


def _before_words(rec: FrozenForecast, score: Score) -> str:
    """Whether the freeze came before the hero's first submission, and, where that is not on record (a loss or a
    curve given by hand, a run never submitted through `ladder submit`), why not and what the freeze itself saw."""
    before = score.frozen_before_training
    if before is not None:
        return "yes" if before else f"no: frozen after {_after_what(rec)}"
    src = score.source
    if src.kind == "loss":
        why = "not known: scored against a loss given with --loss, which says nothing of when the hero started"
    elif src.kind == "curve":
        why = f"not known: scored against the loss curve {src.file}, which says nothing of when the hero started"
    else:
        why = f"not known: {JOBS} holds no submission of hero run {src.run_id} (not trained through `ladder submit`)"
    if (rec.model_extra or {}).get("after_hero") is False:  # what `ladder forecast freeze` saw
        why += "; when it was frozen, no hero run of the study had trained or logged an eval point"
    return why


def _z(z: float | None) -> str:
    """A score's z as `ladder forecast score` and `forecast show` give it: signed, 2 decimals (+0.54)."""
    x = num(z)
    return f"{x:+.2f}" if math.isfinite(x) else ABSENT


def _score_text(score: Score | None) -> str:
    if score is None:
        return "not scored"
    if score.final:
        return (
            f"actual {fmt_loss(score.actual)}: error {fmt_pct(score.error_pct, signed=True)}, "
            f"{_inside(score.inside)}, z {_z(score.z)}"
        )
    p = score.partial or Partial()
    if not p.available:
        return f"hero still training: {p.reason or 'no partial forecast'}"
    return f"hero at {pct_of_tokens(p.fraction or 0)} of its tokens: heads for {fmt_loss(p.final_forecast)}"


def _scored_point(rec: FrozenForecast, score: Score | None) -> str:
    """A score beside the hero forecast made at a --predict point says so: its error is not the hero forecast's."""
    if score is None or score.point == "hero":
        return ""
    return f"at {_frozen_point(rec, score.point)} (forecast {fmt_loss(score.forecast)}): "


def _frozen_point(rec: FrozenForecast, label: str) -> str:
    """The point a score checked: the hero, or a --predict point (its label is params:tokens in full)."""
    point = rec.point(label)
    if label == "hero":
        return f"hero: {fmt_point(None, rec.hero.params, rec.hero.tokens)}"
    return f"prediction {fmt_point(label, point.params if point else None, point.tokens if point else None)}"


def _final_items(score: Score) -> list[tuple[str, str]]:
    """The rows of a score against the hero's final loss: the error, its replicates, each kind of target."""
    items = [
        ("Actual", f"{fmt_loss(score.actual)} nats/token"),
        ("Error (forecast − actual)", f"{fmt_pct(score.error_pct, signed=True)} of the actual"),
        ("Inside the 90% interval", _inside(score.inside)),
        ("z", f"{_z(score.z)} (log error over the half-width in normal sd)"),
    ]
    reps = score.replicates
    if reps is not None:
        vs = reps.vs_mean or Comparison()
        items += [
            (
                "Seed replicates of the hero",
                f"{fmt_int(reps.n)} done: "
                + ", ".join(f"seed {r.seed} {fmt_loss(r.final)}" for r in reps.runs)
                + f"; spread {fmt_pct(reps.sd_log_pct)} (sd of log loss)",
            ),
            (
                "Error against their mean",
                f"{fmt_pct(vs.error_pct, signed=True)} of {fmt_loss(reps.mean)}, {_inside(vs.inside)} the interval",
            ),
        ]
        by_kind = reps.sd_log_pct_by_kind or {}
        if by_kind:
            items.append(
                (
                    "Their spread by kind of target",
                    f"{fmt_pct(by_kind.get('repeats'))} on the in-context "
                    f"repeats, {fmt_pct(by_kind.get('novel'))} on the novel tokens (sd of log loss)",
                )
            )
    ic = score.in_context
    for kind, label in (("novel", "novel tokens"), ("repeats", "in-context repeats")):
        actual = (ic.actual or {}).get(kind) if ic is not None else None
        if actual is None:
            continue
        vs = getattr(ic, kind)
        against = (
            f" (forecast {fmt_loss(vs.forecast)}, error {fmt_pct(vs.error_pct, signed=True)}, "
            f"{_inside(vs.inside)} its interval)"
            if vs is not None
            else ""
        )
        items.append((f"Loss on the {label}", fmt_loss(actual) + against))
    return items


def forecast_vs_actual(ctx: Builder) -> Section | None:
    got = lead(ctx)
    if got is None:
        return None
    rec, score = got
    s = Section("forecast", "Forecast vs actual")
    partial = score.partial or Partial()
    point = score if score.final else (partial.vs_frozen or Comparison())
    frozen = f"{fmt_loss(point.forecast)} nats/token (90% interval {_interval(point)})"
    before = score.frozen_before_training
    when = f"forecast {rec.number}, frozen at {rec.frozen_at} UTC" + {
        True: ", before the hero was submitted",
        False: f", AFTER {_after_what(rec)}: not a forecast made before the run",
    }.get(before, "")
    if score.final:
        s.add(
            Para(
                (
                    "A late freeze checked against a real run (frozen after the hero had trained: not a prediction). "
                    if late(rec, score)
                    else "A prediction checked against a real run. "
                )
                + f"The frozen forecast ({when}) "
                f"was {frozen}; the hero's final eval loss is {fmt_loss(score.actual)}: the forecast is "
                f"{fmt_pct(score.error_pct, signed=True)} off it, {_inside(score.inside)} its "
                f"interval (z = {_z(score.z)}).",
                "ok" if score.inside else "warn",
            )
        )
    else:
        why = unfinished(ctx)
        text = f"{why[0].upper()}{why[1:]}, so the headline stays a projection. Frozen ({when}): {frozen}. "
        if partial.available:
            text += (
                f"At {pct_of_tokens(partial.fraction or 0)} of its tokens its curve heads for a "
                "final loss of {} (90% {}, from the curves of ".format(*_heads_for(partial))
                + f"{len(partial.references)} finished rungs): the frozen forecast is "
                f"{fmt_pct(point.error_pct, signed=True)} off it, {_inside(point.inside)} its "
                "interval."
            )
        else:
            text += f"No forecast of its final loss yet: {partial.reason}."
        s.add(Para(text, "warn" if point.inside is False else "note"))
    if data_changed(ctx, rec):
        s.add(Para(DATA_CHANGED, "warn"))
    off = offset_words(score.offset)
    of = _frozen_point(rec, score.point) + (f" (the hero run is {off} off it)" if off else "")
    items = [("Frozen forecast", frozen), ("Forecast of", of)]
    if score.final:
        items += _final_items(score)
    items += [
        ("Frozen at", f"{rec.frozen_at} UTC"),
        ("Scored at", f"{score.scored_at} UTC"),
        ("Scored against", _source(score)),
        ("Frozen before the hero was submitted", _before_words(rec, score)),
    ]
    if rec.note:
        items.append(("Note", str(rec.note)))
    s.add(KV(items, "The forecast on record and the hero"))
    rows = []
    for r in ctx.d.forecasts:
        rows.append(
            [
                str(r.number),
                str(r.frozen_at),
                fmt_loss(r.hero.loss),
                _interval(r.hero),
                _scored_point(r, r.scores[-1] if r.scores else None) + _score_text(r.scores[-1] if r.scores else None),
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
