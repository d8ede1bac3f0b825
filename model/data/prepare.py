"""Preparing data: corpus -> tokenizer -> datatrove-tokenized ``.ds`` shards, cached and shared.

``prepare_data(cfg, vocab_size)`` does, once per (corpus content, tokenizer, split rule)::

    corpus (ladder.model.data.corpus) -- split by document hash --> train / validation documents
    tokenizer: cfg.tokenizer == "train": a byte-level BPE trained on the TRAIN documents (cached separately)
    datatrove: reader -> split filter -> DocumentTokenizer (EOS after every document) -> <split>/*.ds
               run by LocalPipelineExecutor (or SlurmPipelineExecutor), train and validation separately

and writes ``ready.json`` last (the folder's layout: :mod:`ladder.model.data.prepared`).

A killed preparation resumes: datatrove skips the tasks whose completion marker exists and redoes the others
(a task's output files are rewritten from scratch). Two processes preparing the same key serialize on
``<key>.lock``: the second waits, then finds ``ready.json``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ladder.errors import DataError, shell_word
from ladder.layout import atomic_write_json, expand_user
from ladder.model.config import DataConfig
from ladder.model.data.cache import default_cache_root, file_lock, sha256_json
from ladder.model.data.corpus import CorpusSource, hub_offline, resolve_corpus
from ladder.model.data.executors import run_pipeline
from ladder.model.data.prepared import READY, SPLIT_DIRS, PreparedData
from ladder.model.data.tokenizer import (
    TOKENIZER_FILE,
    TRAIN_INFO,
    copy_tokenizer,
    eos_token_of,
    file_sha256,
    load_tokenizer,
    special_ids,
    tokenizer_file,
    train_tokenizer,
)
from ladder.model.data.windows import token_files

DATA_VERSION = 1  # bump when the preparation changes what lands in the shards
TOKENIZER_VERSION = 1
TOKENIZER_TRAIN_MAX_BYTES = 64_000_000  # BPE training reads at most this prefix of the train split
MAX_TASKS = 64  # datatrove tasks per split (one per input file, at most this many); fixed, so the output
# does not depend on the number of workers
SHUFFLE_SEED = 0  # DocumentTokenizer shuffles the documents within each task's shard with this seed


# ----------------------------------------------------------------------------------------------- tokenizer


def _tokenizer_for(
    cfg: DataConfig, vocab_size: int, source: CorpusSource, cache: Path, progress: bool
) -> tuple[Path, dict[str, Any]]:
    """The tokenizer.json to use and what identifies it; trains (cached) when ``cfg.tokenizer == "train"``."""
    if cfg.tokenizer == "train":
        out = trained_tokenizer_dir(cfg, vocab_size, source, cache)
        key = out.name.rsplit("-", 1)[1]
        if not (out / TRAIN_INFO).is_file():
            with file_lock(cache / "tokenizers" / f"bpe-{vocab_size}-{key}.lock"):
                if not (out / TRAIN_INFO).is_file():
                    probe = source.iter_texts("train", cfg.validation_fraction)
                    first = next(probe, None)
                    probe.close()
                    if first is None:
                        raise DataError(_empty_corpus_message(source))
                    if progress:
                        print(f"Training a byte-level BPE tokenizer (vocab {vocab_size}) ...", file=sys.stderr)
                    for stale in out.parent.glob(f"{out.name}.tmp-*"):  # left by a killed training
                        shutil.rmtree(stale, ignore_errors=True)
                    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
                    texts = source.iter_texts("train", cfg.validation_fraction)
                    train_tokenizer(texts, vocab_size, tmp, max_bytes=TOKENIZER_TRAIN_MAX_BYTES)
                    shutil.rmtree(out, ignore_errors=True)
                    os.replace(tmp, out)
        return out / TOKENIZER_FILE, {"trained": key}
    path = expand_user(cfg.tokenizer, "data.tokenizer")
    if path.exists():
        return tokenizer_file(path), {"path": str(path.resolve())}
    return _hub_tokenizer(cfg.tokenizer, cache), {"hub": cfg.tokenizer}


def trained_tokenizer_dir(cfg: DataConfig, vocab_size: int, source: CorpusSource, cache: Path) -> Path:
    """Where the tokenizer trained for ``cfg`` on ``source`` is cached (``bpe-<vocab>-<key>``)."""
    ident = {
        "version": TOKENIZER_VERSION,
        "corpus": source.identity,
        "vocab_size": vocab_size,
        "validation_fraction": cfg.validation_fraction,
        "max_bytes": TOKENIZER_TRAIN_MAX_BYTES,
    }
    return cache / "tokenizers" / f"bpe-{vocab_size}-{sha256_json(ident)[:16]}"


def is_prepared(cfg: DataConfig, vocab_size: int, *, cache_root: Path | None = None) -> bool:
    """Whether the data cache already holds ``cfg``'s corpus prepared for this vocabulary, found without reading
    the corpus (so without the hub for an ``hf:`` corpus, which :func:`prepare_data` then never reads)."""
    cache = expand_user(cache_root, "the data cache") if cache_root is not None else default_cache_root()
    try:
        source = resolve_corpus(cfg.corpus, cfg.text_key, max_bytes=cfg.max_bytes, cache_root=cache, progress=False)
    except DataError:
        return False
    if cfg.tokenizer == "train":
        tok_file = trained_tokenizer_dir(cfg, vocab_size, source, cache) / TOKENIZER_FILE
    elif (given := expand_user(cfg.tokenizer, "data.tokenizer")).exists():
        tok_file = tokenizer_file(given)
    else:
        tok_file = _hub_tokenizer_dir(cfg.tokenizer, cache) / TOKENIZER_FILE
    if not tok_file.is_file():
        return False
    return (cache / "data" / data_key(source, file_sha256(tok_file), cfg.validation_fraction) / READY).is_file()


def _empty_corpus_message(source: CorpusSource) -> str:
    return (
        f"the corpus {source.spec!r} has no training documents: is it empty, or is text_key "
        f"({source.text_key!r}) not the field that holds the text?"
    )


def _hub_tokenizer_dir(name: str, cache: Path) -> Path:
    """Where a hub tokenizer is saved in the data cache."""
    return cache / "tokenizers" / ("hub-" + name.replace("/", "--"))


def _hub_tokenizer(name: str, cache: Path) -> Path:
    out = _hub_tokenizer_dir(name, cache)
    if (out / TOKENIZER_FILE).is_file():
        return out / TOKENIZER_FILE
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name)
    except Exception as e:
        offline = hub_offline()
        raise DataError(
            f"tokenizer {name!r} is neither a local tokenizer folder / tokenizer.json nor loadable from the hub"
            + (" (HF_HUB_OFFLINE is set)" if offline else "")
            + f": {e}"
        ) from e
    if not getattr(tok, "is_fast", False):
        raise DataError(f"tokenizer {name!r} is not a fast tokenizer: datatrove needs a tokenizer.json")
    tok.save_pretrained(str(out))
    return tokenizer_file(out)


def _copy_into_cache(tok_file: Path, tok_dir: Path) -> None:
    """The tokenizer into the prepared folder, written aside and renamed: never a half-copied ``tokenizer/``."""
    tmp = tok_dir.with_name(f"{tok_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    copy_tokenizer(tok_file, tmp)
    shutil.rmtree(tok_dir, ignore_errors=True)
    os.replace(tmp, tok_dir)


# ----------------------------------------------------------------------------------------------- prepare


def data_key(source: CorpusSource, tokenizer_sha256: str, validation_fraction: float) -> str:
    """The cache key of prepared data: what determines the tokens in the shards, and nothing else (seq_len,
    validation_tokens and the model do not enter: runs that differ only in those share the data)."""
    return sha256_json(
        {
            "version": DATA_VERSION,
            "corpus": source.identity,
            "tokenizer_sha256": tokenizer_sha256,
            "validation_fraction": validation_fraction,
            "max_tasks": MAX_TASKS,
            "shuffle_seed": SHUFFLE_SEED,
        }
    )[:16]


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def prepare_data(
    cfg: DataConfig,
    vocab_size: int,
    *,
    cache_root: Path | None = None,
    workers: int | None = None,
    progress: bool = True,
    executor: Literal["local", "slurm"] = "local",
    slurm_options: dict[str, Any] | None = None,
) -> PreparedData:
    """Prepare (or find in the cache) the tokenized train and validation splits of ``cfg``'s corpus.

    ``vocab_size`` is the model's: a trained tokenizer gets exactly that many ids; a given tokenizer must not
    have more. ``workers``: datatrove tasks run at once (default: the usable CPUs). Raises DataError for a
    missing or empty corpus, a tokenizer larger than the model's vocabulary, or a validation split shorter
    than ``cfg.validation_tokens``. Returns at once when the same data is already prepared.
    """
    cache = expand_user(cache_root, "the data cache") if cache_root is not None else default_cache_root()
    source = resolve_corpus(cfg.corpus, cfg.text_key, max_bytes=cfg.max_bytes, cache_root=cache, progress=progress)
    tok_file, tok_ident = _tokenizer_for(cfg, vocab_size, source, cache, progress)
    try:
        tok = load_tokenizer(tok_file)
    except DataError as exc:
        if "path" in tok_ident:  # the user's own tokenizer: theirs to mend
            raise
        # the cache's copy (trained or downloaded) is damaged: "cannot load tokenizer" named no way out
        again = "trains it" if "trained" in tok_ident else "downloads it"
        raise DataError(
            f"{exc}; it is the data cache's copy: remove it (`rm -r {shell_word(tok_file.parent)}`), and the next command "
            f"{again} again"
        ) from exc
    tok_vocab = tok.get_vocab_size()
    if tok_vocab > vocab_size:
        raise DataError(
            f"the tokenizer {tok_file} has {tok_vocab:,} ids but the model's vocab_size is {vocab_size:,}: "
            "token ids would fall outside the embedding; raise the model's vocab_size or use a smaller tokenizer"
        )
    eos_id, pad_id = special_ids(tok)
    key = data_key(source, file_sha256(tok_file), cfg.validation_fraction)
    root = cache / "data" / key
    if not (root / READY).is_file():
        with file_lock(cache / "data" / f"{key}.lock"):
            if not (root / READY).is_file():
                _prepare(
                    root, key, source, tok_file, tok_ident, tok_vocab, eos_id, pad_id, cfg,
                    workers=workers or _default_workers(), progress=progress, executor=executor,
                    slurm_options=slurm_options,
                )  # fmt: skip
    prepared = PreparedData.load(root)
    prepared.val_windows(cfg.seq_len, cfg.validation_tokens)  # raises DataError when too short
    return prepared


def _prepare(
    root: Path,
    key: str,
    source: CorpusSource,
    tok_file: Path,
    tok_ident: dict[str, Any],
    tok_vocab: int,
    eos_id: int,
    pad_id: int | None,
    cfg: DataConfig,
    *,
    workers: int,
    progress: bool,
    executor: Literal["local", "slurm"],
    slurm_options: dict[str, Any] | None,
) -> None:
    from datatrove.pipeline.tokens import DocumentTokenizer

    start = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    tok_dir = root / "tokenizer"
    if not (tok_dir / TOKENIZER_FILE).is_file() or file_sha256(tok_dir / TOKENIZER_FILE) != file_sha256(tok_file):
        _copy_into_cache(tok_file, tok_dir)
    tok = load_tokenizer(tok_dir / TOKENIZER_FILE)
    eos_token = eos_token_of(tok)
    token_dtype = "uint32" if tok.get_vocab_size() > np.iinfo(np.uint16).max + 1 else "uint16"
    tasks = min(source.max_tasks(), MAX_TASKS)
    counts: dict[str, int] = {}
    timings: dict[str, float] = {}
    for split, sub in SPLIT_DIRS.items():
        t0 = time.perf_counter()
        pipeline = source.pipeline_head(split, cfg.validation_fraction) + [
            DocumentTokenizer(
                output_folder=str(root / sub),
                tokenizer_name_or_path=str(tok_dir / TOKENIZER_FILE),  # the FILE: a folder would go to the hub
                eos_token=eos_token,
                seed=SHUFFLE_SEED,
                shuffle_documents=True,
                save_final_metadata=False,
                batch_size=1000,
            )
        ]
        run_pipeline(
            pipeline,
            tasks=tasks,
            workers=min(workers, tasks),
            logging_dir=root / "logs" / sub,
            desc=f"Tokenizing {split}",
            progress=progress,
            executor=executor,
            slurm_options=slurm_options,
        )
        for leftover in (root / sub).glob("*_unshuffled.ds*"):  # a task with no document of this split
            leftover.unlink()
        counts[split] = _count_tokens(root / sub, token_dtype)
        timings[split] = round(time.perf_counter() - t0, 2)
    if counts["train"] == 0:
        raise DataError(_empty_corpus_message(source))
    info = {
        "key": key,
        "corpus": source.identity,
        "corpus_manifest": source.manifest,
        "tokenizer": {"sha256": file_sha256(tok_dir / TOKENIZER_FILE), **tok_ident},
        "validation_fraction": cfg.validation_fraction,
        "vocab_size": tok_vocab,
        "eos_id": eos_id,
        "pad_id": pad_id,
        "token_dtype": token_dtype,
        "train_tokens": counts["train"],
        "val_tokens": counts["validation"],
        "tasks": tasks,
        "seconds": timings,
        "total_seconds": round(time.perf_counter() - start, 2),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    atomic_write_json(root / READY, info)
    if progress:
        print(
            f"Prepared {counts['train']:,} train and {counts['validation']:,} validation tokens in {root}",
            file=sys.stderr,
        )


def _count_tokens(folder: Path, dtype: str) -> int:
    size = np.dtype(dtype).itemsize
    return sum(p.stat().st_size // size for p in token_files(folder))
