"""The `ladder` command line. Thin: parse, call one library function, render with rich or print JSON.

One module per command group (``ladder.cli.plan``, ``ladder.cli.training``, ...); this one builds the Typer
app from them, in the order ``ladder --help`` lists them. A ``LadderError`` (the user's to fix) prints one
line and exits 2; any other exception is a bug in ladder and exits 1 with its traceback.
"""

from __future__ import annotations

import sys

import typer

from ladder import __version__
from ladder.cli import (
    data,
    evaluate,
    fit_report,
    forecast,
    hero,
    model_info,
    plan,
    run,
    status,
    studies,
    training,
)
from ladder.console import err, out
from ladder.errors import LadderError

app = typer.Typer(
    name="ladder",
    help="Rehearse a big pretraining run on a scaling ladder of small Llama runs: "
    "plan -> submit -> status -> collect -> fit -> report. `ladder run` does it all; then "
    "forecast freeze -> hero -> submit -> forecast score checks the forecast against the hero.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.add_typer(studies.app, name="studies")
app.add_typer(model_info.app, name="model")
app.add_typer(data.app, name="data")
app.add_typer(forecast.app, name="forecast")
app.command()(plan.plan)
app.command()(training.sanity)
app.command()(training.train)
app.command()(training.submit)
app.command()(status.status)
app.command()(status.collect)
app.command()(training.cancel)
app.command()(fit_report.fit)
app.command()(fit_report.report)
app.command()(hero.hero)
app.command("eval")(evaluate.eval_cmd)
app.command("run")(run.run_cmd)


def _version(value: bool) -> None:
    if value:
        out.print(f"ladder {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Rehearse a big pretraining run on a scaling ladder of small Llama runs."""


def main() -> None:
    try:
        app()
    except LadderError as exc:
        err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        sys.exit(2)
