"""`ladder fit --runs` with no study: what the terminal calls its numbers (retrial7)."""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import run_cli


def _rows() -> list[tuple[float, float, float]]:
    return [
        (n, n * r, round(1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28, 4)) for n in (1e6, 2e6, 4e6) for r in (10, 20, 40)
    ]


def _csv(path: Path, variants: list[str]) -> Path:
    rows = _rows()
    text = "params,tokens,loss,variant\n"
    for v in variants:
        text += "".join(f"{n},{d},{loss * (1.01 if v == 'B' else 1.0)},{v}\n" for n, d, loss in rows)
    path.write_text(text)
    return path


def test_a_variant_with_no_hero_is_forecast_at_its_own_target_not_at_the_hero(tmp_path, capsys):
    """retrial7: 'variant A: at the hero 7.023' although fit.json says there is no hero (no study given)."""
    r = run_cli(capsys, "fit", "--runs", str(_csv(tmp_path / "v.csv", ["A", "B"])), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.strip().startswith("variant ")]
    assert lines, r.stdout
    assert not any("at the hero" in x for x in lines), lines
    assert any("at its target 4M x 40M" in x and "no hero" in x for x in lines), lines


def test_an_empty_variant_cell_is_named_no_variant_not_a_question_mark(tmp_path, capsys):
    r = run_cli(capsys, "fit", "--runs", str(_csv(tmp_path / "v.csv", ["", "A"])), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert "variant ?" not in r.stdout
    assert "(no variant)" in r.stdout


def test_a_semicolon_separated_csv_is_hinted_and_ladders_run_id_is_not_listed(tmp_path, capsys):
    """retrial7: 'it has run_id, params;tokens;loss' - the file has no run_id column (ladder added it)."""
    from tests.cli_helpers import one_line

    path = tmp_path / "semi.csv"
    path.write_text("params;tokens;loss\n" + "".join(f"{n};{d};{loss}\n" for n, d, loss in _rows()))
    line = one_line(run_cli(capsys, "fit", "--runs", str(path)), "it has params;tokens;loss", "';'-separated")
    assert "run_id" not in line
