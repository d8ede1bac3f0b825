"""The results of downstream evaluation on disk: one ``lm_eval/results_<task>.json`` per task and run (written
by :func:`ladder.model.evaluation.downstream.evaluate_run`), whether a file answers a request (same ``limit``,
few-shot count and model files), which runs of a study still need evaluating, and the metric ladder adds.

Added metric: for every ``multiple_choice`` task, ``bpb`` = bits per byte of the correct choice's continuation
(``-loglik / ln 2 / bytes``), the mean over documents, and its standard error ``bpb_stderr``. It is the "task
loss" of the two-step task scaling fits (Bhagia et al. 2024); lm-eval itself reports only accuracies there.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from ladder import layout
from ladder.errors import StateError
from ladder.model.evaluation.tasks import SHIPPED_TASKS

RESULTS_PREFIX = "results_"  # ladder.books.collect reads lm_eval/**/results*.json
SAMPLES_PREFIX = "samples_"
FORMAT_VERSION = 1


def default_tasks() -> list[str]:
    """The shipped offline tasks (no download needed)."""
    return list(SHIPPED_TASKS)


def results_file(run_dir: Path | layout.RunDir, task: str) -> Path:
    """Where :func:`evaluate_run` writes the results of ``task`` (a task, group, tag or YAML path)."""
    rd = run_dir if isinstance(run_dir, layout.RunDir) else layout.RunDir(Path(run_dir))
    return rd.lm_eval / f"{RESULTS_PREFIX}{_safe_name(task)}.json"


def samples_file(run_dir: Path | layout.RunDir, task: str) -> Path:
    rd = run_dir if isinstance(run_dir, layout.RunDir) else layout.RunDir(Path(run_dir))
    return rd.lm_eval / f"{SAMPLES_PREFIX}{_safe_name(task)}.jsonl"


def _safe_name(task: str) -> str:
    name = Path(task).stem if task.endswith((".yaml", ".yml")) else task
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "task"


def model_fingerprint(model_dir: Path) -> str:
    """Names, sizes and modification times of the model folder's files: changes when the model is rewritten."""
    h = hashlib.sha256()
    for p in sorted(model_dir.iterdir()):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def check_model_dir(run_dir: Path | layout.RunDir) -> Path:
    """The run's ``model/`` folder, or a :class:`StateError` saying what is missing."""
    rd = run_dir if isinstance(run_dir, layout.RunDir) else layout.RunDir(Path(run_dir))
    model = rd.model
    if not model.is_dir():
        raise StateError(
            f"run {rd.run_id}: no final model in {model} (the run has not finished training); "
            "evaluate runs after they are done"
        )
    if not (model / "config.json").is_file():
        raise StateError(f"run {rd.run_id}: {model} has no config.json; it is not a save_pretrained checkpoint")
    if not any(model.glob("*.safetensors")) and not any(model.glob("*.bin")):
        raise StateError(f"run {rd.run_id}: {model} has no weights (*.safetensors)")
    if not (model / "tokenizer.json").is_file() and not (model / "tokenizer_config.json").is_file():
        raise StateError(
            f"run {rd.run_id}: {model} has no tokenizer files; lm-eval loads the tokenizer from the model folder"
        )
    return model


def existing_results(run_dir: Path | layout.RunDir, task: str) -> dict | None:
    """The results file of ``task`` as written by :func:`evaluate_run`, or None (absent or unreadable)."""
    path = results_file(run_dir, task)
    try:
        data = layout.loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("ladder"), dict) else None


def is_done(
    data: dict | None, limit: int | float | None, fingerprint: str | None, num_fewshot: int | None = None
) -> bool:
    """Whether a results file answers the request: same limit and few-shot count, same model files (``None``:
    do not check the model)."""
    if not data:
        return False
    meta = data["ladder"]
    same_model = fingerprint is None or meta.get("model_fingerprint") == fingerprint
    return meta.get("limit") == limit and meta.get("num_fewshot") == num_fewshot and same_model


def is_evaluated(
    run_dir: Path | layout.RunDir, task: str, limit: int | float | None = None, num_fewshot: int | None = None
) -> bool:
    """Whether ``task`` has results for this ``limit`` (and few-shot count) on the run's current model."""
    rd = run_dir if isinstance(run_dir, layout.RunDir) else layout.RunDir(Path(run_dir))
    if not rd.model.is_dir():
        return False
    return is_done(existing_results(rd, task), limit, model_fingerprint(rd.model), num_fewshot)


def runs_to_evaluate(
    study_dir: Path | str,
    tasks: Sequence[str] | None = None,
    *,
    limit: int | float | None = None,
    num_fewshot: int | None = None,
) -> list[layout.RunDir]:
    """The runs of a study that finished training (``result.json`` says ``done`` and ``model/`` exists) and
    lack results for at least one of ``tasks`` (default: the shipped tasks) at this ``limit``: what
    ``ladder eval`` has to submit. Runs still training, diverged or failed are not listed."""
    names = list(tasks) if tasks else default_tasks()
    out = []
    for rd in layout.StudyDir(Path(study_dir)).all_run_dirs():
        try:
            status = json.loads(rd.result.read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError, AttributeError):
            continue
        if status != "done" or not rd.model.is_dir():
            continue
        if not all(is_evaluated(rd, t, limit, num_fewshot) for t in names):
            out.append(rd)
    return out


# ------------------------------------------------------------------------------------------ added metrics


def _gold_index(task, doc: dict, n_choices: int) -> int | None:
    gold = task.doc_to_text(doc) if getattr(task, "multiple_input", 0) else task.doc_to_target(doc)
    if isinstance(gold, (list, tuple)):
        gold = gold[0] if gold else None
    if isinstance(gold, str):
        choices = task.doc_to_choice(doc)
        gold = choices.index(gold) if gold in choices else None
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < n_choices:
        return None
    return gold


def correct_choice_bpb(task, samples: list[dict]) -> tuple[float, float, int] | None:
    """(mean, standard error, documents) of the bits per byte of the correct continuation over the logged
    samples of a multiple-choice task (first filter only); None when no document could be scored."""
    if not samples:
        return None
    first_filter = samples[0].get("filter")
    values = []
    for s in samples:
        if s.get("filter") != first_filter:
            continue
        args, resps = s.get("arguments") or [], s.get("filtered_resps") or []
        try:
            n = len(task.doc_to_choice(s["doc"]))
            gold = _gold_index(task, s["doc"], min(n, len(args), len(resps)))
            if gold is None:
                continue
            ll = float(resps[gold][0])
            continuation = args[gold][1]
        except Exception:  # noqa: BLE001 - a task with an unusual doc format just gets no bpb
            continue
        nbytes = len(str(continuation).encode("utf-8"))
        if nbytes and math.isfinite(ll):
            values.append(-ll / math.log(2) / nbytes)
    if not values:
        return None
    mean = sum(values) / len(values)
    if len(values) > 1:
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        sem = math.sqrt(var / len(values))
    else:
        sem = float("nan")
    return mean, sem, len(values)


def add_correct_bpb(results: dict, tasks: dict) -> list[str]:
    """Add ``bpb`` (and ``bpb_stderr``) to ``results["results"][task]`` for each multiple-choice task with
    logged samples. Returns the tasks that got it."""
    done = []
    for name, task in tasks.items():
        if getattr(task, "OUTPUT_TYPE", None) != "multiple_choice":
            continue
        samples = (results.get("samples") or {}).get(name) or []
        got = correct_choice_bpb(task, samples)
        if got is None or name not in results.get("results", {}):
            continue
        mean, sem, _n = got
        flt = samples[0].get("filter", "none")
        results["results"][name][f"bpb,{flt}"] = mean
        results["results"][name][f"bpb_stderr,{flt}"] = sem if math.isfinite(sem) else "N/A"
        results.setdefault("higher_is_better", {}).setdefault(name, {})["bpb"] = False
        done.append(name)
    return done
