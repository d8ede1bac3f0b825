"""A finished preparation in the cache: its folder's layout, what ``ready.json`` records, its train and
validation windows. :mod:`ladder.model.data.prepare` writes such folders; a run only reads them.

The cache folder is ``<cache_root>/data/<key>/``::

    tokenizer/            the tokenizer (tokenizer.json + transformers files), copied in: self-contained
    train/*.ds            token shards (flat little-endian uint16, or uint32 when vocab > 65536) + .index
    validation/*.ds
    logs/<split>/         datatrove logs, stats and completion markers (what makes a re-run resume)
    ready.json            written atomically when everything above is complete
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ladder.errors import DataError, shell_word
from ladder.model.data.tokenizer import TOKENIZER_FILE
from ladder.model.data.windows import TokenWindows, token_files

READY = "ready.json"
SPLIT_DIRS = {"train": "train", "validation": "validation"}


@dataclass(frozen=True)
class PreparedData:
    """A finished preparation (``ready.json`` exists). Paths are absolute."""

    root: Path
    train_dir: Path
    val_dir: Path
    tokenizer_dir: Path
    tokenizer_file: Path
    vocab_size: int  # the tokenizer's vocabulary (special tokens included); <= the model's vocab_size
    eos_id: int
    pad_id: int | None
    train_tokens: int
    val_tokens: int
    token_dtype: str  # "uint16" or "uint32"
    key: str

    @classmethod
    def load(cls, root: Path) -> PreparedData:
        """Read a prepared folder's ``ready.json``."""
        import json

        root = Path(root)
        # a damaged entry of the cache is refused with its repair: a garbled ready.json said only "not a prepared
        # data folder", and emptied shards "the training data has no window" (of a corpus that had them)
        repair = (
            f"remove the folder (`rm -r {shell_word(root)}`) and prepare the data again (`ladder data prepare STUDY`)"
        )
        try:
            info = json.loads((root / READY).read_text())
            if not isinstance(info, dict):
                raise ValueError("not a JSON object")
            counts = {"train": int(info["train_tokens"]), "validation": int(info["val_tokens"])}
            itemsize = {"uint16": 2, "uint32": 4}[info["token_dtype"]]
        except FileNotFoundError as e:
            raise DataError(f"{root} is not a prepared data folder (no readable {READY}): {e}") from e
        except (OSError, ValueError, TypeError, KeyError) as e:
            why = f"no usable {e}" if isinstance(e, KeyError) else str(e)
            raise DataError(f"{root}/{READY} is damaged ({why}); {repair}") from e
        for split, recorded in counts.items():
            found = sum(f.stat().st_size // itemsize for f in token_files(root / SPLIT_DIRS[split]))
            if found != recorded:
                raise DataError(
                    f"{root} is damaged: its {split} shards hold {found:,} tokens, {READY} records {recorded:,}; "
                    f"{repair}"
                )
        return cls(
            root=root,
            train_dir=root / SPLIT_DIRS["train"],
            val_dir=root / SPLIT_DIRS["validation"],
            tokenizer_dir=root / "tokenizer",
            tokenizer_file=root / "tokenizer" / TOKENIZER_FILE,
            vocab_size=info["vocab_size"],
            eos_id=info["eos_id"],
            pad_id=info["pad_id"],
            train_tokens=info["train_tokens"],
            val_tokens=info["val_tokens"],
            token_dtype=info["token_dtype"],
            key=info["key"],
        )

    def train_windows(self, seq_len: int) -> TokenWindows:
        return TokenWindows(self.train_dir, seq_len, dtype=self.token_dtype)

    def val_windows(self, seq_len: int, validation_tokens: int) -> TokenWindows:
        """The fixed validation set: ``validation_windows_needed(...)`` windows spread evenly over the whole
        validation split, in order (every run of every study evaluates on the same tokens, drawn from every
        shard rather than from the few documents at the start of the first)."""
        n = validation_windows_needed(seq_len, validation_tokens)
        if not token_files(self.val_dir):  # a corpus so small that no document was held out
            raise DataError(
                f"no document of the corpus fell in the validation split ({self.train_tokens:,} train tokens, 0 "
                f"validation tokens; validation_tokens = {validation_tokens:,} are needed): the corpus is too "
                "small; use a bigger one (or raise data.max_bytes), or raise data.validation_fraction (below 0.5)"
            )
        windows = TokenWindows(self.val_dir, seq_len, dtype=self.token_dtype, limit=n, spread=True)
        if len(windows) < n:
            raise DataError(_short_validation_message(self, seq_len, validation_tokens, len(windows)))
        return windows


def validation_windows_needed(seq_len: int, validation_tokens: int) -> int:
    """Windows that hold ``validation_tokens`` predicted tokens (``seq_len`` per window), rounded up."""
    return max(1, math.ceil(validation_tokens / seq_len))


def _short_validation_message(p: PreparedData, seq_len: int, validation_tokens: int, have: int) -> str:
    need = validation_windows_needed(seq_len, validation_tokens)
    return (
        f"the validation split has {p.val_tokens:,} tokens ({have} windows of {seq_len + 1}), fewer than the "
        f"validation_tokens = {validation_tokens:,} the config asks for ({need} windows); lower "
        "data.validation_tokens, raise data.validation_fraction, or use a bigger corpus (data.max_bytes)"
    )


def describe(prepared: PreparedData) -> dict[str, Any]:
    """A JSON-able summary (for logs and run records)."""
    d = asdict(prepared)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}
