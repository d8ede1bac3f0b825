"""The report as a paginated PDF, with matplotlib alone (``PdfPages``): no browser, no network, no LaTeX.

The same sections and blocks as the HTML are laid out on A4 pages by :mod:`ladder.reports.render.pdflayout`;
this module draws the pages: a figure is drawn by its own drawing function into a subfigure slot of the page, so
it stays vector and looks like the HTML's. Text is TrueType (selectable, searchable) and never parsed as
mathtext.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib import rc_context
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle

from ladder.reports.render.environment import environment
from ladder.reports.render.figures.spec import draw_safely
from ladder.reports.render.figures.style import RC, tx
from ladder.reports.render.pdflayout import (
    FAINT,
    INK,
    MUTED,
    MX,
    PAGE_H,
    PAGE_W,
    TEXT_W,
    Layout,
    Page,
    line_h,
    wrap,
)


def _title_block(lay: Layout, data: Any, generated: str) -> None:
    lay.text(MX, lay.page.y, "SCALING LADDER REPORT", 8, weight="bold", color=FAINT)
    lay.page.y += line_h(8) + 0.04
    for ln in wrap(data.name, TEXT_W, 20)[:3]:
        lay.text(MX, lay.page.y, ln, 20, weight="bold")
        lay.page.y += line_h(20)
    if data.description:
        lay.page.y += 0.04
        for ln in wrap(data.description, TEXT_W, 9.5)[:6]:
            lay.text(MX, lay.page.y, ln, 9.5, color=INK)
            lay.page.y += line_h(9.5)
    lay.text(MX, lay.page.y + 0.04, f"Generated {generated} · {data.path}", 8, color=MUTED)
    lay.page.y += line_h(8) + 0.3


def _render_page(page: Page, number: int, name: str) -> Figure:
    fig = Figure(figsize=(PAGE_W, PAGE_H), layout="constrained" if page.figs else None)
    if page.figs:
        fig.get_layout_engine().set(w_pad=0, h_pad=0, wspace=0, hspace=0)
        edges, slots = [0.0], []
        for top, h, spec in sorted(page.figs, key=lambda t: t[0]):
            if top > edges[-1] + 1e-6:
                edges.append(top)
            slots.append((len(edges) - 1, spec))
            edges.append(top + h)
        if edges[-1] < PAGE_H - 1e-6:
            edges.append(PAGE_H)
        heights = [b - a for a, b in zip(edges[:-1], edges[1:])]
        # columns: margin | text width | margin, so a figure spans exactly the text width
        sub = fig.subfigures(len(heights), 3, height_ratios=heights, width_ratios=[MX, TEXT_W, MX],
                             wspace=0, hspace=0, squeeze=False)
        for row, spec in slots:
            draw_safely(spec, sub[row, 1])
    for it in page.items:
        if it[0] == "text":
            _, x, y, s, kw = it
            fig.text(x / PAGE_W, 1 - y / PAGE_H, s, va="top", parse_math=False, **kw)
        elif it[0] == "rect":
            _, x, y, w, h, color, edge, rounded = it
            xy = (x / PAGE_W, 1 - (y + h) / PAGE_H)
            if rounded:
                patch = FancyBboxPatch(xy, w / PAGE_W, h / PAGE_H, boxstyle="round,pad=0,rounding_size=0.008",
                                       transform=fig.transFigure, facecolor=color, edgecolor=edge or color,
                                       linewidth=0.6, zorder=-1)
            else:
                patch = Rectangle(xy, w / PAGE_W, h / PAGE_H, transform=fig.transFigure, facecolor=color,
                                  edgecolor=edge or "none", linewidth=0.5, zorder=-1)
            fig.patches.append(patch)
        elif it[0] == "line":
            _, x0, x1, y, color, lw = it
            fig.add_artist(Line2D([x0 / PAGE_W, x1 / PAGE_W], [1 - y / PAGE_H] * 2, transform=fig.transFigure,
                                  color=color, linewidth=lw))
    fig.text(MX / PAGE_W, 0.35 / PAGE_H, tx(f"ladder report · {name}", 90), fontsize=7, color=FAINT,
             parse_math=False)
    fig.text(1 - MX / PAGE_W, 0.35 / PAGE_H, f"page {number}", fontsize=7, color=FAINT, ha="right")
    return fig


def write_pdf(path: Path, data: Any, sections: list[Any]) -> int:
    """Lay out ``sections`` on A4 pages and write them to ``path``; returns the number of pages."""
    generated = (getattr(data, "env", None) or environment())["date"]
    lay = Layout(data.name)
    _title_block(lay, data, generated)
    for i, sec in enumerate(sections):
        lay.heading(sec.number, sec.title, new_page=i > 0)  # the headline shares the title page
        for b in sec.blocks:
            lay.block(b)
    pages = [p for p in lay.pages if p.items or p.figs]
    meta = {"Title": f"Scaling ladder report: {data.name}", "Author": "ladder", "Subject": data.name,
            "Creator": "ladder (matplotlib)"}
    with rc_context(RC), PdfPages(path, metadata=meta) as pdf:
        for i, page in enumerate(pages, 1):
            fig = _render_page(page, i, data.name)
            pdf.savefig(fig)
    return len(pages)


__all__ = ["write_pdf"]
