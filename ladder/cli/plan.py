"""`ladder plan`: expand a study into run directories and show what they cost."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ladder.cli.options import JSON_OPT
from ladder.console import human_seconds, out, print_json, sci


def plan(
    study: str = typer.Argument(..., help="A study YAML file or a built-in study name (see `ladder studies list`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Study directory (default ./ladder-runs/<name>)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, write nothing."),
    as_json: bool = JSON_OPT,
) -> None:
    """Expand a study into runs and write a directory per run, named by the hash of its spec.

    Prints each run's shape, size, tokens, FLOPs, batch, LR, steps and estimated wall time, and the
    ladder's cost as a percentage of the hero's compute. Planning again is a no-op; adding a value to an
    axis adds only the new runs; nothing is ever deleted.
    """
    from ladder.plan import default_study_dir, expand, run_row, write_plan
    from ladder.studies import load_study

    spec = load_study(study)
    p = expand(spec)
    target = out_dir or default_study_dir(spec)
    written = None if dry_run else write_plan(p, target)
    rows = [run_row(r, None if dry_run else target, p.estimates_s[r.run_id], p.memory.get(r.run_id)) for r in p.runs]
    totals = p.totals()
    if as_json:
        payload = {"study": spec.name, "study_dir": None if dry_run else str(target), "dry_run": dry_run,
                   "runs": rows, "totals": totals, "hero": p.hero.to_dict()}
        if written:
            payload.update(new=written.new, existing=written.existing, orphans=written.orphans)
        print_json(payload)
        return
    conv = spec.ladder.param_count
    table = Table(
        "run", "variant", "axes", "shape", f"params ({conv})", "tokens", "tok/param", "FLOPs", "batch", "LR",
        "steps", "est. time", "est. memory", title=f"plan: {spec.name}", title_justify="left",
    )
    for r in rows:
        shape = r["shape"]
        axes = ", ".join(f"{k}={v}" for k, v in r["axes"].items() if k not in ("size",))
        table.add_row(
            r["run_id"], r["variant"], axes or r["axes"].get("size", ""),
            f"{shape['d_model']}x{shape['n_layers']} h{p.runs[rows.index(r)].shape.n_heads}/"
            f"{p.runs[rows.index(r)].shape.n_kv_heads}",
            f"{r['params']:,}", f"{r['tokens']:,}", f"{r['tokens_per_param']:.1f}", sci(r["flops"]),
            f"{r['batch_tokens']:,}", f"{r['lr']:.2e}", f"{r['steps']:,}", human_seconds(r["est_wall_s"]),
            f"{r['est_memory_bytes'] / 2**20:,.0f} MiB" if r["est_memory_bytes"] else "",
        )
    out.print(table)
    if p.packing is not None:
        k = p.packing
        out.print(f"packing: {k.runs_at_once} run(s) at once, {k.threads_per_run} thread(s) each ({k.rule})")
    h = p.hero
    out.print(
        f"totals: {totals['runs']} runs, {sci(totals['flops'])} FLOPs, {totals['tokens']:,} tokens, "
        f"~{human_seconds(totals['est_wall_s'])} of {spec.executor.hardware} time (one run at a time)"
    )
    out.print(
        f"hero: {h.params:,} params ({conv}), {h.tokens:,} tokens, {sci(h.compute)} FLOPs; "
        f"the ladder costs {totals['ladder_pct_of_hero']:.3g}% of the hero's compute"
    )
    if dry_run:
        out.print("[yellow]dry run[/]: nothing written")
    elif written is not None:
        out.print(
            f"wrote {written.study_dir}: {len(written.new)} new runs, {len(written.existing)} already planned"
            + (f", {len(written.orphans)} run directories of earlier plans kept" if written.orphans else "")
        )
