"""`ladder fit --runs` on tables as people write them (issue 28's new-user trial): counts with units, thousands
separators, percent signs, header cells with spaces or capitals, a file that is not UTF-8, a .tsv with commas."""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import one_line, run_cli

SIZES = (1e6, 2e6, 4e6, 8e6)


def _rows() -> list[tuple[float, float, float]]:
    return [(n, n * r, round(1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28, 4)) for n in SIZES for r in (10, 20, 40)]


def _write(path: Path, header: str, cells, encoding: str = "utf-8") -> Path:
    path.write_text(header + "\n" + "".join(",".join(c) + "\n" for c in cells), encoding=encoding)
    return path


def _human(x: float) -> str:
    return next((f"{x / s:g}{u}" for s, u in ((1e9, "B"), (1e6, "M"), (1e3, "K")) if x >= s), f"{x:g}")


def test_counts_with_units_are_read_as_the_counts_they_are(tmp_path, capsys):
    plain = _write(tmp_path / "plain.csv", "params,tokens,loss", [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()])
    units = _write(
        tmp_path / "units.csv", "params,tokens,loss", [(_human(n), _human(d), f"{x}") for n, d, x in _rows()]
    )
    a, b = (
        run_cli(capsys, "fit", "--runs", p, "--bootstrap", "3", "--predict", "1e8:2e9", "--json")
        for p in (plain, units)
    )
    assert a.code == 0 and b.code == 0, b.stderr
    assert a.json()["predictions"][0]["loss"] == b.json()["predictions"][0]["loss"]


def test_text_in_a_numeric_column_names_the_column_rows_and_a_value(tmp_path, capsys):
    """pandas said "column params is not numeric (Unable to parse string '1,000,000' at position 0)"."""
    rows = _rows()
    runs = _write(tmp_path / "t.csv", "params,tokens,loss", [(f'"{int(n):,}"', f"{d:g}", f"{x}") for n, d, x in rows])
    one_line(
        run_cli(capsys, "fit", "--runs", runs),
        "column params holds text that is not a number in 12 row(s)",
        "line 2",
        "'1,000,000'",
        "without thousands separators",
    )
    runs = _write(tmp_path / "p.csv", "params,tokens,loss", [(f"{n:g}", f"{d:g}", f"{x}%") for n, d, x in rows])
    line = one_line(run_cli(capsys, "fit", "--runs", runs), "column loss holds text", "plain numbers")
    assert "position 0" not in line and "64M" not in line


def test_header_cells_with_spaces_are_read_and_capitals_are_hinted(tmp_path, capsys):
    cells = [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]
    assert (
        run_cli(
            capsys, "fit", "--runs", _write(tmp_path / "s.csv", " params , tokens,loss ", cells), "--bootstrap", "3"
        ).code
        == 0
    )
    one_line(
        run_cli(capsys, "fit", "--runs", _write(tmp_path / "c.csv", "Params,Tokens,loss", cells)),
        "lacks column(s) params, tokens",
        "rename 'Params' to params",
        "--columns params=Params,tokens=Tokens,loss=loss",
    )
    one_line(
        run_cli(capsys, "fit", "--runs", _write(tmp_path / "d.csv", "params, loss,loss", cells)),
        "more than one column is named 'loss'",
    )


def test_a_file_not_in_utf8_and_a_tsv_with_commas_are_named_so(tmp_path, capsys):
    cells = [(f"{n:g}", f"{d:g}", f"{x}", "caf\xe9") for n, d, x in _rows()]
    runs = _write(tmp_path / "l.csv", "params,tokens,loss,name", cells, encoding="latin-1")
    one_line(run_cli(capsys, "fit", "--runs", runs), "not UTF-8", "save it as UTF-8")
    tsv = _write(tmp_path / "c.tsv", "params,tokens,loss", [c[:3] for c in cells])
    one_line(run_cli(capsys, "fit", "--runs", tsv), "comma-separated", "name it .csv")


def test_a_value_with_an_unquoted_comma_names_its_line_and_the_cure(tmp_path, capsys):
    """Fuzzing fit --runs: a tokens cell written 1,000 said "cannot read the runs table (ParserError: Error
    tokenizing data. C error: Expected 3 fields in line 4, saw 4)", pandas' words."""
    cells = [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]
    cells[2] = ("4,000,000", *cells[2][1:])
    runs = _write(tmp_path / "c.csv", "params,tokens,loss", cells)
    line = one_line(run_cli(capsys, "fit", "--runs", runs), "line 4 has 5 fields where the header names 3 columns")
    assert "double quotes" in line and "ParserError" not in line, line


def test_a_loss_that_rises_with_compute_is_warned_about(tmp_path, capsys):
    """An accuracy read as the loss was fitted to a flat law (rollout error 63%) without a word."""
    cells = [(f"{n:g}", f"{d:g}", f"{10 - x}") for n, d, x in _rows()]
    r = run_cli(capsys, "fit", "--runs", _write(tmp_path / "acc.csv", "params,tokens,loss", cells), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert "the loss rises with compute in these runs" in r.stdout and "accuracy" in r.stdout
    r = run_cli(
        capsys,
        "fit",
        "--runs",
        _write(tmp_path / "ok.csv", "params,tokens,loss", [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]),
        "--bootstrap",
        "3",
    )
    assert r.code == 0 and "rises with compute" not in r.stdout


def test_a_runs_fit_never_speaks_of_a_hero_it_does_not_have(tmp_path, capsys):
    """The ratio form's runs were 'those within 10% of the hero's 200 tokens/param' with no hero (the first
    --predict point set the ratio); fit.json's hero reason said 'pass study=', a Python argument."""
    cells = [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]
    runs = _write(tmp_path / "r.csv", "params,tokens,loss", cells)
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--predict", "7B:1.4T")
    assert r.code == 0, r.stderr
    assert "the hero's 200 tokens/param" not in r.stdout and "the target's 200 tokens/param" in r.stdout
    j = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--predict", "7B:1.4T", "--json").json()
    assert "study=" not in j["hero"]["reason"] and "--predict" in j["hero"]["reason"]


def test_json_lines_with_a_bom_a_null_line_no_runs_or_nested_keys(tmp_path, capsys):
    import json

    lines = [json.dumps({"params": n, "tokens": d, "loss": x}) for n, d, x in _rows()]
    bom = tmp_path / "bom.jsonl"
    bom.write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    assert run_cli(capsys, "fit", "--runs", bom, "--bootstrap", "3").code == 0  # was "line 1 is not JSON"
    null = tmp_path / "null.jsonl"
    null.write_text("\n".join(lines[:2]) + "\n\nnull\n")
    one_line(run_cli(capsys, "fit", "--runs", null), "line 4 is null, not a JSON object")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    one_line(run_cli(capsys, "fit", "--runs", empty), "holds no runs")
    nested = tmp_path / "nested.jsonl"
    nested.write_text("".join(json.dumps({"config": {"n": n, "d": d}, "loss": x}) + "\n" for n, d, x in _rows()))
    one_line(run_cli(capsys, "fit", "--runs", nested), "it has loss, config.n, config.d", "map them with --columns")


def test_the_commands_own_warnings_are_in_the_json_and_said_once(tmp_path, capsys):
    """The repeated-rows and below-the-ladder warnings went to stderr only: --json (and fit.json) lacked them."""
    cells = [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]
    runs = _write(tmp_path / "r.csv", "params,tokens,loss", cells + cells[:1])
    args = ("fit", "--runs", runs, "--bootstrap", "3", "--predict", "1e4:1e5")
    j = run_cli(capsys, *args, "--json")
    assert j.code == 0, j.stderr
    warnings = j.json()["warnings"]
    assert any("repeat an earlier row" in w for w in warnings) and any("below the ladder" in w for w in warnings)
    r = run_cli(capsys, *args)
    assert "repeat an earlier row" in r.stderr and "repeat an earlier row" not in r.stdout


def _lr_sweep(path: Path, lrs: tuple[float, ...]) -> Path:
    import math

    cells = [
        (f"{n:g}", f"{d:g}", f"{x + 0.05 * (math.log(abs(lr) + 1e-4) - math.log(3e-3)) ** 2:.5f}", f"{lr:g}")
        for n, d, x in _rows()
        for lr in lrs
    ]
    return _write(path, "params,tokens,loss,lr", cells)


def test_a_zero_or_negative_lr_is_refused_not_left_out_silently(tmp_path, capsys):
    runs = _lr_sweep(tmp_path / "lr.csv", (-1e-3, 0.0, 1e-3, 3e-3, 1e-2))
    one_line(run_cli(capsys, "fit", "--runs", runs), "column lr must be positive", "24 row(s)", "-0.001")


def test_runs_hyperparameter_laws_say_where_they_are_evaluated_not_at_a_hero(tmp_path, capsys):
    """`lr* at hero -, batch* -` with no hero (fit --runs): now where LR* is to be read."""
    runs = _lr_sweep(tmp_path / "lr.csv", (1e-3, 3e-3, 1e-2))
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3")
    line = next(x for x in r.stdout.splitlines() if x.startswith("hyperparameter laws"))
    assert "at hero" not in line and "give --predict" in line
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--predict", "1e8:2e9")
    line = next(x for x in r.stdout.splitlines() if x.startswith("hyperparameter laws"))
    assert "in the predictions table" in line and "LR*" in r.stdout


def test_the_runs_of_one_isoflop_budget_are_not_said_to_rise_with_compute():
    """One isoFLOP budget: its sizes differ in 6ND only by rounding, and its loss is a valley in the size. fit said
    "the loss rises with compute in these runs (rank correlation +0.75)" of runs at one compute."""
    import pandas as pd

    from ladder.reports.fits.study.table import loss_rises_with_compute

    sizes = [1e6, 2e6, 4e6, 8e6, 16e6]
    one = pd.DataFrame(
        {"params": sizes, "tokens": [1e13 / 6 / n * (1 + 0.01 * i) for i, n in enumerate(sizes)],
         "loss": [3.6, 3.5, 3.7, 3.9, 4.1]}  # a valley at 2M; rank correlation with 6ND +0.9, by rounding alone
    )  # fmt: skip
    assert loss_rises_with_compute(one) is None
    two = pd.concat([one, one.assign(tokens=one["tokens"] * 4, loss=one["loss"] + 1.0)])  # 4x: the loss rose
    assert loss_rises_with_compute(two) is not None


def test_a_row_is_named_by_its_line_in_the_file_past_blank_lines_and_multi_line_cells(tmp_path, capsys):
    """pandas skips blank lines, so "line 5" named the run on line 8; a quoted note over two lines shifted it too."""
    rows = [(f"{n:g}", f"{d:g}", f"{x}") for n, d, x in _rows()]
    rows[-1] = (*rows[-1][:2], "abc")
    body = ["params,tokens,loss,note", ""] + [",".join(r) + "," for r in rows[:4]] + ["", "   "]
    body += [",".join(rows[4]) + ',"two\nlines"'] + [",".join(r) + "," for r in rows[5:]]
    runs = tmp_path / "gaps.csv"
    runs.write_text("\n".join(body) + "\n")
    wanted = runs.read_text().splitlines().index(",".join(rows[-1]) + ",") + 1
    assert wanted == len(rows) + 5  # three blank lines, one cell over two lines
    one_line(run_cli(capsys, "fit", "--runs", runs), f"(line {wanted};", "'abc'")


def test_a_flops_column_of_each_runs_budget_sets_the_loss_laws_budgets(tmp_path, capsys):
    """Beck et al.'s budgets count attention (6ND spreads 19-37% within one): fitted by 6ND, 'left out of the loss
    laws' could not name the runs far from a budget's optimum, since 6ND cut each budget into levels of too few
    sizes. With the budgets as a flops column the laws leave them out, as the IsoFLOP fit groups them."""
    import math

    rows = []
    for c in (1e18, 4e18, 1.6e19):
        for k in range(8):
            n = math.sqrt(c / 120) * math.exp(-2 + 4 * k / 7)
            d = c * (1 + 0.15 * (k % 4)) / (6 * n)
            rows.append((n, d, 1.82 + 482 / n**0.348 + 2085 / d**0.366, c))
    plain = _write(tmp_path / "6nd.csv", "params,tokens,loss", [(f"{n!r}", f"{d!r}", f"{x!r}") for n, d, x, _ in rows])
    given = _write(
        tmp_path / "budgets.csv",
        "params,tokens,loss,flops",
        [(f"{n!r}", f"{d!r}", f"{x!r}", f"{c!r}") for n, d, x, c in rows],
    )
    by_6nd = run_cli(capsys, "fit", "--runs", plain, "--bootstrap", "3", "--json").json()
    by_budget = run_cli(capsys, "fit", "--runs", given, "--bootstrap", "3", "--json").json()
    assert by_6nd["loss"]["left_out"]["runs"] == [], by_6nd["loss"]["left_out"]
    left = by_budget["loss"]["left_out"]
    assert 0 < len(left["runs"]) < len(rows) // 2 and "isoFLOP budget" in left["why"], left
    assert by_budget["isoflop"]["n_budgets"] == 3
