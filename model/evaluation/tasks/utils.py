"""Helpers the shipped task YAMLs call through ``!function utils.<name>`` (lm-eval imports this file by path).

Kept free of ladder imports: lm-eval loads it as a stand-alone module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _resolve(path: str | Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else HERE / p


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_local(data_files: str | list | dict | None = None, **_metadata: Any):
    """``custom_dataset`` of the shipped tasks: a ``datasets.DatasetDict`` read from local jsonl files.

    ``data_files`` is what ``dataset_kwargs`` says (a path, a list of paths or ``{split: path(s)}``); relative
    paths are relative to this folder, so the YAML's paths do not depend on the working directory. Reads the
    files directly (no hub, no ``datasets`` cache); lm-eval passes its task metadata as further keywords,
    which are ignored."""
    import datasets

    if data_files is None:
        raise ValueError("load_local needs dataset_kwargs.data_files")
    if not isinstance(data_files, dict):
        data_files = {"test": data_files}
    splits = {}
    for split, files in data_files.items():
        files = files if isinstance(files, (list, tuple)) else [files]
        rows: list[dict[str, Any]] = []
        for f in files:
            rows.extend(_read_jsonl(_resolve(f)))
        splits[split] = datasets.Dataset.from_list(rows)
    return datasets.DatasetDict(splits)
