"""The report (``ladder report``): a study directory's files, read as data, drawn as figures and written as
one self-contained HTML file and an A4 PDF. Entry point: :func:`render_report`.

Imports matplotlib, jinja2, pandas, ``ladder.layout``, ``ladder.errors`` and ``ladder.studies.spec`` (to read
``study.yaml``); never torch, never ``ladder.submit``/``jobs``/``status``, and no fitting module: ``fit.json``
is read as data (:mod:`ladder.reports.render.study`), never recomputed.
"""

from ladder.reports.render.report import render_report

__all__ = ["render_report"]
