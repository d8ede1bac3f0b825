"""What a submitted job runs on its node: one run (a SLURM array task) or a local worker's queue of runs.

Both are submitit ``Checkpointable``: on SIGUSR2 (preemption, time limit) the trainer finishes the step in
flight, writes a checkpoint and hands over to submitit's handler, which calls ``checkpoint()`` (nothing left
to save: it returns the same job to requeue) and requeues; the requeued job resumes from that checkpoint. A
job killed outright resumes from its last periodic checkpoint. A run is trained by at most one process at a
time (:mod:`ladder.books.run_lock`).

The local queue takes the first run in its (longest-first) order that can start; a cooldown branch can once its
trunk's snapshot is there (:mod:`ladder.books.branches`). While only branches whose trunk is still training are left,
the worker polls; a branch whose trunk is not training is tried anyway (it fails with its trunk's failure, or
trains from step 0 when its trunk finished without a snapshot), or left for a later submit when the trunk was
interrupted, or cancelled with its cancelled trunk.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import submitit

from ladder import layout
from ladder.books import job_records
from ladder.books.branches import waits_for
from ladder.books.job_records import is_cancelled
from ladder.books.run_lock import lock_holder, run_lock
from ladder.errors import DataNotPrepared
from ladder.model.config import RunSpec
from ladder.plan.study_lock import editing_study


def _write_error(rd: layout.RunDir, exc: BaseException) -> None:
    layout.atomic_write_json(
        rd.error,
        {
            "error_type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            # "data": the run's data could not be prepared, nothing trained (a plain submit tries it again)
            **({"stage": exc.STAGE} if isinstance(exc, DataNotPrepared) else {}),
        },
    )


def run_one(
    run_dir: str | os.PathLike, *, threads: int | None = None, device: str | None = None, progress: bool = False
) -> dict[str, Any]:
    """Train one run under its lock. An exception is written to ``error.json`` (for ``ladder status``) and
    raised again; a preemption (``Preempted``) is not an error."""
    import torch

    from ladder.model.training.branching import Waiting
    from ladder.model.training.faults import from_environment
    from ladder.model.training.loop import train
    from ladder.model.training.preemption import Preempted

    if threads:
        torch.set_num_threads(threads)
    rd = layout.RunDir(Path(run_dir))
    if int(os.environ.get("RANK", "0")) > 0:
        # a DDP rank other than 0: rank 0 holds the lock and writes the files; this one only trains
        return train(rd.path, device=device, progress=False, nan_at=from_environment())
    with run_lock(rd) as held:
        if not held:
            return {"status": "busy", "run_id": rd.run_id}
        rd.error.unlink(missing_ok=True)
        try:
            # a folder where result.json goes is refused now, not after the whole run trained to write it there
            layout.refuse_if_not_a_file(rd.result, "run the command again")
            # the test hook a study-wide divergence test sets in the environment; None in any real job
            return train(rd.path, device=device, progress=progress, nan_at=from_environment())
        except (Preempted, Waiting, KeyboardInterrupt, SystemExit):  # not failures: the run can go again
            raise
        except BaseException as exc:
            _write_error(rd, exc)
            raise


class TrainJob(submitit.helpers.Checkpointable):
    """One run as one job (a SLURM array task)."""

    def __init__(self, run_dir: str, threads: int | None = None) -> None:
        self.run_dir = str(run_dir)
        self.threads = threads

    def __call__(self) -> dict[str, Any]:
        if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
            # one run over several GPUs: one task per GPU, torch.distributed set up from SLURM's variables
            submitit.helpers.TorchDistributedEnvironment().export()
        return run_one(self.run_dir, threads=self.threads)


class WorkerJob(submitit.helpers.Checkpointable):
    """A local worker: trains runs one after another, skipping those finished, cancelled or held by another
    worker, so that several workers can share one queue; a branch waits for its trunk (see the module
    docstring)."""

    def __init__(self, study_dir: str, run_ids: list[str], threads: int | None = None, poll_s: float = 2.0) -> None:
        self.study_dir = str(study_dir)
        self.run_ids = list(run_ids)
        self.threads = threads
        self.poll_s = poll_s

    def __call__(self) -> dict[str, Any]:
        from ladder.model.training.branching import Waiting
        from ladder.model.training.preemption import Preempted

        sd = layout.StudyDir(Path(self.study_dir))
        specs = {run_id: sd.run(run_id).spec_or_none() for run_id in self.run_ids}
        pending = list(self.run_ids)
        outcomes: dict[str, Any] = {}
        controller = _die_with_controller()
        while pending:
            if controller is not None and os.getppid() != controller:
                # its job (the controller, whose pid jobs.json and `ladder status` give) was killed: the queue ends
                # here, or an orphan trained runs that status showed as planned, and `ladder cancel` did not stop
                outcomes.update({r: "not started: its job was killed" for r in pending})
                break
            pending = [r for r in pending if not _finished(sd, r)]
            run_id = next((r for r in pending if not self._waits(sd, specs.get(r), pending, outcomes)), None)
            if run_id is None:
                if pending:
                    time.sleep(self.poll_s)  # only branches whose trunk is training are left
                continue
            pending.remove(run_id)
            if run_id in outcomes:  # settled by _waits (a cancelled trunk)
                continue
            try:
                with _sigterm_stops_the_run():
                    outcomes[run_id] = run_one(sd.run(run_id).path, threads=self.threads).get("status")
            except (Preempted, StoppedBeforeTraining):
                if is_cancelled(sd, run_id):  # `ladder cancel` stopped this run: go on with the queue
                    outcomes[run_id] = "cancelled"
                    continue
                raise
            except Waiting as exc:  # its trunk stopped short of the branch step: a later submit runs both
                outcomes[run_id] = f"waiting: {exc}"
            except Exception as exc:  # noqa: BLE001 - recorded in error.json; the queue goes on
                outcomes[run_id] = f"failed: {type(exc).__name__}: {exc}"
        return outcomes

    @staticmethod
    def _waits(sd: layout.StudyDir, spec: RunSpec | None, pending: list[str], outcomes: dict[str, Any]) -> bool:
        """Whether a queued run has to wait for its trunk: a branch whose snapshot is not there while its trunk
        trains (or is still in this queue). A branch of a cancelled trunk is cancelled too (in ``outcomes``)."""
        if spec is None or spec.trunk is None or waits_for(sd.run(spec.run_id), spec) is None:
            return False
        trunk = spec.trunk.run_id
        if lock_holder(sd.run(trunk)) is not None or trunk in pending:
            return True
        if is_cancelled(sd, trunk):
            with job_records.editing(sd) as book:
                rec = job_records.latest(book, spec.run_id)
                if rec is not None:
                    rec.cancelled = True
            outcomes[spec.run_id] = f"cancelled: its trunk {trunk} was cancelled"
        return False


def _die_with_controller() -> int | None:
    """The pid of the submitit controller of this local worker (its job id), after asking the kernel for a SIGTERM
    when that controller dies (Linux: ``PR_SET_PDEATHSIG``): a run in training then checkpoints and stops, one in
    set-up stops at once (:func:`_sigterm_stops_the_run`), and the queue ends (the caller checks the pid). Before,
    `kill -9 <job id>` left the worker training on as an orphan. None outside a local job."""
    if os.environ.get("SUBMITIT_EXECUTOR") != "local":
        return None
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no prctl: the queue still ends at the next run
            pass
    job_id = os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")  # the controller's pid: gone already if not our parent
    return int(job_id) if job_id.isdigit() else os.getppid()


class StoppedBeforeTraining(KeyboardInterrupt):
    """SIGTERM (``ladder cancel``) reached a local worker while its run was not in its training loop yet (preparing
    its data, building its model, loading its checkpoint): nothing trained since its last checkpoint, so it stops
    at once. An interrupt, not an error: the run is not booked as failed."""


@contextlib.contextmanager
def _sigterm_stops_the_run() -> Iterator[None]:
    """While a local worker's run sets up, SIGTERM stops it. submitit's job environment only logs a SIGTERM
    ("bypass"): one that `ladder cancel` sent before the trainer took the signal over (its data being prepared, a
    minute on a fresh cache) was lost, and the cancelled run trained to its end. Inside the training loop the
    trainer's own handler takes SIGTERM as ever (a checkpoint at the step boundary, then ``Preempted``)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise StoppedBeforeTraining(signum)

    stop.raises_interrupt = True  # type: ignore[attr-defined]  # the trainer's SignalTrap.chain does not call it
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _finished(sd: layout.StudyDir, run_id: str) -> bool:
    return layout.result_status(sd.run(run_id)) in ("done", "diverged") or is_cancelled(sd, run_id)


class EvalResults(dict):
    """{run id: lm-eval results} of the runs a job evaluated, with ``failed``: {run id: why} of those it could
    not (a dict, so that a caller that knows nothing of failures reads it as before)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed: dict[str, str] = {}


def evaluate_runs(
    run_dirs: list[str],
    tasks: list[str] | None,
    include_path: str | None,
    limit: float | None,
    batch_size: int = 16,
    device: str | None = None,
    threads: int | None = None,
    *,
    log_dir: str | None = None,
) -> dict[str, Any]:
    """lm-eval on the final checkpoints of some runs (one job); finished evaluations are skipped. Only the first
    task of a job evaluates (a job given several tasks would otherwise write each run's results several times).
    A run whose evaluation fails (a damaged model file, say) is named in the result's ``failed``, its traceback in
    the job's log, and the job goes on with its other runs. ``log_dir``: evaluated in the user's own process (the
    debug executor), whose stderr is the terminal: the traceback goes to ``eval-<run>.log`` there instead, and the
    failure names that file."""
    import torch

    if int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0"))) > 0:
        return EvalResults()

    from ladder.model.evaluation.downstream import evaluate_run

    if threads:
        torch.set_num_threads(threads)
    out = EvalResults()
    for run_dir in run_dirs:
        try:
            # one evaluation of a run at a time: a second `ladder eval` started meanwhile (another terminal) waits
            # here, then finds these results and skips them, instead of running lm-eval on the same run again
            with editing_study(Path(run_dir)):
                res = evaluate_run(
                    run_dir,
                    tasks,
                    include_path=Path(include_path) if include_path else None,
                    limit=limit,
                    batch_size=batch_size,
                    device=device,
                )
        except Exception as exc:  # noqa: BLE001 - said for this run; the job's other runs are evaluated all the same
            first = (str(exc).strip().splitlines() or [""])[0]
            why = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
            if log_dir is None:
                traceback.print_exc()  # the job's log
            else:  # a terminal: one line says what failed, the traceback waits in a file
                log = Path(log_dir) / f"eval-{Path(run_dir).name}.log"
                with contextlib.suppress(OSError):
                    log.parent.mkdir(parents=True, exist_ok=True)
                    log.write_text(traceback.format_exc(), encoding="utf-8")
                    why += f" (traceback: {log})"
            out.failed[Path(run_dir).name] = why
            continue
        out[Path(run_dir).name] = res["results"]
    return out
