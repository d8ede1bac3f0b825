"""`ladder run`: the whole ladder in one resumable command, with a live status display."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import typer
from rich.markup import escape

from ladder import layout
from ladder.cli.options import (
    EXECUTOR_HELP,
    JSON_OPT,
    PARALLEL_HELP,
    check_local_gpus,
    executor_spec,
    flag,
    out_path,
    parse_gpus,
)
from ladder.cli.plan import checked_plan, fit_check_flag
from ladder.cli.status import watching
from ladder.console import err, out, print_json


class _Pressed:
    def __init__(self) -> None:
        self.count = 0

    def check(self) -> None:
        if self.count:
            raise KeyboardInterrupt


@contextlib.contextmanager
def _ctrl_c() -> Iterator[_Pressed]:
    """Ctrl-C raises KeyboardInterrupt as always, and is also remembered: the wait for the runs raises it again at
    its next poll, should the first have been lost on its way up (CPython ignores an exception raised inside a
    destructor or a weakref callback). A lost one left the workers stopped and the command waiting them out."""
    pressed = _Pressed()

    def handler(signum, frame) -> None:
        pressed.count += 1
        signal.default_int_handler(signum, frame)

    previous = signal.getsignal(signal.SIGINT)
    # SIGINT ignored (a background job) or taken by the caller: left as it is
    ours = previous is signal.default_int_handler
    if ours:
        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread (an embedding caller): Python's own handling only
            ours = False
    try:
        yield pressed
    finally:
        if ours:
            signal.signal(signal.SIGINT, previous)


def run_cmd(
    study: str = typer.Argument(
        "default",
        help="A study YAML file, a built-in name (default: `default`), or a planned study directory (continued "
        "in place).",
    ),
    out_dir: str | None = typer.Option(
        None,
        "--out",
        metavar="PATH",
        help="Study directory (default ./ladder-runs/<name>, or STUDY itself when it is one).",
    ),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    parallel: int | None = typer.Option(None, "--parallel", help=PARALLEL_HELP),
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        help="Local: GPU ids of this machine, e.g. 0,1 (default: the study's executor.local.gpus; with no ids there, CPU).",
    ),
    skip_sanity: bool = flag("skip-sanity", "Do not overfit a tiny set first."),
    check_fit: bool = fit_check_flag(
        "trains", " The runs train, are evaluated and collected, and the report is written; the fit fails (exit 1)."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """The main job: plan, data, sanity check, submit, wait, evaluate, collect, fit and report.

    Resumable: run it again after Ctrl-C or a crash and it continues where it stopped (finished runs are
    kept, interrupted ones resume from their checkpoints, live jobs are waited for, not resubmitted). A ladder
    that `ladder fit` cannot fit is refused before anything is written (--no-fit-check trains it anyway).

    Exits 1 when a run failed, diverged or is corrupt, when a run's lm-eval failed, or when the fit failed,
    naming them (the report is written all the same). On a terminal the runs show as a live table; in a log or
    CI, as one progress line per stage and about once a minute while they train. --json prints the outcome as JSON on stdout (the
    progress goes to stderr).
    """
    from ladder.pipeline import run_study
    from ladder.plan.planner import study_dir_for
    from ladder.studies import load_study

    spec = load_study(study)
    # refused before the plan is written (what `ladder fit` refuses unless --no-fit-check), as `ladder plan` does
    _, warnings = checked_plan(study, spec, check_fit, "train")
    # a bad option is refused in its one line before the study's warnings are said, not after them
    target = study_dir_for(study, spec, out_path(out_dir))
    ex_spec = executor_spec(spec, executor or None, {"local": dict(parallel=parallel, gpus=parse_gpus(gpus))})
    check_local_gpus(ex_spec, given=gpus is not None)
    if ex_spec.kind == "slurm":  # before the plan and the data, not after them
        from ladder.jobs.submit import refuse_without_slurm

        refuse_without_slurm()
    for w in warnings:
        err.print(f"[yellow]warning[/]: {escape(w)}", soft_wrap=True)
    human = err if as_json else out

    # Ctrl-C: runs checkpoint as they stop, and the command's one line (ladder.cli) says to run it again
    with watching(human, f"training: {spec.name}") as show, _ctrl_c() as pressed:

        def on_status(rows) -> None:
            pressed.check()
            show(rows)

        outcome = run_study(
            study,
            out_dir=target,
            executor=ex_spec,
            on_status=on_status,
            log=lambda m: human.print(f"[bold]>[/] {escape(m)}", soft_wrap=True),
            skip_sanity=skip_sanity,
        )
    if as_json:
        print_json(outcome.to_dict())
    else:
        if outcome.fit_result is not None:
            from ladder.reports.fits.study.fit_json import validate
            from ladder.reports.summary import print_fit

            print_fit(validate(outcome.fit_result.to_dict()), out)
        if outcome.report:
            out.print(f"[bold green]report[/]: {outcome.report}")
        elif outcome.stopped_after:
            out.print(f"stopped after {outcome.stopped_after}: results in {target}")
    for run_id, why in outcome.failures.items():
        err.print(f"[red]{run_id}[/] {escape(why)}", soft_wrap=True)
    if outcome.runs_failed:
        err.print(
            f"[red]{len(outcome.runs_failed)} "
            + (
                "run failed, diverged or is corrupt"
                if len(outcome.runs_failed) == 1
                else "runs failed, diverged or are corrupt"
            )
            + "[/]: "
            f"{', '.join(outcome.runs_failed)} (see `ladder status {escape(layout.shell_word(target))}`)"
        )
    eval_failures = getattr(outcome, "eval_failures", None) or {}  # (a stand-in outcome may have no eval stage)
    if eval_failures:
        from ladder.cli.evaluate import say_failed_evals

        say_failed_evals(eval_failures)
    if outcome.fit_error:
        err.print(f"[red]no fit[/]: {escape(outcome.fit_error)}", soft_wrap=True)
    if outcome.runs_failed or outcome.fit_error or eval_failures:
        raise typer.Exit(1)
