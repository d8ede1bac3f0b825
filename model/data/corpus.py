"""Corpora: what a ``DataConfig.corpus`` string names, read through datatrove readers.

``corpus`` is one of

- ``embedded``: the Python source files (``*.py``) of the standard library and of the installed packages
  (site-packages of the running interpreter), read in place and materialized once as ``jsonl.gz`` shards in
  the cache (``<cache>/corpora/embedded-<fingerprint>/``). Needs no download. See :mod:`ladder.model.data.embedded`.
- a local ``.jsonl`` / ``.jsonl.gz`` / ``.jsonl.zst`` file, a ``.parquet`` file, or a folder of them (one
  document per line or row, the text under ``text_key``);
- a folder of ``.txt`` files (one document per file, recursive);
- ``hf:<dataset>[:<config>]``: the ``train`` split of a hub dataset, streamed (needs ``datasets``, and the hub
  wherever it is read: data prepared from it earlier serves runs offline).

Every corpus is split into train and validation BY DOCUMENT with a content hash (``is_validation``): a document
is held out when the hash of its text falls below ``validation_fraction``; the same text always lands on the
same side, whatever the order, the sharding or the other documents.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.readers import JsonlReader, ParquetReader
from datatrove.pipeline.readers.base import BaseDiskReader

from ladder.errors import DataError
from ladder.model.data.cache import sha256_json
from ladder.model.data.embedded import (
    EMBEDDED,
    EMBEDDED_DEFAULT_MAX_BYTES,
    EMBEDDED_VERSION,
    build_embedded_corpus,
)

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
TEXT_SUFFIXES = (".txt",)

Kind = Literal["jsonl", "parquet", "text", "hf"]
Split = Literal["train", "validation"]


def hub_offline() -> bool:
    """Whether the environment forbids the Hugging Face hub (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set)."""
    return any(os.environ.get(v, "").strip().lower() not in ("", "0", "false", "no") for v in
               ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))  # fmt: skip


def hub_offline_message(corpus: str) -> str:
    return (
        f"corpus {corpus!r} is streamed from the Hugging Face hub, but HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set: "
        "read it where the hub is reachable (`ladder data prepare STUDY` there; the prepared data stays in the data "
        "cache, $LADDER_CACHE, for runs without the hub), or use corpus: embedded or a local jsonl/parquet/txt corpus"
    )


# ---------------------------------------------------------------------------------------------------- split


def text_hash(text: str) -> int:
    """A 64-bit content hash of a document (blake2b of its UTF-8 bytes)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def is_validation(text: str, validation_fraction: float) -> bool:
    """Whether a document belongs to the validation split: its content hash, as a number in [0, 1), is below
    ``validation_fraction``. Deterministic and order-free; duplicates land on the same side."""
    return text_hash(text) < validation_fraction * 2**64


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ------------------------------------------------------------------------------------- datatrove steps


class SplitFilter(PipelineStep):
    """Keep the documents of one split (``is_validation``)."""

    name = "✂️ Split"
    type = "🔻 - FILTER"

    def __init__(self, split: Split, validation_fraction: float):
        super().__init__()
        self.split = split
        self.validation_fraction = validation_fraction

    def run(self, data, rank: int = 0, world_size: int = 1):
        want_val = self.split == "validation"
        for doc in data:
            with self.track_time():
                keep = is_validation(doc.text, self.validation_fraction) == want_val
            self.stat_update("kept" if keep else "other_split")
            if keep:
                yield doc


class ByteBudget(PipelineStep):
    """Pass documents until ``max_bytes`` UTF-8 bytes have gone by (the one crossing the cap included).
    The result is a prefix of the whole corpus only when it runs in a single task."""

    name = "📏 Byte budget"
    type = "🔻 - FILTER"

    def __init__(self, max_bytes: int):
        super().__init__()
        self.max_bytes = max_bytes

    def run(self, data, rank: int = 0, world_size: int = 1):
        total = 0
        for doc in data:
            if total >= self.max_bytes:
                break
            total += len(doc.text.encode("utf-8"))
            yield doc


class _Listed:
    """Mixin for datatrove disk readers: read exactly ``files`` (relative to the data folder, sorted); task
    ``rank`` of ``world_size`` reads ``files[rank::world_size]``, as datatrove shards. Avoids glob surprises
    (datatrove turns a plain file name into the pattern ``*name``)."""

    files: list[str]

    def __init__(self, data_folder, files: list[str], **kwargs):
        super().__init__(data_folder, **kwargs)
        self.files = files

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if data:
            yield from data
        shard = list(self.files[rank::world_size])
        for doc in self.read_files_shard(shard):
            self.update_doc_stats(doc)
            yield doc

    def get_document_from_dict(self, data: dict, source_file: str, id_in_file: int | str):
        """datatrove's document, once the record's ``text_key`` is known to hold text: a number, a list or an
        object there is a corpus the user must fix (DataError naming the record), not a traceback deep in the
        tokenizer."""
        text = data.get(self.text_key)
        if text is not None and not isinstance(text, str):
            raise DataError(
                f"corpus file {Path(self.data_folder.path) / source_file}, "
                f"{'line' if isinstance(self, JsonlReader) else 'row'} {int(id_in_file) + 1}: its {self.text_key!r} "
                f"is {_shown(text)}, not text ({type(text).__name__}); every record's text_key field must hold a "
                "string (data.text_key names the field)"
            )
        return super().get_document_from_dict(data, source_file, id_in_file)


class TextFolderReader(_Listed, BaseDiskReader):
    """Each ``.txt`` file is one document; files that are not UTF-8 are skipped (counted as ``non_utf8``)."""

    name = "📄 Text files"

    def read_file(self, filepath: str):
        with self.data_folder.open(filepath, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.stat_update("non_utf8")
            return
        document = self.get_document_from_dict({self.text_key: text}, filepath, 0)
        if document:
            yield document


class ListedJsonlReader(_Listed, JsonlReader):
    """datatrove's JsonlReader, but a line that is JSON yet not an object (a list, a number, a string) is refused
    naming the file and line, where datatrove would raise an AttributeError; a line that is not JSON at all is
    skipped, as datatrove does."""

    name = "🐿 Jsonl"

    def read_file(self, filepath: str):
        import orjson

        with self.data_folder.open(filepath, "r", compression=self.compression) as f:
            for li, line in enumerate(f):
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.stat_update("not_json")
                    continue
                if not isinstance(record, dict):
                    raise DataError(
                        f"corpus file {Path(self.data_folder.path) / filepath}, line {li + 1}: {_shown(record)} "
                        f"is a JSON {type(record).__name__}, not an object with a {self.text_key!r} field"
                    )
                document = self.get_document_from_dict(record, filepath, li)
                if document:
                    yield document


class ListedParquetReader(_Listed, ParquetReader):
    name = "📒 Parquet"


# ------------------------------------------------------------------------------------------ corpus source


@dataclass(frozen=True)
class CorpusSource:
    """A resolved corpus: where its files are, how to read them, and what identifies its content."""

    spec: str
    kind: Kind
    text_key: str = "text"
    folder: Path | None = None
    files: tuple[str, ...] = ()  # relative to folder, sorted
    hf_dataset: str | None = None
    hf_config: str | None = None
    identity: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None  # embedded corpora: count, bytes, content hash
    prefix_bytes: int | None = None  # a cap still to apply while reading (not for embedded: applied already)

    @property
    def n_files(self) -> int:
        return len(self.files) if self.kind != "hf" else 1

    def max_tasks(self) -> int:
        """How many datatrove tasks can share the reading: one per file; one when a byte prefix applies."""
        if self.prefix_bytes is not None or self.kind == "hf":
            return 1
        return max(1, self.n_files)

    def reader(self) -> Any:
        """A fresh datatrove reader over the whole corpus (rank ``r`` of ``n`` reads files ``r::n``)."""
        common: dict[str, Any] = dict(text_key=self.text_key, add_file_path=False)
        if self.kind == "jsonl":
            return ListedJsonlReader(str(self.folder), list(self.files), compression="infer", **common)
        if self.kind == "parquet":
            return ListedParquetReader(str(self.folder), list(self.files), text_key=self.text_key)
        if self.kind == "text":
            return TextFolderReader(str(self.folder), list(self.files), **common)
        if self.kind == "hf":
            from datatrove.pipeline.readers import HuggingFaceDatasetReader

            if hub_offline():  # checked where the corpus is read: data prepared from it earlier serves offline runs
                raise DataError(hub_offline_message(self.spec))

            options: dict[str, Any] = {"split": "train"}
            if self.hf_config:
                options["name"] = self.hf_config
            return HuggingFaceDatasetReader(
                self.hf_dataset, dataset_options=options, streaming=True, text_key=self.text_key
            )
        raise AssertionError(self.kind)

    def pipeline_head(self, split: Split | None, validation_fraction: float) -> list[Any]:
        """The datatrove steps that yield this corpus' documents of ``split`` (None: all)."""
        steps = [self.reader()]
        if self.prefix_bytes is not None:
            steps.append(ByteBudget(self.prefix_bytes))
        if split is not None:
            steps.append(SplitFilter(split, validation_fraction))
        return steps

    def iter_texts(
        self, split: Split | None = None, validation_fraction: float = 0.02, max_bytes: int | None = None
    ) -> Iterator[str]:
        """The texts of the corpus (or of one split), in order, in this process (no executor)."""
        steps = self.pipeline_head(split, validation_fraction)
        total = 0
        with quiet_datatrove():
            data = None
            for step in steps:
                data = step.run(data, 0, 1)
            for doc in data:
                if max_bytes is not None and total >= max_bytes:
                    return
                total += len(doc.text.encode("utf-8"))
                yield doc.text


@contextlib.contextmanager
def quiet_datatrove(pipeline_logs: bool = True) -> Iterator[None]:
    """Silence datatrove's executor summaries and (``pipeline_logs``) its readers' per-file lines in this
    process. Errors still raise."""
    from loguru import logger

    names = ("datatrove.executor.local",) + (("datatrove.pipeline",) if pipeline_logs else ())
    for n in names:
        logger.disable(n)
    try:
        yield
    finally:
        for n in names:
            logger.enable(n)


def _suffix_kind(name: str) -> Kind | None:
    low = name.lower()
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(TEXT_SUFFIXES):
        return "text"
    return None


def _stat_identity(folder: Path, files: list[str]) -> dict[str, Any]:
    rows = []
    total = 0
    for rel in files:
        st = (folder / rel).stat()
        rows.append([rel, st.st_size, st.st_mtime_ns])
        total += st.st_size
    return {"files": len(files), "file_bytes": total, "stat_sha256": sha256_json(rows)}


def resolve_corpus(
    corpus: str,
    text_key: str = "text",
    *,
    max_bytes: int | None = None,
    cache_root: Path | None = None,
    progress: bool = False,
) -> CorpusSource:
    """Turn a ``DataConfig.corpus`` string into a ``CorpusSource``; DataError when it cannot be read.

    ``embedded`` is materialized in ``cache_root`` on first use (``build_embedded_corpus``). Local corpora are
    identified by their resolved path and the names, sizes and mtimes of their files (not by hashing their
    content): touching a file makes a new cache entry.
    """
    if not corpus or not corpus.strip():
        raise DataError("the corpus is empty: name 'embedded', a local jsonl/parquet/txt path or 'hf:<dataset>'")
    corpus = corpus.strip()
    if corpus == EMBEDDED:
        folder, manifest = build_embedded_corpus(
            max_bytes=max_bytes or EMBEDDED_DEFAULT_MAX_BYTES, cache_root=cache_root, progress=progress
        )
        files = sorted(p.name for p in folder.glob("*.jsonl.gz"))
        identity = {"kind": EMBEDDED, "version": EMBEDDED_VERSION, "sha256": manifest["sha256"]}
        return CorpusSource(corpus, "jsonl", "text", folder, tuple(files), identity=identity, manifest=manifest)
    if corpus.startswith("hf:"):
        rest = corpus[3:]
        name, _, config = rest.partition(":")
        if not name:
            raise DataError(f"corpus {corpus!r}: write 'hf:<dataset>' or 'hf:<dataset>:<config>'")
        try:
            import datasets  # noqa: F401
        except ImportError as e:
            raise DataError(f"corpus {corpus!r} needs the `datasets` package: pip install datasets") from e
        identity = {"kind": "hf", "dataset": name, "config": config or None, "split": "train", "text_key": text_key}
        return CorpusSource(
            corpus, "hf", text_key, hf_dataset=name, hf_config=config or None, identity=identity,
            prefix_bytes=max_bytes,
        )  # fmt: skip

    from ladder.layout import broken_link, expand_user

    path = expand_user(corpus, "corpus")
    if not path.exists():
        link = broken_link(path)  # "does not exist" of what `ls` shows: a loop of links, or a link to a deleted folder
        if link:
            raise DataError(f"corpus {corpus!r}: {link}; mend the link or give the corpus itself")
        # a relative path beside the study file, run from elsewhere, "does not exist" of what `ls` shows there
        where = "" if path.is_absolute() else f"; a relative path is read from the current directory {Path.cwd()}"
        raise DataError(
            f"corpus {corpus!r} does not exist (expected 'embedded', a jsonl/parquet file or folder, a folder of "
            f".txt files, or 'hf:<dataset>[:<config>]'){where}"
        )
    path = path.resolve()
    if path.is_file():
        kind = _suffix_kind(path.name)
        if kind is None:
            raise DataError(
                f"corpus file {path} has an unknown type: use .jsonl (.gz/.zst), .parquet, or a folder of .txt files"
            )
        if kind == "text":
            raise DataError(
                f"corpus {path} is a single .txt file; a text corpus is a folder of .txt files, one document each"
            )
        folder, files = path.parent, [path.name]
    elif not path.is_dir():  # /dev/null, a pipe: "corpus folder /dev/null holds no files" misnamed it
        raise DataError(
            f"corpus {corpus!r} is neither a file nor a folder: give a jsonl/parquet file or a folder of them"
        )
    else:
        folder = path
        found: dict[Kind, list[str]] = {}
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in filenames:
                if fn.startswith("."):
                    continue
                k = _suffix_kind(fn)
                if k is not None:
                    found.setdefault(k, []).append(os.path.relpath(os.path.join(dirpath, fn), path))
        if not found:
            raise DataError(f"corpus folder {path} holds no .jsonl, .jsonl.gz, .parquet or .txt files")
        if len(found) > 1:
            counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(found.items()))
            raise DataError(f"corpus folder {path} mixes file types ({counts}); keep one type per corpus")
        ((kind, files),) = found.items()
        files = sorted(files)
    identity = {"kind": kind, "path": str(path), "text_key": text_key, **_stat_identity(folder, files)}
    if max_bytes is not None:
        identity["max_bytes"] = max_bytes
    return CorpusSource(corpus, kind, text_key, folder, tuple(files), identity=identity, prefix_bytes=max_bytes)


TEXT_KEY_PEEK = 50  # the first records of a jsonl file that are read for its fields


def _first_fields(path: Path, kind: Kind) -> list[str] | None:
    """The fields the first records of a local corpus file hold (a parquet file's columns; the keys of the
    first :data:`TEXT_KEY_PEEK` JSON objects of a jsonl file, in order of first sight), or None where they cannot
    be read cheaply (a zstd file without the zstandard package, a file with no JSON object there)."""
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except Exception:  # a broken file: data preparation names it
            return None
    import gzip
    import io
    import json

    low = path.name.lower()
    try:
        if low.endswith(".zst"):
            import zstandard

            raw = zstandard.ZstdDecompressor().stream_reader(path.open("rb"))
            handle = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        elif low.endswith(".gz"):
            handle = gzip.open(path, "rt", encoding="utf-8", errors="replace")
        else:
            handle = path.open(encoding="utf-8", errors="replace")
    except (ImportError, OSError):
        return None
    keys: dict[str, None] = {}
    seen = 0
    with handle:
        try:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    keys.update(dict.fromkeys(map(str, record)))
                    seen += 1
                    if seen >= TEXT_KEY_PEEK:
                        break
        except (OSError, EOFError, ValueError):  # a truncated archive: data preparation names it
            pass
    return list(keys) if seen else None


def text_key_problem(source: CorpusSource, name: str = "data.text_key") -> str | None:
    """Why data preparation will find no documents in a local jsonl or parquet corpus: its first file's first
    records (or columns) hold no field ``text_key``. Said at validate time; data preparation said it only after
    the plan ("has no training documents: is text_key not the field that holds the text?")."""
    if source.kind not in ("jsonl", "parquet") or source.folder is None or not source.files:
        return None
    first = source.folder / source.files[0]
    fields = _first_fields(first, source.kind)
    if fields is None or source.text_key in fields:
        return None
    where = "its columns are" if source.kind == "parquet" else "its first records hold"
    shown = ", ".join(repr(f) for f in fields[:12]) + (f" and {len(fields) - 12} more" if len(fields) > 12 else "")
    return (
        f"{name} = {source.text_key!r}: {first} has no such field ({where} {shown or 'none'}); set "
        f"{name} to the field that holds the text"
    )


def iter_corpus_texts(
    corpus: str,
    text_key: str = "text",
    *,
    split: Split | None = None,
    validation_fraction: float = 0.02,
    max_bytes: int | None = None,
    cache_root: Path | None = None,
) -> Iterator[str]:
    """The texts of a corpus path (jsonl/parquet file or folder, .txt folder, ``embedded``, ``hf:...``), for the
    ``ladder data tokenizer`` commands. ``split`` keeps one side of the document split; ``max_bytes`` stops
    after that many bytes (for ``embedded`` it is also the corpus budget)."""
    source = resolve_corpus(corpus, text_key, max_bytes=max_bytes, cache_root=cache_root)
    yield from source.iter_texts(split, validation_fraction, max_bytes=max_bytes)
