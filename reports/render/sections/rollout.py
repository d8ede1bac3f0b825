"""The rollout backtest: fit the smallest sizes, forecast every larger run; the error of each law form against
the extrapolation distance, the ladder's demonstrated reach and whether the intervals covered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.fits.loss import track_record
from ladder.reports.fits.study.fit_json import Lean, LossRollout, Reach, coverage_words, written
from ladder.reports.fits.study.study_hero import floor_words, reaches_nowhere
from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.rollout import draw_rollout
from ladder.reports.render.figures.track_record import draw_track_record
from ladder.reports.render.fmt import (
    ABSENT,
    fmt_count,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_pct,
    fmt_times,
    fmt_weight,
    num,
    ok,
)
from ladder.reports.render.sections.forecast import (
    FINAL,
    PARTIAL,
    checked_words,
    is_prediction,
    score_state,
    unfinished,
)
from ladder.reports.render.study import first, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

MAX_ROWS = 60


def rollout(ctx: Builder) -> Section:
    s = Section("rollout", "Rollout backtests: how far the ladder sees")
    fit = ctx.fit_json
    why = why_not(fit.loss) if fit is not None else "no fit.json (run `ladder fit`)"
    if why:
        return s.missing(f"this study has no rollout backtest: {why}")
    law, hero = fit.loss, fit.hero
    ro = law.rollout or LossRollout()
    rows, mixture = ro.rows, ro.mixture
    if not rows:
        return s.missing(
            f"this study has no rollout backtest: {_no_rows((ro.model_extra or {}).get('prefixes') or [])}"
        )
    weights = law.weights or {}
    s.add(
        ctx.figure(
            "fig-rollout",
            "Rollout forecasts against the extrapolation distance",
            "Each law form fitted on the smallest 3, 4, ... sizes alone forecasts every larger run. Left: its error "
            "against the distance in parameters from the largest size it was fitted on (dotted 1%, dashed 2%). "
            "Right: the weighted forecast's error with its 90% interval.",
            3.6,
            lambda fig: draw_rollout(fig, rows, mixture, weights),
        )
    )
    reach = law.reach or {}
    cal, lean = law.calibration, law.lean
    r1, r2, tested = reach.get("1%"), reach.get("2%"), reach.get("tested")
    coverage = cal.coverage if cal is not None else None
    level = first(cal.level if cal is not None else None, 0.9)
    s.add(
        KV(
            [
                ("Within 1% up to", _reach_text(r1)),
                ("Within 2% up to", _reach_text(r2)),
                (
                    "Tested up to",
                    f"{fmt_times(tested and tested.params_x)} in parameters, {fmt_times(tested and tested.tokens_x)} "
                    f"in tokens, {fmt_times(tested and tested.compute_x)} in compute",
                ),
                (
                    "Interval coverage",
                    coverage_words(cal, f"nominal {fmt_pct(100 * num(level), 0)}")  # as `ladder fit` says it
                    if cal is not None and ok(coverage)
                    else ABSENT,
                ),
                (
                    "Widening applied",
                    f"{fmt_times(cal.factor if cal is not None else None)} (conformal factor: intervals are widened "
                    "only when the rollout covered less than promised)",
                ),
                ("Lean", _lean(lean)),
            ],
            "The ladder's demonstrated reach (weighted forecast; compute as 6ND)",
        )
    )
    if lean is not None and lean.direction:
        s.add(
            Para(
                f"The rollout's forecasts near the hero's distance lean {lean.direction}: more of them erred on "
                "that side than "
                "unbiased forecasts would (a sign test at 5%). The ladder's curve bends away from every weighted "
                "law, and the hero's forecast probably errs the same way. The forecast is not shifted for it.",
                "warn",
            )
        )
    dist = hero.distance
    if dist is not None:
        far = dist.rollout_error
        s.add(
            KV(
                [
                    (
                        "The hero's distance",
                        f"{fmt_times(dist.params_x)} in parameters, {fmt_times(dist.tokens_x)} "
                        f"in tokens, {fmt_times(dist.compute_x)} in compute (6ND)",
                    ),
                    (
                        "The rollout's error at its farthest forecasts",
                        (
                            f"median {fmt_pct(far.median_abs_err_pct)}, worst "
                            f"{fmt_pct(far.worst_abs_err_pct)} at {_span(far.min_distance_x, far.max_distance_x)} "
                            "in their farthest axis (the hero lies at "
                            f"{fmt_times(dist.distance_x)} in its farthest axis; no rollout error was "
                            "measured at the hero's own distance)"
                        )
                        if far is not None
                        else ABSENT,
                    ),
                    (
                        "Widened for the distance",
                        f"{fmt_pct(dist.drift_widening_pct, 1, signed=True)} (the rollout's error "
                        # in the ± digits of the hero's interval, which it bounds: never 4.7% beside ±4.67%
                        f"growth per unit of log distance), "
                        + floor_words(
                            dist.public_floor_pct,
                            dist.far_floor_pct,
                            far.median_abs_err_pct if far is not None else None,
                        ),
                    ),
                    ("Track record", track_record.sentence(written(hero.track_record)) or ABSENT),
                ],
                "How far the hero lies, and what that distance has cost forecasts",
            )
        )
    if hero.beyond_tested or hero.beyond_reach:
        state = score_state(ctx)
        far_x = (dist.distance_x if dist is not None else None) or (hero.extrapolation or {}).get("params")
        s.add(
            Para(
                f"The hero lies {fmt_times(far_x)} "
                "beyond the ladder (in its farthest axis): beyond what the rollout "
                + ("tested" if hero.beyond_tested else "showed within 2%")
                + ". "
                + _checked(ctx, state),
                "note" if state == FINAL else "warn",
            )
        )
    if track_record.BY_LADDER:
        s.add(
            ctx.figure(
                "fig-track-record",
                "This engine's track record on published ladders",
                f"Median |error| of the loss forecast by compute distance on each published ladder ({track_record.SOURCE}); "
                "the dashed line is the hero's distance.",
                3.2,
                lambda fig: draw_track_record(
                    fig,
                    track_record.BY_LADDER,
                    [b for b in track_record.BAND_ORDER],
                    track_record.band_of(num(dist.compute_x)) if dist is not None else None,
                ),
            )
        )
    if ro.scores:
        s.add(
            Table(
                [
                    "Form",
                    "Forecasts judged",
                    "Distance-weighted RMS",
                    "Mean |error|",
                    "Interval coverage",
                    "Tested up to",
                    "Weight",
                ],
                [
                    [
                        k,
                        fmt_int(v.n),
                        fmt_pct(v.rms_pct),
                        fmt_pct(v.mae_pct),
                        fmt_pct(100 * num(v.coverage), 0),
                        f"{fmt_times(v.max_params_x)}",
                        fmt_weight(weights.get(k, 0)),
                    ]
                    for k, v in ro.scores.items()
                ],
                "lrrrrrr",
                title="Each form's rollout record ("
                + (
                    "on the forecasts every form made"
                    # fit.json's common: false: fewer than two forecasts every form made, each judged on its own
                    if all(getattr(v, "common", True) is not False for v in ro.scores.values())
                    else "each on its own forecasts: fewer than two were made by every form"
                )
                + ")",
            )
        )
    table = []
    for m in sorted(mixture, key=lambda m: (num(m.prefix), num(m.params_x)))[:MAX_ROWS]:
        iv = m.interval or [None, None]
        table.append(
            [
                fmt_int(m.prefix),
                (str(m.run_id), "mono"),
                fmt_count(m.params),
                fmt_count(m.tokens),
                f"{fmt_times(m.params_x)}",
                f"{fmt_times(m.compute_x)}",
                fmt_loss(m.actual),
                fmt_loss(m.forecast),
                fmt_pct(m.err_pct, signed=True),
                f"{fmt_loss(iv[0])} – {fmt_loss(iv[1])}",
                "yes" if m.inside else "no",
            ]
        )
    if table:
        more = f" (first {MAX_ROWS} of {len(mixture)})" if len(mixture) > MAX_ROWS else ""
        s.add(
            Table(
                [
                    "Sizes fitted",
                    "Run",
                    "Params",
                    "Tokens",
                    "Params ×",
                    "Compute ×",
                    "Observed",
                    "Forecast",
                    "Error",
                    "90% interval",
                    "Inside",
                ],
                table,
                "rlrrrrrrrrl",
                mono=(1,),
                title=f"The rollout table{more}: the last prefix is the classic held-out-largest-size backtest",
            )
        )
    return s


def _reach_text(r: Reach | None) -> str:
    params_x, compute_x = (r.params_x, r.compute_x) if r is not None else (None, None)
    if r is not None and ok(params_x, compute_x) and reaches_nowhere(params_x, r.tokens_x, compute_x):
        return "none (the nearest forecasts already erred by more)"
    return f"{fmt_times(params_x)} in parameters, {fmt_times(compute_x)} in compute"


def _span(lo: float, hi: float) -> str:
    """Distances from ``lo`` to ``hi`` as the report writes them, ``4–16.6×``, or one (``2×``) when they read alike."""
    return fmt_times(hi) if fmt_g(lo, 3) == fmt_g(hi, 3) else f"{fmt_g(lo, 3)}–{fmt_times(hi)}"


def _lean(lean: Lean | None) -> str:
    if lean is None or not ok(lean.mean_err_pct):
        return ABSENT
    leans = f" (leans {lean.direction})" if lean.direction else ""
    # judged near the hero's distance since 2026-12: the far rows' lean is not the near rows'
    band = _span(lean.min_distance_x, lean.max_distance_x) if ok(lean.min_distance_x, lean.max_distance_x) else None
    where = (
        f", the forecasts at {band} beyond their runs (near the hero's {fmt_times(lean.distance_x)}; "
        f"{fmt_int(lean.of)} in all)"
        if band and ok(lean.distance_x, lean.of)
        else ""
    )
    return (
        f"mean error {fmt_pct(lean.mean_err_pct, 1, signed=True)}; {fmt_int(lean.n_high)} of "
        f"{fmt_int(lean.n)} forecasts too high{leans}{where}"
    )


def _checked(ctx: Builder, state: str) -> str:
    """Whether the hero's interval, far beyond the ladder, has been checked: as the score stands."""
    if state == FINAL:
        return (
            "When fitted its interval was a projection; the hero run has since checked it: "
            f"{checked_words(is_prediction(ctx))} (Forecast vs actual)."
        )
    if state == PARTIAL:
        return (
            "Its interval is a projection, not a checked prediction, until the hero's final loss is scored: "
            f"{unfinished(ctx)} (Forecast vs actual); a larger rung would test it sooner."
        )
    return "Its interval is a projection, not a checked prediction; a larger rung would test it."


def _no_rows(prefixes: list[dict]) -> str:
    """Why the rollout made no forecast: no prefix to fit, or (the ladder had one) no law form fitted on its
    largest prefix forecast a larger run (4 sizes at one tokens/param ratio: 3 runs, where L(C) needs 4)."""
    if not prefixes:
        return "the ladder has fewer than 4 sizes, so no prefix of 3 sizes leaves a larger run to forecast"
    last = prefixes[-1]
    runs, sizes = last.get("runs"), last.get("sizes")
    which = (
        f"the lowest compute levels ({fmt_int(runs)} runs at {fmt_int(sizes)} sizes)"
        if last.get("by") == "compute"
        else f"the smallest {fmt_int(sizes)} sizes ({fmt_int(runs)} runs)"
    )
    skipped = last.get("skipped") or {}
    why = "; ".join(f"{form}: {reason}" for form, reason in skipped.items())
    return f"no law form fitted on {which} could forecast a larger run" + (f" ({why})" if why else "")
