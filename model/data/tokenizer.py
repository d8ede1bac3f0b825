"""Byte-level BPE tokenizers: train one on a corpus, save it so transformers loads it offline, evaluate it.

A trained tokenizer folder holds ``tokenizer.json`` (the ``tokenizers`` file that datatrove's
``DocumentTokenizer`` reads: pass it the FILE, a folder would send it to the hub) and the transformers files
(``tokenizer_config.json``, ...) so that ``AutoTokenizer.from_pretrained(folder)`` works with
``HF_HUB_OFFLINE=1``.

The tokenizer is lossless: byte-level pre-tokenizer and decoder, no normalizer, no prefix space, so
``decode(encode(text)) == text`` for any text (accents, CJK, emoji, tabs, runs of spaces, trailing newlines).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ladder.errors import DataError
from ladder.layout import atomic_write_json

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (EOS_TOKEN, PAD_TOKEN)  # ids 0 and 1 in a trained tokenizer
TOKENIZER_FILE = "tokenizer.json"
TRAIN_INFO = "ladder_tokenizer.json"
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS) + 1  # the byte alphabet, the special tokens and at least one merge
MIN_FREQUENCY = 2  # a merge must occur at least twice; keeps training deterministic and free of one-off noise
TOKENIZER_SIDE_FILES = frozenset(
    {TRAIN_INFO, "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja"}
)


def _texts_from(texts_or_files: Iterable[str | os.PathLike]) -> Iterator[str]:
    for item in texts_or_files:
        if isinstance(item, os.PathLike):
            try:
                yield Path(item).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise DataError(f"cannot read tokenizer training file {item}: {e}") from e
        elif isinstance(item, str):
            yield item
        else:
            raise TypeError(f"train_tokenizer takes texts (str) or files (Path), got {type(item).__name__}")


def train_tokenizer(
    texts_or_files: Iterable[str | os.PathLike],
    vocab_size: int,
    out_dir: str | os.PathLike,
    *,
    max_bytes: int | None = None,
) -> Path:
    """Train a byte-level BPE with ``vocab_size`` ids (special tokens included) and save it to ``out_dir``.

    ``texts_or_files`` yields texts (``str``) or files (``pathlib.Path``, each read whole as one text).
    ``max_bytes`` stops reading after that many UTF-8 bytes (a deterministic prefix). Training is deterministic:
    the same texts and vocab_size give a byte-identical ``tokenizer.json``. Returns ``out_dir``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < MIN_VOCAB_SIZE:
        raise DataError(
            f"vocab_size {vocab_size} is too small for a byte-level BPE: it needs at least {MIN_VOCAB_SIZE} "
            f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens + 1 merge)"
        )
    out = Path(out_dir)
    stats = {"texts": 0, "bytes": 0}

    def feed() -> Iterator[str]:
        for text in _texts_from(texts_or_files):
            if not text:
                continue
            n = len(text.encode("utf-8"))
            if max_bytes is not None and stats["bytes"] + n > max_bytes and stats["texts"] > 0:
                return
            stats["texts"] += 1
            stats["bytes"] += n
            yield text

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=MIN_FREQUENCY,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    start = time.perf_counter()
    tok.train_from_iterator(feed(), trainer=trainer)
    seconds = time.perf_counter() - start
    if stats["texts"] == 0:
        raise DataError(
            "cannot train a tokenizer: no training text was read (an empty corpus, the text under another key, or "
            "files that are not UTF-8 text)"
        )
    save_tokenizer(tok, out)
    atomic_write_json(
        out / TRAIN_INFO,
        {
            "kind": "byte-level-bpe",
            "vocab_size": tok.get_vocab_size(),
            "requested_vocab_size": vocab_size,
            "min_frequency": MIN_FREQUENCY,
            "trained_on_texts": stats["texts"],
            "trained_on_bytes": stats["bytes"],
            "train_seconds": round(seconds, 3),
        },
    )
    return out


def save_tokenizer(tok: Any, out_dir: Path) -> None:
    """Save a ``tokenizers.Tokenizer`` as ``tokenizer.json`` plus the transformers files, so that
    ``AutoTokenizer.from_pretrained(out_dir)`` gives a fast tokenizer with eos (= bos) and pad set.

    The transformers files are written directly (importing transformers takes seconds): the class is
    ``PreTrainedTokenizerFast``, which transformers 4 and 5 (where it is an alias of ``TokenizersBackend``)
    both load; ``clean_up_tokenization_spaces`` is off so that decoding is exact."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / TOKENIZER_FILE), pretty=True)
    eos, pad = special_ids(tok)
    eos_token, pad_token = tok.id_to_token(eos), (tok.id_to_token(pad) if pad is not None else None)
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "backend": "tokenizers",
        "bos_token": eos_token,
        "eos_token": eos_token,
        "pad_token": pad_token,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000_000,
        "add_bos_token": False,
        "add_eos_token": False,
    }
    atomic_write_json(out_dir / "tokenizer_config.json", config)
    atomic_write_json(
        out_dir / "special_tokens_map.json",
        {k: config[k] for k in ("bos_token", "eos_token", "pad_token") if config[k] is not None},
    )


def tokenizer_file(tokenizer_dir: str | os.PathLike) -> Path:
    """The ``tokenizer.json`` of a tokenizer folder (or the file itself); DataError when there is none."""
    p = Path(tokenizer_dir)
    f = p if p.is_file() else p / TOKENIZER_FILE
    if not f.is_file():
        raise DataError(
            f"no {TOKENIZER_FILE} in {p}: a tokenizer must be a fast (tokenizers) tokenizer saved with "
            "save_pretrained, or a tokenizer.json file"
        )
    return f


def copy_tokenizer(src: str | os.PathLike, dst_dir: str | os.PathLike) -> None:
    """Copy a tokenizer into ``dst_dir`` (created if missing), never over a file already there: the tokenizer's
    files of a transformers tokenizer folder (not a model's weights), else ``tokenizer.json`` alone plus
    transformers files made for it. ``src`` is a tokenizer folder or its ``tokenizer.json``."""
    f = tokenizer_file(src)
    dst = Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)

    def copy_new(folder: Path) -> None:
        for g in sorted(folder.iterdir()):
            if g.is_file() and (g.name.startswith("tokenizer") or g.name in TOKENIZER_SIDE_FILES):
                if not (dst / g.name).exists():
                    shutil.copyfile(g, dst / g.name)

    if f.name == TOKENIZER_FILE and (f.parent / "tokenizer_config.json").is_file():
        copy_new(f.parent)
        return
    with tempfile.TemporaryDirectory(dir=dst) as made:
        save_tokenizer(load_tokenizer(f), Path(made))
        shutil.copyfile(f, Path(made) / TOKENIZER_FILE)  # the original bytes, not the re-serialized file
        copy_new(Path(made))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_tokenizer(tokenizer_dir: str | os.PathLike) -> Any:
    """The ``tokenizers.Tokenizer`` of a folder or tokenizer.json file (fast, no transformers)."""
    from tokenizers import Tokenizer

    f = tokenizer_file(tokenizer_dir)
    try:
        return Tokenizer.from_file(str(f))
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        raise DataError(f"cannot load tokenizer {f}: {e}") from e


def special_ids(tok: Any) -> tuple[int, int | None]:
    """(eos_id, pad_id) of a ``tokenizers.Tokenizer`` trained by ladder or any tokenizer with a known EOS."""
    for name in (EOS_TOKEN, "</s>", "<eos>", "<|end_of_text|>", "[SEP]"):
        eos = tok.token_to_id(name)
        if eos is not None:
            break
    else:
        raise DataError(
            f"the tokenizer has no end-of-sequence token (looked for {EOS_TOKEN!r}, '</s>', '<eos>', "
            "'<|end_of_text|>', '[SEP]'): documents could not be separated"
        )
    pad = None
    for name in (PAD_TOKEN, "<pad>", "[PAD]"):
        pad = tok.token_to_id(name)
        if pad is not None:
            break
    return eos, pad


def eos_token_of(tok: Any) -> str:
    eos, _ = special_ids(tok)
    return tok.id_to_token(eos)


def evaluate_tokenizer(
    tokenizer_dir: str | os.PathLike,
    corpus_texts: Iterable[str],
    *,
    max_texts: int | None = None,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Measure a tokenizer on texts (ideally held out from its training texts).

    Returns ``texts``, ``bytes`` (UTF-8), ``chars``, ``words`` (whitespace-separated), ``tokens``,
    ``bytes_per_token``, ``chars_per_token``, ``tokens_per_word``, ``vocab_size``, ``vocab_used`` (distinct ids
    seen), ``vocab_usage`` (their share of the vocabulary), ``roundtrip_failures`` (texts where
    ``decode(encode(text)) != text``), ``roundtrip_ok`` and ``first_failure`` (the start of the first failing
    text, or None). Encoding adds no special tokens.
    """
    tok = load_tokenizer(tokenizer_dir)
    vocab_size = tok.get_vocab_size()
    seen: set[int] = set()
    n_texts = n_bytes = n_chars = n_words = n_tokens = failures = 0
    first_failure: str | None = None
    batch: list[str] = []

    def flush() -> None:
        nonlocal n_texts, n_bytes, n_chars, n_words, n_tokens, failures, first_failure
        encs = tok.encode_batch(batch, add_special_tokens=False)
        decoded = tok.decode_batch([e.ids for e in encs], skip_special_tokens=False)
        for text, enc, back in zip(batch, encs, decoded, strict=True):
            n_texts += 1
            n_bytes += len(text.encode("utf-8"))
            n_chars += len(text)
            n_words += len(text.split())
            n_tokens += len(enc.ids)
            seen.update(enc.ids)
            if back != text:
                failures += 1
                if first_failure is None:
                    first_failure = text[:200]
        batch.clear()

    for text in corpus_texts:
        if max_texts is not None and n_texts + len(batch) >= max_texts:
            break
        if max_bytes is not None and n_bytes >= max_bytes:
            break
        batch.append(text)
        if len(batch) >= 256:
            flush()
    if batch:
        flush()
    if n_texts == 0:
        raise DataError("cannot evaluate the tokenizer: no texts")
    return {
        "texts": n_texts,
        "bytes": n_bytes,
        "chars": n_chars,
        "words": n_words,
        "tokens": n_tokens,
        "bytes_per_token": n_bytes / max(n_tokens, 1),
        "chars_per_token": n_chars / max(n_tokens, 1),
        "tokens_per_word": n_tokens / max(n_words, 1),
        "vocab_size": vocab_size,
        "vocab_used": len(seen),
        "vocab_usage": len(seen) / vocab_size,
        "roundtrip_failures": failures,
        "roundtrip_ok": failures == 0,
        "first_failure": first_failure,
    }


def describe_tokenizer(tokenizer_dir: str | os.PathLike) -> dict[str, Any]:
    """What a run records about its tokenizer: vocab size, special ids, content hash of tokenizer.json."""
    f = tokenizer_file(tokenizer_dir)
    tok = load_tokenizer(f)
    eos, pad = special_ids(tok)
    info: dict[str, Any] = {
        "file": str(f),
        "sha256": file_sha256(f),
        "vocab_size": tok.get_vocab_size(),
        "eos_id": eos,
        "pad_id": pad,
    }
    train_info = f.parent / TRAIN_INFO
    if train_info.is_file():
        info["trained"] = json.loads(train_info.read_text())
    return info
