"""The PDF's layout engine: the report's blocks flowed down A4 pages as drawing commands (text, rectangles,
rules) and figure slots, in inches from the top of the page; :mod:`ladder.reports.render.pdf` turns the pages
into matplotlib figures.

Each section starts a page; paragraphs, lists, tables (split across pages with the header repeated), key-value
lists, the study YAML and the figures flow down the page, and a block that does not fit continues on the next
page under a "(continued)" line. Text widths are estimated from DejaVu's average advance (no font metrics are
read), so the layout is quick and the same on every machine.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from ladder.reports.render.figures.spec import FigureSpec
from ladder.reports.render.figures.style import WIDTH_IN

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


def line_h(size: float) -> float:
    return size / 72 * 1.38


def wrap(text: str, width_in: float, size: float, mono: bool = False) -> list[str]:
    chars = max(8, int(width_in / _char_w(size, mono)))
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        out.extend(textwrap.wrap(para, chars, break_long_words=True, replace_whitespace=False) or [""])
    return out


def _fit(text: str, width_in: float, size: float, mono: bool = False) -> str:
    chars = max(3, int(width_in / _char_w(size, mono)))
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass
class Page:
    items: list[tuple] = field(default_factory=list)  # drawing commands
    figs: list[tuple[float, float, FigureSpec]] = field(default_factory=list)  # (top, height, spec), inches
    y: float = MT  # cursor, inches from the top


class Layout:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pages: list[Page] = []
        self.section = ""
        self.new_page()

    # ---------------------------------------------------------------- pages
    def new_page(self, continued: bool = False) -> Page:
        self.page = Page()
        self.pages.append(self.page)
        if continued and self.section:
            self.text(MX, self.page.y, f"{self.section} (continued)", 9, color=FAINT)
            self.page.y += line_h(9) + 0.08
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

    def block_title(self, title: str, keep: float) -> None:
        """A block's bold one-line title, kept on a page with ``keep`` inches of what follows it."""
        self.need(line_h(8.6) + keep)
        self.text(MX, self.page.y, title, 8.6, weight="bold")
        self.page.y += line_h(8.6) + 0.04

    # ---------------------------------------------------------------- blocks
    def heading(self, number: int, title: str, new_page: bool = True) -> None:
        self.section = f"{number}. {title}"
        if new_page and (self.page.y > MT + 0.01 or self.page.items):
            self.new_page()
        self.text(MX, self.page.y, f"{number}", 15, weight="bold", color=FAINT)
        self.text(MX + 0.12 + 0.17 * len(str(number)), self.page.y, title, 15, weight="bold")
        self.page.y += line_h(15) + 0.05
        self.hline(MX, PAGE_W - MX, self.page.y, INK, 0.9)
        self.page.y += 0.16

    def para(self, text: str, style: str = "p") -> None:
        size = 8.5 if style in ("note",) else 9
        color = {"missing": MUTED, "note": MUTED, "warn": WARN, "ok": GOOD}.get(style, INK)
        indent = 0.14 if style in ("missing", "warn") else 0.0
        lines = wrap(text, TEXT_W - indent - 0.05, size)
        h = len(lines) * line_h(size)
        self.need(min(h, 3 * line_h(size)) + 0.1)
        top = self.page.y
        for ln in lines:
            if self.room(line_h(size)) < 0:
                self.new_page(continued=True)
                top = self.page.y
            self.text(MX + indent, self.page.y, ln, size, color=color,
                      style="italic" if style == "missing" else "normal",
                      weight="bold" if style == "ok" else "normal")
            self.page.y += line_h(size)
        if indent:
            self.rect(MX, top - 0.02, 0.035, self.page.y - top, "#b8c0cc" if style == "missing" else "#e0a030")
        self.page.y += 0.1

    def bullets(self, title: str, items: list[str], style: str) -> None:
        size = 8.3
        if title:
            self.need(line_h(9) + 2 * line_h(size))
            self.text(MX, self.page.y, title, 9, weight="bold", color=WARN if style == "warn" else INK)
            self.page.y += line_h(9) + 0.02
        for item in items:
            lines = wrap(item, TEXT_W - 0.2, size)
            self.need(line_h(size) * min(2, len(lines)))
            for i, ln in enumerate(lines):
                if self.room(line_h(size)) < 0:
                    self.new_page(continued=True)
                if i == 0:
                    self.text(MX + 0.04, self.page.y, "•", size, color=MUTED)
                self.text(MX + 0.2, self.page.y, ln, size, color=MUTED if style != "warn" else "#5f3b00")
                self.page.y += line_h(size)
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
        lh = line_h(size) + 0.06
        if title:
            t_lines = wrap(title, TEXT_W, 8.6)
            self.need(len(t_lines) * line_h(8.6) + 3 * lh)
            for ln in t_lines:
                self.text(MX, self.page.y, ln, 8.6, weight="bold")
                self.page.y += line_h(8.6)
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
                lines = wrap(text, widths[c] - 0.1, size, c in mono) if text else [""]
                if len(lines) > 4:
                    lines = lines[:3] + [_fit(" ".join(lines[3:]), widths[c] - 0.1, size, c in mono)]
                cells.append(lines)
            row_h = lh + (max(len(x) for x in cells) - 1) * line_h(size)
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
                    self.text(x, self.page.y + 0.03 + i * line_h(size), ln, size, color=color,
                              family=MONO if c in mono else SANS, weight=weight, ha=ha)
            self.page.y += row_h
            self.hline(MX, right, self.page.y, LINE, 0.4)
        self.page.y += 0.16

    def kv(self, title: str, items: list[tuple[str, str]]) -> None:
        size = 8.2
        key_w = min(2.6, max([len(k) for k, _ in items] + [6]) * _char_w(size) + 0.2)
        if title:
            self.block_title(title, 3 * line_h(size))
        for k, v in items:
            lines = wrap(v, TEXT_W - key_w - 0.05, size)
            h = len(lines) * line_h(size) + 0.05
            if self.room(h) < 0:
                self.new_page(continued=True)
            self.text(MX, self.page.y + 0.01, _fit(k, key_w - 0.1, size), size, color=MUTED)
            for i, ln in enumerate(lines):
                self.text(MX + key_w, self.page.y + 0.01 + i * line_h(size), ln, size)
            self.page.y += h
            self.hline(MX, PAGE_W - MX, self.page.y - 0.025, LINE, 0.4)
        self.page.y += 0.16

    def pre(self, title: str, text: str) -> None:
        size = 6.8
        if title:
            self.block_title(title, 4 * line_h(size))
        lines = wrap(text.expandtabs(4), TEXT_W - 0.2, size, mono=True)
        lh = line_h(size) * 0.95
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

    def figure(self, spec: FigureSpec) -> None:
        h = spec.height * TEXT_W / WIDTH_IN
        cap = wrap(f"{spec.title}. {spec.caption}" if not spec.title.endswith(".") else f"{spec.title} {spec.caption}",
                    TEXT_W, 7.8)
        cap_h = len(cap) * line_h(7.8) + 0.08
        if self.room(h + cap_h) < 0 and self.page.y > MT + 0.5:
            self.new_page(continued=True)
        if self.room(h + cap_h) < 0:  # taller than a page: shrink to fit
            h = max(2.0, PAGE_H - MB - self.page.y - cap_h)
        self.page.figs.append((self.page.y, h, spec))
        self.page.y += h + 0.06
        for ln in cap:
            self.text(MX, self.page.y, ln, 7.8, color=MUTED)
            self.page.y += line_h(7.8)
        self.page.y += 0.18

    def headline(self, b: Any) -> None:
        tiles = b.tiles
        n = max(1, len(tiles))
        gap = 0.12
        w = (TEXT_W - gap * (n - 1)) / n
        detail_lines = [wrap(t.detail, w - 0.2, 6.9)[:7] for t in tiles]
        h = 0.3 + line_h(17) + max(len(d) for d in detail_lines) * line_h(6.9) + 0.12
        top = self.page.y
        fills = {"primary": ("#e8f1fb", "#c6dcf3"), "good": ("#e7f5ee", "#cbe9d8"), "warn": ("#fff4e0", "#f1dcb5")}
        for i, t in enumerate(tiles):
            x = MX + i * (w + gap)
            fill, edge = fills.get(t.style, (PANEL, LINE))
            self.rect(x, top, w, h, fill, edge=edge, rounded=True)
            self.text(x + 0.1, top + 0.1, t.label.upper(), 6.8, weight="bold", color=MUTED)
            self.text(x + 0.1, top + 0.1 + line_h(6.8) + 0.02, t.value, 17, weight="bold",
                      color=ACCENT if t.style == "primary" else INK)
            for j, ln in enumerate(detail_lines[i]):
                self.text(x + 0.1, top + 0.16 + line_h(6.8) + line_h(17) + j * line_h(6.9), ln, 6.9, color=MUTED)
        self.page.y = top + h + 0.25
        rows = [[(a, ""), (v, ""), (s, "")] for a, v, s in b.config]
        self.table(["", "", ""], rows, ["l", "l", "l"], title="Recommended hero configuration", header=False,
                   size=8.2, widths=[1.9, 2.3, TEXT_W - 4.2], bold_first=True)

    def block(self, b: Any) -> None:
        """Lay out one block of :mod:`ladder.reports.render.blocks` by its ``kind``."""
        kind = getattr(b, "kind", "")
        if kind == "para":
            self.para(b.text, b.style)
        elif kind == "bullets":
            self.bullets(b.title, list(b.items), b.style)
        elif kind == "table":
            align = [b.align[c] if c < len(b.align) else "l" for c in range(len(b.columns))]
            self.table(list(b.columns), b.cells(), align, b.title, tuple(b.mono), size=7.2 if b.compact else 7.8)
        elif kind == "kv":
            self.kv(b.title, [(str(k), str(v)) for k, v in b.items])
        elif kind == "pre":
            self.pre(b.title, b.text)
        elif kind == "figure":
            self.figure(b.spec)
        elif kind == "headline":
            self.headline(b)
