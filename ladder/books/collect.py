"""Turn run directories into one results table (``results.parquet`` / ``results.csv``) and a long table of
per-step curves (``curves.parquet``).

ONE ROW PER PLANNED RUN, whatever its state: nothing is lost from the books. Reads only the files the runs
wrote (through :mod:`ladder.books.run_books`: ``spec.json``, ``result.json``, ``metrics.jsonl``, ``error.json``, the
checkpoint pointer, lm-eval's results) and ``jobs.json`` (through :mod:`ladder.books.run_status`, for queued, running
and cancelled runs). Nothing here raises on a bad run: a problem costs only what it touches, and is reported
(run, file, line when there is one, what is wrong):

- a result.json that is unreadable, not an object, says done without a done result's keys, or has a number
  that is not one (text, an infinite or negative count, a done run's loss that is not a finite positive number:
  :func:`ladder.books.run_books.number_problems`, the check ``ladder status`` makes too) makes the run ``corrupt``
  (its row stays, with the problem, naming the field, as its error); so does a missing result.json on a run that
  trained to its end;
- a torn or corrupt line of metrics.jsonl (one with text for a number too:
  :func:`ladder.books.run_books.checked_metrics`) costs that line (a torn last line of a live run is no problem: the
  writer may be finishing it); a done run whose curve stops short of its last step is reported;
- an unreadable lm-eval results file costs that file's task columns.

Columns the books add to the run's shape, recipe and result (see :data:`BOOK_COLUMNS`): ``status``,
``error``, ``reason``, ``tokens_done``, ``flops_spent``, ``flops_planned``, ``problems``, and what relates runs:
``seed``, ``trunk_run_id``, ``branch_step``, and the run's ``role`` (a rung, fitted, or the hero, scored);
``loss`` is the result's eval loss for a done run and NaN for every other state. ``status`` agrees with
``ladder status`` (the same books, the same :func:`ladder.books.run_status.classify`), ``waiting`` included.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ladder import layout
from ladder.books import job_records
from ladder.books.run_books import RunBooks, read_books
from ladder.books.run_status import FINAL, STATES, classify
from ladder.model.config import RunSpec
from ladder.plan.planner import Damaged, plan_entries
from ladder.plan.study_lock import editing_study

PENDING = tuple(s for s in STATES if s not in FINAL)  # not ended yet: planned, waiting, queued, running, interrupted
BOOK_COLUMNS = {
    "status": "the run's state: " + ", ".join(STATES),
    "tokens": "the run's training tokens D: its result's, else as planned",
    "flops": "the run's exact counted training FLOPs C at those tokens: its result's, else as planned",
    "error": "failed, diverged, corrupt: the error text (result.json's reason or error, error.json, or the "
    "problem with the run's files); null otherwise",
    "reason": "why the run has no loss: its error, or what its state means (e.g. 'interrupted at step 40 of "
    "120 (resumable)', 'waits for trunk <id> at step 80'); null for a done run",
    "tokens_planned": "the run's training tokens D as planned (spec.json's tokens; a branch: its trunk's prefix "
    "included, the tokens its model will have seen, as tokens_done counts them; the plan's totals and "
    "flops_planned count a branch's own steps only)",
    "tokens_done": "training tokens consumed: a result's tokens, else the last complete metrics record or the "
    "checkpoint's step (a branch's position: its trunk's prefix included)",
    "flops_spent": "exact counted training FLOPs the run spent: the result's flops_spent (a branch: only the steps "
    "it trained itself), else flops_per_token x tokens_done, less a branch's prefix (branch_step x "
    "tokens per step) when it started from its trunk's snapshot; failed, cancelled and partial runs "
    "included",
    "flops_planned": "exact counted training FLOPs the run costs as planned (flops_per_token x tokens_planned; a "
    "branch: its own steps after branch_step, as the plan's totals count it)",
    "seed": "the run's one seed (initialisation and data order): runs that differ only by seed are repeats of one "
    "configuration",
    "trunk_run_id": "a cooldown branch: the trunk it branches off; null otherwise",
    "branch_step": "a cooldown branch: the trunk's step it starts from (it trains steps branch_step+1..steps)",
    "role": "'rung' (a run of the ladder: the fits use it) or 'hero' (planned by `ladder hero`: scored against the "
    "frozen forecast by `ladder forecast score`, never fitted)",
    "loss": "final eval loss (nats/token) of a done run; NaN for every other state",
    "loss_repeats": "a done run's final eval loss over the in-context repeats alone, the targets whose trigram "
    "already ended earlier in their window (ladder.model.data.repeats); NaN otherwise or when the "
    "run predates the split",
    "loss_novel": "the same over the other (novel) targets",
    "repeat_share": "the repeats' share of the evaluation targets (the same for every run of one data key)",
    "data": "which preparation of the corpus the run trained on (its tokenizer's SHA-256, first 12 hex digits, and "
    "its train and validation token counts, from result.json's data); runs of one study on others are not "
    "comparable, and collect and fit say so; null for a run that has not ended or predates the record",
    "problems": "'; '-joined problems found in the run's files (skipped metrics lines, unreadable lm-eval "
    "files, a truncated curve); null when none",
}


@dataclass(frozen=True)
class Problem:
    run_id: str
    file: str
    what: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file} line {self.line}" if self.line is not None else self.file
        return f"{self.run_id}: {where}: {self.what}"

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "file": self.file, "line": self.line, "what": self.what}


@dataclass
class Collected:
    runs: pd.DataFrame
    curves: pd.DataFrame
    problems: list[Problem] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # not ended yet (PENDING states)
    failed: list[str] = field(default_factory=list)  # state failed (result.json or error.json says so)
    states: dict[str, int] = field(default_factory=dict)


def _curves(spec: RunSpec, books: RunBooks) -> list[dict]:
    rows = []
    for rec in books.metrics.records if books.metrics else []:
        tokens = rec.get("tokens")
        rows.append(
            {
                "run_id": spec.run_id,
                "kind": rec.get("kind", "train"),
                "step": rec.get("step"),
                "tokens": tokens,
                "flops": float(tokens) * spec.flops_per_token if isinstance(tokens, (int, float)) else None,
                "loss": rec.get("loss"),
                "eval_loss": rec.get("eval_loss"),
                "eval_loss_repeats": rec.get("eval_loss_repeats"),
                "eval_loss_novel": rec.get("eval_loss_novel"),
                "lr": rec.get("lr"),
                "grad_norm": rec.get("grad_norm"),
                "tokens_per_s": rec.get("tokens_per_s"),
                "mfu": rec.get("mfu"),
            }
        )
    return rows


def _metrics_problems(spec: RunSpec, books: RunBooks, state: str) -> list[Problem]:
    return [Problem(spec.run_id, layout.METRICS, what, line) for line, what in books.metrics_problems(spec, state)]


def _read_tasks(rd: layout.RunDir) -> tuple[dict[str, float], list[Problem]]:
    """lm-eval results as ``task/<task>/<metric>`` columns (numbers only; stderr columns dropped); an unreadable
    file costs only its own columns."""
    out: dict[str, float] = {}
    problems: list[Problem] = []
    if not rd.lm_eval.is_dir():
        return out, problems
    for path in sorted(rd.lm_eval.rglob("results*.json")):
        name = str(path.relative_to(rd.path))
        try:
            data = layout.loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            problems.append(Problem(rd.run_id, name, f"unreadable JSON ({exc})"))
            continue
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, dict):
            problems.append(Problem(rd.run_id, name, "no 'results' mapping of tasks"))
            continue
        for task, metrics in results.items():
            for key, value in metrics.items() if isinstance(metrics, dict) else ():
                metric, _, _filter = str(key).partition(",")
                if isinstance(value, (int, float)) and not isinstance(value, bool) and "stderr" not in metric:
                    out[f"task/{task}/{metric}"] = float(value)
    return out, problems


def _reason(spec: RunSpec, state: str, error: str | None, books: RunBooks) -> str | None:
    if state == "done":
        return None
    if error:
        return error
    step = books.last_step()
    return {
        "cancelled": f"cancelled at step {step} of {spec.steps}",
        "interrupted": f"interrupted at step {step} of {spec.steps} (resumable)",
        "running": f"running: step {step} of {spec.steps}",
        "queued": f"queued (step {step} of {spec.steps})",
        "planned": "planned, not started",
    }.get(state, f"{state} (step {step} of {spec.steps})")


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def _text(x: Any) -> str | None:
    """A result's text field as text (a hand-edited number or object in it must not break the table's column)."""
    return x if x is None or isinstance(x, str) else json.dumps(x)


def run_record(
    spec: RunSpec,
    result: dict,
    *,
    status: str | None = None,
    error: str | None = None,
    reason: str | None = None,
    tokens_done: int | None = None,
    flops_spent: float | None = None,
    problems: list[Problem] | None = None,
) -> dict[str, Any]:
    """One row of the results table: the run's labels, shape and recipe from its spec, its numbers from its
    ``result`` (an empty dict when it has none) and its books (state, error, what it consumed). Called with a
    result alone, the books follow from the result."""
    shape = spec.shape
    status = status or result.get("status")
    if tokens_done is None:
        tokens_done = result.get("tokens")
    if flops_spent is None:
        flops_spent = result.get("flops_spent", result.get("flops"))
    # the run's point (D, C): its result's numbers, or as planned; what it consumed is tokens_done/flops_spent
    tokens = result.get("tokens", spec.tokens)
    flops = result.get("flops", float(spec.flops_per_token) * tokens if tokens is not None else spec.flops)
    done = status == "done"
    loss = result.get("final_eval_loss") if done else None
    row: dict[str, Any] = {
        "run_id": spec.run_id,
        "variant": spec.variant,
        "scale": str(spec.axes.get("budget", spec.axes.get("size", ""))),
    }
    for axis, value in spec.axes.items():
        row[f"axis/{axis}"] = value
    row.update(
        {
            "d_model": shape.d_model,
            "n_layers": shape.n_layers,
            "n_heads": shape.n_heads,
            "n_kv_heads": shape.n_kv_heads,
            "head_dim": shape.head_dim,
            "ffn_dim": shape.ffn_dim,
            "vocab_size": shape.vocab_size,
            "tie_embeddings": shape.tied,
            "aspect_ratio": shape.aspect_ratio,
            "seq_len": spec.data.seq_len,
            "param_convention": spec.param_convention,
            "params": spec.params,
            "params_total": shape.params_total,
            "params_embedding": shape.params_embedding,
            "params_non_embedding": shape.params_non_embedding,
            "tokens_planned": spec.tokens,
            "tokens": tokens,
            "tokens_done": tokens_done,
            "flops_per_token": spec.flops_per_token,
            "flops": flops,
            "flops_planned": spec.own_flops,
            "flops_spent": flops_spent,
            "seed": spec.seed,  # runs that differ only by seed are repeats of one configuration
            "trunk_run_id": spec.trunk.run_id if spec.trunk else None,
            "branch_step": spec.trunk.step if spec.trunk else None,
            "role": spec.role,
            "batch_tokens": spec.batch_tokens,
            "lr": spec.lr,
            "schedule": spec.schedule.kind,
            "warmup_steps": spec.warmup_steps,
            "steps": spec.steps,
            "status": status,
            "error": error,
            "final_train_loss": result.get("final_train_loss"),
            "final_eval_loss": result.get("final_eval_loss"),
            "loss": _number(loss),
            "loss_repeats": _number(result.get("final_eval_loss_repeats")) if done else math.nan,
            "loss_novel": _number(result.get("final_eval_loss_novel")) if done else math.nan,
            "repeat_share": _number(result.get("eval_repeat_share")) if done else math.nan,
            "wall_time_s": result.get("wall_time_s"),
            "tokens_per_s": result.get("tokens_per_s"),
            "mfu": result.get("mfu"),
            "restarts": result.get("restarts"),
            "diverged_at_step": result.get("diverged_at_step"),
            "reason": reason if reason is not None else _text(result.get("reason")),
            "data": data_id(result.get("data")),
            "problems": "; ".join(str(p).split(": ", 1)[1] for p in problems) if problems else None,
        }
    )
    return row


def data_id(identity: Any) -> str | None:
    """The ``data`` column: a run's result.json ``data`` (the preparation it trained on) as one short word,
    ``<tokenizer sha256[:12]>/<train tokens>/<validation tokens>``; None when it records none."""
    if not isinstance(identity, dict):
        return None
    tok, train, val = (identity.get(k) for k in ("tokenizer_sha256", "train_tokens", "val_tokens"))
    if not isinstance(tok, str) or not all(isinstance(n, int) and not isinstance(n, bool) for n in (train, val)):
        return None
    return f"{tok[:12]}/{train}/{val}"


def saved_tokenizer_id(rd: layout.RunDir) -> str | None:
    """What :func:`mixed_data` knows of the data of a done run trained before result.json recorded it (an older
    ladder): the first 12 hex digits of the SHA-256 of the tokenizer.json its final model was saved with, the
    digits a record's ``tokenizer_sha256`` gives; None without that file. Never a column of the results table:
    filling ``data`` for such runs would change the table's hash, and call every freeze of the study stale."""
    from ladder.model.data.tokenizer import TOKENIZER_FILE, file_sha256

    try:
        return file_sha256(rd.model / TOKENIZER_FILE)[:12]
    except (OSError, ValueError):  # none, unreadable, or a run id that names no folder
        return None


def mixed_data(runs: pd.DataFrame, study_dir: Path) -> str | None:
    """Why the done rungs of a results table cannot all be fitted as one ladder: they trained on different
    preparations of the corpus (its files or its tokenizer changed in place after some of them had finished, so
    the runs planned later trained on other tokens, and a loss per token under another tokenizer is another
    unit); None when they share one. A run that predates the record is known by the tokenizer its model was
    saved with (:func:`saved_tokenizer_id`) and taken as sharing the preparation of the recorded runs on that
    tokenizer; one without even that, as sharing any."""
    if "status" not in runs.columns or "run_id" not in runs.columns:
        return None
    done = runs[(runs["status"] == "done") & (runs.get("role", "rung") != "hero")]
    data = done["data"].astype(object) if "data" in done.columns else pd.Series(None, index=done.index, dtype=object)
    sd = layout.StudyDir(Path(study_dir))
    for i in data.index[data.isna()]:  # an older ladder's run (or table): the tokenizer its model was saved with
        data[i] = saved_tokenizer_id(sd.run(str(done.at[i, "run_id"])))
    done = done.assign(data=data)[data.notna()]
    recorded = [d for d in dict.fromkeys(done["data"]) if "/" in d]

    def preparation(data: str) -> str:  # a tokenizer alone: the first recorded preparation on it
        return data if "/" in data else next((r for r in recorded if r.split("/")[0] == data), data)

    groups = done.groupby(done["data"].map(preparation), sort=False)["run_id"].apply(list)
    if len(groups) < 2:
        return None

    def said(data: str, ids: list[str]) -> str:
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        if "/" not in data:
            return f"{len(ids)} on tokenizer {data}, trained by an older ladder that recorded no token counts ({shown})"
        tok, train, val = data.split("/")
        return f"{len(ids)} on tokenizer {tok} with {int(train):,} train tokens ({shown})"

    return (
        f"the done runs trained on {len(groups)} different preparations of the corpus: "
        + "; ".join(said(d, ids) for d, ids in groups.items())
        + ": the corpus or its tokenizer changed in place while the study grew, and a loss under another "
        "tokenizer or corpus is not the same measure, yet the fit takes them as one ladder; to fit one ladder, "
        "train every run on the corpus as it is now in a new study folder (`ladder plan STUDY --out NEW`); "
        f"each run's `data` is in {layout.StudyDir(Path(study_dir)).results_csv}"
    )


def collect(study_dir: Path) -> Collected:
    sd = layout.StudyDir(Path(study_dir))
    entries = plan_entries(sd.path)
    book = job_records.read(sd)
    rows, curves, problems = [], [], []
    states: dict[str, list[str]] = {}
    for spec in entries:
        if isinstance(spec, Damaged):
            error = f"{spec.why}; `{spec.repair}` rewrites it"
            states.setdefault("damaged", []).append(spec.run_id)
            problems.append(Problem(spec.run_id, layout.SPEC, f"{spec.why}; `{spec.repair}` rewrites it"))
            rows.append(
                {
                    "run_id": spec.run_id,
                    "status": "damaged",
                    "error": error,
                    "reason": error,
                    "params": math.nan,  # the fit's columns, unknown: a table of damaged runs only is no runs table
                    "tokens": math.nan,  # without them (fit said it "lacks column(s) params, tokens")
                    "loss": math.nan,
                    "problems": spec.why,
                }
            )
            continue
        rd = sd.run(spec.run_id)
        books = read_books(rd, spec)
        state, error = classify(sd, spec, book, books)
        reason = _reason(spec, state, error, books)
        if state == "waiting":
            error = None  # what it waits for is its reason, not an error
        states.setdefault(state, []).append(spec.run_id)
        mine = []
        if books.result_problem:
            mine.append(Problem(spec.run_id, layout.RESULT, books.result_problem))
        elif state == "corrupt" and error:  # trained to its end, no result.json
            mine.append(Problem(spec.run_id, layout.RESULT, error.removeprefix(f"{layout.RESULT} is ")))
        mine.extend(_metrics_problems(spec, books, state))
        if books.checkpoint_problem and state not in ("done", "diverged"):
            mine.append(Problem(spec.run_id, layout.CHECKPOINT_POINTER, books.checkpoint_problem))
        tasks, task_problems = _read_tasks(rd)
        mine.extend(task_problems)
        row = run_record(
            spec,
            books.result or {},
            status=state,
            error=error,
            reason=reason,
            tokens_done=books.tokens_done(spec),
            flops_spent=books.flops_spent(spec),
            problems=mine,
        )
        row.update(tasks)
        rows.append(row)
        curves.extend(_curves(spec, books))
        problems.extend(mine)
    pending = [rid for s in PENDING for rid in states.get(s, [])]
    return Collected(
        runs=pd.DataFrame(rows),
        curves=pd.DataFrame(curves),
        problems=problems,
        pending=pending,
        failed=states.get("failed", []),
        states={s: len(states[s]) for s in [*STATES, *sorted(set(states) - set(STATES))] if s in states},
    )


def write_collected(study_dir: Path, collected: Collected) -> list[Path]:
    """Write the tables atomically (a temporary file renamed into place, never left behind). A directory in a
    table's place is refused, naming the ``rm -r``, before any table is written."""
    sd = layout.StudyDir(Path(study_dir))
    tables = (
        (collected.runs, sd.results_parquet, "parquet"),
        (collected.runs, sd.results_csv, "csv"),
        (collected.curves, sd.curves, "parquet"),
    )
    again = f"run `ladder collect {layout.shell_word(sd.path)}` again"
    for _frame, path, _kind in tables:
        layout.refuse_if_not_a_file(path, again)
    written = []
    for frame, path, kind in tables:
        if kind == "parquet":
            layout.atomic_write(path, lambda tmp, frame=frame: frame.to_parquet(tmp, index=False), remedy=again)
        else:
            layout.atomic_write(path, lambda tmp, frame=frame: frame.to_csv(tmp, index=False), remedy=again)
        written.append(path)
    return written


def collect_and_write(study_dir: Path) -> tuple[Collected, list[Path]]:
    """:func:`collect` and :func:`write_collected` as one, taking turns with another collect of the study (a cron
    job and a person): the tables on disk are those of the collect that read the runs last. Unlocked, an older
    collect that wrote after a newer one left a finished run "interrupted" in results.parquet, though the newer
    collect had said it was done."""
    with editing_study(layout.StudyDir(Path(study_dir)).runs):
        collected = collect(study_dir)
        return collected, write_collected(study_dir, collected)


def read_results(study_dir: Path) -> pd.DataFrame:
    from ladder.errors import StateError

    sd = layout.StudyDir(Path(study_dir))
    layout.refuse_if_not_a_file(sd.results_parquet, f"run `ladder collect {layout.shell_word(sd.path)}`")
    if not sd.results_parquet.is_file():
        raise StateError(
            f"{sd.path} has no {layout.RESULTS_PARQUET}; run `ladder collect {layout.shell_word(sd.path)}` first"
        )
    return _read_table(sd.results_parquet, sd.path)


def check_tables(study_dir: Path) -> None:
    """Raise a StateError when a table ``ladder collect`` wrote (results.parquet, curves.parquet) is there but
    cannot be read: what renders the study whole (``ladder report``) refuses it rather than leave its runs out."""
    sd = layout.StudyDir(Path(study_dir))
    for path in (sd.results_parquet, sd.curves):
        if path.is_file():
            _read_table(path, sd.path)


def _read_table(path: Path, study: Path) -> pd.DataFrame:
    from ladder.errors import StateError

    try:
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - a torn or hand-made file: pyarrow raises many kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StateError(
            f"{path} is unreadable ({first}); `ladder collect {layout.shell_word(study)}` writes it again from the runs"
        ) from None
