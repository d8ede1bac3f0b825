"""One writer at a time edits a study's shared books that are read, changed and written back whole: plan.json (by
``ladder plan`` and ``ladder hero``) and a freeze's ``scores`` (by ``ladder forecast score``).

Each of those is a read-modify-write of a whole file; two commands at once (two terminals, a cron job and a person)
each read the old file, and the second write dropped what the first added: a hero run that plan.json no longer
listed (its folder left behind) or listed twice, a score lost from the freeze. The lock is ``flock`` on the study
directory itself (no file is made, so a read-only study stays untouched and its own error is said by the write),
held only for the read and the write: the second command waits a moment (saying that it waits), then reads what
the first wrote.
``flock`` is released by the kernel however the holder dies. Where the folder cannot be locked (a file system
without ``flock``), the command goes on unlocked, as before.

``ladder collect`` takes turns with another collect on the study's ``runs/`` folder (the same lock, on another
folder, so that a long collect never holds up ``hero`` or ``score``): the tables on disk are those of the collect
that read the runs last, never an older snapshot written after a newer one. ``ladder eval`` holds a run folder's
own lock while it evaluates that run: a second eval at the same time waits, then finds the results and skips them.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def editing_study(study_dir: Path) -> Iterator[None]:
    """Hold the study directory's lock for the duration (wait for another holder); see the module's docstring."""
    try:
        fd: int | None = os.open(study_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # no folder yet (a first plan makes it) or none to open: nothing another command could edit
        fd = None
    locked = False
    try:
        if fd is not None:
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # a wait with no word looked like a hang
                    print(f"waiting for another ladder command working on {study_dir} ...", file=sys.stderr, flush=True)
                    fcntl.flock(fd, fcntl.LOCK_EX)
                locked = True
            except OSError:  # a file system without flock on folders
                pass
        yield
    finally:
        if fd is not None:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
