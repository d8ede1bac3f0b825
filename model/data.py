"""Prepared data: corpus -> tokenizer -> datatrove-tokenized ``.ds`` shards, cached and shared; and reading them.

``prepare_data(cfg, vocab_size)`` does, once per (corpus content, tokenizer, split rule)::

    corpus (ladder.model.corpus) -- split by document hash --> train / validation documents
    tokenizer: cfg.tokenizer == "train": a byte-level BPE trained on the TRAIN documents (cached separately)
    datatrove: reader -> split filter -> DocumentTokenizer (EOS after every document) -> <split>/*.ds
               run by LocalPipelineExecutor (or SlurmPipelineExecutor), train and validation separately

and writes ``ready.json`` last. The cache folder is ``<cache_root>/data/<key>/``::

    tokenizer/            the tokenizer (tokenizer.json + transformers files), copied in: self-contained
    train/*.ds            token shards (flat little-endian uint16, or uint32 when vocab > 65536) + .index
    validation/*.ds
    logs/<split>/         datatrove logs, stats and completion markers (what makes a re-run resume)
    ready.json            written atomically when everything above is complete

A killed preparation resumes: datatrove skips the tasks whose completion marker exists and redoes the others
(a task's output files are rewritten from scratch). Two processes preparing the same key serialize on
``<key>.lock``: the second waits, then finds ``ready.json``.

Reading: ``TokenWindows(folder, seq_len)`` memory-maps every ``.ds`` file of a folder and cuts each file into
non-overlapping windows of ``seq_len + 1`` tokens (stepping by ``seq_len + 1``: inputs are ``w[:-1]``, labels
``w[1:]``; windows never straddle two files; a file's tail shorter than a window is dropped).
``window_order(n, seed)`` gives an O(1)-memory pseudo-random permutation of the windows.
"""

from __future__ import annotations

import bisect
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from datatrove.executor import LocalPipelineExecutor
from ladder.model.config import DataConfig
from ladder.model.corpus import (
    CorpusSource,
    default_cache_root,
    file_lock,
    hub_offline,
    quiet_datatrove,
    resolve_corpus,
    sha256_json,
)
from ladder.model.tokenizer import (
    TOKENIZER_FILE,
    TRAIN_INFO,
    eos_token_of,
    file_sha256,
    load_tokenizer,
    special_ids,
    tokenizer_file,
    train_tokenizer,
)

from ladder.errors import DataError
from ladder.layout import atomic_write_json

DATA_VERSION = 1  # bump when the preparation changes what lands in the shards
TOKENIZER_VERSION = 1
TOKENIZER_TRAIN_MAX_BYTES = 64_000_000  # BPE training reads at most this prefix of the train split
MAX_TASKS = 64  # datatrove tasks per split (one per input file, at most this many); fixed, so the output
# does not depend on the number of workers
SHUFFLE_SEED = 0  # DocumentTokenizer shuffles the documents within each task's shard with this seed
READY = "ready.json"
TOKENIZER_SIDE_FILES = frozenset(
    {TRAIN_INFO, "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja"}
)
SPLIT_DIRS = {"train": "train", "validation": "validation"}


# ------------------------------------------------------------------------------------------- prepared data


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
        try:
            info = json.loads((root / READY).read_text())
        except (OSError, ValueError) as e:
            raise DataError(f"{root} is not a prepared data folder (no readable {READY}): {e}") from e
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


# ----------------------------------------------------------------------------------------------- tokenizer


def _tokenizer_for(
    cfg: DataConfig, vocab_size: int, source: CorpusSource, cache: Path, progress: bool
) -> tuple[Path, dict[str, Any]]:
    """The tokenizer.json to use and what identifies it; trains (cached) when ``cfg.tokenizer == "train"``."""
    if cfg.tokenizer == "train":
        ident = {
            "version": TOKENIZER_VERSION,
            "corpus": source.identity,
            "vocab_size": vocab_size,
            "validation_fraction": cfg.validation_fraction,
            "max_bytes": TOKENIZER_TRAIN_MAX_BYTES,
        }
        key = sha256_json(ident)[:16]
        out = cache / "tokenizers" / f"bpe-{vocab_size}-{key}"
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
    path = Path(cfg.tokenizer).expanduser()
    if path.exists():
        return tokenizer_file(path), {"path": str(path.resolve())}
    return _hub_tokenizer(cfg.tokenizer, cache), {"hub": cfg.tokenizer}


def _empty_corpus_message(source: CorpusSource) -> str:
    return (
        f"the corpus {source.spec!r} has no training documents: is it empty, or is text_key "
        f"({source.text_key!r}) not the field that holds the text?"
    )


def _hub_tokenizer(name: str, cache: Path) -> Path:
    out = cache / "tokenizers" / ("hub-" + name.replace("/", "--"))
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


def _copy_tokenizer(src_file: Path, dst_dir: Path) -> None:
    """Copy a tokenizer into the prepared folder: the whole folder when it is a transformers tokenizer folder,
    else tokenizer.json alone plus transformers files made for it."""
    tmp = dst_dir.with_name(f"{dst_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    if (src_file.parent / "tokenizer_config.json").is_file() and src_file.name == TOKENIZER_FILE:
        tmp.mkdir(parents=True)
        for f in sorted(src_file.parent.iterdir()):  # the tokenizer's files only, not a model's weights
            if f.is_file() and (f.name.startswith("tokenizer") or f.name in TOKENIZER_SIDE_FILES):
                shutil.copyfile(f, tmp / f.name)
    else:
        from ladder.model.tokenizer import save_tokenizer

        tok = load_tokenizer(src_file)
        save_tokenizer(tok, tmp)
        shutil.copyfile(src_file, tmp / TOKENIZER_FILE)
    shutil.rmtree(dst_dir, ignore_errors=True)
    os.replace(tmp, dst_dir)


# ---------------------------------------------------------------------------------------------- executors


class QuietLocalExecutor(LocalPipelineExecutor):
    """LocalPipelineExecutor whose tasks log only errors to the console (every level still goes to the task's
    log file under ``logs/``). datatrove shows INFO on the console for the task with local_rank 0; the local
    rank is used for nothing else, so it is shifted by one."""

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        return super()._run_for_rank(rank, local_rank + 1, node_rank)

    def _launch_run_for_rank(self, rank: int, ranks_q, completed=None, completed_lock=None):
        from loguru import logger

        logger.disable("datatrove.executor.local")  # "n/N tasks completed" lines, from each worker process
        return super()._launch_run_for_rank(rank, ranks_q, completed, completed_lock)


def _count_completions(logging_dir: Path) -> int:
    try:
        return sum(1 for _ in (logging_dir / "completions").iterdir())
    except FileNotFoundError:
        return 0


def _run_pipeline(
    pipeline: list[Any],
    *,
    tasks: int,
    workers: int,
    logging_dir: Path,
    desc: str,
    progress: bool,
    executor: Literal["local", "slurm"],
    slurm_options: dict[str, Any] | None,
) -> None:
    bar = None
    stop = threading.Event()
    poller = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=tasks, desc=desc, unit="task", file=sys.stderr, dynamic_ncols=True)
        bar.update(_count_completions(logging_dir))

        def poll() -> None:
            while not stop.wait(0.5):
                done = _count_completions(logging_dir)
                if done > bar.n:
                    bar.update(done - bar.n)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
    try:
        with quiet_datatrove(pipeline_logs=False):
            if executor == "local":
                QuietLocalExecutor(
                    pipeline,
                    tasks=tasks,
                    workers=workers,
                    logging_dir=str(logging_dir),
                    skip_completed=True,
                    start_method=_start_method(),
                ).run()
            elif executor == "slurm":
                _run_slurm(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir, options=slurm_options)
            else:
                raise DataError(f"unknown data executor {executor!r}: use 'local' or 'slurm'")
    finally:
        stop.set()
        if poller is not None:
            poller.join()
        if bar is not None:
            done = _count_completions(logging_dir)
            if done > bar.n:
                bar.update(done - bar.n)
            bar.close()
    missing = tasks - _count_completions(logging_dir)
    if missing > 0:
        raise DataError(f"{missing} of {tasks} datatrove tasks did not complete; see the logs in {logging_dir}")


def _start_method() -> str:
    """datatrove's default, forkserver, re-imports ``__main__`` in every worker from its file; when the main
    module claims a file that does not exist (``python -`` reading stdin) the workers die at start and the
    pool respawns them forever. Fork then."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not os.path.isfile(main_file):
        return "fork"
    return "forkserver"


def _run_slurm(
    pipeline: list[Any], *, tasks: int, workers: int, logging_dir: Path, options: dict[str, Any] | None
) -> None:
    """Submit the pipeline as a SLURM array with datatrove's executor and wait for every task."""
    from datatrove.executor.slurm import SlurmPipelineExecutor

    opts = dict(options or {})
    opts.setdefault("time", "04:00:00")
    opts.setdefault("partition", os.environ.get("LADDER_SLURM_PARTITION", ""))
    opts.setdefault("job_name", "ladder-data")
    if not opts["partition"]:
        raise DataError("the slurm data executor needs a partition (slurm_options={'partition': ...})")
    ex = SlurmPipelineExecutor(
        pipeline, tasks=tasks, workers=workers, logging_dir=str(logging_dir), skip_completed=True, **opts
    )
    ex.run()
    while _count_completions(logging_dir) < tasks:
        time.sleep(10)


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
    cache = Path(cache_root).expanduser() if cache_root is not None else default_cache_root()
    source = resolve_corpus(cfg.corpus, cfg.text_key, max_bytes=cfg.max_bytes, cache_root=cache, progress=progress)
    tok_file, tok_ident = _tokenizer_for(cfg, vocab_size, source, cache, progress)
    tok = load_tokenizer(tok_file)
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
        _copy_tokenizer(tok_file, tok_dir)
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
        _run_pipeline(
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


# ---------------------------------------------------------------------------------------------- reading


def token_files(folder: Path) -> list[Path]:
    """The finished ``.ds`` shards of a folder, sorted by name (datatrove's leftovers of a killed task,
    ``*_unshuffled.ds``, excluded)."""
    return sorted(p for p in Path(folder).glob("*.ds") if "unshuffled" not in p.name and p.is_file())


def _count_tokens(folder: Path, dtype: str) -> int:
    size = np.dtype(dtype).itemsize
    return sum(p.stat().st_size // size for p in token_files(folder))


class TokenWindows:
    """Non-overlapping windows of ``seq_len + 1`` tokens over the ``.ds`` shards of a folder, memory-mapped.

    Window ``i`` is ``tokens[k * (seq_len + 1) : (k + 1) * (seq_len + 1)]`` of one shard (shards in name order,
    windows within a shard in order; no window straddles two shards; a shard's tail shorter than a window is
    dropped). The model reads ``w[:-1]`` and predicts ``w[1:]``. ``limit`` keeps only the first windows, or with
    ``spread=True`` that many windows evenly spaced over the whole folder (a sample of every shard, hence of many
    more documents than a prefix).
    Picklable (the maps are reopened lazily), so it can go to DataLoader workers.
    """

    def __init__(self, folder: Path, seq_len: int, dtype: str = "uint16", limit: int | None = None,
                 spread: bool = False):
        if seq_len < 1:
            raise ValueError("seq_len must be >= 1")
        self.folder = Path(folder)
        self.seq_len = seq_len
        self.window = seq_len + 1
        self.dtype = np.dtype(dtype)
        self.files = token_files(self.folder)
        if not self.files:
            raise DataError(f"no token shards (*.ds) in {self.folder}")
        counts = [p.stat().st_size // self.dtype.itemsize // self.window for p in self.files]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        total = int(self._starts[-1])
        self._len = total if limit is None else min(total, int(limit))
        self._total = total
        self._spread = spread and self._len < total
        self._maps: list[np.memmap | None] = [None] * len(self.files)

    def __len__(self) -> int:
        return self._len

    @property
    def tokens(self) -> int:
        """Tokens covered by the windows (each window counted with its seq_len + 1 tokens)."""
        return self._len * self.window

    def _map(self, f: int) -> np.ndarray:
        m = self._maps[f]
        if m is None:
            m = np.memmap(self.files[f], dtype=self.dtype, mode="r")
            self._maps[f] = m
        return m

    def __getitem__(self, i: int) -> np.ndarray:
        i = int(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"window {i} out of range (0..{self._len - 1})")
        if self._spread:
            i = i * self._total // self._len
        f = bisect.bisect_right(self._starts, i) - 1
        k = i - int(self._starts[f])
        return np.asarray(self._map(f)[k * self.window : (k + 1) * self.window], dtype=np.int64)

    def batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Windows ``indices`` stacked: int64 array of shape (len(indices), seq_len + 1)."""
        out = np.empty((len(indices), self.window), dtype=np.int64)
        for row, i in enumerate(indices):
            out[row] = self[int(i)]
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = [None] * len(self.files)
        return state

    def __repr__(self) -> str:
        return f"TokenWindows({str(self.folder)!r}, seq_len={self.seq_len}, windows={self._len})"


# ----------------------------------------------------------------------------------------- window order

_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finalizer: a good 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def window_order(n_windows: int, seed: int = 0, rounds: int = 6) -> Callable[[int], int]:
    """A deterministic pseudo-random permutation of ``range(n_windows)`` in O(1) memory.

    Returns ``order`` with ``order(i)`` the window to read for global sequence number ``i``: for
    ``0 <= i < n_windows`` a permutation (a balanced Feistel network over the next even power of two, with
    cycle walking back into range); for ``i >= n_windows``, epoch ``e = i // n_windows`` is read in its own
    permutation (the same network keyed by ``(seed, e)``), so ``order(i)`` for every ``i`` in one epoch
    visits each window exactly once. A trainer then resumes exactly from its step number alone. Callers that
    want the same order every epoch pass ``i % n_windows``.
    """
    if n_windows < 1:
        raise ValueError("window_order needs at least one window")
    n = int(n_windows)
    half_bits = max(1, math.ceil(math.log2(n) / 2)) if n > 1 else 1
    half_mask = (1 << half_bits) - 1
    base = _mix64(int(seed) & _MASK64)

    def permute(x: int, epoch: int) -> int:
        keys = [_mix64(base ^ _mix64((epoch << 8) + r)) for r in range(rounds)]
        while True:  # cycle walking: at most a few steps, since the domain is < 4 n
            left, right = x >> half_bits, x & half_mask
            for k in keys:
                left, right = right, left ^ (_mix64(right ^ k) & half_mask)
            x = (left << half_bits) | right
            if x < n:
                return x

    if n == 1:
        return lambda i: 0

    def order(i: int) -> int:
        i = int(i)
        if i < 0:
            raise ValueError("sequence numbers start at 0")
        epoch, j = divmod(i, n)
        return permute(j, epoch)

    return order


def describe(prepared: PreparedData) -> dict[str, Any]:
    """A JSON-able summary (for logs and run records)."""
    d = asdict(prepared)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}
