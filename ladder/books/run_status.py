"""Where every run of a study stands: planned, waiting (a cooldown branch whose trunk has not reached its branch
step), queued, running, done, failed, diverged, cancelled, interrupted (stopped without finishing; a new submit
resumes it from its checkpoint), corrupt (it trained, but its result.json is missing or unusable: the problem
is stated) or damaged (its run directory or spec.json is missing or unreadable: the row says what is wrong and
the command that repairs it, and the other runs are shown as ever).

Built only from files: the run directory (read by :mod:`ladder.books.run_books`: result, error, metrics, checkpoint,
model) plus its lock, and ``jobs.json`` with the executor's view of those jobs. A finished run shows the losses
of its result.json (authoritative); metrics.jsonl gives the progress of the others.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ladder import layout
from ladder.books import job_records
from ladder.books.run_books import RunBooks, read_books
from ladder.books.run_lock import lock_holder
from ladder.model.config import RunSpec
from ladder.plan.planner import Damaged, plan_entries

STATES = (
    "planned",
    "waiting",
    "queued",
    "running",
    "interrupted",
    "done",
    "failed",
    "diverged",
    "cancelled",
    "corrupt",
    "damaged",
)
FINAL = {"done", "failed", "diverged", "cancelled", "corrupt", "damaged"}
LIVE = {"queued", "running"}


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
    tokens_per_s: float | None  # tokens trained / seconds inside training steps: result.json's tokens_per_s
    eta_s: float | None
    job_id: str | None
    executor: str | None
    error: str | None  # also why a waiting branch waits
    flops_spent: float = 0.0  # exact counted FLOPs of the tokens it trained (ladder.books.run_books; a branch: its own)
    flops_planned: float = 0.0  # as planned: a branch, its own steps (the plan's totals count them so)
    problems: list[str] = field(default_factory=list)  # lines of its files that had to be skipped
    trunk_run_id: str | None = None
    job_alive: bool = False  # a job is queued or running for it (a waiting branch's job may be)
    # the tokens of the updates it trains itself (a branch's prefix is its trunk's): what the study's totals add
    own_tokens_done: int | None = None
    own_tokens_planned: int | None = None
    seed: int | None = None  # runs that differ only by seed are replicates of one configuration
    hero: bool = False  # the hero run (`ladder hero`): no part of the ladder's cost as fit and the report count it
    # wall seconds the run has taken so far, evaluations and checkpoints included: result.json's wall_time_s, else
    # the last metrics record's elapsed_s (a branch: its own, from its branch step)
    elapsed_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify(
    sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]], books: RunBooks
) -> tuple[str, str | None]:
    """(state, the error of a failed, diverged or corrupt run, or what a waiting branch waits for)."""
    return with_waiting(*classify_own(sd, spec, book, books), books)


def with_waiting(state: str, error: str | None, books: RunBooks) -> tuple[str, str | None]:
    """A branch that is planned or queued but cannot start yet is ``waiting`` (for its trunk)."""
    if state in ("planned", "queued") and books.waiting_for is not None:
        return "waiting", books.waiting_for
    return state, error


def classify_own(
    sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]], books: RunBooks
) -> tuple[str, str | None]:
    """(state, the error of a failed, diverged or corrupt run) from the run's files and its jobs alone: a
    waiting branch is ``planned`` or ``queued`` here."""
    rd = sd.run(spec.run_id)
    if books.status in ("done", "diverged"):
        return books.status, books.error_text() if books.status == "diverged" else None
    rec = job_records.latest(book, spec.run_id)
    if lock_holder(rd) is not None:
        return "running", None
    failed = books.status == "failed" or books.error is not None
    if rec is not None and not rec.cancelled and not (failed and _ended_since(books, rec)):
        live = job_records.job_state(sd, rec)
        if live == "running" and rec.executor == "local":
            live = "queued"  # a local worker is alive, but no process holds this run's lock: it waits its turn
        if live in LIVE:
            return live, None
    if failed:
        return "failed", books.error_text()
    if books.result_problem:
        return "corrupt", f"{layout.RESULT}: {books.result_problem}"
    if books.trained_to_end(spec):
        why = (
            f"{layout.MODEL}/ exists" if books.has_model else f"metrics reach step {books.last_step()} of {spec.steps}"
        )
        return "corrupt", f"{layout.RESULT} is missing although the run trained to its end ({why})"
    if rec is not None and rec.cancelled:
        return "cancelled", None
    if books.checkpoint_step is not None or books.metrics is not None or books.metrics_problem:
        return "interrupted", None
    return "planned", None


def _ended_since(books: RunBooks, rec: job_records.JobRecord) -> bool:
    """Whether the run failed after its latest job was submitted: a local worker then lives on with the rest of
    its queue, but will not train this run again (a failure older than the job is one a retry will replace)."""
    try:
        submitted = _dt.datetime.fromisoformat(rec.submitted_at).timestamp()
    except (TypeError, ValueError):
        return False
    return books.ended_at is not None and books.ended_at >= int(submitted)


def run_state(
    sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]]
) -> tuple[str, str | None]:
    """(state, the error of a failed, diverged or corrupt run, or what a waiting branch waits for)."""
    return classify(sd, spec, book, read_books(sd.run(spec.run_id), spec))


def own_state(
    sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]]
) -> tuple[str, str | None]:
    """:func:`classify_own` from the run's files: what ``submit`` and ``cancel`` act on (a waiting branch is
    ``planned`` or ``queued``)."""
    return classify_own(sd, spec, book, read_books(sd.run(spec.run_id), spec))


def run_status(
    sd: layout.StudyDir, spec: RunSpec, book: dict[str, list[job_records.JobRecord]], books: RunBooks
) -> RunStatus:
    own, own_error = classify_own(sd, spec, book, books)
    state, error = with_waiting(own, own_error, books)
    done_tokens = books.tokens_done(spec)
    last = books.latest()
    train_loss, eval_loss = last.get("loss"), last.get("eval_loss")
    if state == "done" and books.result is not None:  # the result's numbers, not the curve's
        train_loss, eval_loss = books.result.get("final_train_loss"), books.result.get("final_eval_loss")
    tps = last.get("tokens_per_s")  # the trainer's tokens trained so far / seconds in training steps so far
    if books.result is not None and isinstance(books.result.get("tokens_per_s"), (int, float)):
        tps = float(books.result["tokens_per_s"])  # an ended run: its result's (the same definition, whole run)
    elapsed = last.get("elapsed_s")
    if books.result is not None and isinstance(books.result.get("wall_time_s"), (int, float)):
        elapsed = float(books.result["wall_time_s"])
    if not (isinstance(elapsed, (int, float)) and math.isfinite(elapsed) and elapsed > 0):
        elapsed = None
    spent = books.flops_spent(spec)
    per_step = spec.sequences_per_batch * spec.data.seq_len
    # a branch trained from step 0 (its trunk finished without its snapshot) spends all its tokens, not its own steps
    own_flops, own_tokens = (spec.flops, spec.tokens) if books.from_step_0 else (spec.own_flops, spec.own_tokens)
    eta = None
    if state == "running":
        eta = own_seconds_left(own_flops, spent, elapsed)
        if eta is None and tps:
            eta = (spec.tokens - done_tokens) / tps
    rec = job_records.latest(book, spec.run_id)
    problems = [
        f"{layout.METRICS} line {n}: {what}" if n else f"{layout.METRICS}: {what}"
        for n, what in books.metrics_problems(spec, state)
    ]
    if books.checkpoint_problem and state not in ("done", "diverged"):
        problems.append(f"{layout.CHECKPOINT_POINTER}: {books.checkpoint_problem}")
    return RunStatus(
        run_id=spec.run_id,
        variant=spec.variant,
        size=str(spec.axes.get("size", "")),
        state=state,
        tokens_done=done_tokens,
        tokens_planned=spec.tokens,
        progress=min(1.0, done_tokens / spec.tokens),
        train_loss=train_loss,
        eval_loss=eval_loss,
        tokens_per_s=tps,
        eta_s=eta,
        job_id=",".join(rec.job_ids) if rec else None,
        executor=rec.executor if rec else None,
        error=error,
        flops_spent=spent,
        flops_planned=own_flops,
        problems=problems,
        trunk_run_id=spec.trunk.run_id if spec.trunk else None,
        job_alive=own in LIVE,
        own_tokens_done=min(own_tokens, max(0, done_tokens - books.start_step * per_step)),
        own_tokens_planned=own_tokens,
        seed=spec.seed,
        hero=spec.role == "hero",
        elapsed_s=elapsed,
    )


def damaged_status(entry: Damaged) -> RunStatus:
    """The row of a run whose directory or spec.json cannot be read: ``damaged``, with what is wrong and the
    command that repairs it as its error."""
    return RunStatus(
        run_id=entry.run_id,
        variant="?",
        size="?",
        state="damaged",
        tokens_done=0,
        tokens_planned=0,
        progress=0.0,
        train_loss=None,
        eval_loss=None,
        tokens_per_s=None,
        eta_s=None,
        job_id=None,
        executor=None,
        error=f"{entry.why}; `{entry.repair}` rewrites it",
        own_tokens_done=0,
        own_tokens_planned=0,
    )


def study_status(study_dir: Path) -> list[RunStatus]:
    """Every run of the plan in plan order; a damaged run (:class:`ladder.plan.planner.Damaged`) is a row of its own and
    never hides the others."""
    sd = layout.StudyDir(Path(study_dir))
    entries = plan_entries(sd.path)
    book = job_records.read(sd)
    return [
        damaged_status(e) if isinstance(e, Damaged) else run_status(sd, e, book, read_books(sd.run(e.run_id), e))
        for e in entries
    ]


def totals(rows: list[RunStatus]) -> dict[str, Any]:
    counts = {s: 0 for s in STATES}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    # each token once: a branch adds the tokens after its branch step (its prefix is its trunk's)
    done = sum(r.tokens_done if r.own_tokens_done is None else r.own_tokens_done for r in rows)
    planned = sum(r.tokens_planned if r.own_tokens_planned is None else r.own_tokens_planned for r in rows)
    return {
        "runs": len(rows),
        "states": counts,
        "tokens_done": done,
        "tokens_planned": planned,
        "progress": done / planned if planned else 0.0,
        "all_ended": all(r.state in FINAL for r in rows),
        "flops_spent": float(sum(r.flops_spent for r in rows)),
        "hero_flops_spent": float(sum(r.flops_spent for r in rows if r.hero)),
        "heroes": sum(1 for r in rows if r.hero),
        "flops_planned": float(sum(r.flops_planned for r in rows)),
        "flops_convention": "exact counted training FLOPs (flops_per_token x tokens)",
    }


# rate_law's slope until runs of several sizes have shown theirs: a constant FLOP rate, weighed as runs whose sizes
# spread a tenth of a unit of (ln size)^2 (two runs 1.56x apart), so that the measured spread soon decides
RATE_SLOPE_PRIOR, RATE_SLOPE_WEIGHT = 0.0, 0.1


def rate_law(rows: list[RunStatus]) -> tuple[float, float] | None:
    """``(a, b)`` of ``ln(FLOPs per wall second) = a + b ln(FLOPs per token)``: how fast one run works, by its size,
    from the runs that have shown it (a done run: its FLOPs over its wall time; a running one: so far). Wall time,
    not the seconds inside training steps, since evaluations and checkpoints take the clock too. Small models
    turn fewer FLOPs per second than large ones (a constant FLOP rate made the main job's ETA 2-4x too short
    once its small runs came), but more tokens: the slope is fitted, shrunk towards :data:`RATE_SLOPE_PRIOR` (the
    old constant FLOP rate) while the measured sizes hardly differ, and kept within [0, 1] (0: a constant FLOP
    rate, 1: a constant token rate). None until a run has shown a rate."""
    xs, ys = [], []
    for r in rows:
        per_token = _flops_per_token(r)
        if per_token and r.elapsed_s and r.flops_spent > 0 and r.state in ("running", "done"):
            xs.append(math.log(per_token))
            ys.append(math.log(r.flops_spent / r.elapsed_s))
    if not xs:
        return None
    xm, ym = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - xm) ** 2 for x in xs)
    sxy = sum((x - xm) * (y - ym) for x, y in zip(xs, ys))
    b = min(1.0, max(0.0, (sxy + RATE_SLOPE_PRIOR * RATE_SLOPE_WEIGHT) / (sxx + RATE_SLOPE_WEIGHT)))
    return ym - b * xm, b


def own_seconds_left(planned: float, spent: float, elapsed: float | None) -> float | None:
    """A running run's time left at its own wall-clock rate so far (evaluations and checkpoints take the clock
    too): its FLOPs left over its FLOPs per wall second; None before it has spent any or shown its wall time."""
    if not elapsed or spent <= 0:
        return None
    return max(0.0, planned - spent) / (spent / elapsed)


def _flops_per_token(r: RunStatus) -> float | None:
    own = r.tokens_planned if r.own_tokens_planned is None else r.own_tokens_planned
    return r.flops_planned / own if r.flops_planned > 0 and own else None


def seconds_left(rows: list[RunStatus], slots: int) -> float | None:
    """The wall time the study's unfinished runs need: their FLOPs left at :func:`rate_law`'s rate for their size
    (a running run at its own rate so far, as its row's ETA), spread over ``slots`` runs at once, and never less
    than its longest run needs. The runs counted are those queued, running or waiting for their trunk: a planned
    or interrupted run waits for a submit. 0 when nothing is left; None when no run has shown a rate yet (or no
    run knows its FLOPs)."""
    left = [r for r in rows if r.state in (*LIVE, "waiting") and r.flops_planned - r.flops_spent > 0]
    if not left:
        return 0.0
    law = rate_law(rows)
    if law is None:
        return None
    a, b = law
    times = []
    for r in left:
        per_token = _flops_per_token(r)
        if per_token is None:
            return None
        own = own_seconds_left(r.flops_planned, r.flops_spent, r.elapsed_s) if r.state == "running" else None
        law_rate = math.exp(a + b * math.log(per_token))
        times.append(own if own is not None else (r.flops_planned - r.flops_spent) / law_rate)
    return max(sum(times) / max(1, slots), max(times))


class EtaClock:
    """The time left for a study's remaining work (:func:`seconds_left`), moving steadily.

    Each call (a poll of :func:`study_status`) estimates the time left from every run's rate so far, by size,
    spread over as many runs at once as the clock has seen run together. The ETA shown counts down with the clock
    between polls and moves towards the new estimate at the pace of ``glide_s``, so that work that shows in lumps
    (a run's metrics arrive every log interval, a run ends) does not make it jump."""

    def __init__(self, glide_s: float = 60.0, clock=time.monotonic) -> None:
        self.glide_s, self.clock = glide_s, clock
        self.eta: float | None = None
        self.last: float | None = None
        self.slots = 1

    def estimate(self, rows: list[RunStatus]) -> float | None:
        """The time left as this poll sees it, before the glide (benchmarks/eta_replay.py puts its reference here)."""
        return seconds_left(rows, self.slots)

    def __call__(self, rows: list[RunStatus]) -> float | None:
        now = self.clock()
        self.slots = max(self.slots, sum(r.state == "running" for r in rows))
        raw = self.estimate(rows)
        dt = now - self.last if self.last is not None else 0.0
        self.last = now
        if raw == 0.0:
            self.eta = 0.0
        elif raw is None or self.eta is None:
            self.eta = raw
        else:  # count down with the clock, and move towards the new estimate at the pace of glide_s
            ticked = max(0.0, self.eta - dt)
            self.eta = ticked + (1.0 - math.exp(-dt / self.glide_s)) * (raw - ticked)
        return self.eta


def wait(study_dir: Path, *, poll_s: float = 2.0, on_update=None, timeout_s: float | None = None) -> list[RunStatus]:
    """Poll until every run has ended (done, failed, diverged, cancelled) or nothing is alive to end it."""
    start = time.monotonic()
    while True:
        rows = study_status(study_dir)
        if on_update:
            on_update(rows)
        alive = any(r.state in LIVE or r.job_alive for r in rows)
        if not alive:
            return rows
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            return rows
        time.sleep(poll_s)


def refuse_dropping_live_runs(study_dir: Path, keep: list[str]) -> None:
    """Refuse to plan a study again when the new plan (run ids ``keep``) drops runs of its current plan that are
    queued or running (their spec changed: another lr, schedule, size ...). Once out of plan.json no command of the
    study shows or cancels them, and their workers train on for nothing. A study not planned yet has none."""
    from ladder.errors import StateError
    from ladder.plan.planner import planned_heroes

    sd = layout.StudyDir(Path(study_dir))
    if not sd.plan.is_file():
        return
    try:
        entries = plan_entries(sd.path)
    except StateError:  # an unreadable plan.json: what planning again rewrites
        return
    kept = set(keep) | set(planned_heroes(sd))
    try:  # read once: a damaged jobs.json is said below, and its runs are judged from their folders alone
        book, damaged_jobs = job_records.read_strict(sd), None
    except job_records.DamagedJobs as exc:
        book, damaged_jobs = {}, str(exc)
    live = {}
    for e in entries:
        if not isinstance(e, Damaged) and e.run_id not in kept:
            state, _ = own_state(sd, e, book)
            # without jobs.json a queued job shows as planned, a running one's as interrupted: any run not ended
            if state in LIVE or (damaged_jobs and state not in FINAL):
                live[e.run_id] = state
    if live and damaged_jobs:
        raise StateError(
            f"cannot plan {sd.path} again: {damaged_jobs}, so ladder cannot know whether the {len(live)} run(s) of "
            f"the current plan that the new plan drops ({', '.join(live)}) are queued or running, and once out of "
            "the plan no command of the study shows or cancels them: check that none is alive (squeue, ps), "
            "remove it and plan again"
        )
    if live:
        where = layout.shell_word(sd.path)
        runs = " ".join(f"--run {r}" for r in live)
        raise StateError(
            f"{sd.path}: the new plan drops {len(live)} run(s) of the current plan that are still queued or "
            f"running: {', '.join(f'{r} ({s})' for r, s in live.items())}; once out of the plan no command of the "
            "study shows or cancels them, and they would train on for nothing: "
            f"`ladder cancel {where} {runs}` stops them (a running one checkpoints first), or wait until "
            "`ladder status` shows them ended; then plan again"
        )


def earlier_runs(study_dir: Path) -> dict[str, int]:
    """The run directories of earlier plans that the current plan no longer has (the study file was edited: another
    lr, corpus, size ...), by state: kept on disk, never collected or fitted, but no run leaves the books
    unsaid (`ladder status` counts them). Empty when there are none or plan.json cannot be read."""
    from ladder.errors import StateError
    from ladder.plan.planner import read_run_spec

    sd = layout.StudyDir(Path(study_dir))
    try:
        planned = {e.run_id for e in plan_entries(sd.path)}
    except StateError:
        return {}
    book = job_records.read(sd)
    counts: dict[str, int] = {}
    for rd in sd.all_run_dirs():
        if rd.run_id in planned:
            continue
        spec = read_run_spec(rd)
        state = "damaged" if isinstance(spec, str) else run_state(sd, spec, book)[0]
        counts[state] = counts.get(state, 0) + 1
    return counts
