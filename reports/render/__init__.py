"""``ladder report``: a study directory read as data, drawn with matplotlib, written as HTML (jinja2) and PDF.
Imports matplotlib, jinja2, weasyprint (lazily), pandas, ladder.layout/errors/studies.spec; never torch, submit/jobs/status
or fits."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _matplotlib_dir() -> None:
    """Give matplotlib a folder of its own when its default (``~/.config/matplotlib``, ``~/.cache/matplotlib``)
    cannot be made or written: a HOME that is unwritable or missing (a container, a daemon's /nonexistent). It
    would fall back to a temporary folder itself, but only after two warning lines on stderr ("mkdir -p failed
    ...", "Matplotlib created a temporary cache directory ...") that came before every word of `ladder report` and
    `ladder fit`. Same fallback, in silence: a temporary folder, removed at exit. Before matplotlib is imported."""
    if os.environ.get("MPLCONFIGDIR") or "matplotlib" in sys.modules or not sys.platform.startswith("linux"):
        return  # the user's own setting stands (matplotlib's warning about it is theirs to read)
    try:
        home = Path.home()
        config = os.environ.get("XDG_CONFIG_HOME") or home / ".config"
        for base in (config, os.environ.get("XDG_CACHE_HOME") or home / ".cache"):
            folder = Path(base, "matplotlib").resolve()
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder.is_dir() and os.access(folder, os.W_OK)):
                raise PermissionError(folder)
        return
    except (OSError, RuntimeError):  # RuntimeError: no home directory at all
        pass
    try:
        tmp = tempfile.mkdtemp(prefix="matplotlib-")
    except OSError:
        return  # no temporary folder either: matplotlib's own error says what to set
    os.environ["MPLCONFIGDIR"] = tmp
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)


_matplotlib_dir()

from ladder.reports.render.report import render_report  # noqa: E402 - matplotlib's folder is set first

__all__ = ["render_report"]
