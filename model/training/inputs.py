"""What the trainer reads: windows of ``seq_len + 1`` tokens (prepared shards, or an array in memory for tests and
benchmarks), the :class:`TrainData` a caller injects, and how a batch of windows becomes inputs and labels (the loss:
:mod:`ladder.model.training.loss`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from ladder.model.config import RunSpec
from ladder.model.training.distributed import Dist, barrier


class Windows(Protocol):
    """What the trainer reads: ``len()`` windows of ``seq_len + 1`` tokens; ``batch(indices)`` stacks them."""

    def __len__(self) -> int: ...

    def batch(self, indices: Sequence[int]) -> np.ndarray: ...


class ArrayWindows:
    """In-memory twin of ``ladder.model.data.windows.TokenWindows``: non-overlapping windows of ``seq_len + 1`` tokens over
    a 1-D token array (window ``i`` is ``tokens[i * (seq_len + 1) : (i + 1) * (seq_len + 1)]``)."""

    def __init__(self, tokens: np.ndarray | Sequence[int], seq_len: int, limit: int | None = None):
        self.tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        self.seq_len = int(seq_len)
        self.window = self.seq_len + 1
        n = len(self.tokens) // self.window
        self._len = n if limit is None else min(n, int(limit))

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> np.ndarray:
        i = int(i)
        if not 0 <= i < self._len:
            raise IndexError(f"window {i} out of range (0..{self._len - 1})")
        return self.tokens[i * self.window : (i + 1) * self.window].copy()

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self._len):
            raise IndexError(f"window index out of range (0..{self._len - 1})")
        return self.tokens[idx[:, None] * self.window + np.arange(self.window)[None, :]]


@dataclass
class TrainData:
    """Data injected into :func:`train`: train windows, the FIXED validation windows (evaluated in order, the
    first ``ceil(eval_tokens / seq_len)`` of them), and optionally the tokenizer folder (copied into ``model/``)
    and the special ids (written into the model config)."""

    train: Windows
    val: Windows
    tokenizer_dir: Path | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    # which preparation of the corpus it is (result.json's ``data``): the cache key, the tokenizer's SHA-256 and the
    # token counts; runs of one study trained on others (the corpus or tokenizer changed in place) are told apart
    identity: dict[str, Any] | None = None


def inputs_and_labels(windows: torch.Tensor, *, label_shift_bug: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Split windows of ``seq_len + 1`` tokens into inputs ``w[:, :-1]`` and next-token labels ``w[:, 1:]``.
    ``label_shift_bug=True`` deliberately breaks the shift (labels = inputs), for the sanity check's test."""
    x = windows[:, :-1]
    y = windows[:, :-1] if label_shift_bug else windows[:, 1:]
    return x, y


def _not_prepared(exc: OSError, data_cache: Any) -> Exception:
    """An OSError of data preparation (the shared cache not writable, a disk full, the corpus unreadable) as the one
    line a run's error.json and `ladder status` give: the place and why, and that nothing was trained."""
    from ladder.errors import DataNotPrepared
    from ladder.model.data.cache import default_cache_root

    try:
        root = Path(data_cache) if data_cache is not None else default_cache_root()
    except Exception:  # noqa: BLE001 - no cache root to name (no home directory): the OSError says the rest
        root = None
    place = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    why = f"cannot use {place}: {exc.strerror or exc}" if place else f"{exc.strerror or exc} ({type(exc).__name__})"
    cache = f" (the data cache is {root}: LADDER_CACHE sets it)" if root is not None else ""
    return DataNotPrepared(
        f"the run's data could not be prepared, so nothing was trained: {why}{cache}; fix that and run again (a plain "
        "`ladder submit` of its study tries it again: no --retry-failed needed)"
    )


def _identity(prepared: Any) -> dict[str, Any] | None:
    """The identity of a ``PreparedData``: its cache key, its tokenizer file's SHA-256 and its token counts."""
    from ladder.model.data.tokenizer import file_sha256

    try:
        tokenizer = file_sha256(Path(prepared.tokenizer_file))
    except (OSError, TypeError, AttributeError):
        return None
    return {
        "key": str(getattr(prepared, "key", "")),
        "tokenizer_sha256": tokenizer,
        "train_tokens": int(prepared.train_tokens),
        "val_tokens": int(prepared.val_tokens),
    }


def resolve_data(spec: RunSpec, dataset: Any, data_cache: Any, progress: bool, d: Dist) -> TrainData:
    """The run's :class:`TrainData`: ``dataset`` as given, the windows of a ``PreparedData``, or (``None``) the
    spec's data prepared (rank 0 first; the others then find it in the cache)."""
    seq_len = spec.data.seq_len
    if dataset is None:
        from ladder.model.data.prepare import prepare_data

        prepared = None
        try:
            if d.is_main:
                prepared = prepare_data(spec.data, spec.shape.vocab_size, cache_root=data_cache, progress=progress)
            barrier(d)
            if not d.is_main:
                prepared = prepare_data(spec.data, spec.shape.vocab_size, cache_root=data_cache, progress=False)
        except OSError as exc:
            raise _not_prepared(exc, data_cache) from exc
        dataset = prepared
    if isinstance(dataset, TrainData):
        return dataset
    if hasattr(dataset, "train_windows") and hasattr(dataset, "val_windows"):  # a PreparedData
        return TrainData(
            train=dataset.train_windows(seq_len),
            val=dataset.val_windows(seq_len, spec.data.validation_tokens),
            tokenizer_dir=Path(dataset.tokenizer_dir),
            eos_id=dataset.eos_id,
            pad_id=dataset.pad_id,
            identity=_identity(dataset),
        )
    raise TypeError(f"dataset must be a TrainData or a PreparedData, got {type(dataset).__name__}")
