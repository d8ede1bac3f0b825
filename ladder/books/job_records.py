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
from ladder.errors import StateError

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


class DamagedJobs(StateError):
    """``jobs.json`` cannot be read, or is not of the shape ladder writes (a hand edit, another tool's file)."""


_TEXT_FIELDS = ("executor", "folder", "submitted_at")


def _shape_problem(raw: Any) -> str | None:
    """What makes a parsed jobs.json other than ``{"runs": {run_id: [record, ...]}}``, or None."""
    if not isinstance(raw, dict):
        return f"it is a JSON {type(raw).__name__}, not an object"
    runs = raw.get("runs", {})
    if not isinstance(runs, dict):
        return f"runs is a JSON {type(runs).__name__}, not an object of run ids"
    for run_id, recs in runs.items():
        if not isinstance(recs, list):
            return f"runs.{run_id} is a JSON {type(recs).__name__}, not a list of jobs"
        for i, rec in enumerate(recs):
            where = f"runs.{run_id}[{i}]"
            if not isinstance(rec, dict):
                return f"{where} is a JSON {type(rec).__name__}, not a job record"
            unknown = sorted(set(rec) - {*_TEXT_FIELDS, "job_ids", "cancelled"})
            missing = [k for k in (*_TEXT_FIELDS, "job_ids") if k not in rec]
            if unknown or missing:
                return f"{where} " + (
                    "has no " + ", ".join(missing) if missing else "has unknown " + ", ".join(unknown)
                )
            bad = [k for k in _TEXT_FIELDS if not isinstance(rec[k], str)]
            if not isinstance(rec["job_ids"], list) or not all(isinstance(j, str) for j in rec["job_ids"]):
                bad.append("job_ids")
            if not isinstance(rec.get("cancelled", False), bool):
                bad.append("cancelled")
            if bad:
                return f"{where}.{bad[0]} = {rec[bad[0]]!r} is not what ladder writes there"
    return None


def read_strict(sd: layout.StudyDir) -> dict[str, list[JobRecord]]:
    """The study's jobs (none without a jobs.json); a damaged jobs.json raises :class:`DamagedJobs`, one line
    naming the file and what is wrong."""
    if not sd.jobs.exists():
        return {}
    try:
        raw = layout.loads_json(sd.jobs.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DamagedJobs(f"{sd.jobs} cannot be read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedJobs(f"{sd.jobs} is damaged (not JSON: {exc})") from None
    problem = _shape_problem(raw)
    if problem:
        raise DamagedJobs(f"{sd.jobs} is damaged ({problem})")
    return {run_id: [JobRecord(**rec) for rec in recs] for run_id, recs in raw.get("runs", {}).items()}


def problem(sd: layout.StudyDir) -> str | None:
    """Why the study's jobs.json cannot be used (its readers then go on without it), or None."""
    try:
        read_strict(sd)
    except DamagedJobs as exc:
        return str(exc)
    return None


def read(sd: layout.StudyDir) -> dict[str, list[JobRecord]]:
    """The study's jobs; none when jobs.json is damaged (the books then come from the run folders alone: the
    commands that show them warn with :func:`problem`)."""
    try:
        return read_strict(sd)
    except DamagedJobs:
        return {}


def _as_json(book: dict[str, list[JobRecord]]) -> dict[str, Any]:
    return {"runs": {rid: [r.to_dict() for r in recs] for rid, recs in book.items()}}


@contextmanager
def editing(sd: layout.StudyDir) -> Iterator[dict[str, list[JobRecord]]]:
    """Read-modify-write jobs.json under the study's lock; a damaged jobs.json is refused (:class:`DamagedJobs`),
    never written over: the jobs it records could not be known. A book left as it was read is not written."""
    read_strict(sd)  # refused before the lock file is made: nothing written (read again under the lock)
    sd.path.mkdir(parents=True, exist_ok=True)
    fd = os.open(sd.jobs_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        book = read_strict(sd)
        before = json.dumps(_as_json(book))  # text: a record's lists may be changed in place
        yield book
        after = _as_json(book)
        if json.dumps(after) != before:
            layout.atomic_write_json(sd.jobs, after)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def latest(book: dict[str, list[JobRecord]], run_id: str) -> JobRecord | None:
    recs = book.get(run_id)
    return recs[-1] if recs else None


def is_cancelled(sd: layout.StudyDir, run_id: str) -> bool:
    rec = latest(read(sd), run_id)
    return bool(rec and rec.cancelled)


def _pid_alive(pid: int, submitted_at: str | None = None) -> bool:
    """Whether the local worker ``pid`` lives. A process that started well after ``submitted_at`` has the pid of a
    worker long gone (after a reboot, pids are handed out again): its run is no "queued (job alive)" forever."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            return False
        submitted = _dt.datetime.fromisoformat(submitted_at or "").timestamp()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time after boot
    except (OSError, IndexError, StopIteration):
        return False
    except ValueError:  # no start time to compare (an old or hand-made record): alive, as before
        return True
    return started <= submitted + 60  # the worker starts just before its record is written


def _another_studys_worker(sd: layout.StudyDir, rec: JobRecord, pid: int) -> bool:
    """Whether the local worker ``pid`` is the job of another study folder: a copy of a study (``cp -r`` while its
    worker trained) holds the original's jobs.json, and took the original's live worker for its own ("queued (job
    alive)": submit skipped its runs, cancel "cancelled" them and stopped nothing). submitit's controller names its
    folder on its command line (``-m submitit.local._local <study>/submitit/local/%j``): another folder's is not
    this study's job. A process that names none (a hand-made record) is taken at its word."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0")]
    except OSError:
        return False
    folder = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "submitit.local._local"), None)
    if not folder:
        return False
    try:
        return not os.path.samefile(os.path.dirname(folder), os.path.dirname(sd.path / rec.folder))
    except OSError:  # the folder it names is gone (its study moved), or this study has none: not this study's
        return True


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
        alive = any(
            _pid_alive(int(j), rec.submitted_at) and not _another_studys_worker(sd, rec, int(j))
            for j in rec.job_ids
            if j.isdigit()
        )
        return "running" if alive else "ended"
    return "ended"  # debug jobs ran inside the submitting process
