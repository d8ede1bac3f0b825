"""A figure as the report holds it (:class:`FigureSpec`: a title, a caption, a height and a drawing function)
and how it is drawn: :func:`to_svg` for the inline SVG of the HTML and of the PDF printed from it,
:func:`draw_safely` into any figure or subfigure."""

from __future__ import annotations

import html
import io
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure, FigureBase

from ladder.reports.render.figures.axes import empty
from ladder.reports.render.figures.style import RC, WIDTH_IN


@dataclass
class FigureSpec:
    """One figure: ``key`` (HTML id), ``title`` and ``caption`` (plain text, escaped by the template), the height
    in inches at :data:`WIDTH_IN` and the drawing function."""

    key: str
    title: str
    caption: str
    height: float
    draw: Callable[[FigureBase], None]


_ID_REF = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def draw_safely(spec: FigureSpec, target: FigureBase) -> None:
    """Draw ``spec`` into ``target``; a figure that raises is replaced by one line saying why, so that a broken
    figure never takes the report down."""
    try:
        spec.draw(target)
    except Exception as exc:  # noqa: BLE001 - any error of any drawing function
        target.clear()
        empty(target.add_subplot(), f"this figure could not be drawn: {type(exc).__name__}: {exc}")


def to_svg(spec: FigureSpec, prefix: str | None = None, context: str = "", text: bool = False) -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, no metadata (no URLs at all), ids prefixed so
    that several figures can share one HTML document, scaled by CSS (``viewBox`` kept). Glyphs are paths (the
    same in every browser) unless ``text``: then they stay text in DejaVu Sans, for the PDF, whose printer
    embeds the font, so that the figures' words can be selected and searched."""
    buf = io.StringIO()
    # numpy's and matplotlib's warnings (an overflow scaling a 1e300 point, an axis with nothing to log-scale) are
    # for the programmer, not the reader: the figure says what it can; none reaches the terminal
    with (
        rc_context({**RC, "svg.fonttype": "none"} if text else RC),
        warnings.catch_warnings(),
        np.errstate(all="ignore"),
    ):
        warnings.simplefilter("ignore")
        fig = Figure(figsize=(WIDTH_IN, spec.height), layout="constrained")
        draw_safely(spec, fig)
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    p = (prefix or spec.key) + "-"
    svg = _ID_REF.sub(lambda m: m.group(1) + p + m.group(2), svg)
    head_end = svg.index(">")
    head = svg[:head_end]
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    head = re.sub(r'\sxmlns:xlink="[^"]*"', "", head)
    label = f"{context}: {spec.title}" if context else spec.title
    head += f' class="figure" role="img" aria-label="{html.escape(label, quote=True)}"'
    return head + ">\n<title>" + html.escape(label, quote=False) + "</title>" + svg[head_end + 1 :]
