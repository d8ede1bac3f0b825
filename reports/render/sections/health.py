"""Run health (divergences, failures, throughput, MFU) and reproducibility (versions, source, hardware, the
study spec)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd

from ladder.reports.render.blocks import KV, Para, Pre, Section, Table
from ladder.reports.render.environment import environment
from ladder.reports.render.figures.health import draw_health
from ladder.reports.render.fmt import (
    ABSENT,
    clip,
    fmt_count,
    fmt_int,
    fmt_s,
    ok,
    shape_text,
    slug,
)

if TYPE_CHECKING:
    from ladder.reports.render.builder import Builder


def health(ctx: Builder) -> Section:
    s = Section("health", "Run health")
    runs = ctx.runs
    if not len(runs):
        return s.missing("this study has no runs to report on")
    bad = runs[runs["status"].isin(["diverged", "failed"])]
    if len(bad):
        rows = []
        for _, r in bad.iterrows():
            status = str(r.get("status"))
            step = r.get("diverged_at_step")
            rows.append(
                [
                    (str(r.get("run_id")), "mono"),
                    str(r.get("variant")),
                    shape_text(r),
                    (status, f"status-{slug(status)}"),
                    fmt_int(step) if ok(step) else ABSENT,
                    clip(r.get("reason") or "no reason recorded", 300),
                ]
            )
        s.add(
            Table(
                ["Run", "Variant", "Shape", "Status", "At step", "Reason"],
                rows,
                "llllrl",
                mono=(0,),
                title="Runs that diverged or failed",
            )
        )
    else:
        s.add(Para("No run diverged or failed.", "ok"))
    pending = int((runs["status"] == "pending").sum())
    if pending:
        s.add(Para(f"{pending} planned run(s) have no result yet (pending or still training).", "note"))
    excluded = ctx.fit_json.excluded if ctx.fit_json is not None else []
    if excluded:
        rows = [[(e.run or "", "mono"), clip(e.reason or e.status or "", 200)] for e in excluded[:200]]
        s.add(Table(["Run", "Why the fit left it out"], rows, "ll", mono=(0,), title="Runs left out of the fit"))
    have = [c for c in ("tokens_per_s", "mfu") if c in runs and pd.to_numeric(runs[c], errors="coerce").notna().any()]
    if have:
        s.add(
            ctx.figure(
                "fig-health",
                "Throughput and MFU",
                "Training throughput and model FLOPs utilisation of every run against its size (red crosses: runs "
                "that diverged or failed).",
                3.2,
                lambda fig: draw_health(fig, runs, ctx.styles),
            )
        )
        wall, tps, mfu, restarts = (_numeric(runs, c) for c in ("wall_time_s", "tokens_per_s", "mfu", "restarts"))
        s.add(
            KV(
                [
                    ("Wall time, all runs", fmt_s(wall.sum()) if wall.notna().any() else ABSENT),
                    ("Longest run", fmt_s(wall.max()) if wall.notna().any() else ABSENT),
                    (
                        "Throughput (median, range)",
                        f"{fmt_count(tps.median())} tokens/s ({fmt_count(tps.min())} – {fmt_count(tps.max())})"
                        if tps.notna().any()
                        else ABSENT,
                    ),
                    (
                        "MFU (median, range)",
                        f"{100 * mfu.median():.1f}% ({100 * mfu.min():.1f}% – {100 * mfu.max():.1f}%){_over(mfu)}"
                        if mfu.notna().any()
                        else ABSENT,
                    ),
                    ("Restarts (preemptions, resumes)", fmt_int(restarts.sum()) if restarts.notna().any() else ABSENT),
                ],
                "Throughput",
            )
        )
    else:
        s.add(Para("this study has no throughput data (no tokens_per_s or mfu in the results)", "missing"))
    return s


def _over(mfu: pd.Series) -> str:
    """Words for MFU above 100%, which no run computes: the peak it was divided by was too low. The main job's
    report read up to 160%, with no word, after a busy moment lowered the CPU peak its workers measured (runs
    trained since measure a beaten peak again: hardware.checked_peak)."""
    n = int((mfu > 1).sum())
    if not n:
        return ""
    return (
        f"; {n} run{'s' if n != 1 else ''} above 100%: the peak FLOP/s divided by was below what "
        f"{'they' if n != 1 else 'it'} computed (a CPU's is a matmul rate measured in 0.2 s, which other work on "
        "the same cores lowers), so that MFU is overstated"
    )


def _numeric(runs: pd.DataFrame, col: str) -> pd.Series:
    """A results column as numbers (NaN where missing); empty when the results have no such column."""
    return pd.to_numeric(runs[col], errors="coerce") if col in runs else pd.Series(dtype=float)


def reproducibility(ctx: Builder) -> Section:
    s = Section("reproducibility", "Reproducibility")
    env = ctx.d.env or environment()
    s.add(
        KV(
            [("Report generated", env["date"]), ("Study directory", str(ctx.d.path)), ("Study", ctx.d.name)]
            + ([("Notes", ctx.d.notes)] if ctx.d.notes else []),
            "This report",
        )
    )
    s.add(KV([(k, v) for k, v in env["versions"].items()], "Package versions"))
    s.add(KV(env["source"] + env["hardware"], "Code and machine"))
    if ctx.d.devices:
        s.add(
            KV(
                [(name, f"{n} run(s)") for name, n in sorted(ctx.d.devices.items(), key=lambda kv: -kv[1])],
                "Devices the runs trained on",
            )
        )
    if ctx.fit_json is not None:
        meta = ctx.fit_json.meta.as_written()  # every key the fit recorded, in its order, not only the typed ones
        said = {k: clip(json.dumps(v, default=str) if not isinstance(v, str) else v, 200) for k, v in meta.items()}
        law = ctx.fit_json.loss
        left = len(law.left_out_runs()) if law is not None else 0
        if "n_law_runs" in said and left and law.n_runs is not None:  # "18" beside the laws' "17 runs"
            said["n_law_runs"] += f" (given to the loss laws: {law.n_runs} fitted, {left} left out)"
        s.add(KV(list(said.items()), "Fit"))
    if ctx.d.study_yaml is not None:
        s.add(Pre(ctx.d.study_yaml, "study.yaml (the study spec as planned)"))
    else:
        s.add(Para("this study has no study.yaml", "missing"))
    return s
