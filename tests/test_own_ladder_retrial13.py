"""`ladder fit --runs` on a ladder trained elsewhere (re-trial 13): what a user's own table gets told.

Every table is synthetic: a known Chinchilla law with a little noise, bent the way real exports go wrong.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.cli_helpers import one_line, run_cli

SIZES = (1e6, 2e6, 4e6, 8e6)
RATIOS = (10, 20, 40)


def law(n: float, d: float) -> float:
    return 1.8 + 400 / n**0.34 + 410 / d**0.28


def rows(sizes=SIZES, ratios=RATIOS, noise: float = 0.003, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"params": n, "tokens": n * r, "loss": round(law(n, n * r) * (1 + rng.gauss(0, noise)), 5)}
        for n in sizes
        for r in ratios
    ]


def write(path: Path, table: list[dict]) -> Path:
    cols = list(dict.fromkeys(k for row in table for k in row))
    lines = [",".join(cols)] + [",".join("" if row.get(c) is None else f"{row[c]}" for c in cols) for row in table]
    path.write_text("\n".join(lines) + "\n")
    return path


def table_row(stdout: str, label: str) -> str:
    line = next((x for x in stdout.splitlines() if x.startswith(f"{label} ")), None)
    assert line is not None, stdout
    return line


def test_the_predictions_distance_is_its_farthest_axis_as_reach_is_judged(tmp_path, capsys):
    """A point at the ladder's largest size but 10x its tokens: the table said "1x (beyond reach)" (the parameters'
    multiple alone), while --json gives distance_x 10 and the reach is judged in every axis."""
    from ladder.model.config import format_multiple

    path = write(tmp_path / "runs.csv", rows())
    args = ("fit", "--runs", path, "--predict", "8M:3.2B", "--predict", "16M:320M", "--bootstrap", "3")
    r = run_cli(capsys, *args)
    assert r.code == 0, r.stderr
    got = run_cli(capsys, *args, "--json").json()
    for p in got["predictions"]:
        row = table_row(r.stdout, p["label"])
        far = format_multiple(p["distance"]["distance_x"])
        assert re.search(rf"\b{re.escape(far)} (params|tokens|compute)\b", row), (far, row)
    first = got["predictions"][0]
    assert first["params_x"] == 1.0 and first["beyond_reach"], first
    assert " 1x " not in table_row(r.stdout, "8M:3.2B") + " "


def test_the_reports_forecast_table_gives_the_same_distance():
    from ladder.reports.fits.study.fit_json_laws import Prediction
    from ladder.reports.render.sections.scaling import _farthest

    p = Prediction(label="8M:3.2B", params=8e6, tokens=3.2e9, params_x=1.0, tokens_x=10.0, compute_x=10.0)
    assert _farthest(p).startswith("10") and "params" not in _farthest(p)
    old = Prediction(label="x", params=8e6, tokens=3.2e9, params_x=2.0)  # a fit.json of before issue 26
    assert _farthest(old).endswith("params")


def _warnings(capsys, path: Path, *extra: str) -> list[str]:
    r = run_cli(capsys, "fit", "--runs", path, "--bootstrap", "3", "--json", *extra)
    assert r.code == 0, r.stderr
    return r.json()["warnings"]


def test_a_diverged_run_without_a_status_is_named_not_fitted_in_silence(tmp_path, capsys):
    """The largest, longest run at loss 11.5 (diverged; the export has no status column) was fitted without a word:
    the interval came out [0.25, 24.1] and nothing said why."""
    table = rows()
    table[-1]["loss"] = 11.5
    said = [w for w in _warnings(capsys, write(tmp_path / "runs.csv", table)) if "no more params" in w]
    assert len(said) == 1 and "line 13" in said[0] and "11.5" in said[0] and "status column" in said[0], said
    # a clean ladder, and seed replicates a little apart, say nothing of the kind
    clean = rows() + rows(seed=1)
    assert not [w for w in _warnings(capsys, write(tmp_path / "clean.csv", clean)) if "no more params" in w]


def test_params_and_tokens_swapped_or_in_millions_are_warned(tmp_path, capsys):
    swapped = [{"params": r["tokens"], "tokens": r["params"], "loss": r["loss"]} for r in rows()]
    said = _warnings(capsys, write(tmp_path / "swapped.csv", swapped))
    assert any("tokens per parameter" in w and "swapped" in w for w in said), said
    millions = [{**r, "params": r["params"] / 1e6} for r in rows()]
    said = _warnings(capsys, write(tmp_path / "millions.csv", millions))
    assert any("tokens per parameter" in w and "millions" in w for w in said), said
    assert not [w for w in _warnings(capsys, write(tmp_path / "ok.csv", rows())) if "tokens per parameter" in w]


def test_a_batch_size_in_sequences_is_warned_as_read_in_tokens(tmp_path, capsys):
    """An export's batch_size in sequences (Beck et al.'s: 128) was read as 128 tokens per batch, in silence."""
    table = [{**r, "batch_size": 128} for r in rows(sizes=(1e8, 2e8, 4e8, 8e8))]
    said = _warnings(capsys, write(tmp_path / "seqs.csv", table))
    assert any("batch column is read as tokens" in w and "sequences" in w for w in said), said
    table = [{**r, "batch_size": 128 * 2048} for r in rows(sizes=(1e8, 2e8, 4e8, 8e8))]
    assert not [w for w in _warnings(capsys, write(tmp_path / "tokens.csv", table)) if "batch column" in w]


def test_a_runs_table_given_as_the_study_is_pointed_at_fit_runs(tmp_path, capsys):
    """`ladder fit runs.csv` said "runs.csv is a file; give a study directory": a ladder trained elsewhere has none,
    and --runs went unnamed. `ladder report runs.csv` likewise."""
    path = write(tmp_path / "runs.csv", rows())
    line = one_line(run_cli(capsys, "fit", path), "is a file; give a study directory", "ladder fit --runs")
    assert str(path) in line
    one_line(run_cli(capsys, "report", path), "is a file; give a study directory", "ladder fit --runs")
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize(
    "command",
    [["status"], ["collect"], ["hero"], ["forecast", "show"], ["forecast", "freeze"], ["fit"], ["report"]],
)
def test_every_command_given_a_runs_table_for_its_study_names_fit_runs(tmp_path, capsys, command):
    """status, collect, hero and forecast said only "runs.csv is a file; give a study directory" (fit and report
    named `ladder fit --runs`, from a check of their own). The study directory's own check now names it, for every
    command; a file of another kind is not offered it. (`plan --suggest` has a message of its own.)"""
    path = write(tmp_path / "runs.csv", rows())
    before = sorted(tmp_path.iterdir())
    line = one_line(run_cli(capsys, *command, path), "is a file; give a study directory", "ladder fit --runs")
    assert str(path) in line
    assert sorted(tmp_path.iterdir()) == before
    other = tmp_path / "notes.txt"
    other.write_text("not a table\n")
    r = run_cli(capsys, *command, other)
    assert r.code == 2 and "is a file" in r.stderr and "--runs" not in r.stderr, r.stderr


def test_numpys_runtime_warnings_during_the_fit_do_not_reach_the_user(tmp_path, capsys, monkeypatch):
    """Beck et al.'s mLSTM ladder (ctx 16384) made `fit --runs` print "isoflop_fit.py:333: RuntimeWarning: invalid
    value encountered in log" and the source line first: a bootstrap draw's log of a negative loss, left out as NaN
    by design. Any such warning of numpy's during the fit now stays inside."""
    import warnings

    import numpy as np

    import ladder.reports.fits as fits

    real = fits.fit_study

    def noisy(*args, **kwargs):
        np.log(np.array([-1.0]))  # what the IsoFLOP bootstrap's spread does with a negative draw
        return real(*args, **kwargs)

    monkeypatch.setattr(fits, "fit_study", noisy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_cli(capsys, "fit", "--runs", write(tmp_path / "runs.csv", rows()), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert "RuntimeWarning" not in r.stderr


def test_a_mapping_that_leaves_out_the_loss_names_the_files_columns_not_the_mappings(tmp_path, capsys):
    """`--columns params=N,tokens=D` on a file of N, D, val_loss said "the runs table lacks column(s) loss; ... it
    has params, tokens": the mapping's names, as if the file had no loss column to map."""
    table = [{"N": r["params"], "D": r["tokens"], "val_loss": r["loss"]} for r in rows()]
    path = write(tmp_path / "runs.csv", table)
    line = one_line(run_cli(capsys, "fit", "--runs", path, "--columns", "params=N,tokens=D"), "loss=COLUMN")
    assert "N, D, val_loss" in line and "it has params, tokens" not in line, line
    r = run_cli(capsys, "fit", "--runs", path, "--columns", "params=N,tokens=D,loss=val_loss", "--bootstrap", "3")
    assert r.code == 0, r.stderr


def test_a_fit_of_a_runs_table_without_predict_says_how_to_forecast(tmp_path, capsys):
    """`fit --runs F` alone printed the laws and no forecast, with no word why (fit.json's hero reason names
    --predict; the terminal never said it)."""
    r = run_cli(capsys, "fit", "--runs", write(tmp_path / "runs.csv", rows()), "--bootstrap", "3")
    assert r.code == 0, r.stderr
    assert re.search(r"^forecasts: none asked: --predict PARAMS:TOKENS", r.stdout, re.M), r.stdout


def test_the_first_predict_point_is_named_as_the_target_the_forms_are_weighted_for(tmp_path, capsys):
    """`--predict A --predict B` and `--predict B --predict A` print different numbers for the same point (the first
    is the target: its tokens/param weighs the forms), and nothing said so."""
    path = write(tmp_path / "runs.csv", rows())
    for first, second in (("16M:320M", "32M:3.2B"), ("32M:3.2B", "16M:320M")):
        r = run_cli(capsys, "fit", "--runs", path, "--predict", first, "--predict", second, "--bootstrap", "3")
        assert r.code == 0, r.stderr
        said = [x for x in r.stdout.splitlines() if "weighted for the first point" in x]
        assert len(said) == 1 and f"first point, {first} (" in said[0], r.stdout


def test_a_refusal_after_repeated_rows_were_merged_says_they_were(tmp_path, capsys):
    """Six rows, three of them repeats: the fit refused with "needs >= 4 runs for 3 parameters (has 3)" and never
    said that three rows had been merged (that warning is printed after a fit, and this one failed)."""
    table = rows(ratios=(20,), sizes=(1e6, 2e6, 4e6))
    line = one_line(run_cli(capsys, "fit", "--runs", write(tmp_path / "runs.csv", table + table)), "(has 3)")
    assert "3 of the file's rows repeat an earlier row" in line and "--keep-duplicates" in line, line


def test_a_table_of_one_or_two_sizes_is_told_it_needs_three_first(tmp_path, capsys):
    """One run: the refusal's first words on the two-term laws were "every run has the same tokens/param ratio",
    of a table with one run; the reason every form shares, too few sizes, now comes first."""
    line = one_line(run_cli(capsys, "fit", "--runs", write(tmp_path / "one.csv", rows()[:1])))
    assert "chinchilla: needs runs at >= 3 model sizes (has 1)" in line, line
    two = [r for r in rows() if r["params"] <= 2e6]
    line = one_line(run_cli(capsys, "fit", "--runs", write(tmp_path / "two.csv", two)))
    assert "chinchilla: needs runs at >= 3 model sizes (has 2)" in line, line


def test_a_point_beyond_reach_in_tokens_alone_is_told_the_tokens_reach():
    """Within the reach's params and compute but past its tokens (an isoFLOP ladder of 20 runs, --predict 100M:12B):
    the warning said "beyond the ladder's demonstrated reach (forecasts stayed within 2% up to 1x params, 3.33x
    compute)" of a point at 0.25x params and 2.4x compute; the axis it passed, tokens (1x), went unsaid."""
    from types import SimpleNamespace

    from ladder.reports.fits.study.study_hero import prediction_beyond

    fc = SimpleNamespace(mixture_rows=[object()], reach={"2%": {"params_x": 1.0, "tokens_x": 1.0, "compute_x": 3.33}})
    row = {"params_x": 0.25, "tokens_x": 1.52, "compute_x": 2.4, "beyond_tested": False, "beyond_reach": True}
    said = prediction_beyond(row, fc)
    assert "stayed within 2% up to 1x params, 3.33x compute, 1x tokens" in said, said


def test_a_batch_in_tokens_mapped_beside_a_batch_size_in_sequences_is_read(tmp_path, capsys):
    """Beck et al.'s export has batch_size (sequences) and batch_size_tokens: `--columns
    batch_tokens=batch_size_tokens` was refused with "the runs table has both batch_size and batch_tokens; keep one",
    though the user had picked one; the file's batch_size was kept beside the mapping as the alias it is not."""
    table = [{**r, "batch_size": 64, "batch_size_tokens": 64 * 2048} for r in rows(sizes=(1e8, 2e8, 4e8, 8e8))]
    path = write(tmp_path / "runs.csv", table)
    r = run_cli(
        capsys, "fit", "--runs", path, "--columns", "batch_tokens=batch_size_tokens", "--bootstrap", "3", "--json"
    )
    assert r.code == 0, r.stderr
    assert not [w for w in r.json()["warnings"] if "batch column" in w]
    both = write(tmp_path / "both.csv", [{**r, "batch_tokens": r["batch_size_tokens"]} for r in table])
    one_line(run_cli(capsys, "fit", "--runs", both), "both batch_size and batch_tokens", "--columns batch_tokens=")


def test_a_mapped_column_that_is_nested_deeper_is_named_in_the_refusal(tmp_path, capsys):
    """W&B's raw config wraps each value ({"n_params": {"value": 1e6, "desc": null}}): `--columns
    params=config.n_params` was refused with the first 12 columns of a wide export, none of them the one meant."""
    path = tmp_path / "runs.jsonl"
    lines = []
    for i, r in enumerate(rows()):
        config = {f"opt_{k}": {"value": k, "desc": None} for k in range(15)}
        config |= {"n_params": {"value": r["params"], "desc": None}, "tokens": {"value": r["tokens"], "desc": None}}
        lines.append(
            json.dumps({"name": f"r{i}", "state": "finished", "config": config, "summary": {"loss": r["loss"]}})
        )
    path.write_text("\n".join(lines) + "\n")
    cols = "params=config.n_params,tokens=config.tokens.value,loss=summary.loss"
    one_line(run_cli(capsys, "fit", "--runs", path, "--columns", cols), "did you mean 'config.n_params.value'")
    cols = "params=config.n_params.value,tokens=config.tokens.value,loss=summary.loss"
    assert run_cli(capsys, "fit", "--runs", path, "--columns", cols, "--bootstrap", "3").code == 0


def test_a_forecast_past_every_published_one_is_not_given_their_record_as_its_own(tmp_path, capsys):
    """7e9:1.4e12 from a ladder of 8M: 'track record: ... 1 forecast at 64x or more compute erred by 2.9%, inside its
    90% interval', quoted for a forecast at 10^7x; the one published forecast of that band was at 130x."""
    from ladder.reports.fits.loss import track_record

    r = run_cli(
        capsys, "fit", "--runs", write(tmp_path / "runs.csv", rows()), "--predict", "7e9:1.4e12", "--bootstrap", "3"
    )
    line = next(x for x in r.stdout.splitlines() if x.startswith("  7e9:1.4e12:"))
    assert f"none was as far out as this forecast (the farthest at {track_record.FARTHEST_X:g}x)" in line, line
    near = track_record.sentence(track_record.at(100.0))
    assert near and "none was as far" not in near


def test_a_crashed_small_run_does_not_hide_a_prediction_below_the_ladder(tmp_path, capsys):
    """A crashed 100K run (excluded from the fit) set the ladder's smallest model: --predict 300K:3M, below the 1M the
    laws were fitted from, got no 'below the ladder' warning."""
    table = [{**r, "status": "finished"} for r in rows()] + [
        {"params": 1e5, "tokens": 1e6, "loss": 9.5, "status": "crashed"}
    ]
    said = _warnings(capsys, write(tmp_path / "runs.csv", table), "--predict", "300K:3M")
    assert any(w.startswith("--predict 300K:3M: below the ladder (its smallest model has 1M params") for w in said), (
        said
    )


def test_runs_that_share_a_name_are_pointed_at_by_their_line_not_a_row_counted_from_zero(tmp_path, capsys):
    """A run_id column that repeats names (a sweep's): the fit fell back to "row 11", counted from 0 under the
    header, for the run on line 13 of the file."""
    table = [{**r, "run_id": f"run{i % 3}"} for i, r in enumerate(rows())]
    table[-1]["loss"] = 11.5
    said = [w for w in _warnings(capsys, write(tmp_path / "runs.csv", table)) if "no more params" in w]
    assert said and "run2 (line 13)" in said[0] and "row 11" not in said[0], said


def test_the_runs_of_a_json_array_are_pointed_at_as_runs_of_the_array_not_lines(tmp_path, capsys):
    """A pretty-printed JSON array of runs: its 12th run, on line 68, was named "line 12"."""
    table = rows()
    table[-1]["loss"] = 11.5
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(table, indent=2))
    said = [w for w in _warnings(capsys, path) if "no more params" in w]
    assert said and "run 12 of the array" in said[0] and "line 12" not in said[0], said
