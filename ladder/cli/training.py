"""Training: `ladder sanity` (overfit a tiny set first), `ladder train` (one run in the foreground),
`ladder submit` and `ladder cancel` (every unfinished run through an executor)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from ladder import layout
from ladder.cli.options import (
    EXECUTOR_HELP,
    JSON_OPT,
    PARALLEL_HELP,
    check_device,
    check_local_gpus,
    executor_spec,
    flag,
    parse_gpus,
)
from ladder.console import err, human_seconds, out, print_json
from ladder.errors import SpecError, StateError


def sanity(
    study: str = typer.Argument("default", help="A study YAML file, built-in name or planned study directory."),
    break_labels: bool = flag(
        "break-labels",
        "Deliberately train on unshifted labels, to see the check catch a "
        "label-shift bug (a test of the check itself).",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Overfit ~100 short documents with the study's smallest model: the first debugging test.

    Passes when the loss on memorizable tokens falls below 0.05 nats/token and greedy generation reproduces
    the documents; also checks the initial loss (near ln vocab) and that every parameter gets a gradient. On
    failure it names the suspect stage. Exits 1 when the check fails.
    """
    from ladder.cli.plan import checked_plan
    from ladder.model.data.prepare import prepare_data
    from ladder.model.evaluation.sanity import run_sanity
    from ladder.studies import load_study

    spec = load_study(study)
    # nonsense in the study is refused before the data is prepared; the fit's needs are no matter to one model
    runs = checked_plan(study, spec, check_fit=False, verb="check")[0].runs
    prepared = prepare_data(spec.data, spec.model.vocab_size, progress=not as_json)
    smallest = min(runs, key=lambda r: r.shape.params_total).shape
    report = run_sanity(prepared, smallest, label_shift_bug=break_labels)
    if as_json:
        print_json(report.to_dict())
    else:
        out.print(report.summary())
    if not report.passed:
        raise typer.Exit(1)


def _parse_sbatch(pairs: list[str]) -> dict:
    extra = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"--sbatch {pair!r}: use KEY=VALUE, e.g. --sbatch exclusive=true")
        extra[key.strip().lstrip("-")] = value
    return extra


def train(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ladder plan` (holds spec.json)."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads, 1 to 65,536 (default: torch's choice)."),
    device: str | None = typer.Option(
        None, "--device", help="cpu, cuda, cuda:N (a GPU index) or mps (default: cuda if available)."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Train one planned run in the foreground, preparing its data through the shared cache first.

    Resumes from the run's checkpoint if there is one. Ctrl-C (or SIGTERM/SIGUSR2) finishes the step in
    flight, writes a checkpoint and exits; run the command again to continue. Exits 1 when the run does not
    end done (diverged or failed); --json prints its result.json. Without a terminal (a log, CI) it prints a
    progress line about once a minute instead of the live bar.
    """
    import json

    from ladder.errors import StateError
    from ladder.jobs.on_node import run_one
    from ladder.model.hardware import env_peak_flops
    from ladder.model.training.loop import FINAL_LOSS_WINDOW
    from ladder.model.training.preemption import Preempted
    from ladder.studies.spec import MAX_CPUS_PER_RUN

    rd = layout.RunDir(run_dir)
    if not rd.spec.is_file():
        raise StateError(_not_a_run(Path(run_dir)))
    if threads is not None and not 1 <= threads <= MAX_CPUS_PER_RUN:  # torch overflowed past 2^31, a traceback
        raise SpecError(f"--threads {threads}: must be from 1 to {MAX_CPUS_PER_RUN:,} (as --cpus-per-run)")
    check_device(device, here=True)  # before the run is touched: a bad device once left it recorded as failed
    env_peak_flops()  # so is a bad LADDER_PEAK_FLOPS
    # a run already done (or diverged) is not trained again: its result.json comes back as it is, and was printed
    # "done: ..., 33,024 tokens in 6s" as if just trained
    try:
        ended = json.loads(rd.result.read_text(encoding="utf-8")).get("status") in ("done", "diverged")
    except (OSError, ValueError, AttributeError):
        ended = False
    try:
        result = run_one(rd.path, threads=threads, device=device, progress=not as_json)
    except Preempted as exc:
        # it says the step, the checkpoint and "run the same command again to resume" (this one's advice was said
        # twice: "...; run the same command again to resume; run `ladder train RUN` again to resume")
        err.print(f"[yellow]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    if result.get("status") == "busy":
        raise StateError(f"{run_dir} is being trained by another process (pid in {rd.lock})")
    if as_json:
        print_json(result)
        if result.get("status") != "done":
            raise typer.Exit(1)
        return

    def loss(key: str) -> str:  # in status's four decimals, never 1.8651792122564075
        value = result.get(key)
        return f"{value:.4f}" if isinstance(value, (int, float)) else "-"

    out.print(
        f"{'already ' if ended else ''}{result.get('status')}{', nothing to train' if ended else ''}: "
        f"final eval loss {loss('final_eval_loss')}, "
        f"train loss {loss('final_train_loss')} (mean of the last {FINAL_LOSS_WINDOW:.0%} of steps), "
        f"{result.get('tokens'):,} tokens in "
        f"{human_seconds(result.get('wall_time_s'))}"
    )
    if result.get("status") != "done":
        raise typer.Exit(1)


def submit(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    run: list[str] | None = typer.Option(None, "--run", help="Only this run id (repeatable)."),
    retry_failed: bool = flag(
        "retry-failed",
        "Also resubmit failed and corrupt runs (a diverged run's result stands: it is not trained again).",
    ),
    # each option's default is the study's executor section (ladder studies show NAME prints it); the bounds are
    # those of studies.spec.SlurmSpec and LocalSpec (tests/test_help_retrial17.py tries each at its edges)
    partition: str | None = typer.Option(
        None, help="SLURM partition (default: the study's executor.slurm.partition; unset: the cluster's default)."
    ),
    account: str | None = typer.Option(None, help="SLURM account (default: the study's executor.slurm.account)."),
    qos: str | None = typer.Option(None, help="SLURM QOS (default: the study's executor.slurm.qos)."),
    time_min: int | None = typer.Option(
        None,
        "--time-min",
        help="SLURM time limit per job, in minutes, 1 to 527,040 (a year; default: the study's "
        "executor.slurm.time_min, 60 unless set).",
    ),
    gpus_per_task: int | None = typer.Option(
        None,
        "--gpus-per-task",
        help="SLURM GPUs per run, 0 to 1,024 (default: the study's executor.slurm.gpus_per_task, 0 unless set).",
    ),
    cpus_per_task: int | None = typer.Option(
        None,
        "--cpus-per-task",
        help="SLURM CPUs per run, 1 to 65,536 (default: the study's executor.slurm.cpus_per_task, 1 unless set).",
    ),
    mem_gb: float | None = typer.Option(
        None,
        "--mem-gb",
        help="SLURM memory per run, in GB, above 0 and at most 1,000,000 (default: the study's "
        "executor.slurm.mem_gb; unset: the cluster's default).",
    ),
    constraint: str | None = typer.Option(
        None, help="SLURM constraint (default: the study's executor.slurm.constraint)."
    ),
    array_parallelism: int | None = typer.Option(
        None,
        "--array-parallelism",
        help="SLURM array tasks at once, 1 to 1,000,000 (default: the study's executor.slurm.array_parallelism, "
        "32 unless set).",
    ),
    sbatch: list[str] | None = typer.Option(
        None,
        "--sbatch",
        help="Extra sbatch option KEY=VALUE (repeatable), added to the study's executor.slurm.additional (a key "
        "it holds takes the new value).",
    ),
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        help="Local: GPU ids of this machine, e.g. 0,1 (default: the study's executor.local.gpus; with no ids there, CPU).",
    ),
    runs_per_gpu: int | None = typer.Option(
        None,
        "--runs-per-gpu",
        help="Local: runs sharing one GPU, 1 to 1,000,000 (default: the study's executor.local.runs_per_gpu, else 1).",
    ),
    cpus_per_run: int | None = typer.Option(
        None,
        "--cpus-per-run",
        help="Local: threads per run, 1 to 65,536 (default: the study's executor.local.cpus_per_run, else the "
        "cores / the runs at once).",
    ),
    parallel: int | None = typer.Option(None, "--parallel", help=PARALLEL_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Submit every unfinished run once: SLURM job arrays, local workers, or in-process debug.

    Runs that are done or diverged, or whose jobs are alive, are skipped, so submitting again submits nothing;
    `--retry-failed` resubmits failed and corrupt runs (a corrupt one trains again from scratch; a run whose data
    could not be prepared trained nothing, and goes again without it); interrupted and cancelled runs resume from
    their checkpoints. Job ids are recorded in the study's jobs.json.

    Returns at once (but with the debug executor, which trains in this process and exits 1, naming them, when runs
    it trained failed or diverged): local workers run in a session of their own and write to files in the study
    (logs/, submitit/local/), never to this command's output, so `ladder submit DIR --json | jq .` ends when
    submit does; `ladder cancel` stops them.
    """
    from ladder.jobs.submit import only_runs
    from ladder.jobs.submit import submit as do_submit
    from ladder.plan.planner import edited_since_plan, read_plan

    study, specs = read_plan(study_dir)
    ex = executor_spec(
        study,
        executor,
        {
            "slurm": dict(
                partition=partition,
                account=account,
                qos=qos,
                time_min=time_min,
                gpus_per_task=gpus_per_task,
                cpus_per_task=cpus_per_task,
                mem_gb=mem_gb,
                constraint=constraint,
                array_parallelism=array_parallelism,
                additional=_parse_sbatch(sbatch or []) or None,
            ),
            "local": dict(
                gpus=parse_gpus(gpus), runs_per_gpu=runs_per_gpu, cpus_per_run=cpus_per_run, parallel=parallel
            ),
        },
    )
    check_local_gpus(ex, given=gpus is not None)
    only_runs(layout.StudyDir(study_dir), specs, run)  # an unknown --run too
    edited = edited_since_plan(study_dir, study)  # said after the options are checked: a bad one is one line
    if edited:  # submit trains the plan's runs: what the file gained waits for `ladder plan`
        err.print(f"[yellow]warning[/]: {escape(edited)}", soft_wrap=True)
    result = do_submit(study_dir, ex, run_ids=run, retry_failed=retry_failed)
    # the debug executor trained the runs in this process: one that failed or diverged is said, and the exit is 1
    # (as `ladder train`'s), not "submitted" with exit 0 over a run that failed at its first step (busy: another
    # process trains it; waiting: its trunk is short of the branch step; neither is a failure)
    not_done = {r: str(s) for r, s in result.results.items() if str(s).startswith(("failed", "diverged"))}
    if as_json:
        print_json({**result.to_dict(), **({"results": result.results} if ex.kind == "debug" else {})})
        if result.refused:  # named in the JSON's "refused"
            raise typer.Exit(2)
        if not_done:
            raise typer.Exit(1)
        return
    for run_id in result.submitted:
        # the debug executor trained it already: its outcome in a word (a failure's error follows on stderr)
        ended = str(result.results[run_id]).split(":")[0] if run_id in result.results else None
        out.print(
            f"submitted {run_id} ({ex.kind}, job {','.join(result.job_ids.get(run_id, []))})"
            + (f": {escape(ended)}" if ended else "")
        )
    for run_id, why in result.skipped.items():
        out.print(f"[dim]skipped {run_id}: {escape(why)}[/]")
    shown = escape(layout.shell_word(study_dir))
    # "follow with `ladder status S --watch`" after the debug executor had trained every run, in this process, was
    # advice to watch what had ended
    # and after a submit that sent nothing while nothing was in flight (every run done, say), there was nothing to watch
    in_flight = any(why.endswith("(job alive)") or why.startswith("still stopping") for why in result.skipped.values())
    if ex.kind == "debug" and result.submitted:
        then = f"trained in this process, one after another: `ladder status {shown}` shows them"
    elif result.submitted or in_flight:
        then = f"follow with `ladder status {shown} --watch`"
    else:
        then = f"nothing is training; `ladder status {shown}` shows where the runs stand"
    out.print(f"{len(result.submitted)} submitted, {len(result.skipped)} skipped; {then}")
    for run_id, state in not_done.items():
        err.print(
            f"[red]{run_id}[/]: {escape(state)} (`ladder status {escape(layout.shell_word(study_dir))}` shows its error)",
            soft_wrap=True,
        )
    if result.refused:  # the others went out: one run's folder does not hold up the study
        first = next(iter(result.refused.values()))
        more = f" (and {len(result.refused) - 1} more run(s) alike)" if len(result.refused) > 1 else ""
        raise StateError(f"{', '.join(result.refused)} not submitted: {first}{more}")
    if not_done:
        raise typer.Exit(1)


def cancel(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    run: list[str] | None = typer.Option(None, "--run", help="Only this run id (repeatable)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Cancel queued and running jobs (all, or those given with --run).

    Running runs checkpoint first, so a later `ladder submit` resumes them."""
    from ladder.jobs.submit import cancel as do_cancel

    damaged: list = []
    stopping: list[str] = []
    outside: list[tuple[str, int]] = []
    cancelled = do_cancel(study_dir, run, damaged, stopping, outside)
    for run_id, pid in outside:  # trained, but by no job of the study: whoever started it stops it
        by = f"process {pid}" if pid > 0 else "another process"
        err.print(
            f"[yellow]warning[/]: run {run_id} not cancelled: it is trained by {by}, not by a job of this study (a "
            f"`ladder train` in a terminal?): stop it there with Ctrl-C"
            + (f", or `kill {pid}`" if pid > 0 else "")
            + " (it checkpoints first)",
            soft_wrap=True,
        )
    for d in damaged:  # its job, if it has one, cannot be told from its files: said, never stopping the rest
        err.print(
            f"[yellow]warning[/]: run {d.run_id} not cancelled: {escape(d.why)}; stop a job of it by hand (scancel, "
            f"kill) if it has one; `{escape(d.repair)}` rewrites it",
            soft_wrap=True,
        )
    if as_json:
        print_json(
            {
                "cancelled": cancelled,
                "stopping": stopping,
                "not_a_job": [{"run_id": r, "pid": pid} for r, pid in outside],
                "damaged": [{"run_id": d.run_id, "why": d.why} for d in damaged],
            }
        )
        return
    if stopping:  # a second cancel, while the first one's runs write their checkpoints: not "cancelled" again
        out.print(
            f"already cancelled, checkpointing on the way out: {', '.join(stopping)} (an earlier `ladder cancel`)"
        )
    if not cancelled:  # "cancelled 0 runs" read as if cancel had failed
        if not stopping:
            out.print(
                ("nothing to cancel: no job of this study is queued or running" if outside else
                 "nothing to cancel: no run of this study has a queued or running job")
                + (" among --run" if run else "")
            )  # fmt: skip
        return
    n = len(cancelled)
    out.print(f"cancelled {n} run{'s' if n != 1 else ''}: {', '.join(cancelled)}")


def _not_a_run(path: Path) -> str:
    """Why ``path`` is no run directory, said so that the advice fits: "run `ladder plan` first" was the answer to a
    planned study directory, a run's model/ folder and a typo alike."""
    if (path / layout.PLAN).is_file():
        return f"{path} is a study directory; give one of its runs ({path / layout.RUNS}/<id>), or `ladder submit {layout.shell_word(path)}`"
    if (path.parent / layout.PLAN).is_file():
        return f"{path} is a folder of the study {path.parent}; give one of its runs ({path.parent / layout.RUNS}/<id>)"
    for parent in path.parents:
        if (parent / layout.SPEC).is_file():
            return f"{path} is inside the run directory {parent}; give that directory"
    link = layout.broken_link(path)
    if link:
        return f"{link}; give a run directory (STUDY_DIR/runs/<id>, written by `ladder plan`) or mend the link"
    if not path.exists():
        return f"{path} does not exist; give a run directory (STUDY_DIR/runs/<id>, written by `ladder plan`)"
    if path.is_file():
        return f"{path} is a file; give a run directory (STUDY_DIR/runs/<id>, written by `ladder plan`)"
    return f"{path} is not a run directory (no {layout.SPEC}); give STUDY_DIR/runs/<id>, written by `ladder plan`"
