"""The `ladder` command line. Thin: parse, call one library function, render with rich or print JSON.

A ``LadderError`` (the user's to fix) prints one line and exits 2; any other exception is a bug in ladder
and exits 1 with its traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ladder import __version__
from ladder.console import err, human_seconds, out, print_json, sci
from ladder.errors import LadderError

app = typer.Typer(
    name="ladder",
    help="Rehearse a big pretraining run on a scaling ladder of small Llama runs: "
    "plan -> submit -> status -> collect -> fit -> report. `ladder run` does it all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
studies_app = typer.Typer(help="List, show and validate study specs.", no_args_is_help=True)
model_app = typer.Typer(help="Parameter and FLOP accounting of Llama shapes.", no_args_is_help=True)
app.add_typer(studies_app, name="studies")
app.add_typer(model_app, name="model")

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON only.")


def _version(value: bool) -> None:
    if value:
        out.print(f"ladder {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Rehearse a big pretraining run on a scaling ladder of small Llama runs."""


# ---- studies ---------------------------------------------------------------------------------------


@studies_app.command("list")
def studies_list(as_json: bool = JSON_OPT) -> None:
    """List the built-in studies with their descriptions."""
    from ladder.studies import builtin_names, load_study

    rows = []
    for name in builtin_names():
        s = load_study(name)
        rows.append({"name": name, "description": s.description, "runs": None})
    if as_json:
        print_json({"studies": rows})
        return
    table = Table("name", "description", title="built-in studies")
    for r in rows:
        table.add_row(r["name"], r["description"])
    out.print(table)


@studies_app.command("show")
def studies_show(name: str = typer.Argument(..., help="A built-in study name or a study YAML file.")) -> None:
    """Print a study as YAML, every default filled in (a starting point for your own study file)."""
    from ladder.studies import load_study

    sys.stdout.write(load_study(name).to_yaml())


@studies_app.command("validate")
def studies_validate(
    file: str = typer.Argument(..., help="Study YAML file (or built-in name) to check."),
    as_json: bool = JSON_OPT,
) -> None:
    """Check a study file without writing anything; a bad field exits 2 naming the field and the value."""
    from ladder.plan import expand
    from ladder.studies import load_study

    study = load_study(file)
    plan = expand(study)
    if as_json:
        print_json({"valid": True, "name": study.name, "runs": len(plan.runs)})
        return
    out.print(f"[green]ok[/]: {study.name!s} is valid ({len(plan.runs)} runs)")


# ---- model info ------------------------------------------------------------------------------------


@model_app.command("info")
def model_info(
    d_model: Optional[int] = typer.Option(None, "--d-model", help="Hidden size."),
    n_layers: Optional[int] = typer.Option(None, "--n-layers", help="Number of layers."),
    n_heads: Optional[int] = typer.Option(None, "--n-heads", help="Query heads (default d_model / head_dim)."),
    n_kv_heads: Optional[int] = typer.Option(None, "--n-kv-heads", help="KV heads (default n_heads / kv_ratio)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension (default d_model / n_heads or 64)."),
    ffn_dim: Optional[int] = typer.Option(None, "--ffn-dim", help="SwiGLU width (default 8/3 d_model, rounded)."),
    vocab_size: int = typer.Option(49152, "--vocab-size"),
    tied: bool = typer.Option(True, "--tied/--untied", help="Tie the LM head to the input embedding."),
    seq_len: int = typer.Option(2048, "--seq-len", help="Context length for the attention FLOPs."),
    params: Optional[str] = typer.Option(
        None, "--params", help="Instead of a shape: a target size such as 135M, sized at --aspect-ratio."
    ),
    convention: str = typer.Option("total", "--convention", help="total | non_embedding, for --params."),
    aspect_ratio: float = typer.Option(32.0, "--aspect-ratio", help="d_model / n_layers, for --params."),
    kv_ratio: int = typer.Option(1, "--kv-ratio", help="Query heads per KV head, for --params."),
    as_json: bool = JSON_OPT,
) -> None:
    """Parameter counts (total / embedding / non-embedding) and training FLOPs per token of a shape.

    Give an explicit shape (--d-model --n-layers ...) or a target size (--params 135M --aspect-ratio 19.2).
    Example: the SmolLM2-135M shape, `ladder model info --d-model 576 --n-layers 30 --n-heads 9
    --n-kv-heads 3 --ffn-dim 1536 --vocab-size 49152` has 134,515,008 parameters tied.
    """
    from pydantic import ValidationError

    from ladder.errors import SpecError
    from ladder.model.config import parse_count
    from ladder.model.shape import ModelShape
    from ladder.model.sizing import FamilyRules, shape_for_params

    try:
        if params is not None:
            if d_model is not None or n_layers is not None:
                raise SpecError("give either an explicit shape (--d-model, --n-layers) or --params, not both")
            if convention not in ("total", "non_embedding"):
                raise SpecError(f"--convention {convention!r}: must be 'total' or 'non_embedding'")
            target = parse_count(params)
            if not isinstance(target, (int, float)) or target <= 0:
                raise SpecError(f"--params {params!r}: must be a positive count such as 50K, 135M or 7e9")
            rules = FamilyRules(
                vocab_size=vocab_size,
                head_dim=head_dim or 64,
                kv_ratio=kv_ratio,
                max_seq_len=seq_len,
            )
            shape = shape_for_params(int(target), convention, aspect_ratio, rules, tied)
        else:
            if d_model is None or n_layers is None:
                raise SpecError("give --d-model and --n-layers (or --params with --aspect-ratio)")
            hd = head_dim or (d_model // n_heads if n_heads else 64)
            heads = n_heads or max(1, d_model // hd)
            shape = ModelShape(
                d_model=d_model,
                n_layers=n_layers,
                n_heads=heads,
                n_kv_heads=n_kv_heads or heads,
                head_dim=hd,
                ffn_dim=ffn_dim or max(16, int(round(8 * d_model / 3 / 16)) * 16),
                vocab_size=vocab_size,
                tied=tied,
                max_seq_len=seq_len,
            )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "shape"
        raise SpecError(f"{field}: {first['msg']}") from None
    info = shape.accounting(seq_len)
    if as_json:
        print_json(info)
        return
    table = Table("quantity", "value", title=f"Llama {shape.describe()} ffn {shape.ffn_dim} vocab {shape.vocab_size}"
                  f" {'tied' if shape.tied else 'untied'}")
    table.add_row("params total", f"{info['params_total']:,}")
    table.add_row("params embedding", f"{info['params_embedding']:,}")
    table.add_row("params non-embedding", f"{info['params_non_embedding']:,}")
    table.add_row(f"FLOPs/token (train, seq {seq_len}, head + causal attention)", f"{info['flops_per_token']:,}")
    table.add_row("FLOPs/token 6N (N = params total)", f"{info['flops_per_token_6n']:,}")
    out.print(table)


# ---- plan ------------------------------------------------------------------------------------------


@app.command()
def plan(
    study: str = typer.Argument(..., help="A study YAML file or a built-in study name (see `ladder studies list`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Study directory (default ./ladder-runs/<name>)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, write nothing."),
    as_json: bool = JSON_OPT,
) -> None:
    """Expand a study into runs and write a directory per run (named by the hash of its spec).

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
    rows = [run_row(r, None if dry_run else target, p.estimates_s[r.run_id]) for r in p.runs]
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
        "steps", "est. time", title=f"plan: {spec.name}", title_justify="left",
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
        )
    out.print(table)
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


def main() -> None:
    try:
        app()
    except LadderError as exc:
        err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
