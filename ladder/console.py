"""Output helpers shared by the CLI commands: one rich console for humans, plain JSON for machines."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import threading
from typing import Any

from rich.console import Console

from ladder.layout import jsonable
from ladder.model.config import format_flops


def _reopen_closed_streams() -> None:
    """A standard stream the shell closed (``ladder status >&-``, ``2>&-``, ``<&-``) is /dev/null: its output is
    dropped, as asked (Python gives ``None`` there, and the consoles below died of it at import, a traceback), and
    its descriptor is not handed to the next file the command opens, where a write meant for the terminal would
    land."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            free = False  # the descriptor already names another file: leave it to its owner
        except OSError:
            free = True
        null = os.open(os.devnull, os.O_RDWR)
        if free and null != fd:
            os.dup2(null, fd)
            os.close(null)
            null = fd
        setattr(sys, name, open(null, mode, encoding="utf-8", closefd=not free))


_reopen_closed_streams()


class _StandardOutput:
    """``sys.stdout`` (whatever it is at the time of the write: a test may swap it), whose failed write names
    standard output: ``ladder fit S >/dev/full`` said only "No space left on device", which reads as the study's
    disk being full when fit.json had been written."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except OSError as exc:
            raise _named(exc) from None

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except OSError as exc:
            raise _named(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


def _named(exc: OSError) -> OSError:
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, "standard output")


STDOUT = _StandardOutput()

# The width of a pipe or a CI log (rich would otherwise assume 80): tables fit it, wrapping their cells; a line of
# text is not broken there (soft wrap), so that a log keeps each message on one line for grep.
LOG_WIDTH = 120
out = Console(
    file=STDOUT, width=None if sys.stdout.isatty() else LOG_WIDTH, soft_wrap=not sys.stdout.isatty(), highlight=False
)
err = Console(
    stderr=True, width=None if sys.stderr.isatty() else LOG_WIDTH, soft_wrap=not sys.stderr.isatty(), highlight=False
)


def print_json(obj: Any) -> None:
    STDOUT.write(json.dumps(jsonable(obj), indent=2, default=str) + "\n")
    STDOUT.flush()


def human_seconds(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def sci(x: float | None) -> str:
    """Compute and other wide-ranging numbers as the report writes them (:func:`format_flops`: ``2.63e13``, not
    ``2.63e+13``), and ``-`` for a number that is missing or not finite."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format_flops(x)


_STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
_commands: list[dict[int, Any]] = []  # the stop signals' handlers, as each running command found them


@contextlib.contextmanager
def command_running():
    """Around a command of the command line: the handlers :func:`on_record` set aside are put back after it."""
    here = threading.current_thread() is threading.main_thread()
    _commands.append({s: signal.getsignal(s) for s in _STOP_SIGNALS} if here else {})
    try:
        yield
    finally:
        for signum, handler in _commands.pop().items():
            if handler is not None and signal.getsignal(signum) != handler:
                signal.signal(signum, handler)


def on_record() -> None:
    """The command's work is being put on record (a freeze, a score), and nothing is left but to say so: a Ctrl-C
    or kill from here on would say "run the same command to continue" about work that is done, and the same
    command would do it a second time (another freeze, the score appended twice). So they are ignored until
    the command ends. Outside a command of the command line (a library call, a test), nothing changes."""
    if not _commands or threading.current_thread() is not threading.main_thread():
        return
    for signum in _STOP_SIGNALS:
        if signal.getsignal(signum) not in (signal.SIG_IGN, None):
            signal.signal(signum, signal.SIG_IGN)
