"""The embedded corpus: the Python source files of the standard library and of this interpreter's installed
packages, read in place and materialized once as ``jsonl.gz`` shards in the cache
(``<cache>/corpora/embedded-<fingerprint>/``). Needs no download; ``corpus: embedded`` in a study names it.
See :func:`build_embedded_corpus` for the selection rules.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import site
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from ladder.errors import DataError
from ladder.layout import atomic_write_json
from ladder.model.data.cache import default_cache_root, file_lock, sha256_json

EMBEDDED = "embedded"
EMBEDDED_VERSION = 2  # bump when the selection rules change: the cache key changes with it
EMBEDDED_DEFAULT_MAX_BYTES = 64_000_000
EMBEDDED_MIN_FILE_BYTES = 512  # __init__.py stubs and one-liners teach nothing
EMBEDDED_MAX_FILE_BYTES = 1_000_000  # generated tables (unicode data, protobuf dumps) are not code
EMBEDDED_SHARD_BYTES = 4_000_000
EMBEDDED_MANIFEST = "manifest.json"
EMBEDDED_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
# written by an editable install and naming the checkout's folder: with them two clones built different corpora
EMBEDDED_SKIP_PREFIXES = ("__editable__",)
# the report's PDF stack (WeasyPrint and the packages it brings): a dependency of rendering, not of training, so
# the main job trains on the same corpus with or without it (it sorted ahead of the 64 MB cut and shifted it)
EMBEDDED_SKIP_PACKAGES = frozenset(
    {
        "brotli",
        "cffi",
        "cssselect2",
        "pycparser",
        "pydyf",
        "pyphen",
        "tinycss2",
        "tinyhtml5",
        "weasyprint",
        "webencodings",
        "zopfli",
    }
)


def embedded_roots() -> list[tuple[str, Path]]:
    """(label, folder) of the standard library and of this interpreter's site-packages, deduplicated."""
    paths = sysconfig.get_paths()
    roots: list[tuple[str, Path]] = [("stdlib", Path(paths["stdlib"]))]
    candidates = [paths.get("purelib"), paths.get("platlib")]
    with contextlib.suppress(AttributeError):
        candidates += site.getsitepackages()
    seen = {roots[0][1].resolve()}
    for c in candidates:
        if not c:
            continue
        p = Path(c)
        if not p.is_dir() or p.resolve() in seen:
            continue
        seen.add(p.resolve())
        roots.append((f"site-packages{'' if len(roots) == 1 else len(roots) - 1}", p))
    return [(label, p) for label, p in roots if p.is_dir()]


def _embedded_candidates(roots: list[tuple[str, Path]]) -> list[tuple[str, Path, int, int]]:
    """Every ``*.py`` under the roots, sorted by (root order, relative path): (label/rel, path, size, mtime)."""
    out = []
    for label, root in roots:
        rows = []
        for dirpath, dirnames, filenames in os.walk(root):
            top = label != "stdlib" and Path(dirpath) == root
            dirnames[:] = [
                d
                for d in dirnames
                if d not in EMBEDDED_SKIP_DIRS and not d.startswith(".") and not (top and d in EMBEDDED_SKIP_PACKAGES)
            ]
            for fn in filenames:
                if not fn.endswith(".py") or fn.startswith(EMBEDDED_SKIP_PREFIXES):
                    continue
                if top and fn[:-3] in EMBEDDED_SKIP_PACKAGES:
                    continue
                full = os.path.join(dirpath, fn)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                rows.append((f"{label}/{os.path.relpath(full, root)}", Path(full), st.st_size, st.st_mtime_ns))
        rows.sort(key=lambda r: r[0])
        out.extend(rows)
    return out


def build_embedded_corpus(
    max_bytes: int = EMBEDDED_DEFAULT_MAX_BYTES,
    *,
    cache_root: Path | None = None,
    roots: list[tuple[str, Path]] | None = None,
    progress: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Assemble the embedded corpus once and return (its folder of ``jsonl.gz`` shards, its manifest).

    Rules, all deterministic: the ``*.py`` files of the standard library, then of site-packages, in sorted
    path order (an editable install's ``__editable__*`` finders left out: they name the checkout's folder, and
    the Makefile pins site-packages with ``constraints.txt``, so two clones build one corpus); files under ``EMBEDDED_MIN_FILE_BYTES`` or over ``EMBEDDED_MAX_FILE_BYTES`` skipped, files
    that are not UTF-8 skipped, repeated contents kept once (by SHA-256); the first files taken until their
    text reaches ``max_bytes``. The chosen documents are stored in the order of their content hash (so every
    shard mixes all packages) in shards of about ``EMBEDDED_SHARD_BYTES``.

    The folder is named by a fingerprint of the candidate files' names, sizes and mtimes and the rules; the
    manifest records the document count, bytes and a SHA-256 of the contents, which is what identifies the
    corpus in cache keys (another machine with other packages installed gets another corpus and another key).
    """
    cache = Path(cache_root) if cache_root is not None else default_cache_root()
    roots = roots if roots is not None else embedded_roots()
    candidates = _embedded_candidates(roots)
    rules = {
        "version": EMBEDDED_VERSION,
        "max_bytes": max_bytes,
        "min_file_bytes": EMBEDDED_MIN_FILE_BYTES,
        "max_file_bytes": EMBEDDED_MAX_FILE_BYTES,
        "shard_bytes": EMBEDDED_SHARD_BYTES,
    }
    fingerprint = sha256_json({"rules": rules, "files": [[r[0], r[2], r[3]] for r in candidates]})[:16]
    folder = cache / "corpora" / f"embedded-{fingerprint}"
    manifest_file = folder / EMBEDDED_MANIFEST
    if manifest_file.is_file():
        return folder, json.loads(manifest_file.read_text())
    with file_lock(cache / "corpora" / f"embedded-{fingerprint}.lock"):
        if manifest_file.is_file():  # another process built it while we waited
            return folder, json.loads(manifest_file.read_text())
        start = time.perf_counter()
        if progress:
            print(f"Assembling the embedded corpus ({max_bytes / 1e6:.0f} MB of Python source) ...", file=sys.stderr)
        docs: list[tuple[bytes, str, str]] = []  # (sha256, id, text)
        seen: set[bytes] = set()
        skipped = {"tiny": 0, "huge": 0, "non_utf8": 0, "duplicate": 0, "unreadable": 0}
        total = 0
        for rel, path, size, _ in candidates:
            if total >= max_bytes:
                break
            if size < EMBEDDED_MIN_FILE_BYTES:
                skipped["tiny"] += 1
                continue
            if size > EMBEDDED_MAX_FILE_BYTES:
                skipped["huge"] += 1
                continue
            try:
                raw = path.read_bytes()
            except OSError:
                skipped["unreadable"] += 1
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped["non_utf8"] += 1
                continue
            digest = hashlib.sha256(raw).digest()
            if digest in seen:
                skipped["duplicate"] += 1
                continue
            seen.add(digest)
            docs.append((digest, rel, text))
            total += len(raw)
        if not docs:
            raise DataError(
                "the embedded corpus is empty: no readable *.py files under " + ", ".join(str(p) for _, p in roots)
            )
        docs.sort(key=lambda d: d[0])
        content = hashlib.sha256()
        for digest, _, _ in docs:
            content.update(digest)
        for stale in folder.parent.glob(f"{folder.name}.tmp-*"):  # left by a killed build (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        n_shards = max(1, min(64, -(-total // EMBEDDED_SHARD_BYTES)))
        per_shard = -(-total // n_shards)
        shard, shard_bytes, shard_files = None, 0, 0
        try:
            for _, rel, text in docs:
                if shard is None or (shard_bytes >= per_shard and shard_files < n_shards):
                    if shard is not None:
                        shard.close()
                    shard = gzip.GzipFile(tmp / f"{shard_files:05d}.jsonl.gz", "wb", compresslevel=1, mtime=0)
                    shard_files += 1
                    shard_bytes = 0
                line = json.dumps({"id": rel, "text": text}, ensure_ascii=False) + "\n"
                shard.write(line.encode("utf-8"))
                shard_bytes += len(text.encode("utf-8"))
        finally:
            if shard is not None:
                shard.close()
        manifest = {
            "kind": EMBEDDED,
            "rules": rules,
            "documents": len(docs),
            "bytes": total,
            "sha256": content.hexdigest(),
            "shards": shard_files,
            "skipped": skipped,
            "candidates": len(candidates),
            "roots": {label: str(p) for label, p in roots},
            "python": sys.version.split()[0],
            "seconds": round(time.perf_counter() - start, 2),
        }
        atomic_write_json(tmp / EMBEDDED_MANIFEST, manifest)
        if folder.exists():  # a leftover without a manifest (killed before the rename)
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        return folder, manifest
