"""``ladder report``: a study directory read as data, drawn with matplotlib, written as HTML (jinja2) and PDF.
Imports matplotlib, jinja2, weasyprint (lazily), pandas, ladder.layout/errors/studies.spec; never torch, submit/jobs/status
or fits."""

from ladder.reports.render.report import render_report

__all__ = ["render_report"]
