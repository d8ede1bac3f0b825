"""The scaling laws: the law forms with their weights and the forecast, and the IsoFLOP profiles (Approach 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ladder.reports.fits.loss import track_record
from ladder.reports.fits.study.fit_json import (
    OUTSIDE,
    BudgetCI90,
    ComputeOptimal,
    ExponentsCI90,
    FitJson,
    IsoflopLaw,
    Point,
    written,
)
from ladder.reports.fits.study.study_hero import beyond_mark, farthest_axis, left_out_words
from ladder.reports.fits.study.table import of_variant
from ladder.reports.render.blocks import KV, Bullets, Para, Section, Table
from ladder.reports.render.figures.scaling import draw_isoflop, draw_scaling
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_ci,
    fmt_count,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_label,
    fmt_loss,
    fmt_pct,
    fmt_size,
    fmt_times,
    fmt_weight,
    num,
    ok,
    pos,
)
from ladder.reports.render.sections.forecast import actual_point
from ladder.reports.render.study import no_section, why_not

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


PARAM_NAMES = {"E": "E", "A": "A", "B": "B", "alpha": "α", "beta": "β", "eta": "η"}


def _params_text(p: Mapping, ci: Mapping) -> str:
    out = []
    order = ("E", "A", "alpha", "B", "beta", "eta")
    for k in [*order, *(k for k in p if k not in order)]:  # every parameter `ladder fit` prints (bounded's U too)
        if p.get(k) is None:
            continue
        c = ci.get(k)
        outside = c and None not in c[:2] and not c[0] <= p[k] <= c[1]  # a 1-dof fit: E 1.547 [5.055, 5.07]
        out.append(
            f"{PARAM_NAMES.get(k, k)} {fmt_g(p[k], 4)}"
            + (f" [{fmt_ci(c, lambda v: fmt_g(v, 3), sep=', ')}]" if c else "")
            + (f" ({OUTSIDE})" if outside else "")
        )
    return ", ".join(out)


def scaling(ctx: Builder) -> Section:
    s = Section("scaling", "Scaling laws")
    fit = ctx.fit_json
    why = why_not(fit.loss) if fit is not None else _why_untyped(ctx, "no fit.json (run `ladder fit`)")
    if why:
        return s.missing(f"this study has no scaling-law fit: {why}")
    law, hero = fit.loss, fit.hero
    forms = law.forms or {}
    in_law = {str(r.run) for f in forms.values() for r in f.residuals}
    band = fit.forecast_curve or None
    actual = actual_point(ctx)
    s.add(
        ctx.figure(
            "fig-scaling",
            "The runs, the forecast and its extrapolation to the hero",
            "Final eval loss of every finished run against compute and parameters (one marker per variant; outlined: "
            f"the runs the laws{of_variant(law.variant)} were fitted to), the weighted forecast of the law "
            "forms along the hero's tokens per parameter with its calibrated 90% interval, extrapolated to the hero "
            "(star: the hero's forecast" + ("; diamond: the hero run's actual final loss" if actual else "") + ").",
            3.9,
            lambda fig: draw_scaling(fig, ctx.done, hero, ctx.styles, in_law=in_law, band=band, actual=actual),
        )
    )
    by_rollout = law.weighted_by_rollout()
    calibrated = law.calibration is not None and (law.calibration.n or 0) > 0
    rows = []
    for key, f in forms.items():
        rows.append(
            [
                f.title or key,
                f.formula or "",
                _params_text(f.params or {}, f.ci90 or {}),
                fmt_int(f.n),
                fmt_pct(f.rollout.rms_pct) if f.rollout is not None else ABSENT,
                fmt_weight(f.weight),
            ]
        )
    for key, reason in (law.skipped or {}).items():
        rows.append([key, "", f"not fitted: {clip(reason, 200)}", ABSENT, ABSENT, fmt_weight(0)])
    s.add(
        Table(
            ["Law form", "Law", "Parameters [90% interval]", "Runs", "Rollout error", "Weight"],
            rows,
            "lllrrr",
            title="Law forms fitted by one engine (Huber on log loss, δ 1e-3; residual bootstrap from fresh "
            f"starts), {law.selection or ('weighted by their rollout error' if by_rollout else 'no rollout forecasts')}",
        )
    )
    for words in left_out_words(written(law.left_out), law.n_runs):  # as `ladder fit` says it under its header
        s.add(Para(f"{words[0].upper()}{words[1:]}."))
    if pos(law.seed_sigma):
        s.add(
            Para(
                f"Seed noise floor: replicates of one configuration scatter by {fmt_pct(100 * num(law.seed_sigma))} "
                "(sd of log loss); every interval includes at least this scatter."
            )
        )
    _allocation(s, fit.compute_optimal)
    if len(fit.loss_by_variant) > 1:
        _variants(s, fit)
    if fit.predictions:
        s.add(
            Table(
                [
                    "Forecast",
                    "Parameters",
                    "Tokens",
                    "Loss (nats/token)",
                    "90% interval",
                    "±",
                    "Distance",
                    "Distance (params, tokens, 6ND) and track record",
                ],
                [
                    [
                        fmt_label(p.label),
                        fmt_size(p.params),
                        fmt_size(p.tokens),
                        fmt_loss(p.loss),
                        fmt_ci([p.lo, p.hi], fmt_loss),
                        fmt_pct(p.half_width_pct),
                        _farthest(p) + beyond_mark(p.beyond_tested, p.beyond_reach),  # as `ladder fit`
                        # issue 26: every forecast's distance in each axis and the published ladders' record there
                        f"{fmt_times(p.params_x)} params, {fmt_times(p.tokens_x)} tokens, "
                        f"{fmt_times(p.compute_x)} compute (6ND): "
                        + (track_record.sentence(written(p.track_record)) or ABSENT),
                    ]
                    for p in fit.predictions
                ],
                "lrrrrrll",
                title="Forecasts (90% intervals, calibrated on the rollout)"
                if calibrated
                else "Forecasts (90% intervals, not calibrated: no rollout forecasts to calibrate them on)",
            )
        )
    return s


def _farthest(p) -> str:
    """A forecast's distance in its farthest axis (``57.6× compute``), as its reach is judged and `ladder fit` says."""
    v, axis = farthest_axis(p.params_x, p.tokens_x, p.compute_x)
    return ABSENT if v is None else f"{fmt_times(v)} {axis}"


def _why_untyped(ctx: Builder, no_fit: str) -> str:
    """Why a section is missing when fit.json is not there typed: no fit at all, or one that is not the contract
    (:func:`~ladder.reports.render.study.load_study` refuses such a file; a test may hand one over)."""
    return "fit.json is not the contract (refit with `ladder fit`)" if ctx.fit else no_fit


def _allocation(s: Section, alloc: ComputeOptimal) -> None:
    """The compute-optimal split of the allocating law (and at the hero), or why there is none."""
    if alloc.identifiable:
        aci = alloc.ci90 or ExponentsCI90()
        at = alloc.at_hero
        s.add(
            Para(
                f"Compute-optimal allocation ({alloc.source} law): N_opt ∝ C^{fmt_g(alloc.a)} "
                f"(90%: {fmt_ci(aci.a)}), D_opt ∝ C^{fmt_g(alloc.b)} (90%: {fmt_ci(aci.b)})"
                + (
                    f"; at the hero's 6ND = {fmt_flops(at.compute_6nd)}: {fmt_count(at.params)} "
                    f"parameters (90%: {fmt_ci(at.ci90 and at.ci90.params, fmt_count)}), "
                    f"{fmt_g(at.tokens_per_param)} tokens/param"
                    if at is not None
                    else ""
                )
                + "."
            )
        )
        if alloc.assumption:
            s.add(Para(f"The split rests on {alloc.assumption}.", "note"))
        if alloc.determined is False:
            s.add(
                Para(
                    f"Not advice: {alloc.reason}; size the hero by a rule (the study's tokens_per_param) "
                    "or give the ladder a wider range of tokens per parameter.",
                    "note",
                )
            )
    elif alloc.reason:
        s.add(Para(f"Compute-optimal allocation: {alloc.reason}.", "note"))


def _variants(s: Section, fit: FitJson) -> None:
    """Each variant at the hero: by the paired tied-vs-untied comparison, and by its own loss law."""
    from ladder.reports.fits.ablations.tied import paired_forecast

    byv = fit.loss_by_variant
    vrows = []
    primary = next((n for n, v in byv.items() if v.primary), None)
    call = fit.tied_vs_untied.hero
    target = byv[primary].target if primary is not None else None
    # the forecast the paired comparison moves: the hero's, else the primary variant's own at the hero
    base = fit.hero.loss if ok(fit.hero.loss) else (target.loss if target is not None else None)
    any_paired = False
    for name, v in byv.items():
        why_v = why_not(v)
        paired = paired_forecast(primary, {"loss": base}, written(call), name) if primary and name != primary else None
        any_paired = any_paired or paired is not None
        by_call = (
            f"{fmt_loss(paired['loss'])} ({fmt_ci([paired['lo'], paired['hi']], fmt_loss)})"
            if paired
            else (fmt_loss(base) if name == primary and call is not None else ABSENT)
        )
        if why_v:
            vrows.append([name, by_call, ABSENT, ABSENT, clip(why_v, 160)])
            continue
        t = v.target or Point()
        w = ", ".join(f"{k} {num(x):.2f}" for k, x in (v.weights or {}).items())
        vrows.append(
            [
                name + (" (hero's)" if v.primary else ""),
                by_call,
                fmt_loss(t.loss),
                fmt_ci([t.lo, t.hi], fmt_loss),
                w,
            ]
        )
    s.add(
        Table(
            ["Variant", "By the tied-vs-untied call", "Own law at the hero", "90% interval", "Weights"],
            vrows,
            "lrrrl",
            title="Each variant at the hero's size and tokens: by the paired tied-vs-untied comparison (the "
            "call's and the recommendation's basis: the hero's forecast moved by the gap at the hero; "
            "its interval is the gap's), and by its own loss law, fitted on its runs apart",
        )
    )
    if any_paired:
        s.add(
            Para(
                "The variants' own laws are fitted apart and may put their weight on different forms; where "
                "they disagree with the paired comparison, the comparison (rung by rung, at matched compute) "
                "is the one the call and the recommendation use.",
                "note",
            )
        )


def isoflop(ctx: Builder) -> Section:
    s = Section("isoflop", "IsoFLOP profiles and compute-optimal allocation")
    fit = ctx.fit_json
    why = why_not(fit.isoflop) if fit is not None else _why_untyped(ctx, "no fit.json")
    if why:
        return s.missing(no_section("IsoFLOP profiles", why))
    iso, hero = fit.isoflop, fit.hero
    s.add(
        ctx.figure(
            "fig-isoflop",
            "IsoFLOP profiles and N_opt, D_opt against compute",
            "Left: final loss against model size per compute budget, with the fitted IsoFLOP curve of each budget "
            f"({iso.method or 'shape'} fit) and its minimum (diamond, 90% interval). Right: the optimal "
            "parameters and tokens per budget with their power laws in compute, extrapolated to the hero's compute.",
            3.8,
            lambda fig: draw_isoflop(fig, iso, hero),
        )
    )
    rows = []
    for b in iso.budgets:
        c = b.ci90 or BudgetCI90()
        rows.append(
            [
                fmt_flops(b.flops),
                fmt_int(b.n_runs),
                fmt_int(b.n_sizes),
                fmt_count(b.params_opt),
                fmt_ci(c.params_opt, fmt_count),
                fmt_count(b.tokens_opt),
                fmt_ci(c.tokens_opt, fmt_count),
                fmt_loss(b.loss_opt),
                "yes" if b.interior else "no (extrapolated)",
            ]
        )
    s.add(
        Table(
            ["Budget (FLOPs)", "Runs", "Sizes", "N_opt", "90%", "D_opt", "90%", "Loss at N_opt", "Bracketed"],
            rows,
            "rrrrrrrrl",
            title="Optimum per compute budget",
        )
    )
    ci = iso.ci90 or ExponentsCI90()
    n_law, d_law = iso.n_opt or IsoflopLaw(), iso.d_opt or IsoflopLaw()
    s.add(
        KV(
            [
                (
                    "N_opt(C)",
                    f"{fmt_g(n_law.k)} × C^{fmt_g(iso.a, 4)} (exponent 90%: {fmt_ci(ci.a)})",
                ),
                (
                    "D_opt(C)",
                    f"{fmt_g(d_law.k)} × C^{fmt_g(iso.b, 4)} (exponent 90%: {fmt_ci(ci.b)})",
                ),
                (
                    "Runs / budgets / bootstrap",
                    f"{fmt_int(iso.n_runs)} / {fmt_int(iso.n_budgets)} / {fmt_int(iso.n_boot)}",
                ),
            ],
            "Approach 2",
        )
    )
    skipped = [f"{fmt_flops(b.flops)} FLOPs: {b.reason}" for b in iso.skipped_budgets]
    if iso.note:
        skipped.append(iso.note)
    if skipped:
        s.add(Bullets(skipped, "Notes"))
    return s
