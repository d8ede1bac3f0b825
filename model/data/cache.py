"""The shared cache on disk: where it is, the lock that serializes two processes building the same entry, and the
content key that names an entry (corpora, tokenizers and prepared data all live under one root)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ladder.errors import DataError


def default_cache_root() -> Path:
    """``$LADDER_CACHE`` or ``~/.cache/ladder``."""
    from ladder.layout import expand_user

    env = os.environ.get("LADDER_CACHE")
    if env:
        return expand_user(env, "LADDER_CACHE")
    try:
        return Path.home() / ".cache" / "ladder"
    except RuntimeError:  # HOME unset and no passwd entry: a container run as an arbitrary user id
        raise DataError(
            f"the data cache defaults to ~/.cache/ladder, but there is no home directory (HOME is unset and user id "
            f"{os.getuid()} has no passwd entry): set LADDER_CACHE to a folder for the cache"
        ) from None


def refuse_an_unwritable_cache() -> None:
    """Before ``ladder submit`` books a job that trains on this machine: the data cache must take the runs' tokenized
    data, or every run fails before its first step (each then booked as failed, one by one)."""
    from ladder.layout import check_writable

    root = default_cache_root()
    place = root
    while not os.path.lexists(place) and place != place.parent:  # the folder the cache would be made in
        place = place.parent
    try:
        if not place.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(place))
        check_writable(place)
    except OSError as exc:
        raise DataError(
            f"the data cache {root} cannot be written ({place}: {exc.strerror or exc}), so every run would fail "
            "before its first step: set LADDER_CACHE to a folder you can write, then submit again"
        ) from None


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (``flock``) on ``path``; a second process (or thread) waits here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
