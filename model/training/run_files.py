"""The files of a run directory that the loop reads and rewrites (names in :mod:`ladder.layout`): the spec it
trains, ``metrics.jsonl`` cut back to a checkpoint on resume, and ``model/`` written aside and renamed at the end.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch

from ladder.errors import SpecError, StateError
from ladder.layout import RunDir, UnreadableSpec, atomic_write_text, jsonable, read_jsonl
from ladder.model.config import RunSpec
from ladder.model.data.tokenizer import copy_tokenizer
from ladder.model.training import checkpoint as ckpt
from ladder.model.training.llama import save_model


def read_spec(run: RunDir) -> RunSpec:
    """The run's ``spec.json``; StateError when there is none, SpecError when it does not validate."""
    if not run.spec.is_file():
        raise StateError(f"{run.path} has no {run.spec.name}: not a planned run directory")
    try:
        return run.read_spec()
    except UnreadableSpec as e:  # unreadable, bad JSON or a pydantic ValidationError: the original error
        raise SpecError(f"{run.spec}: {e.__cause__}") from e.__cause__


def finite_or_none(x: float | None) -> float | None:
    """``x`` as a float, or None when it is missing or not finite (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def trim_metrics(run: RunDir, step: int) -> None:
    """Keep only the records with ``step <= step`` (all of them written before that checkpoint); a NaN an older
    version wrote in a record is written back null, as :func:`ladder.layout.append_jsonl` writes it now."""
    if not run.metrics.exists():
        return
    kept = [r for r in read_jsonl(run.metrics) if int(r.get("step", 0)) <= step]
    atomic_write_text(run.metrics, "".join(json.dumps(jsonable(r)) + "\n" for r in kept))


def model_tmp_prefix(run: RunDir) -> str:
    """The name prefix of ``model/`` while it is being written (what a killed final save leaves behind)."""
    return f".{run.model.name}.tmp-"


def save_final_model(run: RunDir, model: torch.nn.Module, tokenizer_dir: Path | None) -> None:
    """``model/`` = save_pretrained + tokenizer, written in a temporary folder and renamed into place."""
    tmp = run.path / f"{model_tmp_prefix(run)}{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    save_model(model, tmp)
    if tokenizer_dir is not None:
        copy_tokenizer(tokenizer_dir, tmp)
    ckpt.fsync_tree(tmp)
    if run.model.exists():
        shutil.rmtree(run.model)
    os.replace(tmp, run.model)
    ckpt.fsync_path(run.path)
