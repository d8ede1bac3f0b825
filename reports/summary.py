"""A compact rich summary of a fit for the terminal (``ladder fit``).

``print_fit(result, console)`` takes a :class:`ladder.reports.fits.FitResult` or the dict of ``fit.json``
(``FitResult.to_dict()``), so a saved fit prints the same way.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ladder.model.config import format_count
from ladder.model.shape import LADDER_COST_COUNTS
from ladder.reports.fits.recommend import tied_uncertainty
from ladder.reports.fits.study.study_hero import BEYOND_REACH, BEYOND_TESTED
from ladder.reports.render.fmt import fmt_flops

__all__ = ["print_fit"]


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    try:
        return f"{float(v):.{digits}g}"
    except (TypeError, ValueError):
        return str(v)


def _count(v: Any) -> str:
    return "-" if v is None else format_count(float(v))


def _ci(pair: Any, digits: int = 3) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return ""
    return f" [{_num(pair[0], digits)}, {_num(pair[1], digits)}]"


def print_fit(result: Any, console: Console | None = None) -> None:
    """Print the law with its 90% intervals, the degenerate note, the backtest, the hero forecast with its
    interval and cost, the recommendation block and the warnings."""
    console = console or Console()
    d = result.to_dict() if hasattr(result, "to_dict") else result
    _print_law(d, console)
    _print_variants(d, console)

    co = d.get("compute_optimal") or {}
    if co.get("identifiable"):
        console.print(
            f"[bold]compute-optimal[/]: N* ~ C^{_num(co.get('a'), 3)}, D* ~ C^{_num(co.get('b'), 3)}"
            + (f" (isoflop: a = {_num(co['isoflop']['a'], 3)})" if co.get("isoflop") else "")
        )
        if co.get("assumption"):
            console.print(f"  [yellow]assumed[/]: {co['assumption']}")
        if co.get("determined") is False:
            console.print(f"  [yellow]not advice[/]: {co.get('reason')}")
    else:
        console.print(f"[bold]compute-optimal[/]: [dim]{co.get('reason')}[/]")

    hero = d.get("hero") or {}
    if hero.get("available", True) and hero.get("params") is not None:
        loss = hero.get("loss")
        line = (
            f"[bold]hero[/] {_count(hero['params'])} params x {_count(hero['tokens'])} tokens "
            f"({hero['allocation']}), C = {fmt_flops(hero['compute'])} FLOPs: "
        )
        if loss is not None:
            line += (
                f"loss [bold]{loss:.4g}[/] (90% [{_num(hero['lo'])}, {_num(hero['hi'])}], "
                f"±{_num(hero.get('half_width_pct'), 2)}%), a {hero.get('kind', 'projection')}"
            )
        else:
            why = hero.get("loss_reason") or d["loss"].get("reason") or "no loss law"
            line += f"[yellow]no forecast[/] ({why})"
        console.print(line)
        ext = hero.get("extrapolation") or {}
        if ext.get("params") is not None:
            law = d.get("loss") or {}
            reach = (law.get("reach") or {}).get("2%") or {}
            tested = (law.get("reach") or {}).get("tested") or {}
            where = (
                f"  {_num(ext['params'], 3)}x the ladder's largest model in parameters, "
                f"{_num(ext.get('tokens'), 3)}x in tokens, {_num(ext.get('compute_6nd'), 3)}x in compute; "
            )
            if not (law.get("calibration") or {}).get("n"):
                console.print(where + "[yellow]no rollout forecast tested any distance[/]")
            else:
                console.print(
                    where + f"forecasts stayed within 2% up to {_num(reach.get('params_x'), 3)}x params, "
                    f"{_num(reach.get('compute_x'), 3)}x compute in the rollout (tested up to "
                    f"{_num(tested.get('compute_x'), 3)}x compute)"
                    + (
                        f" [yellow](the hero is {BEYOND_TESTED})[/]"
                        if hero.get("beyond_tested")
                        else f" [yellow](the hero is {BEYOND_REACH})[/]"
                        if hero.get("beyond_reach")
                        else ""
                    )
                )
        console.print(
            f"  ladder cost {fmt_flops(hero['ladder_flops'])} FLOPs = {hero['ladder_pct_of_hero']:.3g}% of the hero "
            f"(exact counted training FLOPs spent: {LADDER_COST_COUNTS})"
        )
    _print_predictions(d, console)
    _print_in_context(d, console)

    for key, title in (
        ("hparams", "hyperparameter laws"),
        ("tied_vs_untied", "tied vs untied"),
        ("depth_vs_width", "depth vs width"),
        ("isoflop", "isoflop"),
    ):
        sec = d.get(key) or {}
        if not sec.get("available"):
            console.print(f"[bold]{title}[/]: [dim]{sec.get('reason')}[/]")
        elif key == "hparams":
            hh = sec.get("hero") or {}
            laws = ", ".join(x for x in (hh.get("lr_law"), hh.get("batch_tokens_law")) if x)
            console.print(
                f"[bold]{title}[/]: lr* at hero {_num(hh.get('lr'), 3)}{_ci(hh.get('lr_ci90'))}, "
                f"batch* {_num(hh.get('batch_tokens'), 3)}{_ci(hh.get('batch_tokens_ci90'))}"
                + (f" [dim]({laws})[/]" if laws else "")
            )
        elif key == "tied_vs_untied":
            hh = sec.get("hero") or {}
            msg = hh.get("message") or (sec.get("crossover") or {}).get("message") or sec.get("reason") or ""
            console.print(f"[bold]{title}[/]: {msg}")
        elif key == "depth_vs_width":
            hh = sec.get("hero") or {}
            console.print(
                f"[bold]{title}[/]: best aspect at hero {_num(hh.get('aspect_ratio'), 3)}{_ci(hh.get('aspect_ratio_ci90'))}"
            )
        else:
            console.print(f"[bold]{title}[/]: N_opt ~ C^{_num(sec.get('a'), 3)} over {sec.get('n_budgets')} budgets")

    r = d.get("recommendation") or {}
    if r.get("available"):
        t = Table(title="recommended hero", show_header=False, box=None, pad_edge=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column()
        t.add_column(style="dim")
        src = r.get("sources", {})
        t.add_row(
            "shape",
            f"d_model {r['d_model']}, n_layers {r['n_layers']}, heads {r['n_heads']}/{r['n_kv_heads']} kv, "
            f"head_dim {r['head_dim']}, ffn {r['ffn_dim']}",
            src.get("shape", ""),
        )
        doubt = tied_uncertainty((d.get("tied_vs_untied") or {}).get("hero"))
        t.add_row("tied", str(r["tied"]).lower() + (f" [yellow]({doubt})[/]" if doubt else ""), src.get("tied", ""))
        t.add_row("aspect ratio", _num(r["aspect_ratio"], 3), src.get("aspect_ratio", ""))
        t.add_row("params", f"{_count(r['params'])} {r['param_convention']} ({_count(r['params_total'])} total)", "")
        t.add_row("tokens", f"{_count(r['tokens'])} ({_num(r['tokens_per_param'], 3)}/param)", src.get("tokens", ""))
        t.add_row("batch", f"{r['batch_tokens']:,} tokens", src.get("batch_tokens", ""))
        t.add_row("peak LR", _num(r["lr"], 3) + _ci(r.get("lr_ci90")), src.get("lr", ""))
        t.add_row(
            "schedule",
            f"{r['schedule'].get('kind')}, warmup {r['warmup_steps']} of {r['steps']} steps",
            src.get("warmup", ""),
        )
        li = r.get("loss_interval") or [None, None]
        t.add_row("loss", f"{_num(r.get('loss'))}{_ci(li)}", src.get("loss", ""))
        console.print(t)
    else:
        console.print(f"[bold]recommendation[/]: [dim]{r.get('reason')}[/]")

    for e in d.get("excluded", []):
        console.print(f"[dim]excluded {e['run']} ({e['status']}{': ' + e['reason'] if e.get('reason') else ''})[/]")
    for w in d.get("warnings", []):
        console.print(f"[yellow]warning:[/] {w}")


def _print_predictions(d: dict, console: Console) -> None:
    """The extra predictions: loss with its interval and, from the hyperparameter laws, LR* and B* with theirs."""
    preds = [x for x in d.get("predictions", []) if x.get("label") != "hero"]
    if not preds:
        return
    hp = any(x.get("lr") is not None or x.get("batch_tokens") is not None for x in preds)
    cols = ["prediction", "params", "tokens", "loss", "90%", "distance"]
    cols += ["LR*", "90%", "B* (tokens)", "90%"] if hp else []
    t = Table(*cols, box=None, pad_edge=False)
    for x in preds:
        row = [
            x["label"],
            _count(x["params"]),
            _count(x["tokens"]),
            _num(x.get("loss")),
            _ci([x.get("lo"), x.get("hi")]).strip() or (x.get("reason") or "-"),
            f"{_num(x.get('params_x'), 3)}x" + (" (beyond reach)" if x.get("beyond_reach") else ""),
        ]
        if hp:
            row += [
                _num(x.get("lr"), 3),
                _ci(x.get("lr_ci90")).strip() or (x.get("lr_reason") or "-"),
                _count(x.get("batch_tokens")),
                _ci(x.get("batch_ci90")).strip() or (x.get("batch_reason") or "-"),
            ]
        t.add_row(*row)
    console.print(t)


def _print_law(d: dict, console: Console) -> None:
    meta = d.get("meta", {})
    law = d["loss"]
    if law.get("available") is False:
        console.print(f"[bold]loss laws[/] (variant {law.get('variant')}): [yellow]not fitted[/] ({law.get('reason')})")
        return
    console.print(
        f"[bold]loss laws[/] (variant {law.get('variant')}, {law.get('n_runs')} runs, N = params "
        f"{meta.get('param_convention', '')}; Huber on log loss, delta 1e-3)"
    )
    for key, f in (law.get("forms") or {}).items():
        p, ci = f.get("params") or {}, f.get("ci90") or {}
        score = f.get("rollout") or {}
        rms = f", rollout {score['rms_pct']:.2f}%" if score.get("rms_pct") is not None else ""
        console.print(f"  [bold]{key}[/] {f.get('formula')}  weight {f.get('weight', 0):.2f}{rms}")
        console.print("    " + "   ".join(f"{k} = {_num(v)}{_ci(ci.get(k))}" for k, v in p.items()))
    for key, why in (law.get("skipped") or {}).items():
        console.print(f"  [dim]{key}: not fitted ({why})[/]")
    if law.get("selection"):
        console.print(f"  [dim]{law['selection']}[/]")
    cal = law.get("calibration") or {}
    if cal.get("coverage") is not None:
        lean = law.get("lean") or {}
        side = (
            f"; mean error {lean['mean_err_pct']:+.1f}%, {lean['n_high']} of {lean['n']} too high"
            if lean.get("mean_err_pct") is not None
            else ""
        )
        console.print(
            f"  rollout: {cal.get('n')} weighted forecasts, {100 * cal['coverage']:.0f}% inside their 90% "
            f"interval; widening {cal.get('factor', 1):.3g}x{side}"
        )


def _weights(f: dict) -> str:
    w = {k: x for k, x in (f.get("weights") or {}).items() if isinstance(x, (int, float)) and x > 0.005}
    return ", ".join(f"{k} {x:.2f}" for k, x in sorted(w.items(), key=lambda kv: -kv[1])) or "-"


def _print_variants(d: dict, console: Console) -> None:
    """Each other variant at the hero. With a tied-vs-untied call, its number first (the hero's forecast moved by
    the call's gap): the per-variant law, fitted on that variant's runs apart, is shown second and says so, so
    that the forecasts never contradict the call without a word."""
    from ladder.reports.fits.ablations.tied import paired_forecast

    primary = d["loss"].get("variant")
    by = d.get("loss_by_variant", {}) or {}
    call = (
        ((d.get("tied_vs_untied") or {}).get("hero"))
        if (d.get("tied_vs_untied") or {}).get("available", True)
        else None
    )
    own_primary = (by.get(primary) or {}).get("target") or {}
    hero_t = (
        {"loss": (d.get("hero") or {}).get("loss")} if (d.get("hero") or {}).get("loss") is not None else own_primary
    )
    for v, f in by.items():
        if v == primary:
            continue
        paired = paired_forecast(primary, hero_t, call, v)
        if paired is not None:
            console.print(
                f"  variant {v} at the hero: {_num(paired['loss'])}{_ci([paired['lo'], paired['hi']])} by the paired "
                f"tied-vs-untied comparison, the call's basis ({primary}'s {_num(paired['from_loss'])} x "
                f"e^{paired['gap']:+.4f}; the interval is the gap's)"
            )
        if not f.get("available"):
            console.print(f"  variant {v}: [yellow]no law[/] ({f.get('reason')})")
            continue
        t = f.get("target") or {}
        at = f"at the hero {_num(t.get('loss'))}{_ci([t.get('lo'), t.get('hi')])}" if t.get("loss") is not None else ""
        if paired is None:
            console.print(f"  variant {v}: {at}")
            continue
        agree = (
            t.get("loss") is not None and (t["loss"] - paired["from_loss"]) * (paired["loss"] - paired["from_loss"]) > 0
        )
        console.print(
            f"  [dim]variant {v}'s own loss law alone (fitted on its runs apart, weights {_weights(f)}; {primary}'s: "
            f"{_weights(by.get(primary) or {})}): {at}"
            + (
                ""
                if agree
                else "; it disagrees with the paired comparison, which compares the variants rung by "
                "rung at matched compute and is what the call and the recommendation use"
            )
            + "[/]"
        )


def _print_in_context(d: dict, console: Console) -> None:
    """The loss split into in-context repeats and novel tokens: the copy ratio's trend and each kind's forecast."""
    sec = d.get("in_context") or {}
    if not sec.get("available"):
        console.print(f"[bold]in-context repeats[/]: [dim]{sec.get('reason')}[/]")
        return
    tr, fc = sec["trend"], sec["forecasts"]
    console.print(
        f"[bold]in-context repeats[/] ({100 * sec['repeat_share']:.0f}% of eval targets): repeats/novel loss "
        f"{tr['ratio_at_smallest']:.3f} -> {tr['ratio_at_largest']:.3f} over {tr['compute_span']:.3g}x compute "
        f"(slope {tr['slope']:+.3f}{_ci(tr['ci90'])})"
    )
    for i, point in enumerate([fc, *(fc.get("predictions") or [])]):
        kinds = []
        for key in ("novel", "repeats", "combined"):
            k = point.get(key) or {}
            if k.get("available"):
                rms = k.get("rollout_rms_pct") if i == 0 else None  # the rollout is the same for every point
                kinds.append(
                    f"{key} {k['loss']:.4g} [{k['lo']:.4g}, {k['hi']:.4g}]"
                    + (f" (rollout RMS {rms:.2g}%)" if rms is not None else "")
                )
        if kinds:
            console.print(f"  at {_count(point['params'])} x {_count(point['tokens'])}: " + "; ".join(kinds))
