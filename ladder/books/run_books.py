"""What a run's own files say about it, read without ever raising: its result (checked), its error, its metrics
line by line, its checkpoint step, whether it trained to its last step, and the tokens and FLOPs it consumed.

``ladder status`` and ``ladder collect`` read every run through :func:`read_books`, so the two always agree on a
run's state, error, tokens and FLOPs. Nothing here looks at jobs (``ladder.books.run_status`` adds the executor's view).

Conventions:

- ``result.json`` is authoritative for a finished run (its losses, tokens, FLOPs); ``metrics.jsonl`` is its
  curve. A result that cannot be read, that is not a JSON object, whose ``status`` is not done, diverged or
  failed, that says done without the keys a done result has, or whose numbers are not numbers (text, a boolean,
  an infinite or negative count, a done run's loss that is missing, not finite or not positive, or a done run's
  final eval loss outside :data:`MIN_LOSS` to :data:`MAX_LOSS`: :func:`number_problems`) is a *problem* (the run
  is ``corrupt``, the field named), never a silent absence.
- A run's error text is the result's ``reason`` or ``error`` key, else ``error.json``'s ``error_type: message``.
- Tokens consumed: a result's ``tokens``, else the furthest of the last complete metrics record and the
  checkpoint's step. FLOPs spent: a result's ``flops_spent`` when it has one (a branch counts only the steps it
  trained itself), else exact counted FLOPs of the tokens consumed (``flops_per_token x tokens``); a cooldown
  branch that started from its trunk's snapshot counts tokens from the branch step (the trunk's prefix, which
  its metrics and checkpoint step include, is the trunk's: ``branch_step x tokens per step x flops_per_token``
  less).
- Waiting: a cooldown branch that has not started while its trunk may still reach the branch step
  (:func:`ladder.books.branches.waits_for`, the rule the local queue and ``submit`` follow too).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from ladder import layout
from ladder.books.branches import waits_for
from ladder.model.config import RunSpec

RESULT_STATES = ("done", "diverged", "failed")
DONE_KEYS = ("final_train_loss", "final_eval_loss", "tokens", "flops", "wall_time_s")
# a result's numbers, each a number or null: the losses (nats/token, positive; a done run's must be finite and its
# final_eval_loss there), and the counts, times and rates (finite, >= 0; a done run's tokens and flops positive)
LOSS_KEYS = ("final_train_loss", "final_eval_loss", "final_eval_loss_repeats", "final_eval_loss_novel")
COUNT_KEYS = (
    "tokens",
    "steps",
    "flops",
    "flops_spent",
    "wall_time_s",
    "train_time_s",
    "tokens_per_s",
    "mfu",
    "restarts",
    "diverged_at_step",
    "eval_repeat_share",
)
# the plausible range of a loss in nats/token, the fit's (ladder.reports.fits.runs MIN_LOSS/MAX_LOSS, which a test
# holds equal; not imported, so that `ladder status` does not load the fits): a done run's final eval loss outside
# it is a mistake in its result.json (1e9, 150, 0.0005), and the run is corrupt rather than one `ladder fit` refuses
MIN_LOSS = 1e-3
MAX_LOSS = 100.0


@dataclass(frozen=True)
class RunBooks:
    """Everything a run directory holds that says where the run stands."""

    result: dict[str, Any] | None  # a checked result.json; None when missing or unusable
    result_problem: str | None  # why a result.json that exists cannot be used
    error: dict[str, Any] | None  # error.json (the job raised before or instead of writing a result)
    metrics: layout.JsonlLines | None  # None when there is no metrics.jsonl (or it cannot be opened)
    metrics_problem: str | None  # the file as a whole cannot be read
    checkpoint_step: int | None
    has_model: bool
    ended_at: float | None = None  # when result.json or error.json was last written (epoch seconds)
    waiting_for: str | None = None  # a branch that cannot start yet: what it waits for (its trunk at its step)
    start_step: int = 0  # a branch started from its trunk's snapshot: the branch step (its prefix is the trunk's)
    checkpoint_problem: str | None = None  # checkpoint.json is unreadable or names a folder that is gone
    from_step_0: bool = False  # a branch whose trunk finished without its snapshot: it trains all its steps itself

    @property
    def status(self) -> str | None:
        return self.result.get("status") if self.result else None

    def error_text(self) -> str | None:
        """The run's error, as the result or error.json state it (None when neither does)."""
        if self.result:
            for key in ("reason", "error"):
                value = self.result.get(key)
                if value not in (None, ""):
                    return value if isinstance(value, str) else json.dumps(value)
        if self.error:
            kind, message = self.error.get("error_type"), self.error.get("message")
            if kind or message:
                return f"{kind or 'error'}: {message or ''}".rstrip(": ")
        return None

    def last_step(self) -> int:
        """The furthest optimizer step that the metrics or the checkpoint say was completed."""
        steps = [int(r["step"]) for r in self._records() if isinstance(r.get("step"), (int, float))]
        return max([*steps, self.checkpoint_step or 0])

    def trained_to_end(self, spec: RunSpec) -> bool:
        """Whether the run got through its last step (its metrics say so, or it saved its final model)."""
        return self.has_model or self.last_step() >= spec.steps

    def tokens_done(self, spec: RunSpec) -> int:
        if self.result and isinstance(self.result.get("tokens"), (int, float)):
            return int(self.result["tokens"])
        tokens = [int(r["tokens"]) for r in self._records() if isinstance(r.get("tokens"), (int, float))]
        per_step = spec.sequences_per_batch * spec.data.seq_len
        return min(spec.tokens, max([*tokens, (self.checkpoint_step or 0) * per_step]))

    def flops_spent(self, spec: RunSpec) -> float:
        if self.result and isinstance(self.result.get("flops_spent"), (int, float)):
            return float(self.result["flops_spent"])
        if self.result and isinstance(self.result.get("flops"), (int, float)):
            return float(self.result["flops"])
        prefix = self.start_step * spec.sequences_per_batch * spec.data.seq_len
        return float(spec.flops_per_token) * max(0, self.tokens_done(spec) - prefix)

    def latest(self) -> dict[str, Any]:
        """The last train record's loss, throughput and wall time so far, and the last eval loss in the metrics."""
        last: dict[str, Any] = {}
        for rec in self._records():
            if rec.get("kind") == "eval":
                last["eval_loss"] = rec.get("eval_loss")
            else:
                last.update(loss=rec.get("loss"), tokens_per_s=rec.get("tokens_per_s"), elapsed_s=rec.get("elapsed_s"))
        return last

    def metrics_problems(self, spec: RunSpec, state: str) -> list[tuple[int | None, str]]:
        """(line number or None, what) of every skipped metrics line, and of a done run's curve that stops short
        of its last step. A torn last line is no problem while a live writer (a queued or running run) may still
        be finishing it."""
        if self.metrics_problem:
            return [(None, self.metrics_problem)]
        live = state in ("queued", "running")
        torn = self.metrics.torn_tail if self.metrics else None
        bad = self.metrics.bad if self.metrics else []
        out: list[tuple[int | None, str]] = [(n, what) for n, what in bad if not (live and n == torn)]
        if state == "done":
            steps = [
                r["step"]
                for r in self._records()
                if r.get("kind", "train") == "train" and isinstance(r.get("step"), (int, float))
            ]
            if max(steps, default=0) < spec.steps:
                out.append(
                    (
                        None,
                        f"the curve ends at step {max(steps, default=0)} of {spec.steps} "
                        f"(the run's numbers are in {layout.RESULT})",
                    )
                )
        return out

    def _records(self) -> list[dict[str, Any]]:
        return self.metrics.records if self.metrics else []


def check_result(result: Any) -> str | None:
    """Why a parsed result.json cannot be used, or None when it can."""
    if not isinstance(result, dict):
        return f"not a JSON object (a JSON {type(result).__name__})"
    status = result.get("status")
    if status not in RESULT_STATES:
        return f"status {status!r} is not one of {', '.join(RESULT_STATES)}"
    if status == "done":
        missing = [k for k in DONE_KEYS if k not in result]
        if missing:
            return f"says done but lacks {', '.join(missing)}"
    bad = number_problems(result)
    return "; ".join(bad) if bad else None


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _beyond_int64(x: Any) -> bool:
    """An integer that no int64 column holds (10**30: pyarrow's OverflowError once broke ``collect``)."""
    return isinstance(x, int) and abs(x) > layout.INT64_MAX


def number_problems(result: dict[str, Any]) -> list[str]:
    """What is wrong with the numbers of a result.json (:data:`LOSS_KEYS`, :data:`COUNT_KEYS`), each naming its
    field: THE check of a result's numbers, so that ``ladder status`` and ``ladder collect`` (and through them
    ``ladder fit``) never take text, an infinite or a negative number, or an integer beyond int64, for a result.
    A diverged or failed run's losses may be null or not finite (that is what diverging means), but never text or
    negative."""
    done = result.get("status") == "done"
    out = []
    for key in (*LOSS_KEYS, *COUNT_KEYS):
        value = result.get(key)
        if value is None:
            if done and key == "final_eval_loss":
                out.append(f"{key} is null: a done run's final eval loss must be a number")
            continue
        if not _is_number(value):
            out.append(f"{key} is {json.dumps(value)[:40]}, not a number")
            continue
        if _beyond_int64(value):
            out.append(f"{key} is {float(value):.3g}, beyond a 64-bit count")
            continue
        value = float(value)
        if key in LOSS_KEYS:
            if (done or math.isfinite(value)) and not (math.isfinite(value) and value > 0):
                out.append(f"{key} is {value:g}, not a loss (a finite number of nats/token > 0)")
            elif done and key == "final_eval_loss" and not MIN_LOSS <= value <= MAX_LOSS:
                out.append(
                    f"{key} is {value:g}, outside {MIN_LOSS:g} to {MAX_LOSS:g} nats/token, the range of any "
                    "language model's loss"
                )
        elif not (math.isfinite(value) and value >= 0) or (done and key in ("tokens", "flops") and value == 0):
            out.append(
                f"{key} is {value:g}, not a finite number {'> 0' if done and key in ('tokens', 'flops') else '>= 0'}"
            )
    return out


METRIC_NUMBERS = (
    "loss",
    "eval_loss",
    "eval_loss_repeats",
    "eval_loss_novel",
    "lr",
    "grad_norm",
    "tokens_per_s",
    "mfu",
    "elapsed_s",
)


def checked_metrics(lines: layout.JsonlLines) -> layout.JsonlLines:
    """``lines`` less the records whose numbers are not numbers (text, a boolean; a ``step`` or ``tokens`` that is
    not a finite number >= 0; an integer beyond int64) or whose ``kind`` is not text, each skipped and named like a corrupt line: one bad
    record costs that line, and ``ladder status`` and ``ladder collect`` never show or write text as a loss. A
    non-finite loss stays (a run that diverged logged it)."""
    keep, numbers, bad = [], [], list(lines.bad)
    for n, rec in zip(lines.line_numbers, lines.records):
        kind = rec.get("kind", "train")
        why = [] if isinstance(kind, str) else [f"kind is {json.dumps(kind)[:40]}, not text"]
        for key in ("step", "tokens", *METRIC_NUMBERS):
            value = rec.get(key)
            if value is None:
                continue
            if not _is_number(value):
                why.append(f"{key} is {json.dumps(value)[:40]}, not a number")
            elif _beyond_int64(value):
                why.append(f"{key} is {float(value):.3g}, beyond a 64-bit count")
            elif key in ("step", "tokens") and not (math.isfinite(value) and value >= 0):
                why.append(f"{key} is {float(value):g}, not a finite number >= 0")
        if why:
            bad.append((n, "; ".join(why)))
        else:
            keep.append(rec)
            numbers.append(n)
    if len(bad) == len(lines.bad):
        return lines
    return layout.JsonlLines(records=keep, line_numbers=numbers, bad=sorted(bad), torn_tail=lines.torn_tail)


def _read_json(path) -> tuple[Any, str | None, bool]:
    """(value, problem, exists)."""
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        # a named pipe would block the read for ever, and a link to /dev/zero fill the memory: one run's damage
        return None, "is not a regular file (a pipe or a device: it would never be read)", True
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None, None, False
    except OSError as exc:
        return None, f"cannot be read ({exc})", True
    try:
        return layout.loads_json(text.decode("utf-8")), None, True
    except UnicodeDecodeError:
        return None, "not UTF-8 text", True
    except ValueError as exc:
        return None, f"unreadable JSON ({exc})", True


def _checkpoint_step(rd: layout.RunDir) -> int | None:
    pointer, problem, exists = _read_json(rd.checkpoint_pointer)
    if not exists or problem or not isinstance(pointer, dict):
        return None
    try:
        return int(pointer["step"])
    except (KeyError, TypeError, ValueError):
        return None


def checkpoint_problem(rd: layout.RunDir) -> str | None:
    """Why checkpoint.json cannot be resumed from (unreadable, or naming a checkpoint folder that is gone), said
    with the repair; None when it is fine or absent. Such a run looked "interrupted (resumable)" in `status`, and
    its next job failed at once."""
    pointer, problem, exists = _read_json(rd.checkpoint_pointer)
    if not exists:
        return None
    repair = f"delete {rd.checkpoint_pointer} to restart the run from scratch"
    if problem or not isinstance(pointer, dict) or not isinstance(pointer.get("path"), str):
        return f"{problem or 'not a checkpoint pointer'}: the run cannot resume; {repair}"
    if not (rd.path / pointer["path"]).is_dir():
        return f"names {pointer['path']}, which is gone: the run cannot resume; {repair}"
    return None


def _start_step(rd: layout.RunDir, spec: RunSpec | None) -> int:
    """Where a branch's own steps begin: its branch step when its trunk's snapshot is there (a branch without a
    checkpoint of its own starts from it whenever it exists, and a snapshot is never removed), else 0 (it trains
    from step 0, or has not started)."""
    t = spec.trunk if spec is not None else None
    return t.step if t is not None and rd.sibling(t.run_id).snapshot_dir(t.step).is_dir() else 0


def trains_from_step_0(rd: layout.RunDir, spec: RunSpec | None) -> bool:
    """A branch whose trunk finished without a snapshot at its branch step (a budget planned after the trunk
    trained): it trains from step 0 as an independent run, so its own tokens and FLOPs are all of its run's."""
    t = spec.trunk if spec is not None else None
    if t is None or _start_step(rd, spec):
        return False
    return layout.result_status(rd.sibling(t.run_id)) == "done"


def read_result(rd: layout.RunDir) -> tuple[dict[str, Any] | None, str | None]:
    """A run's result.json, checked (:func:`check_result`): ``(result, None)``, ``(None, why it cannot be used)``,
    or ``(None, None)`` when there is none."""
    raw, problem, exists = _read_json(rd.result)
    if not exists:
        return None, None
    problem = problem or check_result(raw)
    other = raw.get("run_id") if isinstance(raw, dict) else None
    if not problem and isinstance(other, str) and other != rd.run_id:  # a copied or linked file: not this run's
        problem = f"is the result of another run ({other}), copied or linked here"
    return (None, problem) if problem else (raw, None)


def read_books(rd: layout.RunDir, spec: RunSpec | None = None) -> RunBooks:
    """The books of run directory ``rd``; with its ``spec``, a branch's also say whether it waits for its trunk
    and where its own steps begin."""
    result, problem = read_result(rd)
    error, err_problem, err_exists = _read_json(rd.error)
    if err_exists and not isinstance(error, dict):
        error = {"error_type": "unreadable error.json", "message": err_problem or "not a JSON object"}
    metrics, metrics_problem = None, None
    if rd.metrics.is_file():
        try:
            metrics = checked_metrics(layout.read_jsonl_lines(rd.metrics))
        except OSError as exc:
            metrics_problem = f"cannot be read ({exc})"
    return RunBooks(
        result=result,
        result_problem=problem,
        error=error if err_exists else None,
        metrics=metrics,
        metrics_problem=metrics_problem,
        checkpoint_step=_checkpoint_step(rd),
        has_model=rd.model.is_dir(),
        ended_at=max((p.stat().st_mtime for p in (rd.result, rd.error) if p.is_file()), default=None),
        waiting_for=waits_for(rd, spec) if spec is not None else None,
        start_step=_start_step(rd, spec),
        checkpoint_problem=checkpoint_problem(rd),
        from_step_0=trains_from_step_0(rd, spec),
    )
