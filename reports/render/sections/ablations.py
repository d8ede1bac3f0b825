"""The ablations: tied vs untied embeddings, and depth vs width. Every number shown is fit.json's, formatted
by the helpers below (``fmt_gap``, ``fmt_mult``), so that the report and fit.json say the same thing."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ladder.reports.render.blocks import KV, Para, Section, Table
from ladder.reports.render.figures.ablations import (
    draw_aspect_trend,
    draw_aspects,
    draw_tie,
)
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_ci,
    fmt_flops,
    fmt_g,
    fmt_int,
    fmt_loss,
    num,
    ok,
    status_cell,
)
from ladder.reports.render.study import mapping, maps

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder

Z90 = 1.6448536269514722
PER_FIGURE = 9
CROSSING = ("within_range", "beyond_range", "possible_beyond")  # statuses with a crossing compute


def fmt_gap(v: Any) -> str:
    x = num(v)
    return f"{x:+.4f}" if math.isfinite(x) else ABSENT


def fmt_p(v: Any) -> str:
    x = num(v)
    return f"{x:.2f}" if math.isfinite(x) else ABSENT


def fmt_mult(v: Any) -> str:
    x = num(v)
    return f"{x:.3g}×" if math.isfinite(x) else ABSENT


def _forms_table(trend: Mapping, quantity: str) -> Table | None:
    forms = mapping(trend.get("forms"))
    if not forms:
        return None
    rows = []
    for key, f in forms.items():
        f = mapping(f)
        ro = mapping(f.get("rollout"))
        rows.append(
            [
                str(f.get("title") or key),
                str(f.get("formula") or ""),
                fmt_g(f.get("weight")),
                fmt_g(ro.get("rms")) if ro else "no forecasts",
                fmt_int(ro.get("n")) if ro else "0",
            ]
        )
    cal = mapping(trend.get("calibration"))
    reach = mapping(trend.get("reach"))
    title = (
        f"Trend forms of {quantity}, weighted by rollout error (fit on the smaller rungs, forecast the larger); "
        f"calibration: coverage {fmt_g(cal.get('coverage'))}, factor {fmt_g(cal.get('factor'))}; reach "
        f"{fmt_g(reach.get('compute_x'))}× in compute (tested to {fmt_g(reach.get('tested_compute_x'))}×)"
    )
    return Table(["Form", "Formula", "Weight", "Rollout RMS", "Forecasts"], rows, "llrrr", title=title)


def tied(ctx: Builder) -> Section:
    s = Section("tied", "Tied vs untied embeddings")
    tie, why = ctx.entry("tied_vs_untied")
    if why:
        return s.missing(f"this study has no tied-vs-untied ablation ({why})")
    h = mapping(tie.get("hero"))
    if h.get("message"):
        s.add(Para(f"The call: {h['message']}.", "p"))
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
    for r in maps(tie.get("scales")):
        if r.get("skipped"):
            rows.append(
                [
                    str(r.get("scale")),
                    fmt_flops(r.get("flops")),
                    ABSENT,
                    ABSENT,
                    ABSENT,
                    ABSENT,
                    ABSENT,
                    clip(r.get("skipped"), 120),
                ]
            )
            continue
        se = r.get("gap_se")
        noise = f" ± {Z90 * num(se):.4f}" if ok(se) else ""
        beyond = {True: "yes", False: "no"}.get(r.get("beyond_noise"), ABSENT)
        rows.append(
            [
                str(r.get("scale")),
                fmt_flops(r.get("flops")),
                fmt_loss(r.get("loss_tied")),
                fmt_loss(r.get("loss_untied")),
                fmt_gap(r.get("gap")) + noise,
                beyond,
                fmt_mult(r.get("compute_multiplier")),
                str(r.get("winner") or ""),
            ]
        )
    noise = mapping(tie.get("noise"))
    s.add(
        Table(
            ["Rung", "Compute", "Tied", "Untied", "Gap (90% noise)", "Beyond noise", "Compute ×", "Winner"],
            rows,
            "lrrrrcrl",
            title=f"Per rung (gap = ln L_untied − ln L_tied; noise from {noise.get('source') or 'unknown'}; "
            "compute ×: the untied compute needed to reach the tied loss, over C)",
        )
    )
    items = []
    if h:
        items += [
            ("Gap at the hero", f"{fmt_gap(h.get('gap'))} (90%: {fmt_ci(h.get('gap_ci90'), fmt_gap)})"),
            ("Winner", f"{h.get('winner') or '?'} ({h.get('call') or '?'}; P = {fmt_p(h.get('p_winner'))})"),
            (
                "Distance",
                f"the hero is {fmt_g(h.get('compute_x'))}× the largest rung's compute; the rollout "
                f"showed the gap forecasts right up to {fmt_g(h.get('reach_compute_x'))}×",
            ),
        ]
        if h.get("compute_multiplier") is not None:
            items.append(
                (
                    "Effective compute",
                    f"untied reaches tied's loss with {fmt_mult(h.get('compute_multiplier'))}"
                    f" (90%: {fmt_ci(h.get('compute_multiplier_ci90'), fmt_mult)}) the "
                    "compute (local slope of the untied L(C) law)",
                )
            )
    cross = mapping(tie.get("crossover"))
    if cross.get("message"):
        ci = cross.get("ci90")
        items.append(
            (
                "Crossover",
                f"{cross['message']}"
                + (f" (90%: {fmt_ci(ci, fmt_flops)} FLOPs)" if cross.get("status") in CROSSING else ""),
            )
        )
    if not h and tie.get("reason"):
        items.append(("Trend", str(tie["reason"])))
    if items:
        s.add(KV(items, "Along the ladder and at the hero"))
    s.add(_forms_table(mapping(tie.get("trend")), "the gap"))
    if tie.get("method"):
        s.add(Para(f"Method: {tie['method']}.", "note"))
    return s


def depth(ctx: Builder) -> Section:
    s = Section("depth", "Depth vs width")
    dw, why = ctx.entry("depth_vs_width")
    scales = maps(dw.get("scales")) if not why else []
    if why or not any(sc.get("fit") for sc in scales):
        reason = why or dw.get("reason") or "no rung has 3 or more aspect ratios"
        return s.missing(
            reason if str(reason).startswith("this study") else f"this study has no depth-vs-width sweep ({reason})"
        )
    shown = [sc for sc in scales if sc.get("points")]
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
    if mapping(dw.get("aspect")):
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
        f = mapping(sc.get("fit"))
        rows.append(
            [
                str(sc.get("scale")),
                fmt_flops(sc.get("flops")),
                fmt_int(sc.get("n_runs")),
                fmt_g(f.get("opt")),
                fmt_ci(f.get("ci90")),
                status_cell(f.get("status") or "skipped"),
                fmt_loss(f.get("penalty_2x")),
                clip(sc.get("skipped") or f.get("message") or "", 140),
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
    h = mapping(dw.get("hero"))
    if h.get("aspect_ratio") is not None:
        s.add(
            KV(
                [
                    (
                        "Aspect ratio at the hero",
                        f"{fmt_g(h.get('aspect_ratio'))} (90%: {fmt_ci(h.get('aspect_ratio_ci90'))})",
                    ),
                    (
                        "Distance",
                        f"the hero is {fmt_g(h.get('compute_x'))}× the largest rung's compute; the rollout "
                        f"showed the trend forecasts right up to {fmt_g(h.get('reach_compute_x'))}×",
                    ),
                    (
                        "Cost of a 2× wrong aspect at the hero",
                        f"{fmt_loss(h.get('penalty_2x'))} nats/token (90%: {fmt_ci(h.get('penalty_2x_ci90'), fmt_loss)})",
                    ),
                ],
                "At the hero",
            )
        )
    elif dw.get("reason"):
        s.add(Para(f"No aspect-ratio trend: {dw['reason']}", "note"))
    s.add(_forms_table(mapping(dw.get("aspect")), "ln aspect*"))
    if dw.get("method"):
        s.add(Para(f"Method: {dw['method']}.", "note"))
    return s
