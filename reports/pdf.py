"""The report as a paginated PDF, with matplotlib alone (``PdfPages``): no browser, no network, no LaTeX.

The same sections and blocks as the HTML (:mod:`ladder.reports.render`) are laid out on A4 pages: each section
starts a page; paragraphs, lists, tables (split across pages with the header repeated), key-value lists, the
study YAML and the figures flow down the page. A figure is drawn by its own drawing function into a subfigure
slot of the page, so it stays vector and looks like the HTML's. Text is TrueType (selectable, searchable) and
never parsed as mathtext.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder.reports import figures as F
from matplotlib import rc_context
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle

PAGE_W, PAGE_H = 8.27, 11.69  # A4, inches
MX, MT, MB = 0.7, 0.75, 0.75  # margins: sides, top, bottom
TEXT_W = PAGE_W - 2 * MX
SANS, MONO = "DejaVu Sans", "DejaVu Sans Mono"
INK, MUTED, FAINT, LINE, PANEL = "#1b2230", "#5d6677", "#8a93a3", "#d9dee6", "#f4f6f9"
ACCENT, WARN, GOOD, BAD = "#0b5cad", "#9a5b00", "#1b7f4b", "#b3261e"
STATUS_COLORS = {"status-done": GOOD, "status-ok": GOOD, "status-diverged": WARN, "status-edge": WARN,
                 "status-pending": WARN, "status-failed": BAD, "status-no-minimum": BAD, "status-skipped": FAINT}


def _char_w(size: float, mono: bool = False) -> float:
    """Average advance of a character in inches (DejaVu: ~0.55 em sans text, 0.602 em mono)."""
    return size / 72 * (0.602 if mono else 0.56)


def _line_h(size: float) -> float:
    return size / 72 * 1.38


def _wrap(text: str, width_in: float, size: float, mono: bool = False) -> list[str]:
    chars = max(8, int(width_in / _char_w(size, mono)))
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        out.extend(textwrap.wrap(para, chars, break_long_words=True, replace_whitespace=False) or [""])
    return out


def _fit(text: str, width_in: float, size: float, mono: bool = False) -> str:
    chars = max(3, int(width_in / _char_w(size, mono)))
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass
class _Page:
    items: list[tuple] = field(default_factory=list)  # drawing commands
    figs: list[tuple[float, float, F.FigureSpec]] = field(default_factory=list)  # (top, height, spec), inches
    y: float = MT  # cursor, inches from the top


class _Layout:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pages: list[_Page] = []
        self.section = ""
        self.new_page()

    # ---------------------------------------------------------------- pages
    def new_page(self, continued: bool = False) -> _Page:
        self.page = _Page()
        self.pages.append(self.page)
        if continued and self.section:
            self.text(MX, self.page.y, f"{self.section} (continued)", 9, color=FAINT)
            self.page.y += _line_h(9) + 0.08
        return self.page

    def room(self, h: float) -> float:
        return PAGE_H - MB - self.page.y - h

    def need(self, h: float) -> None:
        if self.room(h) < 0 and self.page.y > MT + 0.5:
            self.new_page(continued=True)

    # ---------------------------------------------------------------- primitives
    def text(self, x: float, y: float, s: str, size: float, *, weight: str = "normal", color: str = INK,
             family: str = SANS, style: str = "normal", ha: str = "left") -> None:
        self.page.items.append(("text", x, y, s, dict(fontsize=size, fontweight=weight, color=color,
                                                      family=family, fontstyle=style, ha=ha)))

    def rect(self, x: float, y: float, w: float, h: float, color: str, *, edge: str | None = None,
             rounded: bool = False) -> None:
        self.page.items.append(("rect", x, y, w, h, color, edge, rounded))

    def hline(self, x0: float, x1: float, y: float, color: str = LINE, lw: float = 0.6) -> None:
        self.page.items.append(("line", x0, x1, y, color, lw))

    # ---------------------------------------------------------------- blocks
    def heading(self, number: int, title: str) -> None:
        self.section = f"{number}. {title}"
        if self.page.y > MT + 0.01 or self.page.items:
            self.new_page()
        self.text(MX, self.page.y, f"{number}", 15, weight="bold", color=FAINT)
        self.text(MX + 0.12 + 0.17 * len(str(number)), self.page.y, title, 15, weight="bold")
        self.page.y += _line_h(15) + 0.05
        self.hline(MX, PAGE_W - MX, self.page.y, INK, 0.9)
        self.page.y += 0.16

    def para(self, text: str, style: str = "p") -> None:
        size = 8.5 if style in ("note",) else 9
        color = {"missing": MUTED, "note": MUTED, "warn": WARN, "ok": GOOD}.get(style, INK)
        indent = 0.14 if style in ("missing", "warn") else 0.0
        lines = _wrap(text, TEXT_W - indent - 0.05, size)
        h = len(lines) * _line_h(size)
        self.need(min(h, 3 * _line_h(size)) + 0.1)
        top = self.page.y
        for ln in lines:
            if self.room(_line_h(size)) < 0:
                self.new_page(continued=True)
                top = self.page.y
            self.text(MX + indent, self.page.y, ln, size, color=color,
                      style="italic" if style == "missing" else "normal",
                      weight="bold" if style == "ok" else "normal")
            self.page.y += _line_h(size)
        if indent:
            self.rect(MX, top - 0.02, 0.035, self.page.y - top, "#b8c0cc" if style == "missing" else "#e0a030")
        self.page.y += 0.1

    def bullets(self, title: str, items: list[str], style: str) -> None:
        size = 8.3
        if title:
            self.need(_line_h(9) + 2 * _line_h(size))
            self.text(MX, self.page.y, title, 9, weight="bold", color=WARN if style == "warn" else INK)
            self.page.y += _line_h(9) + 0.02
        for item in items:
            lines = _wrap(item, TEXT_W - 0.2, size)
            self.need(_line_h(size) * min(2, len(lines)))
            for i, ln in enumerate(lines):
                if self.room(_line_h(size)) < 0:
                    self.new_page(continued=True)
                if i == 0:
                    self.text(MX + 0.04, self.page.y, "•", size, color=MUTED)
                self.text(MX + 0.2, self.page.y, ln, size, color=MUTED if style != "warn" else "#5f3b00")
                self.page.y += _line_h(size)
        self.page.y += 0.1

    def table(self, columns: list[str], rows: list[list[tuple[str, str]]], align: list[str], title: str = "",
              mono: tuple[int, ...] = (), size: float = 7.6, header: bool = True, widths: list[float] | None = None,
              bold_first: bool = False) -> None:
        n = len(columns)
        if widths is None:
            pad = 0.12
            need = []
            for c in range(n):
                longest = max([len(columns[c]) if header else 0] + [len(r[c][0]) for r in rows])
                need.append(longest * _char_w(size, c in mono) + pad)
            total = sum(need)
            if total > TEXT_W and n > 1 and sum(need[:-1]) + 1.4 <= TEXT_W:
                need[-1] = TEXT_W - sum(need[:-1])  # the last column (reasons, notes, sources) wraps
                total = TEXT_W
            while total > TEXT_W and size > 5.8:
                size -= 0.3
                need = [w * (size / (size + 0.3)) for w in need]
                total = sum(need)
            if total > TEXT_W:  # still too wide: shrink the widest columns, cells are truncated
                excess = total - TEXT_W
                for c in sorted(range(n), key=lambda c: -need[c]):
                    cut = min(excess, max(0.0, need[c] - 0.7))
                    need[c] -= cut
                    excess -= cut
                    if excess <= 0:
                        break
            widths = need
        lh = _line_h(size) + 0.06
        if title:
            t_lines = _wrap(title, TEXT_W, 8.6)
            self.need(len(t_lines) * _line_h(8.6) + 3 * lh)
            for ln in t_lines:
                self.text(MX, self.page.y, ln, 8.6, weight="bold")
                self.page.y += _line_h(8.6)
            self.page.y += 0.04
        xs = [MX]
        for w in widths[:-1]:
            xs.append(xs[-1] + w)
        right = xs[-1] + widths[-1]

        def cell_x(c: int) -> tuple[float, str]:
            a = align[c] if c < len(align) else "l"
            if a == "r":
                return xs[c] + widths[c] - 0.06, "right"
            if a == "c":
                return xs[c] + widths[c] / 2, "center"
            return xs[c] + 0.04, "left"

        def draw_header() -> None:
            if not header:
                return
            self.rect(MX, self.page.y, right - MX, lh, PANEL)
            for c, name in enumerate(columns):
                x, ha = cell_x(c)
                self.text(x, self.page.y + 0.03, _fit(name, widths[c] - 0.08, size), size, weight="bold", ha=ha)
            self.page.y += lh
            self.hline(MX, right, self.page.y, "#b9c1cc", 0.6)

        self.need(lh * (2 + min(3, len(rows))))
        draw_header()
        for r in rows:
            cells = []
            for c, (text, _cls) in enumerate(r):
                lines = _wrap(text, widths[c] - 0.1, size, c in mono) if text else [""]
                if len(lines) > 4:
                    lines = lines[:3] + [_fit(" ".join(lines[3:]), widths[c] - 0.1, size, c in mono)]
                cells.append(lines)
            row_h = lh + (max(len(x) for x in cells) - 1) * _line_h(size)
            if self.room(row_h) < 0:
                self.new_page(continued=True)
                draw_header()
            for c, (text, cls) in enumerate(r):
                x, ha = cell_x(c)
                color = STATUS_COLORS.get(cls.split()[0] if cls else "", INK)
                weight = "bold" if (cls.startswith("status-") or (bold_first and c == 1)) else "normal"
                if not header and c == 0:
                    color = MUTED
                for i, ln in enumerate(cells[c]):
                    self.text(x, self.page.y + 0.03 + i * _line_h(size), ln, size, color=color,
                              family=MONO if c in mono else SANS, weight=weight, ha=ha)
            self.page.y += row_h
            self.hline(MX, right, self.page.y, LINE, 0.4)
        self.page.y += 0.16

    def kv(self, title: str, items: list[tuple[str, str]]) -> None:
        size = 8.2
        key_w = min(2.6, max([len(k) for k, _ in items] + [6]) * _char_w(size) + 0.2)
        if title:
            self.need(_line_h(8.6) + 3 * _line_h(size))
            self.text(MX, self.page.y, title, 8.6, weight="bold")
            self.page.y += _line_h(8.6) + 0.04
        for k, v in items:
            lines = _wrap(v, TEXT_W - key_w - 0.05, size)
            h = len(lines) * _line_h(size) + 0.05
            if self.room(h) < 0:
                self.new_page(continued=True)
            self.text(MX, self.page.y + 0.01, _fit(k, key_w - 0.1, size), size, color=MUTED)
            for i, ln in enumerate(lines):
                self.text(MX + key_w, self.page.y + 0.01 + i * _line_h(size), ln, size)
            self.page.y += h
            self.hline(MX, PAGE_W - MX, self.page.y - 0.025, LINE, 0.4)
        self.page.y += 0.16

    def pre(self, title: str, text: str) -> None:
        size = 6.8
        if title:
            self.need(_line_h(8.6) + 4 * _line_h(size))
            self.text(MX, self.page.y, title, 8.6, weight="bold")
            self.page.y += _line_h(8.6) + 0.04
        lines = _wrap(text.expandtabs(4), TEXT_W - 0.2, size, mono=True)
        lh = _line_h(size) * 0.95
        i = 0
        while i < len(lines):
            fit = max(1, int(self.room(0.2) / lh))
            if fit < 3 and self.page.y > MT + 0.5:
                self.new_page(continued=True)
                continue
            chunk = lines[i:i + fit]
            self.rect(MX, self.page.y - 0.05, TEXT_W, len(chunk) * lh + 0.1, PANEL, edge=LINE)
            for ln in chunk:
                self.text(MX + 0.1, self.page.y, ln, size, family=MONO)
                self.page.y += lh
            self.page.y += 0.12
            i += len(chunk)
            if i < len(lines):
                self.new_page(continued=True)
        self.page.y += 0.08

    def figure(self, spec: F.FigureSpec) -> None:
        h = spec.height * TEXT_W / F.WIDTH_IN
        cap = _wrap(f"{spec.title}. {spec.caption}" if not spec.title.endswith(".") else f"{spec.title} {spec.caption}",
                    TEXT_W, 7.8)
        cap_h = len(cap) * _line_h(7.8) + 0.08
        if self.room(h + cap_h) < 0 and self.page.y > MT + 0.5:
            self.new_page(continued=True)
        if self.room(h + cap_h) < 0:  # taller than a page: shrink to fit
            h = max(2.0, PAGE_H - MB - self.page.y - cap_h)
        self.page.figs.append((self.page.y, h, spec))
        self.page.y += h + 0.06
        for ln in cap:
            self.text(MX, self.page.y, ln, 7.8, color=MUTED)
            self.page.y += _line_h(7.8)
        self.page.y += 0.18

    def headline(self, b: Any) -> None:
        tiles = b.tiles
        n = max(1, len(tiles))
        gap = 0.12
        w = (TEXT_W - gap * (n - 1)) / n
        detail_lines = [_wrap(t.detail, w - 0.2, 6.9)[:7] for t in tiles]
        h = 0.3 + _line_h(17) + max(len(d) for d in detail_lines) * _line_h(6.9) + 0.12
        top = self.page.y
        fills = {"primary": ("#e8f1fb", "#c6dcf3"), "good": ("#e7f5ee", "#cbe9d8"), "warn": ("#fff4e0", "#f1dcb5")}
        for i, t in enumerate(tiles):
            x = MX + i * (w + gap)
            fill, edge = fills.get(t.style, (PANEL, LINE))
            self.rect(x, top, w, h, fill, edge=edge, rounded=True)
            self.text(x + 0.1, top + 0.1, t.label.upper(), 6.8, weight="bold", color=MUTED)
            self.text(x + 0.1, top + 0.1 + _line_h(6.8) + 0.02, t.value, 17, weight="bold",
                      color=ACCENT if t.style == "primary" else INK)
            for j, ln in enumerate(detail_lines[i]):
                self.text(x + 0.1, top + 0.16 + _line_h(6.8) + _line_h(17) + j * _line_h(6.9), ln, 6.9, color=MUTED)
        self.page.y = top + h + 0.25
        rows = [[(a, ""), (v, ""), (s, "")] for a, v, s in b.config]
        self.table(["", "", ""], rows, ["l", "l", "l"], title="Recommended hero configuration", header=False,
                   size=8.2, widths=[1.9, 2.3, TEXT_W - 4.2], bold_first=True)


def _block(lay: _Layout, b: Any) -> None:
    kind = getattr(b, "kind", "")
    if kind == "para":
        lay.para(b.text, b.style)
    elif kind == "bullets":
        lay.bullets(b.title, list(b.items), b.style)
    elif kind == "table":
        lay.table(list(b.columns), b.cells(), [b.align[c] if c < len(b.align) else "l" for c in range(len(b.columns))],
                  b.title, tuple(b.mono), size=7.2 if b.compact else 7.8)
    elif kind == "kv":
        lay.kv(b.title, [(str(k), str(v)) for k, v in b.items])
    elif kind == "pre":
        lay.pre(b.title, b.text)
    elif kind == "figure":
        lay.figure(b.spec)
    elif kind == "headline":
        lay.headline(b)


def _title_block(lay: _Layout, data: Any, generated: str) -> None:
    lay.text(MX, lay.page.y, "SCALING LADDER REPORT", 8, weight="bold", color=FAINT)
    lay.page.y += _line_h(8) + 0.04
    for ln in _wrap(data.name, TEXT_W, 20)[:3]:
        lay.text(MX, lay.page.y, ln, 20, weight="bold")
        lay.page.y += _line_h(20)
    if data.description:
        lay.page.y += 0.04
        for ln in _wrap(data.description, TEXT_W, 9.5)[:6]:
            lay.text(MX, lay.page.y, ln, 9.5, color=INK)
            lay.page.y += _line_h(9.5)
    lay.text(MX, lay.page.y + 0.04, f"Generated {generated} · {data.path}", 8, color=MUTED)
    lay.page.y += _line_h(8) + 0.3


def _render_page(page: _Page, number: int, name: str) -> Figure:
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
            F.draw_safely(spec, sub[row, 1])
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
    fig.text(MX / PAGE_W, 0.35 / PAGE_H, F.tx(f"ladder report · {name}", 90), fontsize=7, color=FAINT,
             parse_math=False)
    fig.text(1 - MX / PAGE_W, 0.35 / PAGE_H, f"page {number}", fontsize=7, color=FAINT, ha="right")
    return fig


def write_pdf(path: Path, data: Any, sections: list[Any]) -> int:
    """Lay out ``sections`` on A4 pages and write them to ``path``; returns the number of pages."""
    from ladder.reports.render import environment

    generated = (getattr(data, "env", None) or environment())["date"]
    lay = _Layout(data.name)
    _title_block(lay, data, generated)
    first = True
    for sec in sections:
        if first:  # the headline shares the title page
            lay.section = f"{sec.number}. {sec.title}"
            lay.text(MX, lay.page.y, f"{sec.number}", 15, weight="bold", color=FAINT)
            lay.text(MX + 0.12 + 0.17 * len(str(sec.number)), lay.page.y, sec.title, 15, weight="bold")
            lay.page.y += _line_h(15) + 0.05
            lay.hline(MX, PAGE_W - MX, lay.page.y, INK, 0.9)
            lay.page.y += 0.16
            first = False
        else:
            lay.heading(sec.number, sec.title)
        for b in sec.blocks:
            _block(lay, b)
    pages = [p for p in lay.pages if p.items or p.figs]
    meta = {"Title": f"Scaling ladder report: {data.name}", "Author": "ladder", "Subject": data.name,
            "Creator": "ladder (matplotlib)"}
    with rc_context(F.RC), PdfPages(path, metadata=meta) as pdf:
        for i, page in enumerate(pages, 1):
            fig = _render_page(page, i, data.name)
            pdf.savefig(fig)
    return len(pages)


__all__ = ["PAGE_H", "PAGE_W", "write_pdf"]
