"""Submit a study's unfinished runs through submitit: SLURM (job arrays), local CPUs/GPUs (worker
processes sharing one queue) or the in-process debug executor.

Each run is submitted once: a run that is done, diverged, queued or running is skipped; a failed or corrupt one
only with ``retry_failed`` (a corrupt one's unusable result.json is first set aside, kept in the run directory, or
the trainer would take the run for finished), but a failed run whose data could not be prepared, which trained
nothing, goes again; planned, interrupted and cancelled runs go out (interrupted ones
resume from their checkpoint). Every job is recorded in ``jobs.json``.

A cooldown branch runs once its trunk has passed the branch step: SLURM submits the trunks first (one array)
and each trunk's branches as an array with ``--dependency=afterany:<trunk job>`` (none when the snapshot is
already there; the branch job checks it when it starts); local workers share one queue that skips a branch
until its trunk's snapshot is there; the debug executor trains trunks before branches. A branch whose trunk is
not going to run (not submitted now, no live job, not finished) is skipped, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import submitit

from ladder import layout
from ladder.books import job_records
from ladder.books.branches import snapshot_ready, waits_for
from ladder.books.run_books import read_books
from ladder.books.run_lock import lock_holder
from ladder.books.run_status import own_state
from ladder.errors import DataNotPrepared, SpecError, StateError
from ladder.jobs.local_workers import DetachedLocalExecutor
from ladder.jobs.on_node import TrainJob, WorkerJob
from ladder.model.config import RunSpec
from ladder.plan.packing import packing
from ladder.plan.planner import Damaged, plan_entries, read_plan, readable_runs
from ladder.studies.spec import ExecutorSpec

LOCAL_TIMEOUT_MIN = 60 * 24 * 30  # local workers have no scheduler limit; submitit needs one


@dataclass
class SubmitResult:
    submitted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # run id -> why
    job_ids: dict[str, list[str]] = field(default_factory=dict)
    executor: str = ""
    results: dict[str, Any] = field(default_factory=dict)  # debug executor: the runs' results
    refused: dict[str, str] = field(default_factory=dict)  # run id -> why its folder cannot take a job

    def to_dict(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted,
            "skipped": sorted(self.skipped),
            "reasons": self.skipped,
            "job_ids": self.job_ids,
            "executor": self.executor,
            "refused": self.refused,
        }


def only_runs(sd: layout.StudyDir, specs: list[RunSpec], run_ids: list[str] | None) -> list[RunSpec]:
    """The specs of ``run_ids`` (all when none are given); an id not in the plan is the user's error."""
    if not run_ids:
        return specs
    known = {s.run_id for s in specs}
    unknown = [r for r in run_ids if r not in known]
    if unknown:
        raise StateError(
            f"--run {', '.join(unknown)}: not a run of this study (see `ladder status {layout.shell_word(sd.path)}`)"
        )
    return [s for s in specs if s.run_id in set(run_ids)]


_LIVE = job_records.JobRecord(executor="", job_ids=[], folder="", submitted_at="")  # no record: not cancelled


def _select(
    sd: layout.StudyDir, specs: list[RunSpec], run_ids: list[str] | None, retry_failed: bool
) -> tuple[list[RunSpec], dict[str, str]]:
    every = {s.run_id: s for s in specs}
    specs = only_runs(sd, specs, run_ids)
    book = job_records.read(sd)
    states: dict[str, str] = {}

    def state_of(run_id: str) -> str:
        if run_id not in states:
            states[run_id] = own_state(sd, every[run_id], book)[0] if run_id in every else "not planned"
        return states[run_id]

    chosen, skipped = [], {}
    for spec in specs:
        state = state_of(spec.run_id)
        if state in ("done", "diverged"):
            skipped[spec.run_id] = state
        elif state in ("queued", "running") and (job_records.latest(book, spec.run_id) or _LIVE).cancelled:
            # "running (job alive)", said right after `ladder cancel`, read as if the cancel had failed
            skipped[spec.run_id] = (
                "still stopping after `ladder cancel` (writing its checkpoint): submit again once "
                f"`ladder status {layout.shell_word(sd.path)}` shows it cancelled"
            )
        elif state in ("queued", "running"):
            skipped[spec.run_id] = f"{state} (job alive)"
        elif state == "failed" and not retry_failed and not _never_started(sd, spec):
            skipped[spec.run_id] = "failed (use --retry-failed)"
        elif state == "corrupt" and not retry_failed:
            skipped[spec.run_id] = "corrupt: trained, but its result is unusable (--retry-failed trains it again)"
        else:
            chosen.append(spec)
    going = {s.run_id for s in chosen}
    for spec in list(chosen):
        waits = waits_for(sd.run(spec.run_id), spec)
        trunk = spec.trunk.run_id if spec.trunk else None
        if waits is not None and trunk not in going and state_of(trunk) not in ("queued", "running"):
            chosen.remove(spec)
            skipped[spec.run_id] = f"{waits}, which is {state_of(trunk)} (submit the trunk too)"
    # trunks (and independent runs) before branches, each in plan order
    return sorted(chosen, key=lambda s: s.trunk is not None), skipped


def _never_started(sd: layout.StudyDir, spec: RunSpec) -> bool:
    """Whether a failed run failed before its first step because its data could not be prepared (its error.json's
    ``stage``, :class:`ladder.errors.DataNotPrepared`): it trained nothing, so it is no failure of its own, and a
    plain submit tries it again (the cache mended), with no --retry-failed."""
    books = read_books(sd.run(spec.run_id), spec)
    return books.result is None and isinstance(books.error, dict) and books.error.get("stage") == DataNotPrepared.STAGE


def _writable(sd: layout.StudyDir, chosen: list[RunSpec], refused: dict[str, str]) -> list[RunSpec]:
    """The chosen runs whose folder and lock this process can write; each other one goes into ``refused``: its job
    would stop at the lock, with no error.json to say why (the run stays "planned"), and the rest go out."""
    kept = []
    for spec in chosen:
        rd = sd.run(spec.run_id)
        try:
            layout.check_writable(rd.path)
            if os.path.lexists(rd.lock):  # one of another user's, say: run_lock opens it for writing
                os.close(os.open(rd.lock, os.O_RDWR))
        except OSError as exc:
            place = exc.filename if exc.filename and os.path.lexists(exc.filename) else rd.path
            refused[spec.run_id] = (
                f"cannot write {place} ({exc.strerror}): fix its permissions, then run the same command again"
            )
            continue
        kept.append(spec)
    return kept


def _slurm_parameters(ex: ExecutorSpec, *, one_task: bool = False) -> dict[str, Any]:
    """The sbatch options of a study's jobs. ``one_task``: a job that one process does on at most one GPU (an lm-eval
    of a checkpoint), not a DDP run with a task per GPU."""
    s = ex.slurm
    params: dict[str, Any] = {
        "timeout_min": s.time_min,
        "cpus_per_task": s.cpus_per_task,
        "gpus_per_node": min(1, s.gpus_per_task) if one_task else s.gpus_per_task,
        # a run on several GPUs is one DDP job with one task per GPU (TrainJob sets up torch.distributed)
        "tasks_per_node": 1 if one_task else max(1, s.gpus_per_task),
        "nodes": 1,
        "slurm_array_parallelism": s.array_parallelism,
        "slurm_signal_delay_s": 120,
    }
    for key, value in (
        ("slurm_partition", s.partition),
        ("slurm_account", s.account),
        ("slurm_qos", s.qos),
        ("mem_gb", s.mem_gb),
        ("slurm_constraint", s.constraint),
    ):
        if value is not None:
            params[key] = value
    if s.additional:
        params["slurm_additional_parameters"] = dict(s.additional)
    return params


def refuse_without_slurm() -> None:
    """Before anything is written: submitit's own test for a SLURM cluster, which it would fail with "RuntimeError:
    Could not detect "srun"" (a traceback) once the runs were chosen and their old errors cleared."""
    if submitit.SlurmExecutor.affinity() <= 0:
        raise StateError(
            "the slurm executor needs a SLURM cluster, and this machine has none (no `srun` on PATH): run from a "
            "SLURM login node, or give --executor local (or debug)"
        )


def _slurm_executor(folder: Path, name: str, ex: ExecutorSpec, after: str | None = None, *,
                    one_task: bool = False) -> submitit.AutoExecutor:  # fmt: skip
    """A SLURM executor with the study's parameters; ``after``: a job id its jobs start after (afterany);
    ``one_task``: see :func:`_slurm_parameters`."""
    refuse_without_slurm()
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params = _slurm_parameters(ex, one_task=one_task)
    if after is not None:
        params["slurm_additional_parameters"] = {**params.get("slurm_additional_parameters", {}),
                                                 "dependency": f"afterany:{after}"}  # fmt: skip
    try:
        executor.update_parameters(name=name, **params)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"executor.slurm: {exc}") from None
    return executor


def _live_slurm_job(sd: layout.StudyDir, book: dict[str, list[job_records.JobRecord]], run_id: str) -> str | None:
    rec = job_records.latest(book, run_id)
    if rec is None or rec.executor != "slurm" or rec.cancelled or not rec.job_ids:
        return None
    return rec.job_ids[0] if job_records.job_state(sd, rec) in ("queued", "running") else None


def _submit_slurm(
    sd: layout.StudyDir, runs: list[RunSpec], ex: ExecutorSpec, book: dict[str, list[job_records.JobRecord]]
) -> dict[str, list[str]]:
    """One array of the trunks and independent runs, then one array per trunk of its branches, each starting
    after its trunk's job."""
    folder, name, threads = sd.submitit / "slurm" / "%j", f"ladder-{sd.path.name}", ex.slurm.cpus_per_task
    trunks = [r for r in runs if r.trunk is None]
    ids = _submit_array(_slurm_executor(folder, name, ex), sd, trunks, threads) if trunks else {}
    groups: dict[str | None, list[RunSpec]] = {}
    for r in runs:
        if r.trunk is not None:
            after = None
            if not snapshot_ready(sd, r):
                after = (ids.get(r.trunk.run_id) or [None])[0] or _live_slurm_job(sd, book, r.trunk.run_id)
            groups.setdefault(after, []).append(r)
    for after, group in groups.items():
        ids.update(_submit_array(_slurm_executor(folder, name, ex, after), sd, group, threads))
    return ids


def _submit_array(
    executor: submitit.AutoExecutor, sd: layout.StudyDir, runs: list[RunSpec], threads: int
) -> dict[str, list[str]]:
    with executor.batch():
        jobs = [executor.submit(TrainJob(str(sd.run(r.run_id).path), threads)) for r in runs]
    return {r.run_id: [j.job_id] for r, j in zip(runs, jobs)}


def _local_slots(ex: ExecutorSpec, runs: list[RunSpec]) -> list[tuple[list[int], int]]:
    """(visible GPUs, threads) per worker: the plan's packing (:mod:`ladder.plan.packing`) of these runs."""
    pack = packing(ex, runs)
    if ex.local.gpus:
        return [([g], pack.threads_per_run) for g in ex.local.gpus for _ in range(pack.runs_per_device)]
    return [([], pack.threads_per_run) for _ in range(pack.runs_per_device)]


def _local_executor(sd: layout.StudyDir, folder: Path, gpus: list[int], detach: bool) -> DetachedLocalExecutor:
    """A worker process on this machine that sees only ``gpus`` (none: CPU), logging to the study's logs/ (in a
    session of its own when ``detach``: see :mod:`ladder.jobs.local_workers`)."""
    executor = DetachedLocalExecutor(folder, sd.logs, new_session=detach)
    params: dict[str, Any] = {"timeout_min": LOCAL_TIMEOUT_MIN, "gpus_per_node": len(gpus)}
    if gpus:
        params["visible_gpus"] = tuple(gpus)
    executor.update_parameters(**params)
    return executor


def _submit_local(sd: layout.StudyDir, runs: list[RunSpec], ex: ExecutorSpec, detach: bool) -> dict[str, list[str]]:
    # every worker takes the biggest unclaimed run first (longest-processing-time first): the ladder then
    # ends with small runs filling the gaps rather than one big run training alone
    run_ids = [r.run_id for r in sorted(runs, key=lambda r: -r.own_flops)]
    jobs: list[submitit.Job] = []
    try:
        for gpus, threads in _local_slots(ex, runs):
            executor = _local_executor(sd, sd.submitit / "local" / "%j", gpus, detach)
            jobs.append(executor.submit(WorkerJob(str(sd.path), run_ids, threads)))
    except BaseException:
        # Ctrl-C (or a kill) between two workers: jobs.json is not written, so the workers already started would
        # train on unrecorded, where `ladder cancel` cannot see them, beside those of the submit run again. They
        # have trained nothing yet: they go (a worker whose controller is gone stops: WorkerJob)
        for job in jobs:
            process = getattr(job, "_process", None)
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        raise
    job_ids = [job.job_id for job in jobs]
    return {rid: list(job_ids) for rid in run_ids}


def submit(
    study_dir: Path,
    executor: ExecutorSpec,
    *,
    run_ids: list[str] | None = None,
    retry_failed: bool = False,
    detach: bool = True,
) -> SubmitResult:
    """Submit the study's unfinished runs (see the module docstring). ``detach=False`` keeps local workers in
    this process group (``ladder run``, which waits for them: its Ctrl-C stops them too)."""
    sd = layout.StudyDir(Path(study_dir))
    _, specs = read_plan(sd.path)
    result = SubmitResult(executor=executor.kind)
    with (
        _jobs_known(sd, "submit", "check that none is alive (squeue, ps), remove it and submit again"),
        job_records.editing(sd) as book,
    ):
        # decide under the lock: a second `ladder submit` racing this one then sees our jobs
        chosen, result.skipped = _select(sd, specs, run_ids, retry_failed)
        if chosen and executor.kind == "slurm":
            refuse_without_slurm()
        chosen = _writable(sd, chosen, result.refused)
        if not chosen:
            return result
        if executor.kind in ("local", "debug"):  # (a SLURM node's cache may be another machine's folder)
            from ladder.model.data.cache import refuse_an_unwritable_cache

            refuse_an_unwritable_cache()
        for spec in chosen:
            rd = sd.run(spec.run_id)
            rd.error.unlink(missing_ok=True)
            # chosen, so a done or diverged one is corrupt, and one that is no JSON file (a folder, a link that leads
            # nowhere) too: the trainer would train it to its end, then fail to write result.json
            if os.path.lexists(rd.result) and layout.result_status(rd) != "failed":
                rd.set_aside_result()
        if executor.kind == "slurm":
            ids = _submit_slurm(sd, chosen, executor, book)
            folder = str(Path(layout.SUBMITIT) / "slurm" / "%j")
        elif executor.kind == "local":
            ids = _submit_local(sd, chosen, executor, detach)
            folder = str(Path(layout.SUBMITIT) / "local" / "%j")
        else:
            ids = {r.run_id: [f"debug-{os.getpid()}"] for r in chosen}
            folder = str(Path(layout.SUBMITIT) / "debug")
        for spec in chosen:
            book.setdefault(spec.run_id, []).append(
                job_records.JobRecord(
                    executor=executor.kind, job_ids=ids[spec.run_id], folder=folder, submitted_at=job_records.now()
                )
            )
            result.submitted.append(spec.run_id)
        result.job_ids = ids
    if executor.kind == "debug":
        result.results = _run_debug(sd, chosen)
    return result


def _run_debug(sd: layout.StudyDir, runs: list[RunSpec]) -> dict[str, Any]:
    """The debug executor runs each job in this process, one after another, when its result is asked for."""
    from ladder.model.training.branching import Waiting
    from ladder.model.training.preemption import Preempted

    executor = submitit.AutoExecutor(folder=sd.submitit / "debug", cluster="debug")
    out = {}
    for spec in runs:
        job = executor.submit(TrainJob(str(sd.run(spec.run_id).path)))
        # exception() runs the job without submitit's pdb post-mortem (which result() opens on failure)
        exc = job.exception()
        if isinstance(exc, Preempted):
            if job_records.is_cancelled(sd, spec.run_id):  # another terminal's `ladder cancel`, not a preemption
                after = len(runs) - runs.index(spec) - 1
                w = layout.shell_word(sd.path)
                exc.said = (
                    f"`ladder cancel` (another command) cancelled run {spec.run_id}; its checkpoint is kept"
                    + (f", and the {after} run{'s' if after != 1 else ''} after it did not train" if after else "")
                    + f". `ladder status {w}` shows where the runs are; `ladder submit {w}` trains the unfinished "
                    "ones again, the cancelled run too"
                )
            raise exc
        if isinstance(exc, Waiting):  # its trunk stopped short of the branch step: not a failure (as on_node says)
            out[spec.run_id] = f"waiting: {exc}"
            continue
        out[spec.run_id] = f"failed: {exc}" if exc is not None else job.result().get("status")
    return out


@contextmanager
def _jobs_known(sd: layout.StudyDir, doing: str, remedy: str) -> Iterator[None]:
    """Refuse to ``doing`` with a damaged jobs.json, in one line: ladder cannot know the study's jobs (which are
    alive, which to stop), and would write over the record of them."""
    try:
        yield
    except job_records.DamagedJobs as exc:
        raise StateError(f"cannot {doing}: {exc}, so ladder cannot know the study's jobs: {remedy}") from None


def cancel(
    study_dir: Path,
    run_ids: list[str] | None = None,
    damaged: list[Damaged] | None = None,
    stopping: list[str] | None = None,
    outside: list[tuple[str, int]] | None = None,
) -> list[str]:
    """Cancel the live jobs of the given runs (all by default): SLURM jobs with scancel, local runs by
    signalling the process that trains them (it checkpoints first). Returns the run ids cancelled. A damaged run
    (its folder or spec.json missing or unreadable: its state cannot be told) is passed over, never stopping the
    others, and appended to ``damaged`` for the caller to name. A run an earlier cancel already cancelled, whose
    process is still writing its checkpoint, is no second cancel: it goes into ``stopping`` (its process is
    signalled again, which it takes as the same request). A run trained with no job of the study (``ladder train``
    in a terminal) is left alone, and goes into ``outside`` with the pid that trains it, for the caller to name."""
    import signal

    sd = layout.StudyDir(Path(study_dir))
    entries = plan_entries(sd.path)
    bad = [e for e in entries if isinstance(e, Damaged)]
    asked = set(run_ids or [])
    unknown = [r for r in run_ids or [] if r not in {e.run_id for e in entries}]
    if unknown:
        raise StateError(
            f"--run {', '.join(unknown)}: not a run of this study (see `ladder status {layout.shell_word(sd.path)}`)"
        )
    specs = [e for e in entries if not isinstance(e, Damaged) and (not asked or e.run_id in asked)]
    if damaged is not None:
        damaged.extend(d for d in bad if not asked or d.run_id in asked)
    cancelled, to_signal = [], []
    remedy = "stop its jobs by hand (scancel, kill), then remove it"
    with _jobs_known(sd, "cancel", remedy):
        known = job_records.read_strict(sd)
        if outside is not None:  # "nothing to cancel: no run ... has a running job" while status showed it running
            for spec in specs:
                pid = lock_holder(sd.run(spec.run_id)) if job_records.latest(known, spec.run_id) is None else None
                if pid is not None:
                    outside.append((spec.run_id, pid))
        if not any(job_records.latest(known, s.run_id) for s in specs):
            return cancelled  # no job on record: nothing to cancel, and nothing written (not even the lock)
    with _jobs_known(sd, "cancel", remedy), job_records.editing(sd) as book:
        for spec in specs:
            state, _ = own_state(sd, spec, book)
            rec = job_records.latest(book, spec.run_id)
            if state not in ("queued", "running") or rec is None:
                continue
            if rec.cancelled:  # an earlier (or a concurrent) cancel's: the run is checkpointing on its way out
                pid = lock_holder(sd.run(spec.run_id)) if rec.executor != "slurm" else None
                if pid and pid > 0:
                    to_signal.append(pid)
                if stopping is not None:
                    stopping.append(spec.run_id)
                continue
            rec.cancelled = True
            cancelled.append(spec.run_id)
            if rec.executor == "slurm":
                for job_id in rec.job_ids:
                    submitit.SlurmJob(folder=sd.path / rec.folder, job_id=job_id).cancel(check=False)
            else:
                pid = lock_holder(sd.run(spec.run_id))
                if pid and pid > 0:
                    to_signal.append(pid)
    # after jobs.json says "cancelled", so that the worker, stopping, knows not to treat it as a preemption
    for pid in to_signal:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return cancelled


def submit_evals(
    study_dir: Path,
    executor: ExecutorSpec,
    *,
    tasks: list[str] | None,
    include_path: Path | None,
    limit: float | None,
    batch_size: int = 16,
    device: str | None = None,
    wait: bool = True,
) -> dict[str, Any]:
    """Run lm-eval on every finished run that lacks these results, through the study's executors: one SLURM
    array task per run, local workers splitting the runs, or in this process. Returns the results per run
    (when waited for) and the job ids."""
    from ladder.jobs.on_node import evaluate_runs
    from ladder.model.evaluation.results import runs_to_evaluate

    sd = layout.StudyDir(Path(study_dir))
    todo = [str(rd.path) for rd in runs_to_evaluate(sd.path, tasks, limit=limit)]
    # "failed": run id -> why its evaluation failed (one run's failure never stops the others' evaluations)
    out: dict[str, Any] = {"evaluated": [Path(r).name for r in todo], "job_ids": [], "results": {}, "failed": {}}
    if not todo:
        return out
    for run_dir in todo:  # a read-only study is refused before the evaluations, not after them
        layout.check_writable(layout.RunDir(Path(run_dir)).lm_eval)
    args = (tasks, str(include_path) if include_path else None, limit, batch_size, device)
    if executor.kind == "debug":
        done = evaluate_runs(todo, *args, log_dir=str(sd.logs))  # in this process: no traceback on the terminal
        out["results"], out["failed"] = dict(done), dict(getattr(done, "failed", {}))
        out["evaluated"] = [r for r in out["evaluated"] if r in out["results"]]
        return out
    jobs: list[submitit.Job] = []
    chunks: list[list[str]] = []  # the runs of each job, in the order of jobs
    try:
        if executor.kind == "slurm":
            # one task per run: with a task per GPU every task would evaluate the same run into the same folder
            ex = _slurm_executor(sd.submitit / "eval" / "%j", f"ladder-eval-{sd.path.name}", executor, one_task=True)
            with ex.batch():
                batch = [ex.submit(evaluate_runs, [r], *args[:-1], device, executor.slurm.cpus_per_task) for r in todo]
            jobs, chunks = batch, [[r] for r in todo]  # submitted as the batch closes (not at all when interrupted)
        else:
            slots = _local_slots(executor, readable_runs(sd.path))
            chunks = [todo[i :: len(slots)] for i in range(len(slots))]
            for (gpus, threads), chunk in zip(slots, chunks):
                if not chunk:
                    continue
                ex = _local_executor(sd, sd.submitit / "eval" / "%j", gpus, detach=False)
                jobs.append(ex.submit(evaluate_runs, chunk, *args[:-1], device, threads))
                chunks.append(chunk)
        out["job_ids"] = [j.job_id for j in jobs]
        if wait:
            # every job is waited for, whatever another's fate: a job that failed outright (killed, out of memory)
            # costs its runs that have no results, each named with why and where its log is, never the others
            for job, chunk in zip(jobs, chunks):
                try:
                    done = job.result()
                except Exception as exc:  # noqa: BLE001 - submitit's FailedJobError, UncompletedJobError, ...
                    if isinstance(exc, submitit.core.utils.UncompletedJobError):  # its log's last line was submitit's
                        why = f"its eval worker (job {job.job_id}) ended without a result: killed, or out of memory?"
                    else:
                        why = _last_error_line(str(exc))
                    why = f"{why} (its log: {job.paths.stderr})"
                    out["failed"].update({Path(r).name: why for r in chunk if Path(r).name not in out["results"]})
                    continue
                out["results"].update(done)
                out["failed"].update(getattr(done, "failed", {}))
            out["evaluated"] = [r for r in out["evaluated"] if r in out["results"]]
    except KeyboardInterrupt:  # Ctrl-C, or a kill (ladder.cli.Stopped)
        _stop_evals(jobs)
        raise
    return out


def _last_error_line(text: str) -> str:
    """The error a failed job's message ends with (submitit's FailedJobError holds the whole traceback, between
    lines of dashes, and where its logs are), in one line."""
    lines = [line.strip() for line in text.splitlines()]
    said = [
        line
        for line in lines
        if line
        and not line.startswith(("-", "^", "~", "File ", "Traceback", "Job (task", "You can check"))
        and not line.startswith(tuple(f"{w} " for w in ("return", "raise")))
    ]
    return said[-1] if said else (lines[0] if lines else "no error recorded")


def _stop_evals(jobs: list[submitit.Job], grace_s: float = 10.0) -> None:
    """Stop the eval jobs an interrupted ``ladder eval`` (or the main job's eval stage) started, before it says
    "run the same command to continue": the same command would otherwise race a job still writing the same run's
    lm_eval/ folder. A terminal's Ctrl-C reaches the local workers too (they are in the command's process group),
    but a signal to the command alone (``kill PID``, a supervisor) does not. SLURM's eval jobs are cancelled
    (scancel): unlike training jobs, which jobs.json records for the next command to wait for, nothing keeps
    them. What an evaluation finished is kept (each task's results are written whole, or not at all)."""
    from ladder.console import on_record

    on_record()  # a second Ctrl-C or kill, ignored until the command ends, does not cut the stopping short
    local = []
    for job in jobs:
        if isinstance(job, submitit.LocalJob):
            local.append(job)
        else:
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001 - scancel gone or failing: the command is stopping all the same
                pass
    _stop_local(local, grace_s)


def _stop_local(jobs: list[submitit.LocalJob], grace_s: float) -> None:
    """Ctrl-C (SIGINT) to each local job's task, the process that evaluates, which its submitit controller then sees
    end and ends too; whatever is left after ``grace_s`` is killed. Not a second SIGINT to a controller that a
    terminal's Ctrl-C has already begun to stop: it would die of it before it killed its task. A controller still
    starting its task gets the SIGINT itself: it stops its own."""
    import signal
    import subprocess
    import time

    import psutil

    gone = (OSError, psutil.Error)
    controllers = [p for p in (getattr(j, "_process", None) for j in jobs) if p is not None and p.poll() is None]
    tasks = []
    for ctrl in controllers:
        try:
            found = psutil.Process(ctrl.pid).children(recursive=True)
        except gone:
            found = []
        for proc in found or [ctrl]:
            try:
                proc.send_signal(signal.SIGINT)
            except gone:
                pass
        tasks += found
    deadline = time.monotonic() + grace_s
    for ctrl in controllers:
        try:
            ctrl.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            ctrl.kill()
            ctrl.wait()
    _, alive = psutil.wait_procs(tasks, timeout=max(0.1, deadline - time.monotonic()))
    for task in alive:
        try:
            task.kill()
        except gone:
            pass
    psutil.wait_procs(alive, timeout=5)
