"""Offline downstream tasks shipped with ladder, in lm-evaluation-harness YAML format.

This folder is an lm-eval ``include_path``: every ``*.yaml`` here is a task; its data are the ``data/*.jsonl``
files next to it (built by ``python -m ladder.model.evaluation.tasks.build`` from Python source files of the standard
library, then committed so that every machine evaluates the same examples). Nothing needs a download.

Tasks (all tagged ``ladder_offline``):

``ladder_py_next_line``
    multiple choice: given up to ten lines of Python, pick the true next line among four lines of the same
    file. Metrics ``acc``, ``acc_norm`` (lm-eval's) and ``bpb`` (bits per byte of the correct line, added by
    :func:`ladder.model.evaluation.downstream.evaluate_run` for every multiple-choice task).
``ladder_py_ppl``
    ``loglikelihood_rolling`` over held-out snippets of Python: ``bits_per_byte``, ``byte_perplexity``,
    ``word_perplexity``.

The YAML files name their data as ``dataset_kwargs: {data_files: data/<file>.jsonl}`` relative to the YAML;
``custom_dataset: !function utils.load_local`` resolves such relative paths against this folder, so the tasks
also work with plain ``lm_eval --include_path <this folder>`` from any working directory.
"""

from __future__ import annotations

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent
DATA_DIR = TASKS_DIR / "data"
TAG = "ladder_offline"
SHIPPED_TASKS = ("ladder_py_next_line", "ladder_py_ppl")

# the metric each shipped task reports as its "task loss" and as its accuracy (None: no accuracy)
TASK_LOSS_METRIC = {"ladder_py_next_line": "bpb", "ladder_py_ppl": "bits_per_byte"}
TASK_ACC_METRIC = {"ladder_py_next_line": "acc", "ladder_py_ppl": None}
