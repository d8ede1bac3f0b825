"""Local worker processes that let go of the command that started them.

submitit's local executor starts each job's controller with the caller's stdin, stdout and stderr: a caller that
reads ``ladder submit``'s output (``ladder submit ... | jq .``, ``out=$(ladder submit ...)``) then waits for the
pipe to close, which happens only when the last worker ends. Here the controller writes to a log file in the study
(``<study>/logs/worker-<job id>.log``; the runs themselves log under ``submitit/local/<job id>/``), reads from
``/dev/null`` and, for ``ladder submit``, starts a session of its own, so that the terminal's Ctrl-C or hangup
does not stop the ladder (``ladder cancel`` does). ``ladder run`` waits for its workers and keeps them in its
process group, so that its Ctrl-C stops them too (they checkpoint first).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import submitit
import submitit.local.local as submitit_local

_COUNTER = itertools.count()


class _Subprocess:
    """What submitit's local module sees as ``subprocess`` while a controller starts: ``Popen`` with our stdio
    and session; everything else is the real module."""

    def __init__(self, **popen_kwargs: Any) -> None:
        self._kwargs = popen_kwargs

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def Popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:  # noqa: N802 - the name submitit calls
        return subprocess.Popen(*args, **{**kwargs, **self._kwargs})


@contextlib.contextmanager
def _controller_stdio(log: IO[bytes], new_session: bool) -> Iterator[None]:
    real = submitit_local.subprocess
    submitit_local.subprocess = _Subprocess(stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=new_session)  # fmt: skip
    try:
        yield
    finally:
        submitit_local.subprocess = real


class DetachedLocalExecutor(submitit.LocalExecutor):
    """submitit's local executor whose job controllers log to ``log_dir`` instead of the caller's stdio, in a
    session of their own when ``new_session``."""

    def __init__(self, folder: str | Path, log_dir: Path, *, new_session: bool) -> None:
        super().__init__(folder=folder)
        self.log_dir = Path(log_dir)
        self.new_session = new_session

    def _submit_command(self, command: str) -> submitit.LocalJob:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        starting = self.log_dir / f".worker-{os.getpid()}-{time.time_ns()}-{next(_COUNTER)}.log"
        with open(starting, "ab") as log, _controller_stdio(log, self.new_session):
            job = super()._submit_command(command)
        starting.rename(self.log_dir / f"worker-{job.job_id}.log")
        return job
