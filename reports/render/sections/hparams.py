"""Learning rate and batch size: the sweeps per rung, the optima's power laws (in N and D, or compute) and their
values at the hero, every number as fit.json holds it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ladder.reports.render.blocks import KV, Bullets, Para, Section, Table
from ladder.reports.render.figures.sweeps import draw_trends
from ladder.reports.render.fmt import (
    ABSENT,
    cap,
    fmt_ci,
    fmt_count,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_lr,
    num,
    status_cell,
)
from ladder.reports.render.study import g, mapping, maps, seq

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def _at_hero(h: Mapping, key: str, f: Callable[[Any], str], unit: str = "") -> str:
    if h.get(key) is None:
        return ABSENT
    return f"{f(h.get(key))}{unit} (90%: {fmt_ci(h.get(f'{key}_ci90'), f)})"


def _law_items(law: Any, name: str) -> list[tuple[str, str]]:
    """The law's formula with its constants and their 90% intervals, or why there is none; its notes."""
    law = mapping(law)
    fitted = mapping(law.get("law"))
    if not fitted:
        return [(f"{name} law", str(law.get("reason") or ABSENT))]
    p, ci = mapping(fitted.get("params")), mapping(fitted.get("ci90"))
    consts = "; ".join(f"{k} = {fmt_g(v, 4)} (90%: {fmt_ci(ci.get(k))})" for k, v in p.items())
    out = [(f"{name} law", f"{law.get('formula')}: {consts}; {fmt_int(fitted.get('n'))} rungs")]
    ro = mapping(law.get("rollout"))
    if ro:
        out.append((f"{name} law backtest", backtest_text(ro)))
    out += [(f"{name} law note", str(n)) for n in seq(law.get("notes"))]
    return out


def backtest_text(ro: Mapping) -> str:
    """The rollout of an optimum's law in one line, as fit.json holds it."""
    reach = ro.get("reach")
    return (
        f"fitted on the smaller rungs, {fmt_int(ro.get('n'))} forecasts of larger rungs' optima: RMS error "
        f"{fmt_g(ro.get('rms_pct'), 2)}%, max {fmt_g(ro.get('max_abs_pct'), 2)}%, "
        f"{fmt_g(100 * num(ro.get('coverage')), 3)}% inside their 90% intervals; reach "
        + (f"{fmt_g(reach)}× in compute" if reach is not None else "none (the nearest forecast missed)")
        + (
            f" (within 10% up to {fmt_g(ro.get('reach_within_10pct'))}×)"
            if ro.get("reach_within_10pct") is not None
            else ""
        )
    )


def hparams(ctx: Builder) -> Section:
    s = Section("hparams", "Learning rate and batch size")
    hp, why = ctx.entry("hparams")
    if why:
        return s.missing(f"this study has no LR sweep ({why})" if "LR sweep" not in why else why)
    scales = maps(hp.get("scales"))
    if not hp.get("has_lr_sweep"):
        reason = g(hp, "lr", "reason") or "no rung has 3 or more learning rates"
        s.missing(reason if reason.startswith("this study") else f"this study has no LR sweep ({reason})")
    else:
        s.add(
            *ctx.small_multiples(
                "fig-lr-sweeps",
                "Learning-rate sweeps per rung",
                "Final loss against peak learning rate at each rung (filled: inside the fit window), the fitted "
                "parabola in log LR, its optimum (dashed) and the optimum's 90% interval (shaded).",
                [sc for sc in scales if sc.get("points")],
                "lr",
            )
        )
    if hp.get("has_batch_sweep"):
        s.add(
            *ctx.small_multiples(
                "fig-batch-sweeps",
                "Batch-size sweeps per rung",
                "Final loss against batch size at each rung and the fitted profile (the LR re-tuned at every batch), "
                "its optimum and 90% interval.",
                [sc for sc in scales if sc.get("batch")],
                "batch",
            )
        )
    elif hp.get("has_lr_sweep"):
        s.add(Para("this study has no batch sweep (no rung has 3 or more batch sizes)", "missing"))
    panels = []
    if hp.get("has_lr_sweep"):
        panels.append((hp.get("lr"), "optimal peak learning rate", "LR* vs compute"))
    if hp.get("has_batch_sweep"):
        panels.append((hp.get("batch"), "optimal batch size (tokens)", "B* vs compute"))
    if panels:
        s.add(
            ctx.figure(
                "fig-hparam-laws",
                "Hyperparameter laws",
                "Optimum per rung (90% interval) against compute, and its power law with the 90% band along the hero's "
                "tokens/param, extrapolated (dashed) to the hero (star: the law's value and 90% interval there); "
                "for a law in N and D, crosses mark the law at each rung's own (N, D).",
                3.2,
                lambda fig: draw_trends(fig, panels),
            )
        )
    if scales:
        rows = []
        for sc in scales:
            lr, b = mapping(sc.get("lr")), mapping(sc.get("batch"))
            rows.append(
                [
                    str(sc.get("scale")),
                    fmt_flops(sc.get("flops")),
                    fmt_count(sc.get("params")),
                    fmt_int(sc.get("n_runs")),
                    fmt_lr(lr.get("opt")),
                    fmt_ci(lr.get("ci90"), fmt_lr),
                    status_cell(lr.get("status") or ("skipped" if sc.get("skipped") else "")),
                    fmt_loss(lr.get("penalty_2x")),
                    fmt_count(b.get("opt")) if b else ABSENT,
                    fmt_ci(b.get("ci90"), fmt_count) if b else ABSENT,
                ]
            )
        s.add(
            Table(
                ["Rung", "Compute", "Params", "Runs", "LR*", "90%", "Status", "Cost of 2× LR", "B*", "90%"],
                rows,
                "lrrrrrlrrr",
                title="Optimum per rung (cost: loss increase when the LR is off by 2×)",
            )
        )
    h = mapping(hp.get("hero"))
    if hp.get("has_lr_sweep"):
        items = [("Learning rate at the hero", _at_hero(h, "lr", fmt_lr))]
        items += _law_items(hp.get("lr"), "LR*")
        if hp.get("has_batch_sweep"):
            items.append(("Batch size at the hero", _at_hero(h, "batch_tokens", fmt_count, " tokens")))
            items += _law_items(hp.get("batch"), "B*")
        if h.get("lr_penalty_2x") is not None:
            items.append(
                (
                    "Cost of a 2× LR error at the hero",
                    f"{fmt_loss(h.get('lr_penalty_2x'))} nats/token "
                    f"(90%: {fmt_ci(h.get('lr_penalty_2x_ci90'), fmt_loss)})",
                )
            )
        if h.get("batch_penalty_2x") is not None:
            items.append(
                (
                    "Cost of a 2× batch error at the hero",
                    f"{fmt_loss(h.get('batch_penalty_2x'))} nats/token "
                    f"(90%: {fmt_ci(h.get('batch_penalty_2x_ci90'), fmt_loss)})",
                )
            )
        s.add(KV(items, "At the hero"))
    notes = [str(n) for n in seq(hp.get("notes"))]
    if notes:
        s.add(Bullets(cap(notes), "Notes"))
    if hp.get("method"):
        s.add(Para(f"Method: {hp['method']}.", "note"))
    return s
