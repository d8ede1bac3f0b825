"""The ablations: tied vs untied embeddings, and depth vs width. Every number shown is fit.json's, formatted
by the helpers below (``fmt_gap``, ``fmt_mult``), so that the report and fit.json say the same thing."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ladder.reports.fits.study.fit_json import AblationTrend, AspectAtHero, AspectOptimum, Crossover, TieNoise
from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.ablations import (
    draw_aspect_trend,
    draw_aspects,
    draw_tie,
)
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_bool,
    fmt_ci,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_times,
    fmt_weight,
    num,
    ok,
    status_cell,
)
from ladder.reports.render.study import no_section, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

Z90 = 1.6448536269514722
PER_FIGURE = 9
CROSSING = ("within_range", "beyond_range", "possible_beyond")  # statuses with a crossing compute
NO_FIT = "no fit.json"  # the words Builder.entry gives the sections still reading the raw dict


def fmt_gap(v: Any) -> str:
    x = num(v)
    return f"{x:+.4f}" if math.isfinite(x) else ABSENT


def fmt_p(v: Any) -> str:
    x = num(v)
    return f"{x:.2f}" if math.isfinite(x) else ABSENT


def fmt_mult(v: Any) -> str:
    x = num(v)
    return fmt_times(x)


def _forms_table(trend: AblationTrend | None, quantity: str) -> Table | None:
    forms = trend.forms if trend is not None else None
    if not forms:
        return None
    rows = []
    for key, f in forms.items():
        ro = f.rollout
        rows.append(
            [
                f.title or key,
                f.formula or "",
                fmt_weight(f.weight),
                fmt_g(ro.rms) if ro is not None else "no forecasts",
                fmt_int(ro.n) if ro is not None else "0",
            ]
        )
    cal, reach = trend.calibration, trend.reach
    title = (
        f"Trend forms of {quantity}, weighted by rollout error (fit on the smaller rungs, forecast the larger); "
        f"calibration: coverage {fmt_g(cal and cal.coverage)}, factor {fmt_g(cal and cal.factor)}; reach "
        f"{fmt_times(reach and reach.compute_x)} in compute (tested to {fmt_times(reach and reach.tested_compute_x)})"
    )
    return Table(["Form", "Formula", "Weight", "Rollout RMS", "Forecasts"], rows, "llrrr", title=title)


def _tie_distance(tie: Any, h: Any) -> str:
    """The hero's compute over that of the largest rung both variants trained (a rung one trained alone, as the
    default study's untied top size, compares nothing), both in the table's FLOPs: the headline's distance is 6ND
    from the main variant's largest run, so the two multiples differ and each says what it divides."""
    paired = [r for r in tie.scales if r.gap is not None and ok(r.flops)]
    top = max(paired, key=lambda r: num(r.flops), default=None)
    hero = tie.hero_flops if ok(tie.hero_flops) else h.flops
    if top is None or not ok(hero):
        of = f"the hero is {fmt_times(h.compute_x)} the compute of the largest rung with both variants"
    else:
        of = (
            f"the hero's {fmt_flops(hero)} FLOPs are {fmt_times(h.compute_x)} the {fmt_flops(top.flops)} of "
            f"{top.scale}, the largest rung with both variants (counted as the Compute column above; the headline's "
            "multiples are 6ND)"
        )
    return f"{of}; the rollout showed the gap forecasts right up to {fmt_times(h.reach_compute_x)}"


def tied(ctx: Builder) -> Section:
    s = Section("tied", "Tied vs untied embeddings")
    tie = ctx.fit_json.tied_vs_untied if ctx.fit_json is not None else None
    why = why_not(tie) if tie is not None else NO_FIT
    if why:
        return s.missing(no_section("tied-vs-untied ablation", why))
    h = tie.hero
    if h is not None and h.message:
        s.add(Para(f"The call: {h.message}.", "p"))
    s.add(
        ctx.figure(
            "fig-tied",
            "Tied vs untied embeddings across scale",
            "Left: each variant's best loss per rung and its L(C) law (one floor and one exponent for both). Middle: the gap ln L_untied − ln L_tied "
            "per rung (> 0: tying wins; bars: 90% noise), the rollout-weighted trend with its calibrated 90% band, "
            "the hero (star) and a crossover where the rungs and the trend agree. Right: the compute the untied model "
            "needs to reach the tied loss, over the rung's compute (< 1: untied is cheaper).",
            3.0,
            lambda fig: draw_tie(fig, tie, ctx.styles),
        )
    )
    rows = []
    for r in tie.scales:
        if r.skipped:
            rows.append(
                [str(r.scale), fmt_flops(r.flops), ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, clip(r.skipped, 120)]
            )
            continue
        noise = f" ± {Z90 * num(r.gap_se):.4f}" if ok(r.gap_se) else ""
        rows.append(
            [
                str(r.scale),
                fmt_flops(r.flops),
                fmt_loss(r.loss_tied),
                fmt_loss(r.loss_untied),
                fmt_gap(r.gap) + noise,
                fmt_bool(r.beyond_noise),
                fmt_mult(r.compute_multiplier),
                r.winner or "",
            ]
        )
    noise = tie.noise or TieNoise()
    s.add(
        Table(
            ["Rung", "Compute", "Tied", "Untied", "Gap (90% noise)", "Beyond noise", "Compute ×", "Winner"],
            rows,
            "lrrrrcrl",
            title=f"Per rung (gap = ln L_untied − ln L_tied; noise from {noise.source or 'unknown'}; "
            "compute ×: the untied compute needed to reach the tied loss, over C)",
        )
    )
    items = []
    if h is not None:
        items += [
            ("Gap at the hero", f"{fmt_gap(h.gap)} (90%: {fmt_ci(h.gap_ci90, fmt_gap)})"),
            ("Winner", f"{h.winner or '?'} ({h.call or '?'}; P = {fmt_p(h.p_winner)})"),
            ("Distance", _tie_distance(tie, h)),
        ]
        if h.compute_multiplier is not None:
            items.append(
                (
                    "Effective compute",
                    f"untied reaches tied's loss with {fmt_mult(h.compute_multiplier)}"
                    f" (90%: {fmt_ci(h.compute_multiplier_ci90, fmt_mult)}) the "
                    "compute (local slope of the untied L(C) law)",
                )
            )
    cross = tie.crossover or Crossover()
    if cross.message:
        items.append(
            (
                "Crossover",
                cross.message + (f" (90%: {fmt_ci(cross.ci90, fmt_flops)} FLOPs)" if cross.status in CROSSING else ""),
            )
        )
    if h is None and tie.reason and tie.reason != cross.message:  # fit.json's crossover says the reason already
        items.append(("Trend", tie.reason))
    if items:
        s.add(KV(items, "Along the ladder and at the hero"))
    s.add(_forms_table(tie.trend, "the gap"))
    if tie.method:
        s.add(Para(f"Method: {tie.method}.", "note"))
    return s


def depth(ctx: Builder) -> Section:
    s = Section("depth", "Depth vs width")
    dw = ctx.fit_json.depth_vs_width if ctx.fit_json is not None else None
    why = why_not(dw) if dw is not None else NO_FIT
    scales = dw.scales if not why else []
    if why or not any(sc.fit is not None for sc in scales):
        reason = why or dw.reason or "no rung has 3 or more aspect ratios"
        return s.missing(no_section("depth-vs-width sweep", reason))
    shown = [sc for sc in scales if sc.points]
    chunks = [shown[i : i + PER_FIGURE] for i in range(0, len(shown), PER_FIGURE)] or [[]]
    for i, chunk in enumerate(chunks):
        part = f" ({i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
        s.add(
            ctx.figure(
                "fig-depth" + (f"-{i + 1}" if len(chunks) > 1 else ""),
                "Loss against aspect ratio per rung" + part,
                "Final loss (moved to the rung's compute) against d_model / n_layers at one size, the quadratic of ln "
                "loss in ln aspect ratio fitted by the engine, its optimum and the optimum's 90% interval.",
                1.0 + 2.2 * max(1, math.ceil(len(chunk) / 3)),
                lambda fig, c=chunk: draw_aspects(fig, c),
            )
        )
    if dw.aspect is not None:
        s.add(
            ctx.figure(
                "fig-depth-law",
                "Best aspect ratio against compute",
                "The best aspect ratio per rung (90%) and the rollout-weighted trend with its calibrated 90% band to "
                "the hero (star); the loss cost of a 2× wrong aspect ratio per rung and at the hero.",
                3.0,
                lambda fig: draw_aspect_trend(fig, dw),
            )
        )
    rows = []
    for sc in scales:
        f = sc.fit or AspectOptimum()
        rows.append(
            [
                str(sc.scale),
                fmt_flops(sc.flops),
                fmt_int(sc.n_runs),
                fmt_g(f.opt),
                fmt_ci(f.ci90),
                status_cell(f.status or "skipped"),
                fmt_loss(f.penalty_2x),
                clip(sc.skipped or f.message or "", 140),
            ]
        )
    s.add(
        Table(
            ["Rung", "Compute", "Runs", "Best aspect", "90%", "Status", "Cost of 2×", "Note"],
            rows,
            "lrrrrlrl",
            title="Best aspect ratio per rung",
        )
    )
    h = dw.hero or AspectAtHero()
    if h.aspect_ratio is not None:
        s.add(
            KV(
                [
                    (
                        "Aspect ratio at the hero",
                        f"{fmt_g(h.aspect_ratio)} (90%: {fmt_ci(h.aspect_ratio_ci90)})",
                    ),
                    (
                        "Distance",
                        f"the hero is {fmt_times(h.compute_x)} the largest rung's compute; the rollout "
                        f"showed the trend forecasts right up to {fmt_times(h.reach_compute_x)}",
                    ),
                    (
                        "Cost of a 2× wrong aspect at the hero",
                        f"{fmt_loss(h.penalty_2x)} nats/token (90%: {fmt_ci(h.penalty_2x_ci90, fmt_loss)})",
                    ),
                ],
                "At the hero",
            )
        )
    elif dw.reason:
        s.add(Para(f"No aspect-ratio trend: {dw.reason}", "note"))
    s.add(_forms_table(dw.aspect, "ln aspect*"))
    if dw.method:
        s.add(Para(f"Method: {dw.method}.", "note"))
    return s
