"""The rollout backtest: fit the smallest sizes, forecast every larger run; the error of each law form against
the extrapolation distance, the ladder's demonstrated reach and whether the intervals covered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.fits.loss import track_record
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
    num,
    ok,
)
from ladder.reports.render.study import mapping, maps

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

MAX_ROWS = 60


def rollout(ctx: Builder) -> Section:
    s = Section("rollout", "Rollout backtests: how far the ladder sees")
    law, why = ctx.entry("loss", "no fit.json (run `ladder fit`)")
    if why:
        return s.missing(f"this study has no rollout backtest: {why}")
    ro = mapping(law.get("rollout"))
    rows, mixture = maps(ro.get("rows")), maps(ro.get("mixture"))
    if not rows:
        return s.missing(
            "this study has no rollout backtest: the ladder has fewer than 4 sizes, so no prefix of "
            "3 sizes leaves a larger run to forecast"
        )
    weights = mapping(law.get("weights"))
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
    reach = mapping(law.get("reach"))
    cal = mapping(law.get("calibration"))
    lean = mapping(law.get("lean"))
    r1, r2, tested = mapping(reach.get("1%")), mapping(reach.get("2%")), mapping(reach.get("tested"))
    s.add(
        KV(
            [
                (
                    "Within 1% up to",
                    f"{fmt_g(r1.get('params_x'), 3)}× in parameters, {fmt_g(r1.get('compute_x'), 3)}× in compute",
                ),
                (
                    "Within 2% up to",
                    f"{fmt_g(r2.get('params_x'), 3)}× in parameters, {fmt_g(r2.get('compute_x'), 3)}× in compute",
                ),
                (
                    "Tested up to",
                    f"{fmt_g(tested.get('params_x'), 3)}× in parameters, {fmt_g(tested.get('tokens_x'), 3)}× in "
                    f"tokens, {fmt_g(tested.get('compute_x'), 3)}× in compute",
                ),
                (
                    "Interval coverage",
                    (
                        f"{fmt_pct(100 * num(cal.get('coverage')), 0)} of {fmt_int(cal.get('n'))} weighted "
                        f"forecasts inside their nominal {fmt_pct(100 * num(cal.get('level', 0.9)), 0)} interval"
                    )
                    if ok(cal.get("coverage"))
                    else ABSENT,
                ),
                (
                    "Widening applied",
                    f"{fmt_g(cal.get('factor'), 3)}× (conformal factor: intervals are widened only when the "
                    "rollout covered less than promised)",
                ),
                ("Lean", _lean(lean)),
            ],
            "The ladder's demonstrated reach (weighted forecast)",
        )
    )
    if lean.get("direction"):
        s.add(
            Para(
                f"The rollout's forecasts lean {lean['direction']}: more of them erred on that side than "
                "unbiased forecasts would (a sign test at 5%). The ladder's curve bends away from every weighted "
                "law, and the hero's forecast probably errs the same way. The forecast is not shifted for it.",
                "warn",
            )
        )
    hero = ctx.hero
    dist = mapping(hero.get("distance"))
    if dist:
        far = mapping(dist.get("rollout_error"))
        s.add(
            KV(
                [
                    (
                        "The hero's distance",
                        f"{fmt_g(dist.get('params_x'), 3)}× in parameters, {fmt_g(dist.get('tokens_x'), 3)}× "
                        f"in tokens, {fmt_g(dist.get('compute_x'), 3)}× in compute",
                    ),
                    (
                        "The rollout's error there",
                        (
                            f"median {fmt_pct(far.get('median_abs_err_pct'))}, worst "
                            f"{fmt_pct(far.get('worst_abs_err_pct'))} at "
                            f"{fmt_g(far.get('min_distance_x'), 3)}–{fmt_g(far.get('max_distance_x'), 3)}× "
                            "(its farthest forecasts)"
                        )
                        if far
                        else ABSENT,
                    ),
                    (
                        "Widened for the distance",
                        f"{fmt_pct(dist.get('drift_widening_pct'), 1, signed=True)} (the rollout's error "
                        "growth per unit of log distance), at least the published-ladder floor of "
                        f"{fmt_pct(dist.get('public_floor_pct'), 1)}",
                    ),
                    ("Track record", track_record.sentence(mapping(hero.get("track_record"))) or ABSENT),
                ],
                "How far the hero lies, and what that distance has cost forecasts",
            )
        )
    if hero.get("beyond_tested") or hero.get("beyond_reach"):
        s.add(
            Para(
                f"The hero lies {fmt_g(dist.get('distance_x') or mapping(hero.get('extrapolation')).get('params'), 3)}× "
                "beyond the ladder (in its farthest axis): beyond what the rollout "
                + ("tested" if hero.get("beyond_tested") else "showed within 2%")
                + ". Its interval is a projection, not a checked prediction; a larger rung would test it.",
                "warn",
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
                    track_record.band_of(num(dist.get("compute_x"))) if dist else None,
                ),
            )
        )
    scores = mapping(ro.get("scores"))
    if scores:
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
                        fmt_int(v.get("n")),
                        fmt_pct(v.get("rms_pct")),
                        fmt_pct(v.get("mae_pct")),
                        fmt_pct(100 * num(v.get("coverage")), 0),
                        f"{fmt_g(v.get('max_params_x'), 3)}×",
                        fmt_g(weights.get(k, 0), 2),
                    ]
                    for k, v in mapping(scores).items()
                ],
                "lrrrrrr",
                title="Each form's rollout record (on the forecasts every form made, where there are at least two)",
            )
        )
    table = []
    for m in sorted(mixture, key=lambda m: (num(m.get("prefix")), num(m.get("params_x"))))[:MAX_ROWS]:
        iv = m.get("interval") or [None, None]
        table.append(
            [
                fmt_int(m.get("prefix")),
                (str(m.get("run_id")), "mono"),
                fmt_count(m.get("params")),
                fmt_count(m.get("tokens")),
                f"{fmt_g(m.get('params_x'), 3)}×",
                f"{fmt_g(m.get('compute_x'), 3)}×",
                fmt_loss(m.get("actual")),
                fmt_loss(m.get("forecast")),
                fmt_pct(m.get("err_pct"), signed=True),
                f"{fmt_loss(iv[0])} – {fmt_loss(iv[1])}",
                "yes" if m.get("inside") else "no",
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


def _lean(lean: dict) -> str:
    if not ok(lean.get("mean_err_pct")):
        return ABSENT
    leans = f" (leans {lean['direction']})" if lean.get("direction") else ""
    return (
        f"mean error {fmt_pct(lean.get('mean_err_pct'), 1, signed=True)}; {fmt_int(lean.get('n_high'))} of "
        f"{fmt_int(lean.get('n'))} forecasts too high{leans}"
    )
