"""A compact rich summary of a fit for the terminal (``ladder fit``).

``print_fit(fit, console)`` takes fit.json validated (:class:`~ladder.reports.fits.study.fit_json.FitJson`: a saved
fit through ``read_fit_json``, a fit just made through ``fit_json.validate(result.to_dict())``), so both print the
same way and every section is read through its typed model.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table

from ladder.model.config import format_count, format_multiple
from ladder.model.shape import LADDER_COST_COUNTS
from ladder.reports.fits.loss import track_record
from ladder.reports.fits.recommend import tied_uncertainty
from ladder.reports.fits.study.fit_json import OUTSIDE, Distance, FitJson, VariantLaw, coverage_words, written
from ladder.reports.fits.study.study_hero import (
    NO_REACH,
    NOT_TESTED,
    beyond_mark,
    beyond_words,
    farthest_axis,
    farthest_span,
    left_out_words,
    reaches_nowhere,
)
from ladder.reports.fits.study.table import ALL_RUNS, of_variant
from ladder.reports.render.fmt import fmt_flops, fmt_loss, fmt_pct, fmt_sig, share_of_hero

__all__ = ["print_fit"]


def _times(v: Any) -> str:
    """A distance as ``4,058x`` (:func:`format_multiple`), ``-`` when missing."""
    try:
        return format_multiple(float(v))
    except (TypeError, ValueError):
        return "-"


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return fmt_sig(x, digits)  # the report's fmt_loss gives a large loss in the same digits


def _count(v: Any) -> str:
    return "-" if v is None else format_count(float(v))


def _counts(pair: Any) -> str:
    """An interval of counts (a batch's tokens) in the report's digits: [5.243K, 6.803K], never [5,240, 6,800]."""
    return f" [{_count(pair[0])}, {_count(pair[1])}]" if pair and None not in pair[:2] else ""


def _ci(pair: Any, digits: int = 4, point: Any = None) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return ""
    out = f" ({OUTSIDE})" if point is not None and not pair[0] <= point <= pair[1] else ""  # E = 1.547 [5.055, 5.07]
    return f" [{_num(pair[0], digits)}, {_num(pair[1], digits)}]{out}"


def _loss_ci(loss: Any, lo: Any, hi: Any) -> str:
    """A loss and its 90% interval in one precision that tells them apart (`forecast freeze`, `hero` and `forecast
    score` print them so): 3.639 [3.598, 3.680], never 3.639 [3.598, 3.68]; the loss alone without an interval."""
    from ladder.reports.fits.scoring import same_digits

    if lo is None or hi is None:
        return _num(loss)
    a, low, high = same_digits(loss, lo, hi)
    return f"{a} [{low}, {high}]"


ZERO_TOL = 1e-12  # a slope this close to 0 is float noise: printed as 0


def _slope(slope: Any, ci: Any) -> str:
    """A slope and its 90% interval, float noise (|x| < ZERO_TOL) shown as 0 with no sign."""

    def z(x: Any) -> Any:
        return 0.0 if x is not None and abs(float(x)) < ZERO_TOL else x

    if slope is None:
        return "-"
    s = z(slope)
    head = "0" if s == 0 else f"{float(s):+.3g}"
    if ci and ci[0] is not None and ci[1] is not None:
        lo, hi = z(ci[0]), z(ci[1])
        if lo == 0 and hi == 0:
            return f"{head} [0, 0]"
        return f"{head} [{_num(lo, 3)}, {_num(hi, 3)}]"
    return head


def _share_of_hero(pct: Any) -> str:
    """The ladder's cost next to the hero's: a percent up to 100%, a multiple of the hero's compute above."""
    return " ".join(share_of_hero(pct))  # the report's headline says it the same way


def _overlap(a: Any, b: Any) -> bool:
    """Whether two [lo, hi] intervals overlap (False when either is missing)."""
    if not a or not b or None in (a[0], a[1], b[0], b[1]):
        return False
    return float(a[0]) <= float(b[1]) and float(b[0]) <= float(a[1])


def print_fit(fit: FitJson, console: Console | None = None) -> None:
    """Print the law with its 90% intervals, the degenerate note, the backtest, the hero forecast with its
    interval and cost, the recommendation block and the warnings."""
    console = console or Console()
    _print_law(fit, console)
    _print_variants(fit, console)

    co = fit.compute_optimal
    if co.identifiable:
        # with their 90% intervals, as fit.json has them: Beck et al.'s isoFLOP groups, cut by 6ND into 8 budgets
        # within 2x of compute, printed "a = 0.146" of an interval [-0.204, 0.42]
        ci, iso_ci = co.ci90, fit.isoflop.ci90 if fit.isoflop.available else None
        console.print(
            f"[bold]compute-optimal[/]: N* ~ C^{_num(co.a, 3)}{_ci(ci and ci.a, 3)}, "
            f"D* ~ C^{_num(co.b, 3)}{_ci(ci and ci.b, 3)}"
            + (f" (isoflop: a = {_num(co.isoflop.a, 3)}{_ci(iso_ci and iso_ci.a, 3)})" if co.isoflop else "")
        )
        if co.assumption:
            console.print(f"  [yellow]assumed[/]: {co.assumption}")
        if co.determined is False:
            console.print(f"  [yellow]not advice[/]: {co.reason}")
    else:
        console.print(f"[bold]compute-optimal[/]: [dim]{co.reason}[/]")

    hero = fit.hero
    if hero.available is not False and hero.params is not None:
        loss = hero.loss
        line = (
            f"[bold]hero[/] {_count(hero.params)} params x {_count(hero.tokens)} tokens "
            f"({hero.allocation}), C = {fmt_flops(hero.compute)} FLOPs: "
        )
        if loss is not None:
            from ladder.reports.fits.scoring import same_digits

            shown, lo, hi = same_digits(loss, hero.lo, hero.hi)  # as `forecast freeze` prints them
            line += (
                f"loss [bold]{shown}[/] (90% [{lo}, {hi}], ±{fmt_pct(hero.half_width_pct)}), "
                f"a {hero.kind or 'projection'}"
            )
        else:
            why = hero.loss_reason or fit.loss.reason or "no loss law"
            line += f"[yellow]no forecast[/] ({why})"
        console.print(line)
        ext = hero.extrapolation or {}
        if ext.get("params") is not None:
            law = fit.loss
            reach = (law.reach or {}).get("2%")
            tested = (law.reach or {}).get("tested")
            where = (
                f"  {_times(ext['params'])} the largest model fitted in parameters, "
                f"{_times(ext.get('tokens'))} in tokens, {_times(ext.get('compute_6nd'))} in compute (6ND); "
            )
            if not (law.calibration and law.calibration.n):
                console.print(where + "[yellow]no rollout forecast tested any distance[/]")
            else:
                reached = (
                    NO_REACH + " ("
                    if reach is None or reaches_nowhere(reach.params_x, reach.compute_x, reach.tokens_x)
                    else f"forecasts stayed within 2% up to {_times(reach.params_x)} params, "
                    f"{_times(reach.compute_x)} compute"
                    + (f", {_times(reach.tokens_x)} tokens" if reach.tokens_x is not None else "")
                    + " in the rollout ("
                )
                console.print(
                    where + reached + "tested up to "
                    f"{_times(tested and tested.params_x)} params, {_times(tested and tested.tokens_x)} tokens, "
                    f"{_times(tested and tested.compute_x)} compute)"
                    + (
                        f" [yellow](the hero is {beyond})[/]"
                        if (beyond := beyond_words(hero.beyond_tested, hero.beyond_reach))
                        else ""
                    )
                )
        console.print(
            f"  ladder cost {fmt_flops(hero.ladder_flops)} FLOPs = {_share_of_hero(hero.ladder_pct_of_hero)} "
            f"(exact counted training FLOPs spent: {LADDER_COST_COUNTS})"
        )
    _print_predictions(fit, console)
    _print_in_context(fit, console)
    _print_ablations(fit, console)
    _print_tasks(fit, console)

    r = fit.recommendation
    if r.available:
        t = Table(title="recommended hero", show_header=False, box=None, pad_edge=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column()
        t.add_column(style="dim")
        src = r.sources
        t.add_row(
            "shape",
            f"d_model {r.d_model}, n_layers {r.n_layers}, heads {r.n_heads}/{r.n_kv_heads} kv, "
            f"head_dim {r.head_dim}, ffn {r.ffn_dim}",
            src.get("shape", ""),
        )
        doubt = tied_uncertainty(written(fit.tied_vs_untied.hero))
        t.add_row("tied", str(r.tied).lower() + (f" [yellow]({doubt})[/]" if doubt else ""), src.get("tied", ""))
        t.add_row("aspect ratio", _num(r.aspect_ratio, 3), src.get("aspect_ratio", ""))
        t.add_row("params", f"{_count(r.params)} {r.param_convention} ({_count(r.params_total)} total)", "")
        t.add_row("tokens", f"{_count(r.tokens)} ({_num(r.tokens_per_param, 3)}/param)", src.get("tokens", ""))
        t.add_row(
            "batch", f"{_count(r.batch_tokens)} tokens{_counts(r.batch_tokens_ci90)}", src.get("batch_tokens", "")
        )
        t.add_row("peak LR", _num(r.lr, 3) + _ci(r.lr_ci90, 3), src.get("lr", ""))
        t.add_row(
            "schedule",
            f"{r.schedule.kind}, warmup {r.warmup_steps} of {r.steps} steps",
            src.get("warmup", ""),
        )
        li = r.loss_interval or [None, None]
        t.add_row("loss", _loss_ci(r.loss, li[0], li[1]), loss_source(fit, src.get("loss", "")))
        console.print(t)
    else:
        console.print(f"[bold]recommendation[/]: [dim]{r.reason}[/]")

    for e in fit.excluded:
        console.print(f"[dim]excluded {e.run} ({e.status}{': ' + e.reason if e.reason else ''})[/]")
    # the report's headline lists them: the terminal gave none ("a sweep run at another LR left out of the laws"
    # explained 45 rows fitted as 44 runs only in fit.json)
    for n in dict.fromkeys([*fit.notes, *r.notes]):
        console.print(f"note: {n}")
    for w in fit.warnings:
        console.print(f"[yellow]warning:[/] {w}")


def loss_source(fit: FitJson, source: str) -> str:
    """Where the hero's loss comes from, as fit.json's recommendation says it, unless that claims a weighting by
    rollout the fit never ran (no rollout forecast scored any form, issue 28): then how the forms were weighted
    in fact, from the loss law's own weights."""
    law = fit.loss
    if not source or "weighted by rollout" not in source or law.weighted_by_rollout():
        return source
    w = {k: x for k, x in (law.weights or {}).items() if x is not None}
    if not w:
        return "fit: the loss law's forms (no rollout forecasts to weight them by)"
    listed = ", ".join(f"{k} {x:.2f}" for k, x in sorted(w.items(), key=lambda kv: -kv[1]))
    how = "weighted equally" if max(w.values()) - min(w.values()) < 1e-9 else "weighted"
    return (
        f"fit: {len(w)} law form(s){of_variant(law.variant)} {how} ({listed}): no rollout forecasts to weight "
        "them by (too few sizes or budgets to backtest)"
    )


def _print_ablations(fit: FitJson, console: Console) -> None:
    """One line per study-level section: the hyperparameter laws, the tied and aspect calls, IsoFLOP."""
    hp = fit.hparams
    if not hp.available:
        console.print(f"[bold]hyperparameter laws[/]: [dim]{_of_runs(fit, hp.reason)}[/]")
    else:
        hh = hp.hero
        laws = ", ".join(x for x in (hh and hh.lr_law, hh and hh.batch_tokens_law) if x)
        if fit.hero.available is False:  # `fit --runs`: no hero to evaluate them at ("lr* at hero -" said nothing)
            where = (
                "LR* and B* at each --predict point are in the predictions table"
                if any(x.label != "hero" for x in fit.predictions)
                else "no hero to evaluate them at: give --predict PARAMS:TOKENS for LR* and B* there"
            )
            if not any(x is not None and x.law is not None for x in (hp.lr, hp.batch)):  # its rungs gave no law
                why = (hp.lr.reason if hp.lr is not None else None) or "no rung has a bracketed optimum"
                console.print(f"[bold]hyperparameter laws[/]: no law: [dim]{why}[/]")
            else:
                console.print(f"[bold]hyperparameter laws[/]: {laws or 'fitted'} ({where})")
        else:
            console.print(
                f"[bold]hyperparameter laws[/]: lr* at hero {_num(hh and hh.lr, 3)}{_ci(hh and hh.lr_ci90, 3)}, "
                f"batch* {_count(hh and hh.batch_tokens)}{_counts(hh and hh.batch_tokens_ci90)}"
                + (f" [dim]({laws})[/]" if laws else "")
            )
        for name, law in (("lr*", hp.lr), ("batch*", hp.batch)):
            line = _left_out(name, law)
            if line:
                console.print(line)
    tv = fit.tied_vs_untied
    if not tv.available:
        console.print(f"[bold]tied vs untied[/]: [dim]{_of_runs(fit, tv.reason)}[/]")
    else:
        msg = (tv.hero and tv.hero.message) or (tv.crossover and tv.crossover.message) or tv.reason or ""
        console.print(f"[bold]tied vs untied[/]: {msg}")
    dw = fit.depth_vs_width
    if not dw.available:
        console.print(f"[bold]depth vs width[/]: [dim]{_of_runs(fit, dw.reason)}[/]")
    else:
        hh = dw.hero
        if (hh is None or hh.aspect_ratio is None) and dw.reason:  # say why there is none, not "-"
            console.print(f"[bold]depth vs width[/]: [dim]{dw.reason}[/]")
        else:
            console.print(
                f"[bold]depth vs width[/]: best aspect at hero {_num(hh and hh.aspect_ratio, 3)}"
                f"{_ci(hh and hh.aspect_ratio_ci90, 3)}"
            )
    iso = fit.isoflop
    if not iso.available:
        console.print(f"[bold]isoflop[/]: [dim]{_of_runs(fit, iso.reason)}[/]")
    else:
        console.print(
            f"[bold]isoflop[/]: N_opt ~ C^{_num(iso.a, 3)}{_ci(iso.ci90 and iso.ci90.a, 3)} over {iso.n_budgets} budgets"
            + (f"\n  [dim]{iso.note}[/]" if iso.note else "")  # fit.json and the report said it, the terminal not
        )


def _left_out(name: str, law: Any) -> str | None:
    """One line naming the rungs a hyperparameter law left out (fit.json's ``excluded``: rung -> why, e.g. its
    optimum at the grid's edge) with the advice, or None when it left none out."""
    if law is None:
        return None
    excluded = (law.model_extra or {}).get("excluded")
    if not isinstance(excluded, dict) or not excluded or law.law is None:
        return None  # no law fitted: its own reason says why, not a list of every rung
    whys, advice = [], []
    for rung, why in excluded.items():
        text = str(why)
        if text.startswith(f"{rung}: "):
            text = text[len(rung) + 2 :]
        what, _, todo = text.partition(": ")
        whys.append(f"{rung} ({what})")
        if todo and todo not in advice:
            advice.append(todo)
    return (
        f"  [yellow]the {name} law leaves out {len(excluded)} rung(s)[/]: "
        + ", ".join(whys)
        + (f": {'; '.join(advice)}" if advice else "")
    )


def _print_predictions(fit: FitJson, console: Console) -> None:
    """The extra predictions: loss with its interval and, from the hyperparameter laws, LR* and B* with theirs."""
    preds = [x for x in fit.predictions if x.label != "hero"]
    if not preds:
        if not fit.meta.study and fit.loss.available is not False:  # `fit --runs` alone forecast nothing, silently
            console.print(
                "[bold]forecasts[/]: [dim]none asked: --predict PARAMS:TOKENS (e.g. 7e9:4e12) forecasts a run[/]"
            )
        return
    hp = any(x.lr is not None or x.batch_tokens is not None for x in preds)
    cols = ["prediction", "params", "tokens", "loss", "90%", "distance"]
    cols += ["LR*", "90%", "B* (tokens)", "90%"] if hp else []
    t = Table(*cols, box=None, pad_edge=False)
    for x in preds:
        row = [
            x.label,
            _count(x.params),
            _count(x.tokens),
            *(
                _loss_ci(x.loss, x.lo, x.hi).split(" ", 1)
                if x.loss is not None and x.lo is not None and x.hi is not None
                else [_num(x.loss), x.reason or "-"]
            ),
            _farthest(x) + beyond_mark(x.beyond_tested, x.beyond_reach),
        ]
        if hp:
            row += [
                _num(x.lr, 3),
                _ci(x.lr_ci90, 3).strip() or (_of_runs(fit, x.lr_reason) or "-"),  # as the sections say it
                _count(x.batch_tokens),
                _counts(x.batch_ci90).strip() or (_of_runs(fit, x.batch_reason) or "-"),
            ]
        t.add_row(*row)
    console.print(t)
    # issue 26: each forecast's distance in every axis and the published ladders' record there, then how far the
    # rollout tested and its error at its farthest (the table's distance is in the farthest axis alone)
    for x in preds:
        if x.loss is None:
            continue
        beyond = beyond_words(x.beyond_tested, x.beyond_reach)
        record = track_record.sentence(written(x.track_record))
        console.print(
            f"  {x.label}: {_times(x.params_x)} params, {_times(x.tokens_x)} tokens, {_times(x.compute_x)} compute "
            "(6ND)" + (f" [yellow]({beyond})[/]" if beyond else "") + (f"; track record: {record}" if record else "")
        )
    law = fit.loss
    first = preds[0]
    if not fit.meta.study and len(preds) > 1 and first.params and first.tokens and law.available is not False:
        # the target of a fit without a hero: its tokens/param weighs the forms, so the order of --predict matters
        console.print(
            f"  the law forms are weighted for the first point, {first.label} ({_num(first.tokens / first.params, 3)} "
            "tokens/param), the target: its tokens/param sets the forms' weights and the rollout's calibration, so "
            "the other points' forecasts and intervals move with it, at times by much; give the one you care about "
            "first"
        )
    tested = (law.reach or {}).get("tested")
    if not (law.calibration and law.calibration.n) or tested is None:
        if any(x.loss is not None for x in preds):
            console.print(f"  [yellow]{NOT_TESTED}[/]")
        return
    far = next((written(x.distance).get("rollout_error") for x in preds if isinstance(x.distance, Distance)), None)
    line = (
        f"  the rollout tested up to {_times(tested.params_x)} params, {_times(tested.tokens_x)} tokens, "
        f"{_times(tested.compute_x)} compute (6ND)"
    )
    if far and far.get("median_abs_err_pct") is not None:
        span = farthest_span(far)
        line += f"; its farthest forecasts{span} in their farthest axis erred by a median of {far['median_abs_err_pct']:.1f}%"
    console.print(line)


def _farthest(x) -> str:
    """A prediction's distance in its farthest axis (``57.6x compute``), as its reach is judged."""
    v, axis = farthest_axis(x.params_x, x.tokens_x, x.compute_x)
    return "-" if v is None else f"{_times(v)} {axis}"


def _main_variant(fit: FitJson) -> str | None:
    """With several variants: which one's law makes the forecasts, and why (fit.json's ``loss.variant_choice``)."""
    law = fit.loss
    if len(fit.loss_by_variant) < 2:
        return None
    what = (
        "the hero's forecast and the predictions" if fit.meta.study else "the predictions; --variant NAME for another"
    )
    return f"  main variant {law.variant} (its law makes {what}): {law.variant_choice}"


def _of_runs(fit: FitJson, reason: str | None) -> str | None:
    """A section's reason as the terminal says it: ``fit --runs`` with no study has runs, not a study ("this study
    has no LR sweep" read oddly under a CSV of someone else's runs)."""
    if fit.meta.study or not reason:
        return reason
    return re.sub(r"^this study has no ", "the runs have no ", reason)


def _variant_words(fit: FitJson) -> str:
    """The words "variant tied, " before a law's run count; nothing when the runs have no variant column (the law's
    variant is then "all": every run)."""
    v = fit.loss.variant
    return "" if v in (None, ALL_RUNS) and len(fit.loss_by_variant) < 2 else f"variant {v}, "


def _print_law(fit: FitJson, console: Console) -> None:
    law = fit.loss
    main = _main_variant(fit)
    if law.available is False:
        said = _variant_words(fit).removesuffix(", ") or "all runs"
        console.print(f"[bold]loss laws[/] ({said}): [yellow]not fitted[/] ({law.reason})")
        if main:
            console.print(main)
        return
    console.print(
        f"[bold]loss laws[/] ({_variant_words(fit)}{law.n_runs} runs, N = params "
        f"{fit.meta.param_convention or ''}; Huber on log loss, delta 1e-3)"
    )
    if main:
        console.print(main)
    for words in left_out_words(law.left_out, law.n_runs):
        console.print(f"  [yellow]{words}[/]")
    for key, f in (law.forms or {}).items():
        p, ci = f.params or {}, f.ci90 or {}
        rms = f", rollout {f.rollout.rms_pct:.2f}%" if f.rollout and f.rollout.rms_pct is not None else ""
        console.print(f"  [bold]{key}[/] {f.formula}  weight {f.weight or 0:.2f}{rms}")
        console.print("    " + "   ".join(f"{k} = {_num(v)}{_ci(ci.get(k), point=v)}" for k, v in p.items()))
    for key, why in (law.skipped or {}).items():
        console.print(f"  [dim]{key}: not fitted: {why}[/]")
    if law.selection:
        console.print(f"  [dim]{law.selection}[/]")
    cal = law.calibration
    if cal is not None and cal.coverage is not None:
        lean = law.lean
        ok_lean = lean is not None and lean.mean_err_pct is not None
        side = f"; mean error {lean.mean_err_pct:+.1f}%, {lean.n_high} of {lean.n} too high" if ok_lean else ""
        span = farthest_span(lean.model_dump()) if side else ""  # judged near the target's distance (2026-12 on)
        side += f"{span} beyond their runs" if span else ""
        console.print(f"  rollout: {coverage_words(cal)}; widening {format_multiple(cal.factor)}{side}")


def _weights(f: VariantLaw | None) -> str:
    w = {k: x for k, x in ((f and f.weights) or {}).items() if x is not None and x > 0.005}
    return ", ".join(f"{k} {x:.2f}" for k, x in sorted(w.items(), key=lambda kv: -kv[1])) or "-"


def _print_variants(fit: FitJson, console: Console) -> None:
    """Each other variant at the hero. With a tied-vs-untied call, its number first (the hero's forecast moved by
    the call's gap): the per-variant law, fitted on that variant's runs apart, is shown second and says so, so
    that the forecasts never contradict the call without a word."""
    from ladder.reports.fits.ablations.tied import paired_forecast

    primary = fit.loss.variant
    by = fit.loss_by_variant
    call = written(fit.tied_vs_untied.hero) if fit.tied_vs_untied.available else None
    own = by.get(primary)
    hero_t = {"loss": fit.hero.loss} if fit.hero.loss is not None else written(own and own.target) or {}
    t = own.target if own is not None and own.available else None
    if fit.hero.available is False and len(by) > 1 and t is not None and t.loss is not None:
        # no hero: the main variant's own number, beside which the others' read
        console.print(f"  variant {primary} (main): {_at_target(fit, t, _loss_ci(t.loss, t.lo, t.hi))}")
    for v, f in by.items():
        if v == primary:
            continue
        paired = paired_forecast(primary, hero_t, call, v)
        if paired is not None:
            console.print(
                f"  variant {v} at the hero: {_loss_ci(paired['loss'], paired.get('lo'), paired.get('hi'))} by the paired "
                f"tied-vs-untied comparison, the call's basis ({primary}'s {_num(paired['from_loss'])} x "
                f"e^{paired['log_factor']:+.4f}; the interval is the gap's)"
            )
        if not f.available:
            console.print(f"  variant {v}: [yellow]no law[/] ({f.reason})")
            continue
        t = f.target
        at = _at_target(fit, t, _loss_ci(t.loss, t.lo, t.hi)) if t is not None and t.loss is not None else ""
        if paired is None:
            console.print(f"  variant {v}: {at}")
            continue
        agree = (
            t is not None
            and t.loss is not None
            and ((t.loss - paired["from_loss"]) * (paired["loss"] - paired["from_loss"]) > 0)
        )
        # a disagreement only where the two 90% intervals do not overlap; else it merely leans the other way
        overlap = t is not None and _overlap([t.lo, t.hi], [paired.get("lo"), paired.get("hi")])
        console.print(
            f"  [dim]variant {v}'s own loss law alone (fitted on its runs apart, weights {_weights(f)}; {primary}'s: "
            f"{_weights(own)}): {at}"
            + (
                ""
                if agree
                else "; it leans the other way from the paired comparison, but their 90% intervals overlap: no "
                "disagreement shown; the paired comparison (rung by rung at matched compute) is what the call "
                "and the recommendation use"
                if overlap
                else "; it disagrees with the paired comparison (their 90% intervals do not overlap), which "
                "compares the variants rung by rung at matched compute and is what the call and the "
                "recommendation use"
            )
            + "[/]"
        )


def _at_target(fit: FitJson, t: Any, value: str) -> str:
    """A variant's own forecast and where it lies: at the hero, or, with no hero (``ladder fit --runs`` with no
    study), at the variant's own target, by its size."""
    if fit.hero.available is not False:
        return f"at the hero {value}"
    size = f" {_count(t.params)} x {_count(t.tokens)}" if t.params is not None and t.tokens is not None else ""
    return f"at its target{size} {value} (no hero: {(fit.hero.reason or 'no study').split(':')[0]})"


def _print_tasks(fit: FitJson, console: Console) -> None:
    """The hero's task forecasts (`ladder eval`'s), in the report's digits; one not fitted is among the warnings."""
    sec = fit.tasks
    if sec is None or not sec.available or not sec.tasks:
        return

    def ci(pair: Any, digits: int = 4, pred: Any = None) -> str:  # an accuracy's two, named as the report's table
        two = [f"[{fmt_loss(p[0], digits)}, {fmt_loss(p[1], digits)}]" for p in (pair, pred) if p and None not in p[:2]]
        return f" (90% {two[0]} curve, {two[1]} prediction)" if len(two) == 2 else f" (90% {two[0]})" if two else ""

    console.print("[bold]task forecasts[/] (lm-eval results of the runs, `ladder eval`):")
    for name, t in sec.tasks.items():
        h = t.hero
        if h is None or h.loss is None:
            continue
        line = f"  {name}: {t.loss_metric or 'task loss'} {fmt_loss(h.loss)}{ci(h.loss_interval)}"
        if h.acc is not None:
            line += (
                f", {t.acc_metric or 'accuracy'} {fmt_loss(h.acc, 3)}{ci(h.acc_interval, 3, h.acc_prediction_interval)}"
            )
        console.print(line + " at the hero", soft_wrap=True)


def _print_in_context(fit: FitJson, console: Console) -> None:
    """The loss split into in-context repeats and novel tokens: the copy ratio's trend and each kind's forecast."""
    sec = fit.in_context
    if not sec.available:
        console.print(f"[bold]in-context repeats[/]: [dim]{sec.reason}[/]")
        return
    tr, fc = sec.trend, sec.forecasts
    console.print(
        f"[bold]in-context repeats[/] ({100 * sec.repeat_share:.0f}% of eval targets): repeats/novel loss "
        # 3 significant digits as the report's in-context section (0.0555, not 0.056; the slope 0.0281, not 0.028)
        f"by its log-log trend {tr.ratio_at_smallest:.3g} -> {tr.ratio_at_largest:.3g} over {format_multiple(tr.compute_span)} compute "
        f"(6ND; slope {_slope(tr.slope, tr.ci90)})"
    )
    for i, point in enumerate([fc, *fc.predictions]):
        kinds = []
        for key, k in (("novel", point.novel), ("repeats", point.repeats), ("share-weighted", point.combined)):
            if k is not None and k.available:
                rms = k.rollout_rms_pct if i == 0 else None  # the rollout is the same for every point
                kinds.append(
                    f"{key} {_loss_ci(k.loss, k.lo, k.hi)}"
                    # two decimals, as the report's table of each kind's forecast (1.79%, never 1.8% there)
                    + (f" (rollout RMS {rms:.2f}%)" if rms is not None else "")
                )
        if kinds:
            console.print(f"  at {_count(point.params)} x {_count(point.tokens)}: " + "; ".join(kinds))
