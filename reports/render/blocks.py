"""The report's content as plain blocks, written once as HTML by ``templates/report.html.j2``
(:mod:`ladder.reports.render.document`); the PDF is that HTML printed (:mod:`ladder.reports.render.pdf`).
A block's ``kind`` names its template branch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ladder.reports.render.figures.spec import FigureSpec


@dataclass
class Para:
    text: str
    style: str = "p"  # p | note | missing | warn | ok
    kind: str = "para"


@dataclass
class Bullets:
    items: list[str]
    title: str = ""
    style: str = "note"
    kind: str = "bullets"


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]  # a cell is a string or (string, css class)
    align: str = ""  # one letter per column: l, r, c
    title: str = ""
    mono: tuple[int, ...] = ()  # columns in a monospaced font (run ids)
    compact: bool = False
    kind: str = "table"

    def cell(self, r: int, c: int) -> tuple[str, str]:
        v = self.rows[r][c]
        return (str(v[0]), str(v[1])) if isinstance(v, tuple) else (str(v), "")

    def cells(self) -> list[list[tuple[str, str]]]:
        return [[self.cell(r, c) for c in range(len(self.columns))] for r in range(len(self.rows))]

    def col_align(self, c: int) -> str:
        return {"r": "right", "c": "center"}.get(self.align[c] if c < len(self.align) else "l", "left")


@dataclass
class KV:
    items: list[tuple[str, str]]
    title: str = ""
    kind: str = "kv"


@dataclass
class Pre:
    text: str
    title: str = ""
    collapsed: bool = False  # HTML: a <details> element (opens without JavaScript)
    kind: str = "pre"


@dataclass
class Fig:
    spec: FigureSpec
    svg: str = ""
    kind: str = "figure"


@dataclass
class Tile:
    label: str
    value: str
    detail: str
    style: str = ""


@dataclass
class Headline:
    tiles: list[Tile]
    config: list[tuple[str, str, str]]  # label, value, source
    kind: str = "headline"


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Any] = field(default_factory=list)
    number: int = 0

    def add(self, *blocks: Any) -> Section:
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def missing(self, text: str) -> Section:
        self.blocks.append(Para(text, "missing"))
        return self
