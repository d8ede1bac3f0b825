"""Running a datatrove pipeline for the preparation: locally (every task's console output quieted) or as a
SLURM array, with a progress bar that counts the tasks' completion markers. A re-run skips completed tasks."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from datatrove.executor import LocalPipelineExecutor

from ladder.errors import DataError, LadderError
from ladder.model.data.corpus import quiet_datatrove


class QuietLocalExecutor(LocalPipelineExecutor):
    """LocalPipelineExecutor whose tasks log only errors to the console (every level still goes to the task's
    log file under ``logs/``). datatrove shows INFO on the console for the task with local_rank 0; the local
    rank is used for nothing else, so it is shifted by one."""

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        from loguru import logger

        logger.configure(patcher=_no_traceback_for_ladder_errors)
        try:
            return super()._run_for_rank(rank, local_rank + 1, node_rank)
        finally:
            logger.configure(patcher=None)

    def _launch_run_for_rank(self, rank: int, ranks_q, completed=None, completed_lock=None):
        from loguru import logger

        logger.disable("datatrove.executor.local")  # "n/N tasks completed" lines, from each worker process
        return super()._launch_run_for_rank(rank, ranks_q, completed, completed_lock)


def _no_traceback_for_ladder_errors(record) -> None:
    """A task that stops on a LadderError (a corpus record that is not text) is logged by datatrove with its
    traceback, on the console too; the error is raised again and printed as ladder's one line. So its record
    keeps only the message, and goes to the task's log file (DEBUG and up) but not to the console (ERROR and
    up): its level number is lowered below ERROR (the record's level object is its own)."""
    exc = record["exception"]
    if exc is not None and isinstance(exc.value, LadderError):
        record["exception"] = None
        record["level"].no = min(record["level"].no, 30)  # WARNING's number; the name stays ERROR in the file


def _count_completions(logging_dir: Path) -> int:
    try:
        return sum(1 for _ in (logging_dir / "completions").iterdir())
    except FileNotFoundError:
        return 0


def run_pipeline(
    pipeline: list[Any],
    *,
    tasks: int,
    workers: int,
    logging_dir: Path,
    desc: str,
    progress: bool,
    executor: Literal["local", "slurm"],
    slurm_options: dict[str, Any] | None,
) -> None:
    bar = None
    stop = threading.Event()
    poller = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=tasks, desc=desc, unit="task", file=sys.stderr, dynamic_ncols=True)
        bar.update(_count_completions(logging_dir))

        def poll() -> None:
            while not stop.wait(0.5):
                done = _count_completions(logging_dir)
                if done > bar.n:
                    bar.update(done - bar.n)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
    try:
        with quiet_datatrove(pipeline_logs=False):
            if executor == "local":
                if _start_method() == "forkserver":
                    start_forkserver_deaf_to_ctrl_c()
                QuietLocalExecutor(
                    pipeline,
                    tasks=tasks,
                    workers=workers,
                    logging_dir=str(logging_dir),
                    skip_completed=True,
                    start_method=_start_method(),
                ).run()
            elif executor == "slurm":
                _run_slurm(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir, options=slurm_options)
            else:
                raise DataError(f"unknown data executor {executor!r}: use 'local' or 'slurm'")
    finally:
        stop.set()
        if poller is not None:
            poller.join()
        if bar is not None:
            done = _count_completions(logging_dir)
            if done > bar.n:
                bar.update(done - bar.n)
            bar.close()
    missing = tasks - _count_completions(logging_dir)
    if missing > 0:
        raise DataError(f"{missing} of {tasks} datatrove tasks did not complete; see the logs in {logging_dir}")


def start_forkserver_deaf_to_ctrl_c() -> None:
    """Start multiprocess's fork server (datatrove's pool workers are forked from it) with SIGINT ignored.

    Ctrl-C goes to the terminal's whole process group: each worker raised its own KeyboardInterrupt and printed
    its traceback above the command's one line. A server started while SIGINT is ignored keeps it ignored (Python
    installs its KeyboardInterrupt handler only where SIGINT was not ignored), and so do the workers it forks;
    the command alone stops, and leaving datatrove's ``with Pool`` terminates them. A server already running is
    kept as it is."""
    import signal

    from multiprocess import forkserver

    if threading.current_thread() is not threading.main_thread():  # signal.signal works in the main thread only
        forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_method() -> str:
    """datatrove's default, forkserver, re-imports ``__main__`` in every worker from its file; when the main
    module claims a file that does not exist (``python -`` reading stdin) the workers die at start and the
    pool respawns them forever. Fork then."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not os.path.isfile(main_file):
        return "fork"
    return "forkserver"


def _run_slurm(
    pipeline: list[Any], *, tasks: int, workers: int, logging_dir: Path, options: dict[str, Any] | None
) -> None:
    """Submit the pipeline as a SLURM array with datatrove's executor and wait for every task."""
    from datatrove.executor.slurm import SlurmPipelineExecutor

    opts = dict(options or {})
    opts.setdefault("time", "04:00:00")
    opts.setdefault("partition", os.environ.get("LADDER_SLURM_PARTITION", ""))
    opts.setdefault("job_name", "ladder-data")
    if not opts["partition"]:
        raise DataError("the slurm data executor needs a partition (slurm_options={'partition': ...})")
    ex = SlurmPipelineExecutor(
        pipeline, tasks=tasks, workers=workers, logging_dir=str(logging_dir), skip_completed=True, **opts
    )
    ex.run()
    while _count_completions(logging_dir) < tasks:
        time.sleep(10)
