"""The ablations: tied vs untied embeddings, and depth vs width."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.ablations import draw_tie
from ladder.reports.render.figures.sweeps import draw_trends
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_ci,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    ok,
    status_cell,
)
from ladder.reports.render.study import g, mapping, maps

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def tied(ctx: Builder) -> Section:
    s = Section("tied", "Tied vs untied embeddings")
    tie, why = ctx.entry("tied_vs_untied")
    if why:
        return s.missing(f"this study has no tied-vs-untied ablation ({why})")
    s.add(ctx.figure(
        "fig-tied", "Tied vs untied embeddings across scale",
        "Left: the best loss of each variant per rung, moved to matched compute, with each variant's L(C) law. "
        "Right: the difference untied − tied (> 0: tying wins) with its fitted trend, extrapolated to the hero.",
        3.5, lambda fig: draw_tie(fig, tie, ctx.styles, "tied", "untied")))
    rows = []
    for r in maps(tie.get("scales")):
        if r.get("skipped"):
            rows.append([str(r.get("scale")), fmt_flops(r.get("flops")), ABSENT, ABSENT, ABSENT, ABSENT,
                         clip(r.get("skipped"), 120)])
            continue
        se = r.get("diff_se")
        rows.append([str(r.get("scale")), fmt_flops(r.get("flops")), fmt_loss(r.get("loss_tied")),
                     fmt_loss(r.get("loss_untied")),
                     fmt_loss(r.get("diff")) + (f" ± {fmt_loss(se)}" if ok(se) else ""),
                     fmt_g(r.get("compute_multiplier")), str(r.get("winner") or "")])
    s.add(Table(["Rung", "Compute", "Tied", "Untied", "Untied − tied", "Compute ×", "Winner"], rows, "lrrrrrl",
                title="Per rung (losses at matched compute; compute ×: the untied compute needed to match tied, "
                      "over C)"))
    cross = mapping(tie.get("crossover"))
    h = mapping(tie.get("hero"))
    items = []
    if cross.get("message"):
        items.append(("Crossover", f"{cross['message']}"
                      + (f" (90%: {fmt_ci(cross.get('ci90'), fmt_flops)} FLOPs)" if cross.get("ci90") else "")))
    if h:
        items.append(("At the hero", f"untied − tied = {fmt_loss(h.get('diff'))} "
                                     f"(90%: {fmt_ci(h.get('diff_ci90'), fmt_loss)}); "
                                     f"{h.get('winner') or '?'} wins"
                      + ("" if h.get("winner_certain") else " (not significant)")))
        if h.get("compute_multiplier") is not None:
            items.append(("Effective compute", f"untied needs {fmt_g(h.get('compute_multiplier'))}× the compute "
                                               f"(90%: {fmt_ci(h.get('compute_multiplier_ci90'))})"))
    elif tie.get("reason"):
        items.append(("Trend", str(tie["reason"])))
    if items:
        s.add(KV(items, "Along the ladder"))
    if tie.get("method"):
        s.add(Para(f"Method: {tie['method']}.", "note"))
    return s


def depth(ctx: Builder) -> Section:
    s = Section("depth", "Depth vs width")
    dw, why = ctx.entry("depth_vs_width")
    scales = maps(dw.get("scales")) if not why else []
    if why or not any(sc.get("fit") for sc in scales):
        reason = why or g(dw, "aspect", "reason") or "no rung has 3 or more aspect ratios"
        return s.missing(reason if str(reason).startswith("this study") else
                         f"this study has no depth-vs-width sweep ({reason})")
    s.add(*ctx.small_multiples(
        "fig-depth", "Loss against aspect ratio per rung",
        "Final loss (moved to the rung's compute) against d_model / n_layers at equal parameter count, the fitted "
        "parabola in log aspect ratio and its optimum with the 90% interval.",
        [sc for sc in scales if sc.get("points")], "aspect"))
    if (mapping(dw.get("aspect"))).get("law") or (mapping(dw.get("aspect"))).get("points"):
        s.add(ctx.figure(
            "fig-depth-law", "Best aspect ratio against compute",
            "The best aspect ratio per rung and its power law in compute, extrapolated to the hero.", 3.0,
            lambda fig: draw_trends(fig, [(dw.get("aspect"), "best aspect ratio (d_model / n_layers)",
                                             "aspect* vs compute"),
                                            (dw.get("penalty"), "loss cost of a 2× wrong aspect",
                                             "cost vs compute")])))
    rows = []
    for sc in scales:
        f = mapping(sc.get("fit"))
        rows.append([str(sc.get("scale")), fmt_flops(sc.get("flops")), fmt_int(sc.get("n_runs")),
                     fmt_g(f.get("opt")), fmt_ci(f.get("ci90")), status_cell(f.get("status") or "skipped"),
                     fmt_loss(f.get("penalty_2x")), clip(sc.get("skipped") or f.get("message") or "", 140)])
    s.add(Table(["Rung", "Compute", "Runs", "Best aspect", "90%", "Status", "Cost of 2×", "Note"], rows, "lrrrrlrl",
                title="Best aspect ratio per rung"))
    h = mapping(dw.get("hero"))
    if h.get("aspect_ratio") is not None:
        s.add(KV([("Aspect ratio at the hero",
                   f"{fmt_g(h.get('aspect_ratio'))} (90%: {fmt_ci(h.get('aspect_ratio_ci90'))})"),
                  ("Cost of a 2× wrong aspect at the hero", f"{fmt_loss(h.get('penalty_2x'))} nats/token")],
                 "At the hero"))
    elif g(dw, "aspect", "reason"):
        s.add(Para(f"No aspect-ratio law: {g(dw, 'aspect', 'reason')}", "note"))
    return s
