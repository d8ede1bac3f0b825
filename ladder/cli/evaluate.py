"""`ladder eval`: the lm-evaluation-harness on every finished run's checkpoint, through the executors."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ladder import layout
from ladder.cli.options import EXECUTOR_HELP, JSON_OPT, check_device, check_executor, executor_spec
from ladder.console import err, out, print_json


def eval_cmd(
    study_dir: Path = typer.Argument(..., help="A study directory with finished runs."),
    tasks: str | None = typer.Option(
        None,
        "--tasks",
        help="lm-eval task names, comma separated (default: the study's evals.tasks, else the shipped offline "
        "tasks ladder_py_next_line, ladder_py_ppl).",
    ),
    include_path: str | None = typer.Option(
        None,
        "--include-path",
        metavar="PATH",
        help="A folder of your own lm-eval task YAMLs (default: the study's evals.include_path).",
    ),
    limit: float | None = typer.Option(
        None,
        "--limit",
        help="Examples per task: a whole number from 1 to 1e12, or below 1 a share of each task (default: the "
        "study's evals.limit, else every example).",
    ),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    batch_size: int = typer.Option(
        16, "--batch-size", min=1, max=1_048_576, help="Examples per forward pass of lm-eval."
    ),
    device: str | None = typer.Option(
        None, "--device", help="cpu, cuda, cuda:N (a GPU index) or mps (default: cuda if available)."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Run the lm-evaluation-harness on every finished run's checkpoint; results land in each run's lm_eval/.

    Finished evaluations are not redone. A run whose evaluation fails (a damaged model file, a worker killed) is
    named with why, and exits 1; the other runs are evaluated all the same. `ladder collect` then adds task/<task>/<metric> columns, and `ladder
    fit` forecasts the hero's task loss and accuracy from them.
    """
    from ladder.errors import SpecError
    from ladder.jobs.submit import submit_evals
    from ladder.plan.planner import read_study
    from ladder.studies.spec import not_whole_examples

    task_list = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
    if tasks is not None and not task_list:
        raise SpecError(f"--tasks {tasks!r}: give lm-eval task names, comma separated")
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        raise SpecError(f"--limit {limit:g}: must be a positive number of examples per task (a fraction below 1)")
    if limit is not None and not_whole_examples(limit):
        raise SpecError(
            f"--limit {limit:g}: from 1 up, a whole number of examples per task (at most 1e12; leave --limit out to "
            "evaluate every example)"
        )
    if include_path == "":  # typed as a path, it was the current directory ("nor in --include-path /home/me")
        raise SpecError(
            f"--include-path {include_path!r}: an empty path; give a folder of your own lm-eval task YAMLs, or leave "
            "--include-path out"
        )
    include = Path(include_path) if include_path is not None else None
    check_executor(executor)  # before looking for work: a bad value is refused even when nothing is left to do
    check_device(device)
    study = read_study(study_dir)  # a damaged run is passed over: the finished ones are evaluated
    if study.evals is not None:  # what the study asks `ladder run` to evaluate, unless an option says otherwise
        task_list = task_list or study.evals.tasks
        include = (
            include if include is not None else (Path(study.evals.include_path) if study.evals.include_path else None)
        )
        limit = limit if limit is not None else study.evals.limit
    if task_list or include is not None:  # unknown names refused here, not inside a job
        from ladder.model.evaluation.downstream import SHIPPED_TASKS, resolve_task_manager

        resolve_task_manager(task_list or list(SHIPPED_TASKS), include)
    ex = executor_spec(study, executor, {})
    check_device(device, here=ex.kind != "slurm")  # a SLURM job's GPUs are on its node, not here
    res = submit_evals(
        study_dir, ex, tasks=task_list, include_path=include, limit=limit, batch_size=batch_size, device=device
    )
    # a finished run whose model/ was removed cannot be evaluated: said, not passed over in silence (nor counted
    # among the runs that "already have these results")
    with_model, no_model = _finished(study_dir)
    failed = res.get("failed") or {}
    if as_json:
        print_json({**res, "no_model": no_model})
        if failed:
            raise typer.Exit(1)
        return
    for run_id in no_model:
        err.print(f"[yellow]skipped[/] {run_id}: done, but its model/ folder is missing: nothing to evaluate")
    if failed:
        say_failed_evals(failed)
    if not res["evaluated"] and failed:
        raise typer.Exit(1)
    if not res["evaluated"]:
        if not with_model:  # "every finished run already has these results" was said of a study with none
            out.print(
                "nothing to evaluate: no run has finished training"
                + (" with its model/ folder" if no_model else " yet")
                + f" (`ladder status {escape(layout.shell_word(study_dir))}` shows where they are)"
            )
            return
        out.print(
            "nothing to evaluate: every finished run "
            + ("with a model/ folder " if no_model else "")
            + "already has these results"
        )
        return
    table = Table("run", "task", "metric", "value", title="lm-eval results", title_justify="left")
    for run_id, results in res["results"].items():
        for task, metrics in results.items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and metric != "sample_len":
                    table.add_row(run_id, task, metric, metric_text(value))
    out.print(table)
    n = len(res["evaluated"])
    out.print(
        f"evaluated {n} run{'s' if n != 1 else ''}; `ladder collect {escape(layout.shell_word(study_dir))}` adds them to the results"
    )
    if failed:
        raise typer.Exit(1)


def say_failed_evals(failed: dict[str, str]) -> None:
    """One line per run whose lm-eval failed (the others' results are kept), then what to do."""
    for run_id, why in failed.items():
        err.print(f"[red]{run_id}[/]: lm-eval failed: {escape(why)}", soft_wrap=True)
    n = len(failed)
    err.print(
        f"[red]{n} run{'s' if n != 1 else ''} not evaluated[/] (the others' results are kept): fix the cause, then "
        "run the same command again; finished evaluations are not redone",
        soft_wrap=True,
    )


def _finished(study_dir: Path) -> tuple[list[str], list[str]]:
    """The run ids of the study whose result.json says done: those with their model/ folder, and those whose
    model/ folder is gone."""
    import json

    with_model, without = [], []
    for rd in layout.StudyDir(Path(study_dir)).all_run_dirs():
        try:
            done = json.loads(rd.result.read_text(encoding="utf-8")).get("status") == "done"
        except (OSError, ValueError, AttributeError):
            continue
        if done:
            (with_model if rd.model.is_dir() else without).append(rd.path.name)
    return with_model, without


def metric_text(value: float) -> str:
    """A metric in four decimals, or in three digits and a power of ten when it is huge (an untrained model's word
    perplexity, 1.66e30, read as a 31-digit number)."""
    from ladder.model.config import format_flops

    return f"{value:.4f}" if abs(value) < 1e5 else format_flops(value)
