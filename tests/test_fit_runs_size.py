"""`ladder fit --runs` on a large table: refused above the row bound before any fitting, and a fit of many runs
says each stage as it starts (issue 28: 1e5 rows fitted 9 minutes and 3.3 GB without a word)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from tests.cli_helpers import one_line, run_cli


def _table(path: Path, n_rows: int, extra: str = "") -> Path:
    """``n_rows`` distinct runs: 10 sizes x 5 budgets, each repeated with its own seed."""
    sizes = [1e6 * 1.6**i for i in range(10)]
    lines = ["params,tokens,loss,seed" + extra]
    i = 0
    while len(lines) <= n_rows:
        for n in sizes:
            for r in (5, 10, 20, 40, 80):
                loss = 1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28 + 1e-4 * (i % 7)
                lines.append(f"{n:.6g},{n * r:.6g},{loss:.6f},{i}")
        i += 1
    path.write_text("\n".join(lines[: n_rows + 1]) + "\n")
    return path


def test_a_table_just_above_the_row_bound_is_refused_at_once(tmp_path, capsys):
    from ladder.cli.fit_report import MAX_RUNS_ROWS

    runs = _table(tmp_path / "big.csv", MAX_RUNS_ROWS + 1)
    start = time.monotonic()
    line = one_line(
        run_cli(capsys, "fit", "--runs", runs), f"{MAX_RUNS_ROWS + 1:,} runs to fit", f"{MAX_RUNS_ROWS:,}", "mean loss"
    )
    assert time.monotonic() - start < 60  # read and refused, never fitted (a fit of 2e4 runs takes minutes)
    assert "merging" not in line


def test_the_bound_counts_runs_once_and_only_those_fitted(tmp_path):
    """Repeated rows are merged before the count; unfinished and hero rows are not fitted, so not counted."""
    import pytest

    from ladder.cli.fit_report import MAX_RUNS_ROWS, _runs_to_fit
    from ladder.errors import LadderError

    table = pd.read_csv(_table(tmp_path / "big.csv", MAX_RUNS_ROWS + 2))
    status = ["done"] * len(table)
    status[:2] = ["failed", "running"]
    assert _runs_to_fit(table.assign(status=status), Path("t.csv"), merged=False) == MAX_RUNS_ROWS
    role = [""] * len(table)
    role[:2] = ["hero", "hero"]
    assert _runs_to_fit(table.assign(role=role), Path("t.csv"), merged=False) == MAX_RUNS_ROWS
    with pytest.raises(LadderError, match="after merging repeated rows"):
        _runs_to_fit(table, Path("t.csv"), merged=True)


def test_a_large_fit_says_each_stage_on_stderr_and_json_stays_json(tmp_path, capsys, monkeypatch):
    import ladder.cli.fit_report as fr

    monkeypatch.setattr(fr, "PROGRESS_ROWS", 40)  # a fit of 3e3 runs takes a minute: the same path on 50
    runs = _table(tmp_path / "runs.csv", 50)
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3", "--json")
    assert r.code == 0, r.stderr
    json.loads(r.stdout)
    assert "fit: 50 runs" in r.stderr
    assert "law form chinchilla (1/" in r.stderr
    assert "rollout prefix 1/" in r.stderr
    monkeypatch.setattr(fr, "PROGRESS_ROWS", 51)
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "3")
    assert r.code == 0 and "rollout prefix" not in r.stderr, r.stderr


def test_a_bootstrap_too_large_for_the_runs_is_refused_before_fitting(tmp_path, capsys):
    """Issue 28: `--bootstrap 100000000` grew to 22 GB; the cap of 10,000 alone still let 10,000 resamples of 500
    runs take about 4 GB (500 runs: 1.9 GB at 4,000). Resamples x runs is bounded; the default always passes."""
    from ladder.cli.fit_report import MAX_RESAMPLED_RUNS

    runs = _table(tmp_path / "r.csv", 401)
    start = time.monotonic()
    one_line(
        run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "10000"),
        "--bootstrap 10000 on 401 runs",
        f"{MAX_RESAMPLED_RUNS:,}",
        "--bootstrap 9975 or fewer",  # a value to type: typer reads no 9,975
    )
    assert time.monotonic() - start < 30
