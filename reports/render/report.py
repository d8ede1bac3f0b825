"""``ladder report``: one self-contained ``report.html`` and a paginated ``report.pdf`` from a study directory.

The content is built once as sections of plain blocks (:mod:`ladder.reports.render.blocks`, by
:mod:`ladder.reports.render.builder`); ``templates/report.html.j2`` turns them into HTML (jinja2 with autoescape:
every string from the study is escaped) and :mod:`ladder.reports.render.pdf` lays the same blocks out on A4
pages. Figures are inline SVG; the HTML makes no external request and needs no JavaScript.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ladder import layout
from ladder.errors import StateError
from ladder.reports.render.blocks import Fig, Section
from ladder.reports.render.builder import Builder
from ladder.reports.render.environment import environment, version
from ladder.reports.render.figures.spec import to_svg
from ladder.reports.render.pdf import write_pdf
from ladder.reports.render.study import StudyData, load_study

FORMATS = ("html", "pdf")
HTML_NAME = "report.html"
PDF_NAME = "report.pdf"
TEMPLATES = Path(__file__).parent / "templates"


def build_sections(study_dir: Path) -> tuple[StudyData, list[Section]]:
    """The study's data and the report's sections (figures not drawn yet: each output draws its own)."""
    data = load_study(Path(study_dir))
    data.env = environment()
    return data, Builder(data).sections()


def _html(data: StudyData, sections: list[Section]) -> str:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    for sec in sections:
        for b in sec.blocks:
            if isinstance(b, Fig) and not b.svg:
                b.svg = to_svg(b.spec, context=data.name)
    return env.get_template("report.html.j2").render(
        name=data.name, description=data.description, sections=sections,
        generated=(data.env or environment())["date"], version=version("ladder"), markup=Markup,
        study_dir=str(data.path),
    )


def render_report(study_dir: Path, out_dir: Path | None = None, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Write ``report.html`` (self-contained) and/or ``report.pdf`` for a study directory; default output folder:
    the study's ``report/``. Returns ``{format: path}``. Missing inputs become one-line notes in the report."""
    formats = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown report format(s) {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    if not formats:
        raise ValueError(f"no format given; choose from {', '.join(FORMATS)}")
    sd = layout.StudyDir(Path(study_dir))
    if not sd.plan.is_file():  # as status, collect and fit refuse it: there is no study to report on
        raise StateError(f"{sd.path} is not a planned study directory (no {layout.PLAN}); run `ladder plan` first")
    out = Path(out_dir) if out_dir is not None else sd.report
    if out.exists() and not out.is_dir():
        raise StateError(f"{out} exists and is not a folder: the report goes into a folder")
    out.mkdir(parents=True, exist_ok=True)
    data, sections = build_sections(sd.path)
    written: dict[str, Path] = {}
    if "html" in formats:
        path = out / HTML_NAME
        layout.atomic_write_text(path, _html(data, sections))
        written["html"] = path
    if "pdf" in formats:
        path = out / PDF_NAME
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            write_pdf(tmp, data, sections)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        written["pdf"] = path
    return written
