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


def _ladder(path: Path, sizes: dict[str, tuple[float, ...]], worse: str = "B") -> Path:
    """Variants with their own sizes (10, 20 and 40 tokens/param each); ``worse`` is 5% worse everywhere."""
    text = "params,tokens,loss,variant\n"
    for v, ns in sizes.items():
        for n in ns:
            for r in (10, 20, 40):
                loss = (1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28) * (1.05 if v == worse else 1.0)
                text += f"{n},{n * r},{loss:.5f},{v}\n"
    path.write_text(text)
    return path


def test_the_main_variant_is_compared_at_a_size_both_trained_and_said(tmp_path, capsys):
    """Issue 28: with a variant column, the variant that alone trained the largest size became the main law, the
    one --predict forecasts with, however much worse its loss, and the terminal did not say which or why."""
    runs = _ladder(tmp_path / "v.csv", {"A": (1e6, 2e6, 4e6), "B": (1e6, 2e6, 4e6, 8e6)})
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--predict", "1e8:2e9")
    assert r.code == 0, r.stderr
    main = [x for x in r.stdout.splitlines() if "main variant" in x]
    assert len(main) == 1 and "main variant A" in main[0] and "largest size every variant trained (4M" in main[0]
    assert "--variant NAME" in main[0]
    assert any(x.strip().startswith("variant A (main): at its target") for x in r.stdout.splitlines()), r.stdout
    j = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--predict", "1e8:2e9", "--json").json()
    assert j["loss"]["variant"] == "A" and j["loss"]["variant_choice"] in main[0]
    assert [p["variant"] for p in j["predictions"]] == ["A"]
    assert j["loss_by_variant"]["A"]["primary"] and not j["loss_by_variant"]["B"]["primary"]


def test_variant_names_the_main_law_and_a_wrong_name_is_refused_before_fitting(tmp_path, capsys):
    from tests.cli_helpers import one_line

    runs = _ladder(tmp_path / "v.csv", {"A": (1e6, 2e6, 4e6), "B": (1e6, 2e6, 4e6)})
    j = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--variant", "B", "--json").json()
    assert j["loss"]["variant"] == "B" and "asked for (--variant)" in j["loss"]["variant_choice"]
    one_line(run_cli(capsys, "fit", "--runs", runs, "--variant", "C"), "no variant 'C'", "are A, B")
    one_line(run_cli(capsys, "fit", "--runs", runs, "--variant", " "), "--variant ' '", "empty")
    one_line(run_cli(capsys, "fit", str(tmp_path), "--variant", "A"), "--variant", "--runs file")
    single = tmp_path / "one.csv"
    single.write_text("".join(x for x in runs.read_text().splitlines(True) if not x.rstrip().endswith(",B")))
    single.write_text("\n".join(x.rsplit(",", 1)[0] for x in single.read_text().splitlines()) + "\n")
    one_line(run_cli(capsys, "fit", "--runs", single, "--variant", "A"), "no variant 'A'", "no variant column")


def test_variants_that_share_no_rung_take_the_first_in_the_table_and_say_so(tmp_path, capsys):
    runs = _ladder(tmp_path / "v.csv", {"B": (1e6, 2e6, 4e6), "A": (1.5e6, 3e6, 6e6)}, worse="A")
    j = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--json").json()
    assert j["loss"]["variant"] == "B", j["loss"]["variant_choice"]
    assert "first variant in the table" in j["loss"]["variant_choice"]
    assert "share no rung" in j["loss"]["variant_choice"]


def test_a_variant_whose_law_cannot_be_fitted_leaves_the_other_named_so(tmp_path, capsys):
    from tests.cli_helpers import one_line

    runs = _ladder(tmp_path / "v.csv", {"A": (1e6, 2e6), "B": (1e6, 2e6, 4e6, 8e6)})
    j = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--json").json()
    assert j["loss"]["variant"] == "B" and "only variant whose loss law could be fitted" in j["loss"]["variant_choice"]
    one_line(run_cli(capsys, "fit", "--runs", runs, "--variant", "A"), "variant 'A' was asked for", "3 model sizes")


def test_a_run_name_read_as_the_variant_is_one_short_line(tmp_path, capsys):
    """Every variant's reason joined: 8 KB in one line that never said the variant column split the runs apart."""
    from tests.cli_helpers import one_line

    runs = tmp_path / "v.csv"
    runs.write_text(
        "params,tokens,loss,variant\n" + "".join(f"{n},{d},{x},run{i}\n" for i, (n, d, x) in enumerate(_rows()))
    )
    line = one_line(
        run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3"), "9 variants of 1 model size(s)", "run name"
    )
    assert len(line) < 1500 and line.count("loss law of variant") == 1


def test_a_runs_table_without_a_study_is_not_called_a_study_nor_variant_all(tmp_path, capsys):
    """retrial8: `fit --runs` said "loss laws (variant all, ...)" and "this study has no LR sweep" of a CSV."""
    path = tmp_path / "r.csv"
    path.write_text("params,tokens,loss\n" + "".join(f"{n},{d},{loss}\n" for n, d, loss in _rows()))
    r = run_cli(capsys, "fit", "--runs", str(path), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert "this study" not in r.stdout and "variant all" not in r.stdout, r.stdout
    assert "loss laws (9 runs," in r.stdout
    assert "hyperparameter laws: the runs have no LR sweep" in r.stdout
