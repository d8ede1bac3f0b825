"""Downstream evaluation of a run's final checkpoint with lm-evaluation-harness.

:func:`evaluate_run` loads the run's ``model/`` folder (``save_pretrained`` weights plus tokenizer) as
lm-eval's ``hf`` model and runs ``lm_eval.simple_evaluate`` once per requested task, writing one results file
per task, atomically, into the run's ``lm_eval/`` folder (``results_<task>.json``; ``ladder.books.collect`` turns its
``results[task][metric]`` numbers into ``task/<task>/<metric>`` columns). A task whose results file exists for
the same ``limit`` and the same model files is not evaluated again.

Tasks: without ``tasks``, the offline tasks shipped in :mod:`ladder.model.evaluation.tasks` (no download).
Any name lm-eval knows (``hellaswag``, ``arc_easy``, ``piqa``, groups, tags, a YAML path) passes through
unchanged; those need their datasets (the hub, or its cache). ``include_path`` adds a user's folder of task
YAMLs. lm-eval's own task index (about 15k YAMLs, tens of seconds to scan) is only built when a name is not
found among the shipped and included tasks.

Added metric: ``bpb`` for every multiple-choice task (:mod:`ladder.model.evaluation.results`).

Offline: the model and tokenizer are read from local files; the shipped tasks read local jsonl files
(no ``datasets`` download, no hub). Set ``HF_HUB_OFFLINE=1`` to make sure nothing else tries.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ladder import layout
from ladder.errors import SpecError
from ladder.layout import jsonable
from ladder.model.evaluation.results import (
    FORMAT_VERSION,
    add_correct_bpb,
    check_model_dir,
    default_tasks,
    existing_results,
    is_done,
    model_fingerprint,
    results_file,
    samples_file,
)
from ladder.model.evaluation.tasks import SHIPPED_TASKS, TASKS_DIR

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 16
DEFAULT_BOOTSTRAP_ITERS = 1000


# ------------------------------------------------------------------------------------------ task manager


def _task_manager(include: list[Path], defaults: bool):
    from lm_eval.tasks import TaskManager

    class RecordingTaskManager(TaskManager):
        """Keeps the Task objects of the last ``load`` (simple_evaluate does not return them)."""

        loaded: dict | None = None

        def load(self, *args, **kwargs):  # noqa: D401
            out = super().load(*args, **kwargs)
            self.loaded = out
            return out

    return RecordingTaskManager(include_path=[str(p) for p in include], include_defaults=defaults)


def _known(tm, name: str) -> bool:
    if name in tm.all_tasks:
        return True
    return name.endswith((".yaml", ".yml")) and Path(name).is_file()


def resolve_task_manager(tasks: Sequence[str], include_path: Path | Sequence[Path] | None = None):
    """A TaskManager that knows every name in ``tasks``: the shipped and included tasks first, lm-eval's own
    index only when needed. :class:`SpecError` for names nobody knows (with close matches)."""
    include = [TASKS_DIR]
    if include_path is not None:
        extra = [include_path] if isinstance(include_path, (str, os.PathLike)) else list(include_path)
        for given in extra:
            try:
                p = layout.expand_user(given, "--include-path").resolve()
            except (OSError, RuntimeError):  # a loop of links: Python 3.11 raised "Symlink loop from", a traceback
                raise SpecError(
                    f"--include-path {given}: a link that leads back to itself (a loop of links); give a folder of "
                    "lm-eval task YAMLs"
                ) from None
            if not p.is_dir():
                raise SpecError(f"--include-path {p}: not a folder of lm-eval task YAMLs")
            include.append(p)
    tm = _task_manager(include, defaults=False)
    if all(_known(tm, t) for t in tasks):
        return tm
    tm = _task_manager(include, defaults=True)
    unknown = [t for t in tasks if not _known(tm, t)]
    if unknown:
        import difflib

        hints = []
        for t in unknown:
            close = difflib.get_close_matches(t, tm.all_tasks, n=3, cutoff=0.6)
            hints.append(f"{t!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        if len(include) > 1:  # "add your own with --include-path DIR" to a user who gave one sent them in a circle
            where = ", ".join(str(p) for p in include[1:])
            mine = (
                f"nor in --include-path {where} (lm-eval skips a task YAML it cannot read, or one whose `task:` "
                "name differs: check the name there)"
            )
        else:
            mine = "add your own with --include-path DIR"
        raise SpecError(
            f"unknown lm-eval task(s): {'; '.join(hints)}. Shipped offline tasks: {', '.join(SHIPPED_TASKS)}; {mine}"
        )
    return tm


# ------------------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    """Set environment variables for the duration (only those not already set by the user)."""
    added = [k for k in values if k not in os.environ]
    for k in added:
        os.environ[k] = values[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class _NoCliAdvice(logging.Filter):
    """Drops lm-eval's advice to pass ``--metadata`` "in console", logged for every task with a custom dataset
    (the project's own): an option of lm-eval's command line, which ``ladder eval`` does not have."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`--metadata`" not in record.getMessage()


@contextlib.contextmanager
def _no_cli_advice() -> Iterator[None]:
    logger, advice = logging.getLogger("lm_eval.api.task"), _NoCliAdvice()
    logger.addFilter(advice)
    try:
        yield
    finally:
        logger.removeFilter(advice)


@contextlib.contextmanager
def _git_hash_quietly() -> Iterator[None]:
    """lm-eval records ``git describe`` of the working directory in its results, and let git print "fatal: not
    a git repository" to the user's terminal from any folder outside a repository (a study's, most often): the
    same hash (or None), asked with git's stderr silenced."""
    import lm_eval.evaluator as evaluator

    asked = evaluator.get_git_commit_hash

    def quietly() -> str | None:
        try:
            out = subprocess.run(["git", "describe", "--always"], capture_output=True, check=True, timeout=30).stdout  # noqa: S607
        except (OSError, subprocess.SubprocessError):
            return None
        return out.decode(errors="replace").strip() or None

    evaluator.get_git_commit_hash = quietly
    try:
        yield
    finally:
        evaluator.get_git_commit_hash = asked


def _default_device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


MIN_EVAL_CONTEXT = 512


def _trained_context(model_dir: Path) -> int:
    try:
        return int(json.loads((Path(model_dir) / "config.json").read_text()).get("max_position_embeddings") or 0)
    except (OSError, ValueError):
        return 0


def _load_lm(model_dir: Path, *, batch_size: int | str, device: str, dtype: str, max_length: int | None):
    from lm_eval.api.registry import get_model

    args: dict[str, Any] = {"pretrained": str(model_dir), "dtype": dtype, "trust_remote_code": False}
    if not max_length:
        # lm-eval takes the context from max_position_embeddings, i.e. the training sequence length, and
        # refuses an answer longer than that. RoPE has no fixed table, so tiny-context ladder models (seq 32-256)
        # can read a longer window; give them at least MIN_EVAL_CONTEXT tokens so that every task fits.
        max_length = max(_trained_context(model_dir), MIN_EVAL_CONTEXT)
    args["max_length"] = int(max_length)
    lm = get_model("hf").create_from_arg_obj(args, {"batch_size": batch_size, "device": device})
    return lm, args


# ------------------------------------------------------------------------------------------ evaluate


def evaluate_run(
    run_dir: Path | str | layout.RunDir,
    tasks: Sequence[str] | None = None,
    *,
    include_path: Path | str | Sequence[Path | str] | None = None,
    limit: int | float | None = None,
    batch_size: int | str = DEFAULT_BATCH_SIZE,
    device: str | None = None,
    dtype: str = "float32",
    max_length: int | None = None,
    num_fewshot: int | None = None,
    redo: bool = False,
    save_samples: bool = False,
    bootstrap_iters: int = DEFAULT_BOOTSTRAP_ITERS,
) -> dict[str, Any]:
    """Evaluate the final model of one run on lm-eval tasks and write the results into its ``lm_eval/``.

    ``tasks``: lm-eval task/group/tag names or YAML paths; None means the shipped offline tasks
    (:data:`ladder.model.evaluation.tasks.SHIPPED_TASKS`). ``include_path``: a folder (or folders) of the user's
    task YAMLs. ``limit``: documents per task (lm-eval's ``limit``; a float below 1 is a share); results are keyed
    by it: a task already evaluated with the same ``limit`` on the same model files is skipped unless ``redo``.
    ``device`` defaults to ``cuda`` when available, else ``cpu``; ``dtype`` defaults to float32.
    ``save_samples`` also writes lm-eval's per-document records to ``lm_eval/samples_<task>.jsonl``.

    Each task gets its own ``lm_eval/results_<task>.json`` (written atomically): lm-eval's results dict
    (``results``, ``groups``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``,
    ``config`` with the model arguments and ``limit``, environment info) without the samples, plus ``ladder``:
    ``{"format", "task", "run_id", "model_dir", "model_fingerprint", "limit", "num_fewshot", "seconds",
    "finished_at", "added_metrics"}``.

    Returns ``{"run_id", "model_dir", "limit", "evaluated": [task, ...], "skipped": [task, ...],
    "files": {task: path}, "results": {leaf_task: {metric: value}}, "seconds": {task: s}, "device"}``:
    ``results`` holds the numbers of every requested task, freshly evaluated or read back (metric keys without
    lm-eval's ``,filter`` suffix; stderr entries left out).
    """
    rd = run_dir if isinstance(run_dir, layout.RunDir) else layout.RunDir(Path(run_dir))
    model_dir = check_model_dir(rd)
    names = list(dict.fromkeys(tasks)) if tasks else default_tasks()
    if not names:
        raise SpecError("no tasks to evaluate")
    if limit is not None and (isinstance(limit, bool) or limit <= 0):
        raise SpecError(f"limit must be positive, got {limit!r}")
    fingerprint = model_fingerprint(model_dir)
    todo = [t for t in names if redo or not is_done(existing_results(rd, t), limit, fingerprint, num_fewshot)]
    out: dict[str, Any] = {
        "run_id": rd.run_id,
        "model_dir": str(model_dir),
        "limit": limit,
        "evaluated": [],
        "skipped": [t for t in names if t not in todo],
        "files": {},
        "results": {},
        "seconds": {},
        "device": None,
    }
    if todo:
        import lm_eval
        from lm_eval.utils import handle_non_serializable

        tm = resolve_task_manager(todo, include_path)
        dev = _default_device(device)
        out["device"] = dev
        with _env(DISABLE_MULTIPROC="1", TOKENIZERS_PARALLELISM="false"), _git_hash_quietly(), _no_cli_advice():
            lm, model_args = _load_lm(model_dir, batch_size=batch_size, device=dev, dtype=dtype, max_length=max_length)
            for name in todo:
                start = time.perf_counter()
                log.info("run %s: evaluating %s (limit=%s)", rd.run_id, name, limit)
                results = lm_eval.simple_evaluate(
                    model=lm,
                    tasks=[name],
                    task_manager=tm,
                    limit=limit,
                    num_fewshot=num_fewshot,
                    batch_size=batch_size,
                    device=dev,
                    log_samples=True,
                    bootstrap_iters=bootstrap_iters,
                )
                if results is None:  # not rank 0 (never the case in one process)
                    continue
                loaded = (tm.loaded or {}).get("tasks", {})
                added = add_correct_bpb(results, loaded)
                samples = results.pop("samples", None)
                seconds = time.perf_counter() - start
                results["config"]["model"] = "hf"
                results["config"]["model_args"] = model_args
                results["config"]["limit"] = limit
                results["ladder"] = {
                    "format": FORMAT_VERSION,
                    "task": name,
                    "run_id": rd.run_id,
                    "model_dir": str(model_dir),
                    "model_fingerprint": fingerprint,
                    "limit": limit,
                    "num_fewshot": num_fewshot,
                    "include_path": None if include_path is None else jsonable(include_path),
                    "seconds": round(seconds, 3),
                    "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    "added_metrics": {
                        "bpb": "bits per byte of the correct choice's continuation (-loglik/ln2/bytes), mean over "
                        "documents; added by ladder for multiple-choice tasks",
                    }
                    if added
                    else {},
                }
                clean = jsonable(json.loads(json.dumps(results, default=handle_non_serializable)))
                path = results_file(rd, name)
                if save_samples and samples:
                    lines = []
                    for task_samples in samples.values():
                        for s in task_samples:
                            lines.append(
                                json.dumps(
                                    jsonable(json.loads(json.dumps(s, default=handle_non_serializable))),
                                    ensure_ascii=False,
                                )
                            )
                    layout.atomic_write_text(samples_file(rd, name), "\n".join(lines) + "\n")
                layout.atomic_write_json(path, clean)
                out["evaluated"].append(name)
                out["seconds"][name] = round(seconds, 3)
    for name in names:
        data = existing_results(rd, name)
        if data is None:
            continue
        out["files"][name] = str(results_file(rd, name))
        for task, metrics in (data.get("results") or {}).items():
            row = out["results"].setdefault(task, {})
            for key, value in metrics.items():
                metric = key.partition(",")[0]
                if isinstance(value, (int, float)) and not isinstance(value, bool) and "stderr" not in metric:
                    row[metric] = float(value)
    return out
