"""Where every run of a study stands: planned, waiting (a cooldown branch whose trunk has not reached its branch
step), queued, running, done, failed, diverged, cancelled or interrupted (stopped without finishing; a new submit
resumes it from its checkpoint).

Built only from files: the run directory (result, error, metrics, checkpoint, lock) and ``jobs.json`` with
the executor's view of those jobs.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ladder import job_records, layout
from ladder.branches import waits_for
from ladder.model.config import RunSpec
from ladder.plan import read_plan
from ladder.run_lock import lock_holder

STATES = ("planned", "waiting", "queued", "running", "interrupted", "done", "failed", "diverged", "cancelled")
FINAL = {"done", "failed", "diverged", "cancelled"}


@dataclass
class RunStatus:
    run_id: str
    variant: str
    size: str
    state: str
    tokens_done: int
    tokens_planned: int
    progress: float
    train_loss: float | None
    eval_loss: float | None
    tokens_per_s: float | None
    eta_s: float | None
    job_id: str | None
    executor: str | None
    error: str | None  # also why a waiting branch waits
    trunk_run_id: str | None = None
    job_alive: bool = False  # a job is queued or running for it (a waiting branch's job may be)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _error_line(rd: layout.RunDir) -> str | None:
    try:
        err = json.loads(rd.error.read_text())
        return f"{err.get('error_type')}: {err.get('message')}"
    except (OSError, ValueError):
        pass
    try:
        res = json.loads(rd.result.read_text())
        if res.get("status") in ("failed", "diverged"):
            return res.get("reason")
    except (OSError, ValueError):
        pass
    return None


def _last_metrics(rd: layout.RunDir) -> dict[str, Any]:
    last: dict[str, Any] = {}
    if not rd.metrics.is_file():
        return last
    try:
        for rec in layout.read_jsonl(rd.metrics):
            if rec.get("kind") == "eval":
                last["eval_loss"] = rec.get("eval_loss")
            else:
                last.update(tokens=rec.get("tokens"), loss=rec.get("loss"), tokens_per_s=rec.get("tokens_per_s"))
    except (OSError, ValueError):
        pass
    return last


def run_state(sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]]
              ) -> tuple[str, str | None]:
    """(state, the reason for failed/diverged runs, or what a waiting branch waits for)."""
    return _waiting(sd, spec, *own_state(sd, spec, book))


def _waiting(sd: layout.StudyDir, spec: RunSpec, state: str, why: str | None) -> tuple[str, str | None]:
    if state in ("planned", "queued"):
        waits = waits_for(sd, spec)
        if waits is not None:
            return "waiting", waits
    return state, why


def own_state(sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]]
              ) -> tuple[str, str | None]:
    """(state, the reason for failed/diverged runs) from the run's files and its jobs alone: a waiting branch
    is ``planned`` or ``queued`` here."""
    rd = sd.run(spec.run_id)
    result = layout.result_status(rd)
    if result in ("done", "diverged"):
        return result, _error_line(rd) if result == "diverged" else None
    rec = job_records.latest(book, spec.run_id)
    if lock_holder(rd) is not None:
        return "running", None
    if rec is not None and not rec.cancelled:
        live = job_records.job_state(sd, rec)
        if live == "running" and rec.executor == "local":
            live = "queued"  # a local worker is alive, but no process holds this run's lock: it waits its turn
        if live in ("queued", "running"):
            return live, None
    if result == "failed" or rd.error.is_file():
        return "failed", _error_line(rd)
    if rec is not None and rec.cancelled:
        return "cancelled", None
    if rd.checkpoint_pointer.is_file() or rd.metrics.is_file():
        return "interrupted", None
    return "planned", None


def study_status(study_dir: Path) -> list[RunStatus]:
    sd = layout.StudyDir(Path(study_dir))
    _, specs = read_plan(sd.path)
    book = job_records.read(sd)
    rows = []
    for spec in specs:
        rd = sd.run(spec.run_id)
        base, why = own_state(sd, spec, book)
        state, error = _waiting(sd, spec, base, why)
        last = _last_metrics(rd)
        done_tokens = int(last.get("tokens") or 0)
        if state == "done":
            done_tokens = spec.tokens
        tps = last.get("tokens_per_s")
        eta = (spec.tokens - done_tokens) / tps if tps and state in ("running", "queued") else None
        rec = job_records.latest(book, spec.run_id)
        rows.append(
            RunStatus(
                run_id=spec.run_id,
                variant=spec.variant,
                size=str(spec.axes.get("size", "")),
                state=state,
                tokens_done=done_tokens,
                tokens_planned=spec.tokens,
                progress=min(1.0, done_tokens / spec.tokens),
                train_loss=last.get("loss"),
                eval_loss=last.get("eval_loss"),
                tokens_per_s=tps,
                eta_s=eta,
                job_id=",".join(rec.job_ids) if rec else None,
                executor=rec.executor if rec else None,
                error=error,
                trunk_run_id=spec.trunk.run_id if spec.trunk else None,
                job_alive=base in ("queued", "running"),
            )
        )
    return rows


def totals(rows: list[RunStatus]) -> dict[str, Any]:
    counts = {s: 0 for s in STATES}
    for r in rows:
        counts[r.state] += 1
    done = sum(r.tokens_done for r in rows)
    planned = sum(r.tokens_planned for r in rows)
    return {"runs": len(rows), "states": counts, "tokens_done": done, "tokens_planned": planned,
            "progress": done / planned if planned else 0.0, "all_ended": all(r.state in FINAL for r in rows)}


def wait(study_dir: Path, *, poll_s: float = 2.0, on_update=None, timeout_s: float | None = None) -> list[RunStatus]:
    """Poll until every run has ended (done, failed, diverged, cancelled) or nothing is alive to end it."""
    start = time.monotonic()
    while True:
        rows = study_status(study_dir)
        if on_update:
            on_update(rows)
        alive = any(r.state in ("queued", "running") or r.job_alive for r in rows)
        if not alive:
            return rows
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            return rows
        time.sleep(poll_s)
