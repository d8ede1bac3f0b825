"""``ladder report``: one self-contained ``report.html`` and a paginated ``report.pdf`` from a study directory.

The content is built once as sections of plain blocks (:mod:`ladder.reports.render.blocks`, by
:mod:`ladder.reports.render.builder`); :mod:`ladder.reports.render.document` turns them into HTML (jinja2 with
autoescape: every string from the study is escaped) and :mod:`ladder.reports.render.pdf` prints that HTML on A4
pages with WeasyPrint. Figures are inline SVG; the HTML makes no external request and needs no JavaScript.
Without WeasyPrint's system libraries the PDF is left out with one line on stderr saying why.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ladder import layout
from ladder.errors import StateError
from ladder.reports.render.blocks import Section
from ladder.reports.render.builder import Builder
from ladder.reports.render.document import render_html
from ladder.reports.render.environment import environment
from ladder.reports.render.pdf import PdfUnavailable, write_pdf
from ladder.reports.render.study import StudyData, load_study

FORMATS = ("html", "pdf")
HTML_NAME = "report.html"
PDF_NAME = "report.pdf"


def build_sections(study_dir: Path) -> tuple[StudyData, list[Section]]:
    """The study's data and the report's sections (figures not drawn yet: each output draws its own)."""
    data = load_study(Path(study_dir))
    data.env = environment()
    return data, Builder(data).sections()


def _html(data: StudyData, sections: list[Section]) -> str:
    return render_html(data, sections)


def render_report(
    study_dir: Path,
    out_dir: Path | None = None,
    formats: Iterable[str] = FORMATS,
    warnings_out: list[str] | None = None,
) -> dict[str, Path]:
    """Write ``report.html`` (self-contained) and/or ``report.pdf`` for a study directory; default output folder:
    the study's ``report/``. Returns ``{format: path}``. Missing inputs become one-line notes in the report; a fit
    that is not of the runs now (runs finished after the last collect, or a fit of another results table) is
    also appended to ``warnings_out``, as the report's headline says it."""
    formats = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown report format(s) {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    if not formats:
        raise ValueError(f"no format given; choose from {', '.join(FORMATS)}")
    sd = layout.StudyDir(Path(study_dir))
    why = sd.not_planned()  # as status, collect and fit refuse it: there is no study to report on
    if why:
        raise StateError(why)
    out = Path(out_dir) if out_dir is not None else sd.report
    if out.exists() and not out.is_dir():
        raise StateError(f"{out} exists and is not a folder: the report goes into a folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)  # now: an unwritable place is refused before the work
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):  # numpy's overflow on a 1e300 loss: not the reader's
            warnings.simplefilter("ignore", RuntimeWarning)
            return _write(sd, out, formats, warnings_out)
    except BaseException:  # Ctrl-C or a failure before anything was written: no empty report folder left behind
        if created and not any(out.iterdir()):
            out.rmdir()
        raise


def _write(sd: layout.StudyDir, out: Path, formats: list[str], warnings_out: list[str] | None) -> dict[str, Path]:
    names = {"html": HTML_NAME, "pdf": PDF_NAME}
    for fmt in formats:  # before any is written: a folder in report.pdf's place must not cost report.html
        layout.refuse_if_not_a_file(out / names[fmt], f"run `ladder report {layout.shell_word(sd.path)}` again")
    data, sections = build_sections(sd.path)
    if warnings_out is not None and data.stale_fit:
        warnings_out.append(data.stale_fit)
    written: dict[str, Path] = {}
    if "html" in formats:
        path = out / HTML_NAME
        layout.atomic_write_text(path, _html(data, sections))
        written["html"] = path
    if "pdf" in formats:
        path = out / PDF_NAME
        try:
            layout.atomic_write(path, lambda tmp: write_pdf(tmp, data, sections))
            written["pdf"] = path
        except PdfUnavailable as exc:  # the HTML says everything; the PDF waits for the system's libraries
            print(f"{PDF_NAME} not written: {exc}", file=sys.stderr)
    return written
