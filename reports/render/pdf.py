"""The report as a paginated A4 PDF: the report's own HTML printed by WeasyPrint (CSS paged media).

The print rules live with the rest of the style, in ``templates/report.css`` (``@page`` and ``@media print``):
each section starts a page, a table's header row repeats on every page the table spans, figures and short blocks
are not split, and the footer carries the study's name and the page number. The figures are the HTML's inline
SVG with their glyphs kept as text, so that every word of the PDF, the figures' included, can be selected and
searched. The fonts are DejaVu Sans and Sans Mono from matplotlib's own files, so the PDF looks the same on every
machine, whatever fonts it has.

WeasyPrint needs Pango (>= 1.44) from the system. Without it :func:`unavailable` says so in one line, and
``ladder report`` writes the HTML alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

from ladder.reports.render.document import render_html

FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
_FACES = [("DejaVu Sans", "DejaVuSans"), ("DejaVu Sans Mono", "DejaVuSansMono")]
_STYLES = [
    ("", "normal", "normal"),
    ("-Bold", "bold", "normal"),
    ("-Oblique", "normal", "italic"),
    ("-BoldOblique", "bold", "italic"),
]
SYSTEM_LIBRARIES = "Pango >= 1.44 (Debian/Ubuntu: apt-get install libpango-1.0-0 libpangoft2-1.0-0)"


class PdfUnavailable(RuntimeError):
    """WeasyPrint or the system libraries it loads are missing; the message is one line."""


def _weasyprint() -> Any:
    try:
        import weasyprint
    except ImportError as exc:
        raise PdfUnavailable(f"WeasyPrint is not installed ({exc}); pip install weasyprint") from None
    except OSError as exc:  # cffi could not load Pango, GObject or HarfBuzz
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PdfUnavailable(f"WeasyPrint needs {SYSTEM_LIBRARIES}: {first}") from None
    return weasyprint


def unavailable() -> str | None:
    """Why the PDF cannot be printed on this machine (one line), or None when it can."""
    try:
        _weasyprint()
    except PdfUnavailable as exc:
        return str(exc)
    return None


def _print_css() -> str:
    """The PDF's fonts, from matplotlib's files (the HTML itself names no file and loads nothing)."""
    faces = [
        f'@font-face {{ font-family: "{family}"; src: url("{(FONTS / f"{stem}{suffix}.ttf").as_uri()}"); '
        f"font-weight: {weight}; font-style: {style}; }}"
        for family, stem in _FACES
        for suffix, weight, style in _STYLES
        if (FONTS / f"{stem}{suffix}.ttf").is_file()
    ]
    return (
        "\n".join(faces)
        + """
body, .masthead .kicker, table, figcaption { font-family: "DejaVu Sans", sans-serif; }
pre, .mono, td.mono, .masthead .path { font-family: "DejaVu Sans Mono", monospace; }
"""
    )


def _fetcher(weasyprint: Any) -> Any:
    """Fetch matplotlib's font files and nothing else: the printed report makes no other request."""
    root = FONTS.resolve().as_uri() + "/"

    class FontsOnly(weasyprint.URLFetcher):
        def fetch(self, url: str, headers: Any = None) -> Any:
            if not url.startswith(root):
                raise ValueError(f"the report's PDF loads no external resource ({url[:80]})")
            return super().fetch(url, headers)

    return FontsOnly()


def write_pdf(path: Path, data: Any, sections: list[Any]) -> int:
    """Print the report's HTML of ``sections`` to an A4 PDF at ``path``; returns the number of pages.
    Raises :class:`PdfUnavailable` when WeasyPrint cannot run here."""
    weasyprint = _weasyprint()
    from weasyprint.text.fonts import FontConfiguration

    fonts = FontConfiguration()
    fetch = _fetcher(weasyprint)
    css = weasyprint.CSS(string=_print_css(), font_config=fonts, url_fetcher=fetch)
    html = weasyprint.HTML(string=render_html(data, sections, for_print=True), url_fetcher=fetch)
    doc = html.render(stylesheets=[css], font_config=fonts)
    doc.metadata.title = f"Scaling ladder report: {data.name}"
    doc.metadata.authors = ["ladder"]
    doc.write_pdf(Path(path))
    return len(doc.pages)


__all__ = ["PdfUnavailable", "unavailable", "write_pdf"]
