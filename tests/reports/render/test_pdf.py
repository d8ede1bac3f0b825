"""report.pdf: the report's HTML printed by WeasyPrint, read back with poppler's pdftotext.

A long table must run across pages with its header row on every page and every row's text kept; a figure is
embedded as vector graphics whose words are text; without WeasyPrint's system libraries `ladder report` writes
the HTML and says in one line why there is no PDF. poppler-utils and Pango come from scripts/test-deps.sh: without
them the checks skip, except in CI (``CI`` or ``LADDER_TEST_SLURM`` set), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ladder.reports.render import pdf
from ladder.reports.render.blocks import Fig, Para, Section, Table
from ladder.reports.render.figures.spec import FigureSpec
from tests.cli_helpers import run_cli
from tests.reports.fixture_study import study_dict

ROWS = 150
HEADER = ["Run id", "Headerword", "Loss", "Status"]


def _in_ci() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("LADDER_TEST_SLURM"))


def need(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if _in_ci():
        pytest.fail(f"{name} is required in CI (scripts/test-deps.sh installs poppler-utils)")
    pytest.skip(f"{name} is not installed (poppler-utils; scripts/test-deps.sh installs it)")


def need_weasyprint() -> None:
    why = pdf.unavailable()
    if why is None:
        return
    if _in_ci():
        pytest.fail(f"the PDF is required in CI: {why}")
    pytest.skip(why)


def _draw(fig) -> None:
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [3.0, 2.5, 2.2])
    ax.set_xlabel("sentinelxlabel")
    ax.set_title("sentinelpanel")


def _pages(path: Path) -> list[str]:
    text = subprocess.run(
        [need("pdftotext"), "-layout", str(path), "-"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return [p for p in text.split("\f") if p.strip()]


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    need_weasyprint()
    rows = [[f"row{i:04d}", f"variant {i % 3}", f"{3 + i / 1000:.4f}", ("done", "status-done")] for i in range(ROWS)]
    sections = [
        Section("first", "A first section", [Para("The title page.")]),
        Section(
            "long",
            "A long table",
            [
                Para("A table longer than a page, then a figure."),
                Table(HEADER, rows, "llrl", title="Every run", mono=(0,)),
                Fig(FigureSpec("fig-sentinel", "Figure 1. A sentinel figure", "Its caption.", 3.0, _draw)),
            ],
        ),
    ]
    for i, s in enumerate(sections, 1):
        s.number = i
    data = SimpleNamespace(
        name="pdf test study",
        description="A study made of one long table.",
        path=Path("/nowhere"),
        env={"date": "2026-01-01 00:00 UTC"},
    )
    path = tmp_path_factory.mktemp("pdf") / "report.pdf"
    return path, pdf.write_pdf(path, data, sections)


def test_a_long_table_repeats_its_header_on_every_page_and_keeps_every_row(long_pdf):
    path, n_pages = long_pdf
    info = subprocess.run([need("pdfinfo"), str(path)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert int(re.search(r"^Pages:\s+(\d+)", info, re.MULTILINE).group(1)) == n_pages
    assert re.search(r"^Page size:\s+595\.\d* x 841\.\d* pts \(A4\)", info, re.MULTILINE)
    pages = _pages(path)
    assert len(pages) == n_pages
    spanned = [p for p in pages if re.search(r"row\d{4}", p)]
    assert len(spanned) >= 3, "the table should run across at least three pages"
    for page in spanned:  # the header row heads every page the table is on, above that page's first row
        header = re.search(r"Run id\s+Headerword\s+Loss\s+Status", page)
        assert header, page[:400]
        assert header.start() < re.search(r"row\d{4}", page).start()
    text = "\n".join(pages)
    for i in range(ROWS):  # every row, whole: its id, variant, number and status on one line
        assert re.search(rf"row{i:04d}\s+variant {i % 3}\s+{3 + i / 1000:.4f}\s+done", text), f"row{i:04d}"
    assert all(f"page {k} of {n_pages}" in p for k, p in enumerate(pages, 1))  # the footer numbers the pages
    assert "pdf test study" in pages[-1]  # and names the study


def test_the_figure_is_embedded_as_vector_graphics_with_its_words_as_text(long_pdf):
    path, _ = long_pdf
    text = "\n".join(_pages(path))
    assert "sentinelxlabel" in text and "sentinelpanel" in text  # drawn by matplotlib, printed as text
    assert "Figure 1. A sentinel figure" in text and "Its caption." in text
    fonts = subprocess.run(
        [need("pdffonts"), str(path)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()[2:]
    assert fonts and all(" yes " in f for f in fonts), fonts  # every font embedded (subsets)
    assert any("DejaVu-Sans" in f for f in fonts), fonts  # matplotlib's DejaVu, the same on every machine
    images = subprocess.run(
        [need("pdfimages"), "-list", str(path)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()[2:]
    assert not images  # the figure is vector graphics, not a picture of one


class _NoPango:
    """A finder that fails to import weasyprint the way a machine without Pango does."""

    def find_spec(self, name, path=None, target=None):
        if name == "weasyprint" or name.startswith("weasyprint."):
            raise OSError("cannot load library 'libpango-1.0-0': libpango-1.0-0: cannot open shared object file")


def test_without_the_system_libraries_the_report_writes_the_html_and_says_why_in_one_line(
    tmp_path, capsys, monkeypatch
):
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    root = tmp_path / "study"
    write_plan(expand(parse_study(study_dict(name="no pango", budgets=(1e12,), points=3))), root)
    for name in [m for m in sys.modules if m == "weasyprint" or m.startswith("weasyprint.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoPango(), *sys.meta_path])
    assert "Pango" in pdf.unavailable()
    res = run_cli(capsys, "report", str(root))
    assert res.code == 0, res.stderr
    report = root / "report"
    assert (report / "report.html").stat().st_size > 10_000
    assert not (report / "report.pdf").exists() and not list(report.glob(".*tmp"))
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("report.pdf not written: WeasyPrint needs Pango"), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert "html:" in res.stdout and "pdf:" not in res.stdout


def test_the_heros_configuration_starts_on_the_first_page_under_the_tiles(tmp_path):
    """The main job's report.pdf left two thirds of page 1 blank: the recommended configuration table (12 rows with
    their sources, two thirds of a page) was kept whole and went to page 2. It runs on from under the tiles now,
    its rows whole and in order."""
    from ladder.reports.render.blocks import Headline, Tile

    need_weasyprint()
    source = "study rule: " + " ".join(["a long source that says where the value came from"] * 4)
    config = [(f"Label{i:02d}", f"value{i:02d}", f"{source} (row{i:02d})") for i in range(12)]
    tiles = [Tile(f"TILE {i}", "27.5%", "detail " * 40) for i in range(4)]
    section = Section("headline", "Forecast for the hero run", [Headline(tiles, config)])
    section.number = 1
    data = SimpleNamespace(name="s", description="A study. " * 30, path=Path("/nowhere"), env={"date": "2026"})
    path = tmp_path / "report.pdf"
    pdf.write_pdf(path, data, [section])
    pages = _pages(path)
    assert "Recommended hero configuration" in pages[0] and "value00" in pages[0], pages[0]
    text = "\n".join(pages)
    assert [int(m) for m in re.findall(r"\(row(\d\d)\)", text)] == list(range(12))  # every row once, in order
