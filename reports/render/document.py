"""The report as one HTML document: the sections' blocks through ``templates/report.html.j2`` (jinja2 with
autoescape: every string from the study is escaped). The same document is ``report.html`` and, printed by
:mod:`ladder.reports.render.pdf`, ``report.pdf``; only the figures' glyphs differ (paths in the HTML, text in
the PDF)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ladder.reports.render.blocks import Fig, Section
from ladder.reports.render.environment import environment, version
from ladder.reports.render.figures.spec import to_svg
from ladder.reports.render.study import StudyData

TEMPLATES = Path(__file__).parent / "templates"


def render_html(data: StudyData, sections: list[Section], *, for_print: bool = False) -> str:
    """The report's HTML. ``for_print``: the figures' glyphs are text, not paths (drawn again for the PDF;
    the HTML's figures, drawn once, are kept on their blocks)."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def svg(b: Fig) -> Markup:
        if for_print:
            return Markup(to_svg(b.spec, context=data.name, text=True))
        if not b.svg:
            b.svg = to_svg(b.spec, context=data.name)
        return Markup(b.svg)

    return env.get_template("report.html.j2").render(
        name=data.name,
        description=data.description,
        sections=sections,
        generated=(data.env or environment())["date"],
        version=version("ladder"),
        svg=svg,
        study_dir=str(data.path),
    )
