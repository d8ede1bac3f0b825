"""Learning rate and batch size: the sweeps per rung, the optimum's power law in compute and its value at the hero."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    status_cell,
)
from ladder.reports.render.study import g, mapping, maps, seq

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


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
        s.add(*ctx.small_multiples(
            "fig-lr-sweeps", "Learning-rate sweeps per rung",
            "Final loss against peak learning rate at each rung (filled: inside the fit window), the fitted "
            "parabola in log LR, its optimum (dashed) and the optimum's 90% interval (shaded).",
            [sc for sc in scales if sc.get("points")], "lr"))
    if hp.get("has_batch_sweep"):
        s.add(*ctx.small_multiples(
            "fig-batch-sweeps", "Batch-size sweeps per rung",
            "Final loss against batch size at each rung and the fitted profile (the LR re-tuned at every batch), "
            "its optimum and 90% interval.", [sc for sc in scales if sc.get("batch")], "batch"))
    elif hp.get("has_lr_sweep"):
        s.add(Para("this study has no batch sweep (no rung has 3 or more batch sizes)", "missing"))
    panels = []
    if hp.get("has_lr_sweep"):
        panels.append((hp.get("lr"), "optimal peak learning rate", "LR* vs compute"))
    if hp.get("has_batch_sweep"):
        panels.append((hp.get("batch"), "optimal batch size (tokens)", "B* vs compute"))
    if panels:
        s.add(ctx.figure(
            "fig-hparam-laws", "Hyperparameter laws",
            "Optimum per rung (90% interval) and its power law in compute, extrapolated (dashed) to the hero's "
            "compute (star: the law's value and 90% interval there).", 3.2,
            lambda fig: draw_trends(fig, panels)))
    if scales:
        rows = []
        for sc in scales:
            lr, b = mapping(sc.get("lr")), mapping(sc.get("batch"))
            rows.append([str(sc.get("scale")), fmt_flops(sc.get("flops")), fmt_count(sc.get("params")),
                         fmt_int(sc.get("n_runs")), fmt_lr(lr.get("opt")), fmt_ci(lr.get("ci90"), fmt_lr),
                         status_cell(lr.get("status") or ("skipped" if sc.get("skipped") else "")),
                         fmt_loss(lr.get("penalty_2x")), fmt_count(b.get("opt")) if b else ABSENT,
                         fmt_ci(b.get("ci90"), fmt_count) if b else ABSENT])
        s.add(Table(["Rung", "Compute", "Params", "Runs", "LR*", "90%", "Status", "Cost of 2× LR", "B*", "90%"],
                    rows, "lrrrrrlrrr", title="Optimum per rung (cost: loss increase when the LR is off by 2×)"))
    h = mapping(hp.get("hero"))
    if hp.get("has_lr_sweep"):
        items = [("Learning rate at the hero", f"{fmt_lr(h.get('lr'))} (90%: {fmt_ci(h.get('lr_ci90'), fmt_lr)})")]
        law = mapping(g(hp, "lr", "law"))
        if law:
            items.append(("LR*(C)", f"{fmt_g(law.get('k'))} × C^{fmt_g(law.get('a'), 4)} "
                                    f"(exponent 90%: {fmt_ci(g(law, 'ci90', 'a'))})"))
        elif g(hp, "lr", "reason"):
            items.append(("LR*(C)", str(g(hp, "lr", "reason"))))
        if h.get("batch_tokens") is not None:
            items.append(("Batch size at the hero", f"{fmt_count(h.get('batch_tokens'))} tokens "
                                                    f"(90%: {fmt_ci(h.get('batch_tokens_ci90'), fmt_count)})"))
        if h.get("lr_penalty_2x") is not None:
            items.append(("Cost of a 2× LR error at the hero", f"{fmt_loss(h.get('lr_penalty_2x'))} nats/token"))
        s.add(KV(items, "At the hero"))
    notes = [str(n) for n in seq(hp.get("notes"))]
    if notes:
        s.add(Bullets(cap(notes), "Notes"))
    if hp.get("method"):
        s.add(Para(f"Method: {hp['method']}.", "note"))
    return s
