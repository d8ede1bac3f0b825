"""The project's errors. A ``LadderError`` is the user's to fix (the CLI prints one line, exit 2);
anything else escaping a command is a bug in ladder (traceback, exit 1)."""

from __future__ import annotations

import os
import shlex


def shell_word(path: str | os.PathLike) -> str:
    """``path`` as one word of a shell command that a message prints for the user to paste (`ladder fit S`,
    `rm -r S/fit.json`): a plain path as it is, one with a space, a quote or another character the shell reads
    quoted (``'my st'"'"'dy'``), so that the command typed as printed names the same path."""
    return shlex.quote(str(path))


class LadderError(Exception):
    """A problem the user can fix: a bad file, a bad field, a command run in the wrong state."""


class SpecError(LadderError):
    """A study or run spec failed validation. The message names the field path, the value and what is allowed."""


class StateError(LadderError):
    """A command does not fit the state on disk (nothing planned, nothing collected, ...)."""


class DataError(LadderError):
    """A corpus or tokenizer cannot be read or does not fit the study."""


class DataNotPrepared(DataError):
    """A run's data could not be prepared (a place of the shared data cache, or of the corpus, that cannot be
    written or read): nothing was trained, so the run is no failure of its own, and a plain ``ladder submit`` of
    its study tries it again (``--retry-failed`` is for runs that failed in training)."""

    STAGE = "data"  # what error.json's "stage" says of such a failure


class FitError(LadderError):
    """Results that cannot be fitted: missing columns, bad values, too few runs for a form."""
