"""Smoke test of the local SLURM cluster through submitit (a standalone script, not a pytest file).

    bash scripts/slurm-up.sh && source scripts/slurm-env.sh
    .venv/bin/python tests/slurm_smoke.py [--keep]

Checks, with timings: one trivial job; a job array of 3 via ``map_array`` (and whether its tasks
ran concurrently); a ``submitit.helpers.Checkpointable`` job preempted with
``scancel --signal=USR2 <jobid>`` that checkpoints, is requeued and resumes where it stopped
(``SLURM_RESTART_COUNT >= 1``).  Exit status 0 when everything passed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import submitit

T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[smoke {time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def add(a: int, b: int) -> dict:
    return {"sum": a + b, "host": socket.gethostname(), "job_id": os.environ.get("SLURM_JOB_ID")}


def square(x: int) -> dict:
    start = time.time()
    time.sleep(3)  # long enough for the three array tasks to overlap if they run concurrently
    return {"x": x, "square": x * x, "start": start, "end": time.time(), "task": os.environ.get("SLURM_ARRAY_TASK_ID")}


class Counter(submitit.helpers.Checkpointable):
    """Counts to `total`, writing progress to `progress_file`.  On preemption submitit pickles
    `self` (with `done`) via Checkpointable.checkpoint() and the requeued job resumes from it."""

    def __init__(self) -> None:
        self.done = 0
        self.starts: list[dict] = []

    def __call__(self, total: int, progress_file: str) -> dict:
        self.starts.append(
            {"from": self.done, "restart_count": os.environ.get("SLURM_RESTART_COUNT"), "t": time.time()}
        )
        while self.done < total:
            time.sleep(0.25)
            self.done += 1
            Path(progress_file).write_text(str(self.done))
        return {
            "done": self.done,
            "starts": self.starts,
            "restart_count": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
            "job_id": os.environ.get("SLURM_JOB_ID"),
        }


def main() -> int:
    keep = "--keep" in sys.argv
    if not os.environ.get("SLURM_CONF"):
        default = Path(os.environ.get("TMPDIR", "/tmp")) / "ladder-slurm" / "etc" / "slurm.conf"
        if not default.exists():
            print(
                "SLURM_CONF is not set: run `bash scripts/slurm-up.sh` and `source scripts/slurm-env.sh`",
                file=sys.stderr,
            )
            return 2
        os.environ["SLURM_CONF"] = str(default)
        say(f"SLURM_CONF not set, using {default}")
    if "/usr/sbin" not in os.environ.get("PATH", "").split(":"):
        os.environ["PATH"] += ":/usr/sbin:/sbin"
    say(f"SLURM_CONF={os.environ['SLURM_CONF']}  submitit {submitit.__version__}")
    # a fresh folder per run: job ids restart at 1 after SLURM_CLEAN=1 and a stale
    # <id>_result.pkl in a reused folder would be returned as the new job's result
    folder = Path(tempfile.mkdtemp(prefix="ladder-slurm-smoke-"))
    failures: list[str] = []

    def check(cond: bool, what: str) -> None:
        say(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    # timeout_min >= 20: with a shorter limit submitit treats every USR2 as a time-out
    executor.update_parameters(timeout_min=20, cpus_per_task=1, mem_gb=1, name="ladder-smoke")

    # 1. one trivial job
    t = time.monotonic()
    job = executor.submit(add, 2, 3)
    res = job.result()
    check(res["sum"] == 5, f"single job {job.job_id}: result {res} in {time.monotonic() - t:.1f}s")

    # 2. job array of 3
    t = time.monotonic()
    executor.update_parameters(slurm_array_parallelism=3)
    jobs = executor.map_array(square, [1, 2, 3])
    results = [j.result() for j in jobs]
    dt = time.monotonic() - t
    check(
        [r["square"] for r in results] == [1, 4, 9],
        f"array {jobs[0].job_id.split('_')[0]} of 3: squares {[r['square'] for r in results]} in {dt:.1f}s",
    )
    overlap = max(r["start"] for r in results) < min(r["end"] for r in results)
    say(
        f"     array tasks ran {'concurrently' if overlap else 'NOT concurrently'} "
        f"(starts spread {max(r['start'] for r in results) - min(r['start'] for r in results):.1f}s)"
    )
    check(overlap, "array tasks overlapped in time (>= 3 CPU slots)")

    # 3. Checkpointable job preempted with USR2, requeued, resumed
    executor.update_parameters(slurm_array_parallelism=None, name="ladder-smoke-ckpt")
    progress = folder / "progress.txt"
    t = time.monotonic()
    job = executor.submit(Counter(), 60, str(progress))  # 60 x 0.25 s = 15 s of work

    def progress_now() -> int:  # the job rewrites the file: tolerate a missing/half-written one
        try:
            return int(progress.read_text())
        except (OSError, ValueError):
            return 0

    while progress_now() < 8:
        if time.monotonic() - t > 120:
            check(False, f"checkpointable job {job.job_id} did not start within 120 s (state {job.state})")
            return 1
        time.sleep(0.2)
    t_started = time.monotonic() - t
    t_sig_wall = time.time()
    subprocess.run(["scancel", "--signal=USR2", str(job.job_id)], check=True)
    say(f"     job {job.job_id} running after {t_started:.1f}s; sent USR2 at progress {progress_now()}")
    res = job.result()
    total = time.monotonic() - t
    starts = res["starts"]
    say(f"     starts (resumed-from, SLURM_RESTART_COUNT): {[(s['from'], s['restart_count']) for s in starts]}")
    if len(starts) >= 2:
        say(f"     requeued job resumed {starts[-1]['t'] - t_sig_wall:.1f}s after USR2; total {total:.1f}s")
    check(
        res["done"] == 60 and res["restart_count"] >= 1 and len(starts) >= 2 and starts[-1]["from"] > 0,
        f"checkpointable job {job.job_id}: done={res['done']} SLURM_RESTART_COUNT={res['restart_count']}, "
        f"resumed from {starts[-1]['from']}",
    )

    if keep or failures:
        say(f"submitit folder kept: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    say("PASSED" if not failures else f"FAILED: {failures}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
