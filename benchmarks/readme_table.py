"""The benchmarks' own rows in benchmarks/README.md: one section per benchmark, whose table gains a row per run.

A benchmark owns its section's heading, the paragraph above its table and the table; whatever a person wrote
below the table (why a figure moved, what a row measured) is kept as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).with_name("README.md")
KEEP_ROWS = 10


def update_section(heading: str, intro: str, header: str, row: str, path: Path = README) -> None:
    """Append ``row`` to the table under ``heading`` (the last ``KEEP_ROWS`` rows stay), rewrite ``intro`` above
    it, and keep the text after the table; a missing section is added at the end."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n(.*?)(?=^## |\Z)", re.S | re.M)
    old = pattern.search(text)
    width = header.split("\n")[0].count("|")
    rows: list[str] = []
    after = ""
    if old:
        body = old.group(1)
        rows = [r for r in re.findall(r"^\| \d{4}-\d\d-\d\d.*$", body, re.M) if r.count("|") == width]
        # the benchmark's own table is the first block of table lines; a person's text below it may hold tables too
        table = re.search(r"^\|.*$(?:\n\|.*$)*", body, re.M)
        after = body[table.end() :].strip("\n") if table else ""
    rows = (rows + [row])[-KEEP_ROWS:]
    section = f"{heading}\n\n{intro.strip()}\n\n{header.strip()}\n" + "\n".join(rows) + "\n\n"
    if after:
        section += after + "\n\n"
    text = pattern.sub(lambda _: section, text) if old else text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")
