"""The scaling laws: the law forms with their weights and the forecast, and the IsoFLOP profiles (Approach 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

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
    num,
    ok,
)
from ladder.reports.render.sections.forecast import actual_point
from ladder.reports.render.study import g, mapping, maps, unavailable

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


PARAM_NAMES = {"E": "E", "A": "A", "B": "B", "alpha": "α", "beta": "β", "eta": "η"}


def _params_text(p: Mapping, ci: Mapping) -> str:
    out = []
    for k in ("E", "A", "alpha", "B", "beta", "eta"):
        if p.get(k) is None:
            continue
        c = ci.get(k)
        out.append(
            f"{PARAM_NAMES[k]} {fmt_g(p[k], 4)}" + (f" [{fmt_ci(c, lambda v: fmt_g(v, 3), sep=', ')}]" if c else "")
        )
    return ", ".join(out)


def scaling(ctx: Builder) -> Section:
    s = Section("scaling", "Scaling laws")
    law, why = ctx.entry("loss", "no fit.json (run `ladder fit`)")
    if why:
        return s.missing(f"this study has no scaling-law fit: {why}")
    forms = mapping(law.get("forms"))
    in_law = {str(r.get("run")) for f in forms.values() if isinstance(f, Mapping) for r in maps(f.get("residuals"))}
    band = forecast_band(ctx.fit)
    actual = actual_point(ctx)
    s.add(
        ctx.figure(
            "fig-scaling",
            "The runs, the forecast and its extrapolation to the hero",
            "Final eval loss of every finished run against compute and parameters (one marker per variant; outlined: "
            f"the runs the laws of variant {law.get('variant') or ''} were fitted to), the weighted forecast of the law "
            "forms along the hero's tokens per parameter with its calibrated 90% interval, extrapolated to the hero "
            "(star: the hero's forecast" + ("; diamond: the hero run's actual final loss" if actual else "") + ").",
            3.9,
            lambda fig: draw_scaling(fig, ctx.done, ctx.hero, ctx.styles, in_law=in_law, band=band, actual=actual),
        )
    )
    rows = []
    for key, f in forms.items():
        f = mapping(f)
        score = mapping(f.get("rollout"))
        rows.append(
            [
                f.get("title") or key,
                str(f.get("formula") or ""),
                _params_text(mapping(f.get("params")), mapping(f.get("ci90"))),
                fmt_int(f.get("n")),
                fmt_pct(score.get("rms_pct")) if score else ABSENT,
                fmt_g(f.get("weight"), 2),
            ]
        )
    for key, reason in mapping(law.get("skipped")).items():
        rows.append([key, "", f"not fitted: {clip(reason, 200)}", ABSENT, ABSENT, "0"])
    s.add(
        Table(
            ["Law form", "Law", "Parameters [90% interval]", "Runs", "Rollout error", "Weight"],
            rows,
            "lllrrr",
            title="Law forms fitted by one engine (Huber on log loss, δ 1e-3; residual bootstrap from fresh "
            f"starts), {law.get('selection') or 'weighted by their rollout error'}",
        )
    )
    if ok(law.get("seed_sigma")) and num(law.get("seed_sigma")) > 0:
        s.add(
            Para(
                f"Seed noise floor: replicates of one configuration scatter by {fmt_pct(100 * num(law['seed_sigma']))} "
                "(sd of log loss); every interval includes at least this scatter."
            )
        )
    alloc = mapping(ctx.fit.get("compute_optimal"))
    if alloc.get("identifiable"):
        aci = mapping(alloc.get("ci90"))
        at = mapping(alloc.get("at_hero"))
        s.add(
            Para(
                f"Compute-optimal allocation ({alloc.get('source')} law): N_opt ∝ C^{fmt_g(alloc.get('a'))} "
                f"(90%: {fmt_ci(aci.get('a'))}), D_opt ∝ C^{fmt_g(alloc.get('b'))} (90%: {fmt_ci(aci.get('b'))})"
                + (
                    f"; at the hero's 6ND = {fmt_flops(at.get('compute_6nd'))}: {fmt_count(at.get('params'))} "
                    f"parameters (90%: {fmt_ci(mapping(at.get('ci90')).get('params'), fmt_count)}), "
                    f"{fmt_g(at.get('tokens_per_param'))} tokens/param"
                    if at
                    else ""
                )
                + "."
            )
        )
        if alloc.get("assumption"):
            s.add(Para(f"The split rests on {alloc['assumption']}.", "note"))
        if alloc.get("determined") is False:
            s.add(
                Para(
                    f"Not advice: {alloc.get('reason')}; size the hero by a rule (the study's tokens_per_param) "
                    "or give the ladder a wider range of tokens per parameter.",
                    "note",
                )
            )
    elif alloc.get("reason"):
        s.add(Para(f"Compute-optimal allocation: {alloc['reason']}.", "note"))
    byv = mapping(ctx.fit.get("loss_by_variant"))
    if len(byv) > 1:
        from ladder.reports.fits.ablations.tied import paired_forecast

        vrows = []
        primary = next((n for n, v in byv.items() if mapping(v).get("primary")), None)
        call = mapping(mapping(ctx.fit.get("tied_vs_untied")).get("hero"))
        hero_loss = (
            {"loss": ctx.hero.get("loss")}
            if ok(ctx.hero.get("loss"))
            else dict(mapping(mapping(byv.get(primary)).get("target")))
        )
        any_paired = False
        for name, v in byv.items():
            why_v = unavailable(v)
            paired = paired_forecast(primary, hero_loss, dict(call), name) if primary and name != primary else None
            any_paired = any_paired or paired is not None
            by_call = (
                f"{fmt_loss(paired['loss'])} ({fmt_ci([paired['lo'], paired['hi']], fmt_loss)})"
                if paired
                else (fmt_loss(hero_loss.get("loss")) if name == primary and call else ABSENT)
            )
            if why_v:
                vrows.append([name, by_call, ABSENT, ABSENT, clip(why_v, 160)])
                continue
            t = mapping(v.get("target"))
            w = ", ".join(f"{k} {num(x):.2f}" for k, x in mapping(v.get("weights")).items())
            vrows.append(
                [
                    name + (" (hero's)" if v.get("primary") else ""),
                    by_call,
                    fmt_loss(t.get("loss")),
                    fmt_ci([t.get("lo"), t.get("hi")], fmt_loss),
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
    preds = maps(ctx.fit.get("predictions"))
    if preds:
        s.add(
            Table(
                ["Forecast", "Parameters", "Tokens", "Loss (nats/token)", "90% interval", "±", "Distance"],
                [
                    [
                        fmt_label(p.get("label", "")),
                        fmt_size(p.get("params")),
                        fmt_size(p.get("tokens")),
                        fmt_loss(p.get("loss")),
                        fmt_ci([p.get("lo"), p.get("hi")], fmt_loss),
                        fmt_pct(p.get("half_width_pct")),
                        f"{fmt_g(p.get('params_x'), 2)}×" + (" (beyond reach)" if p.get("beyond_reach") else ""),
                    ]
                    for p in preds
                ],
                "lrrrrrl",
                title="Forecasts (90% intervals, calibrated on the rollout)",
            )
        )
    return s


def forecast_band(fit: Mapping) -> list[dict] | None:
    """The 90% prediction interval along the hero's tokens per parameter, from the smallest ladder model to
    the hero, as ``ladder fit`` computed it (``fit.json``'s ``forecast_curve``); None when it has none."""
    given = fit.get("forecast_curve") or g(fit, "hero", "curve")
    return maps(given) if isinstance(given, list) and given else None


def isoflop(ctx: Builder) -> Section:
    s = Section("isoflop", "IsoFLOP profiles and compute-optimal allocation")
    iso, why = ctx.entry("isoflop")
    if why:
        return s.missing(f"this study has no IsoFLOP profiles: {why}")
    s.add(
        ctx.figure(
            "fig-isoflop",
            "IsoFLOP profiles and N_opt, D_opt against compute",
            "Left: final loss against model size per compute budget, with the fitted IsoFLOP curve of each budget "
            f"({iso.get('method') or 'shape'} fit) and its minimum (diamond, 90% interval). Right: the optimal "
            "parameters and tokens per budget with their power laws in compute, extrapolated to the hero's compute.",
            3.8,
            lambda fig: draw_isoflop(fig, iso, ctx.hero),
        )
    )
    rows = []
    for b in maps(iso.get("budgets")):
        c = mapping(b.get("ci90"))
        rows.append(
            [
                fmt_flops(b.get("flops")),
                fmt_int(b.get("n_runs")),
                fmt_int(b.get("n_sizes")),
                fmt_count(b.get("params_opt")),
                fmt_ci(c.get("params_opt"), fmt_count),
                fmt_count(b.get("tokens_opt")),
                fmt_ci(c.get("tokens_opt"), fmt_count),
                fmt_loss(b.get("loss_opt")),
                "yes" if b.get("interior") else "no (extrapolated)",
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
    ci = mapping(iso.get("ci90"))
    n_law, d_law = mapping(iso.get("n_opt")), mapping(iso.get("d_opt"))
    s.add(
        KV(
            [
                (
                    "N_opt(C)",
                    f"{fmt_g(n_law.get('k'))} × C^{fmt_g(iso.get('a'), 4)} (exponent 90%: {fmt_ci(ci.get('a'))})",
                ),
                (
                    "D_opt(C)",
                    f"{fmt_g(d_law.get('k'))} × C^{fmt_g(iso.get('b'), 4)} (exponent 90%: {fmt_ci(ci.get('b'))})",
                ),
                (
                    "Runs / budgets / bootstrap",
                    f"{fmt_int(iso.get('n_runs'))} / {fmt_int(iso.get('n_budgets'))} / {fmt_int(iso.get('n_boot'))}",
                ),
            ],
            "Approach 2",
        )
    )
    skipped = [f"{fmt_flops(b.get('flops'))} FLOPs: {b.get('reason')}" for b in maps(iso.get("skipped_budgets"))]
    if iso.get("note"):
        skipped.append(str(iso["note"]))
    if skipped:
        s.add(Bullets(skipped, "Notes"))
    return s
