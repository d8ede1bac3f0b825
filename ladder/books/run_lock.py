"""A run is trained by at most one process at a time: that process holds its run directory's ``.lock``.

``flock`` is released by the kernel however the holder dies (kill -9 included), so a stale lock cannot keep a
run from resuming; the file holds the holder's pid and host, for ``ladder status`` and ``ladder cancel``.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from ladder import layout


@contextmanager
def run_lock(rd: layout.RunDir) -> Iterator[bool]:
    """Hold the run's lock for the duration; yields False (and holds nothing) if another process has it."""
    fd = os.open(rd.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_holder(rd: layout.RunDir) -> int | None:
    """The pid training this run right now, or None. Reliable on a local file system (flock)."""
    if not rd.lock.is_file():
        return None
    fd = os.open(rd.lock, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return int(rd.lock.read_text().split()[0])
            except (ValueError, IndexError, OSError):
                return -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
