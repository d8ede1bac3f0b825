"""benchmarks/readme_table.py: a benchmark's run adds its row and keeps what a person wrote under its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "readme_table.py"
spec = importlib.util.spec_from_file_location("readme_table", SCRIPT)
readme_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_table)

HEADER = "| date | figure |\n|---|---|"
README = """# Benchmarks

## Fit speed

old intro

| date | figure |
|---|---|
| 2026-11-30 | 29.4 |

Why the figure moved: the fifth law form.

## Other

| date | other |
|---|---|
| 2026-11-29 | 1 |
"""


def test_a_row_is_added_and_the_prose_under_the_table_is_kept(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(README)
    readme_table.update_section("## Fit speed", "new intro", HEADER, "| 2026-12-01 | 19.6 |", path)
    text = path.read_text()
    fit, other = text.split("## Other")
    assert "new intro" in fit and "old intro" not in fit
    assert fit.index("| 2026-11-30 | 29.4 |") < fit.index("| 2026-12-01 | 19.6 |") < fit.index("Why the figure")
    assert "Why the figure moved: the fifth law form." in fit
    assert "| 2026-11-29 | 1 |" in other  # the next section is not touched


def test_old_rows_roll_off_and_a_missing_section_is_added(tmp_path):
    path = tmp_path / "README.md"
    for day in range(1, readme_table.KEEP_ROWS + 3):
        readme_table.update_section("## Fit speed", "intro", HEADER, f"| 2026-12-{day:02d} | {day} |", path)
    text = path.read_text()
    assert text.startswith("# Benchmarks\n\n## Fit speed\n\nintro\n")
    rows = [line for line in text.splitlines() if line.startswith("| 2026")]
    assert len(rows) == readme_table.KEEP_ROWS and rows[0] == "| 2026-12-03 | 3 |" and rows[-1].endswith("| 12 |")


def test_a_table_in_the_prose_under_the_table_is_kept(tmp_path):
    """A subsection under the benchmark's table with a table of its own (benchmarks/README.md's Epoch accuracy
    table under the fit-speed rows) survives a new row: bench_fit once dropped everything down to its last line."""
    path = tmp_path / "README.md"
    path.write_text(
        README.replace(
            "Why the figure moved: the fifth law form.\n",
            "Why the figure moved.\n\n### Accuracy\n\n| what | value |\n|---|---|\n| E | 1.8 |\n",
        )
    )
    readme_table.update_section("## Fit speed", "new intro", HEADER, "| 2026-12-01 | 19.6 |", path)
    fit = path.read_text().split("## Other")[0]
    assert "| 2026-11-30 | 29.4 |\n| 2026-12-01 | 19.6 |" in fit
    assert "Why the figure moved." in fit and "### Accuracy" in fit and "| E | 1.8 |" in fit
