"""The scaling laws: the loss law with its forecast, the IsoFLOP profiles (Approach 2), and the law's residuals
and backtest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ladder.reports.render.blocks import KV, Bullets, Para, Section, Table
from ladder.reports.render.figures.health import draw_residuals
from ladder.reports.render.figures.scaling import draw_isoflop, draw_scaling
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_ci,
    fmt_count,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_pct,
    ok,
)
from ladder.reports.render.study import g, mapping, maps, unavailable

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def scaling(ctx: Builder) -> Section:
    s = Section("scaling", "Scaling laws")
    law, why = ctx.entry("loss_law", "no fit.json (run `ladder fit`)")
    if why:
        return s.missing(f"this study has no scaling-law fit: {why}")
    p = mapping(law.get("params"))
    ci = mapping(law.get("ci90"))
    degenerate = bool(law.get("degenerate"))
    form = law.get("reduced_form") if degenerate else "L(N, D) = E + A / N^α + B / D^β"
    lvc = ctx.fit.get("loss_vs_compute") if not unavailable(ctx.fit.get("loss_vs_compute")) else None
    band = forecast_band(ctx.fit)
    s.add(ctx.figure(
        "fig-scaling", "Fitted loss law and the extrapolation to the hero",
        f"Final eval loss of every finished run against compute and parameters (one marker per variant; "
        f"outlined: the {fmt_int(law.get('n_runs'))} runs the law"
        + (f" of variant {law.get('variant')}" if law.get("variant") else "")
        + f" was fitted to), the fitted law {form} along the hero's tokens per parameter, extrapolated to the "
        "hero (star: the forecast with its 90% prediction interval). Thin lines: the per-variant laws.",
        3.9, lambda fig: draw_scaling(fig, ctx.done, law, ctx.hero, ctx.styles, lvc=lvc,
                                        by_variant={k: v for k, v in (mapping(ctx.fit.get("laws_by_variant"))).items()
                                                    if isinstance(v, Mapping) and not unavailable(v)},
                                        band=band)))
    names = {"E": "E (irreducible loss)", "A": "A", "alpha": "α (parameters exponent)", "B": "B",
             "beta": "β (tokens exponent)"}
    rows = [[names[k], fmt_g(p.get(k), 4), fmt_ci(ci.get(k), lambda v: fmt_g(v, 4))]
            for k in ("E", "A", "alpha", "B", "beta") if p.get(k) is not None]
    s.add(Table(["Parameter", "Value", "90% interval"], rows, "lrr",
                title=f"Approach 3: {form}, fitted to {fmt_int(law.get('n_runs'))} runs at {fmt_int(law.get('n_sizes'))} "
                      f"sizes (Huber loss on log L, {fmt_int(law.get('n_boot'))} bootstrap refits)"))
    if degenerate:
        s.add(Para(f"The ladder is degenerate: {law.get('degenerate_reason')}", "warn"))
    co = mapping(law.get("compute_optimal"))
    if co.get("identifiable"):
        cci = mapping(co.get("ci90"))
        s.add(Para(f"Compute-optimal allocation of the law: N_opt ∝ C^{fmt_g(co.get('a'))} "
                   f"(90%: {fmt_ci(cci.get('a'))}), D_opt ∝ C^{fmt_g(co.get('b'))} (90%: {fmt_ci(cci.get('b'))})."))
    elif co.get("reason"):
        s.add(Para(f"Compute-optimal allocation: {co['reason']}.", "note"))
    alloc = ctx.fit.get("compute_optimal")
    if isinstance(alloc, Mapping) and alloc.get("identifiable") and alloc.get("params") is not None:
        aci = mapping(alloc.get("ci90"))
        s.add(KV([
            ("At compute", f"{fmt_flops(alloc.get('flops'))} FLOPs"),
            ("Optimal parameters", f"{fmt_count(alloc.get('params'))} (90%: {fmt_ci(aci.get('params'), fmt_count)})"),
            ("Optimal tokens", f"{fmt_count(alloc.get('tokens'))} (90%: {fmt_ci(aci.get('tokens'), fmt_count)})"),
            ("Tokens per parameter", f"{fmt_g(alloc.get('tokens_per_param'))} "
                                     f"(90%: {fmt_ci(aci.get('tokens_per_param'))})"),
            ("Loss at the optimum", f"{fmt_loss(alloc.get('loss'))} (90%: {fmt_ci(aci.get('loss'), fmt_loss)})"),
        ], "Compute-optimal allocation at the hero's compute"))
    if lvc:
        q, qci = mapping(lvc.get("params")), mapping(lvc.get("ci90"))
        s.add(Table(["Parameter", "Value", "90% interval"],
                    [[k, fmt_g(q.get(k), 4), fmt_ci(qci.get(k), lambda v: fmt_g(v, 4))] for k in ("E", "C0", "gamma")],
                    "lrr", title=f"Loss vs compute, L(C) = E + (C0 / C)^γ, on {fmt_int(lvc.get('n_points'))} "
                                 f"{'frontier runs' if lvc.get('source') == 'frontier' else 'points'} "
                                 f"({lvc.get('source') or ''})"))
    elif ctx.fit.get("loss_vs_compute") is not None:
        s.add(Para(f"this study has no loss-vs-compute law: {unavailable(ctx.fit.get('loss_vs_compute'))}", "missing"))
    byv = mapping(ctx.fit.get("laws_by_variant"))
    if isinstance(byv, Mapping) and byv:
        rows = []
        for name, v in byv.items():
            why = unavailable(v)
            if why:
                rows.append([name, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, clip(why, 160)])
                continue
            vp = mapping(v.get("params"))
            rows.append([name, fmt_int(v.get("n_runs")), fmt_g(vp.get("E"), 4), fmt_g(vp.get("A")), fmt_g(vp.get("alpha")),
                         fmt_g(vp.get("B")), fmt_g(vp.get("beta")),
                         "degenerate: B, β not identified" if v.get("degenerate") else ""])
        s.add(Table(["Variant", "Runs", "E", "A", "α", "B", "β", "Note"], rows, "lrrrrrrl",
                    title="The law fitted per variant"))
    preds = maps(ctx.fit.get("predictions"))
    if preds:
        s.add(Table(["Forecast", "Parameters", "Tokens", "Loss (nats/token)", "90% interval"],
                    [[str(p.get("label", "")), fmt_count(p.get("params")), fmt_count(p.get("tokens")),
                      fmt_loss(p.get("loss")), fmt_ci([p.get("lo"), p.get("hi")], fmt_loss)] for p in preds],
                    "lrrrr", title="Forecasts"))
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
    s.add(ctx.figure(
        "fig-isoflop", "IsoFLOP profiles and N_opt, D_opt against compute",
        "Left: final loss against model size per compute budget, with the fitted IsoFLOP curve of each budget "
        f"({iso.get('method') or 'shape'} fit) and its minimum (diamond, 90% interval). Right: the optimal "
        "parameters and tokens per budget with their power laws in compute, extrapolated to the hero's compute.",
        3.8, lambda fig: draw_isoflop(fig, iso, ctx.hero)))
    rows = []
    for b in maps(iso.get("budgets")):
        c = mapping(b.get("ci90"))
        rows.append([fmt_flops(b.get("flops")), fmt_int(b.get("n_runs")), fmt_int(b.get("n_sizes")),
                     fmt_count(b.get("params_opt")), fmt_ci(c.get("params_opt"), fmt_count),
                     fmt_count(b.get("tokens_opt")), fmt_ci(c.get("tokens_opt"), fmt_count),
                     fmt_loss(b.get("loss_opt")), "yes" if b.get("interior") else "no (extrapolated)"])
    s.add(Table(["Budget (FLOPs)", "Runs", "Sizes", "N_opt", "90%", "D_opt", "90%", "Loss at N_opt", "Bracketed"],
                rows, "rrrrrrrrl", title="Optimum per compute budget"))
    ci = mapping(iso.get("ci90"))
    n_law, d_law = mapping(iso.get("n_opt")), mapping(iso.get("d_opt"))
    s.add(KV([
        ("N_opt(C)", f"{fmt_g(n_law.get('k'))} × C^{fmt_g(iso.get('a'), 4)} (exponent 90%: {fmt_ci(ci.get('a'))})"),
        ("D_opt(C)", f"{fmt_g(d_law.get('k'))} × C^{fmt_g(iso.get('b'), 4)} (exponent 90%: {fmt_ci(ci.get('b'))})"),
        ("Runs / budgets / bootstrap", f"{fmt_int(iso.get('n_runs'))} / {fmt_int(iso.get('n_budgets'))} / {fmt_int(iso.get('n_boot'))}"),
    ], "Approach 2"))
    skipped = [f"{fmt_flops(b.get('flops'))} FLOPs: {b.get('reason')}" for b in maps(iso.get("skipped_budgets"))]
    if iso.get("note"):
        skipped.append(str(iso["note"]))
    if skipped:
        s.add(Bullets(skipped, "Notes"))
    return s


def residuals(ctx: Builder) -> Section:
    s = Section("residuals", "Residuals and backtest")
    resid = maps((ctx.law or {}).get("residuals"))
    bt = ctx.backtest()
    if not resid and not bt:
        return s.missing("this study has no residuals or backtest (no loss-law fit)")
    s.add(ctx.figure(
        "fig-residuals", "Residuals of the loss law and the backtest",
        "Left: (observed − fitted) / fitted of every run in the fit, per variant. Right: the runs of the largest "
        "rung against the forecast of the same fit made without them; the grey band is ±1%.", 3.5,
        lambda fig: draw_residuals(fig, resid, bt, ctx.variant_of, ctx.styles)))
    summ = mapping((ctx.law or {}).get("residual_summary"))
    if summ:
        s.add(KV([(str(k).replace("_", " "), fmt_g(v, 4) if isinstance(v, (int, float)) else str(v))
                  for k, v in summ.items()], "Residual summary"))
    if bt:
        if bt.get("skipped"):
            s.add(Para(f"The backtest was skipped: {bt['skipped']}", "missing"))
        else:
            rows = [[(str(r.get("run")), "mono"), ctx.variant_of.get(str(r.get("run")), ""),
                     fmt_count(r.get("params")), fmt_count(r.get("tokens")), fmt_loss(r.get("loss")),
                     fmt_loss(r.get("predicted")), fmt_pct(r.get("error_pct"), signed=True)]
                    for r in maps(bt.get("held_out"))]
            s.add(Table(["Run", "Variant", "Params", "Tokens", "Observed", "Forecast", "Error"], rows, "llrrrrr",
                        mono=(0,),
                        title=f"Backtest: refit on {fmt_int(bt.get('n_train'))} runs without the largest "
                              f"{bt.get('holdout') or 'size'} rung, forecast of its {fmt_int(bt.get('n_held_out'))} runs "
                              f"(mean error {fmt_pct(bt.get('mean_error_pct'), signed=True)}, mean |error| "
                              f"{fmt_pct(bt.get('mean_abs_error_pct'))}, max |error| {fmt_pct(bt.get('max_abs_error_pct'))}; "
                              "> 0: the forecast was pessimistic)"))
            if bt.get("note"):
                s.add(Para(str(bt["note"]), "note"))
    lbt = g(ctx.fit, "loss_vs_compute", "backtest")
    if isinstance(lbt, Mapping) and not lbt.get("skipped") and ok(lbt.get("mean_abs_error_pct")):
        s.add(Para(f"Loss-vs-compute law backtest (largest {lbt.get('holdout')} rung held out): mean |error| "
                   f"{fmt_pct(lbt.get('mean_abs_error_pct'))} on {fmt_int(lbt.get('n_held_out'))} frontier run(s)."))
    return s
