"""`ladder run`: the whole ladder in one resumable command, with a live status display."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ladder.cli.options import EXECUTOR_HELP, executor_spec, parse_gpus
from ladder.cli.status import status_table, totals_line
from ladder.console import err, out


def run_cmd(
    study: str = typer.Argument("default", help="A study YAML file or built-in name (default: `default`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Study directory (default ./ladder-runs/<name>)."),
    executor: Optional[str] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Local CPU: runs at once."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="Local: GPU ids, e.g. 0,1."),
    skip_sanity: bool = typer.Option(False, "--skip-sanity", help="Do not overfit a tiny set first."),
) -> None:
    """The main job: plan, data, sanity check, submit, wait, evaluate, collect, fit and report.

    Resumable: run it again after Ctrl-C or a crash and it continues where it stopped (finished runs are
    kept, interrupted ones resume from their checkpoints, live jobs are waited for, not resubmitted).
    """
    from rich.console import Group
    from rich.live import Live

    from ladder.pipeline import run_study
    from ladder.plan import default_study_dir
    from ladder.status import totals
    from ladder.studies import load_study

    spec = load_study(study)
    target = out_dir or default_study_dir(spec)
    ex_spec = executor_spec(spec, executor or None, {"local": dict(parallel=parallel, gpus=parse_gpus(gpus))})

    live = Live(console=out, refresh_per_second=2, transient=False)

    def on_status(rows):
        if not live.is_started:
            live.start()
        live.update(Group(status_table(rows, f"training: {spec.name}"), totals_line(totals(rows))))

    try:
        outcome = run_study(study, out_dir=target, executor=ex_spec, log=lambda m: out.print(f"[bold]>[/] {m}"),
                            on_status=on_status, skip_sanity=skip_sanity)
    except KeyboardInterrupt:
        if live.is_started:
            live.stop()
        err.print(f"[yellow]interrupted[/]: runs checkpoint as they stop; `ladder run {study}` continues")
        raise typer.Exit(130) from None
    finally:
        if live.is_started:
            live.stop()
    if outcome.runs_failed:
        err.print(f"[red]{len(outcome.runs_failed)} runs failed or diverged[/]: {', '.join(outcome.runs_failed)}")
    if outcome.fit_result is not None:
        from ladder.reports.summary import print_fit

        print_fit(outcome.fit_result, out)
    if outcome.fit_error:
        err.print(f"[yellow]no fit[/]: {outcome.fit_error}")
    if outcome.report:
        out.print(f"[bold green]report[/]: {outcome.report}")
    elif outcome.stopped_after:
        out.print(f"stopped after {outcome.stopped_after}: results in {target}")
