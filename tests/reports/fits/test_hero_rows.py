"""Hero runs (``role == "hero"``) in a results table: never fitted, listed as excluded with the reason, outside
the ladder's cost, and outside the hash a fit and a frozen forecast record (``results_hash``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ladder.reports.fits import fit_study
from ladder.reports.fits.study.table import HERO_REASON, content_hash, results_hash


def _table() -> pd.DataFrame:
    rows = []
    for i, n in enumerate([2e4, 4e4, 8e4, 1.6e5, 3.2e5]):
        d = 20 * n
        rows.append(
            {
                "run_id": f"r{i}",
                "params": n,
                "tokens": d,
                "flops": 7 * n * d,
                "status": "done",
                "role": "rung",
                "loss": 1.8 + 60 / n**0.34 + 160 / d**0.31,
                "seed": 0,
                "error": None,
            }
        )
    return pd.DataFrame(rows)


def _with_hero(df: pd.DataFrame, loss: float = 2.5, status: str = "done", extra: dict | None = None) -> pd.DataFrame:
    n = 1.28e6
    hero = {
        "run_id": "hero",
        "params": n,
        "tokens": 20 * n,
        "flops": 7 * n * 20 * n,
        "status": status,
        "role": "hero",
        "loss": loss,
        "seed": 0,
        "error": None,
        **(extra or {}),
    }
    return pd.concat([df, pd.DataFrame([hero])], ignore_index=True)


def test_the_hero_row_is_excluded_from_every_law_and_the_cost():
    df = _table()
    plain = fit_study(df, n_boot=20, predict=["1.28e6:2.56e7"])
    fit = fit_study(_with_hero(df, loss=1.0), n_boot=20, predict=["1.28e6:2.56e7"])  # a wild hero changes nothing
    assert fit.predictions[-1]["loss"] == pytest.approx(plain.predictions[-1]["loss"])
    [ex] = fit.excluded
    assert ex["run"] == "hero" and ex["reason"] == HERO_REASON and ex["status"] == "done"
    assert "hero" not in set(fit.law_runs["run_id"]) and "hero" not in set(fit.runs["run_id"])
    assert fit.meta["n_runs"] == len(df) and fit.meta["n_hero_runs"] == 1
    assert fit.meta["results_sha256"] == plain.meta["results_sha256"]
    assert any("not fitted" in n for n in fit.notes)


def test_results_hash_ignores_the_hero_rows_and_columns_only_they_fill():
    df = _table()
    h = results_hash(df)
    assert results_hash(_with_hero(df, status="planned", loss=np.nan)) == h
    assert results_hash(_with_hero(df, extra={"task/x/acc": 0.5})) == h  # a column only the hero has
    changed = df.copy()
    changed.loc[2, "loss"] *= 1.001
    assert results_hash(changed) != h and content_hash(_with_hero(df)) != content_hash(df)


def test_results_hash_survives_a_parquet_round_trip(tmp_path):
    df = _with_hero(_table(), status="running", loss=np.nan)
    df.to_parquet(tmp_path / "r.parquet", index=False)
    assert results_hash(pd.read_parquet(tmp_path / "r.parquet")) == results_hash(df)
