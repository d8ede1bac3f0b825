"""`ladder studies`: list, show and validate study specs."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from ladder.cli.options import JSON_OPT
from ladder.cli.plan import checked_plan, fit_check_flag
from ladder.console import STDOUT, err, out, print_json

app = typer.Typer(help="List, show and validate study specs.", no_args_is_help=True)


@app.command("list")
def studies_list(as_json: bool = JSON_OPT) -> None:
    """List the built-in studies with their descriptions and how many runs each plans."""
    from ladder.plan.planner import expand
    from ladder.studies import builtin_names, load_study

    rows = []
    for name in builtin_names():
        s = load_study(name)
        rows.append({"name": name, "description": s.description, "runs": len(expand(s).runs)})
    if as_json:
        print_json({"studies": rows})
        return
    table = Table("name", "runs", "description", title="built-in studies", title_justify="left")
    for r in rows:
        table.add_row(r["name"], str(r["runs"]), r["description"])
    out.print(table)


@app.command("show")
def studies_show(
    name: str = typer.Argument(..., help="A built-in study name, a study YAML file or a planned study directory."),
    as_json: bool = JSON_OPT,
) -> None:
    """Print a study as YAML, every default filled in (a starting point for your own study file); --json prints
    the same fields as JSON."""
    from ladder.studies import load_study

    study = load_study(name)
    if as_json:
        print_json(study.model_dump(mode="json"))
        return
    STDOUT.write(study.to_yaml())


@app.command("validate")
def studies_validate(
    file: str = typer.Argument(..., help="Study YAML file (or built-in name, or planned study directory) to check."),
    check_fit: bool = fit_check_flag("accepts"),
    as_json: bool = JSON_OPT,
) -> None:
    """Check a study file without writing anything; a bad field exits 2 naming the field and the value.

    Beyond the schema: sizes the family cannot build, a head wider than the model, a batch below one sequence,
    runs that do not fit the hardware, a corpus that does not exist here, a tracker that is not installed, an
    lm-eval task nobody knows, a vocabulary or corpus cap that data preparation refuses, a ladder that `ladder
    fit` cannot fit (too few sizes, runs or budgets per variant; `plan` and `run` refuse it too, and
    --no-fit-check lets it through with a warning); warned: what the fit can use only partly (no rollout backtest,
    an LR, batch or depth-vs-width sweep too small for its optimum or law, too few IsoFLOP budgets)."""
    from ladder.studies import load_study

    study = load_study(file)
    plan, checks = checked_plan(file, study, check_fit, "accept")
    warnings = plan.warnings + checks
    if as_json:
        print_json({"valid": True, "name": study.name, "runs": len(plan.runs), "warnings": warnings})
        return
    for w in warnings:
        err.print(f"[yellow]warning[/]: {escape(w)}", soft_wrap=True)
    out.print(f"[green]ok[/]: {study.name!s} is valid ({len(plan.runs)} runs)")
