"""``jobs.json``: every job submitted for a study, per run, and whether each is still alive.

Written under ``.jobs.lock`` (flock) so two ``ladder submit`` commands cannot interleave; read freely (the
file is replaced atomically).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ladder import layout

# SLURM job states, as sacct/squeue print them, sorted into what ladder shows.
SLURM_QUEUED = {
    "PENDING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "CONFIGURING",
    "RESIZING",
    "SUSPENDED",
    "READY",
    "UNKNOWN",
}
SLURM_RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}


@dataclass
class JobRecord:
    executor: str
    job_ids: list[str]
    folder: str
    submitted_at: str
    cancelled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "job_ids": self.job_ids,
            "folder": self.folder,
            "submitted_at": self.submitted_at,
            "cancelled": self.cancelled,
        }


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read(sd: layout.StudyDir) -> dict[str, list[JobRecord]]:
    if not sd.jobs.is_file():
        return {}
    try:
        raw = json.loads(sd.jobs.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return {run_id: [JobRecord(**rec) for rec in recs] for run_id, recs in raw.get("runs", {}).items()}


@contextmanager
def editing(sd: layout.StudyDir) -> Iterator[dict[str, list[JobRecord]]]:
    """Read-modify-write jobs.json under the study's lock."""
    sd.path.mkdir(parents=True, exist_ok=True)
    fd = os.open(sd.jobs_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        book = read(sd)
        yield book
        layout.atomic_write_json(sd.jobs, {"runs": {rid: [r.to_dict() for r in recs] for rid, recs in book.items()}})
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def latest(book: dict[str, list[JobRecord]], run_id: str) -> JobRecord | None:
    recs = book.get(run_id)
    return recs[-1] if recs else None


def is_cancelled(sd: layout.StudyDir, run_id: str) -> bool:
    rec = latest(read(sd), run_id)
    return bool(rec and rec.cancelled)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def job_state(sd: layout.StudyDir, rec: JobRecord) -> str:
    """``queued``, ``running`` or ``ended`` for the job(s) of a record, as the executor reports them."""
    if rec.executor == "slurm":
        import submitit

        states = []
        for job_id in rec.job_ids:
            try:
                states.append(submitit.SlurmJob(folder=sd.path / rec.folder, job_id=job_id).state.split()[0])
            except Exception:  # noqa: BLE001 - sacct unreachable: say what we know, never crash status
                states.append("UNKNOWN")
        if any(s in SLURM_RUNNING for s in states):
            return "running"
        if any(s in SLURM_QUEUED for s in states):
            return "queued"
        return "ended"
    if rec.executor == "local":
        return "running" if any(_pid_alive(int(j)) for j in rec.job_ids if j.isdigit()) else "ended"
    return "ended"  # debug jobs ran inside the submitting process
