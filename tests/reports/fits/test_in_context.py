"""The loss split into in-context repeats and novel tokens: the copy ratio's trend, the seed spread of each
kind, each kind's forecast, and the warnings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ladder.reports.fits.in_context import available, fit_in_context

E, A, B = 1.82, 482.0, 2085.0
SIZES = np.geomspace(1e7, 1.6e8, 6)
SHARE = 0.3
HERO = (SIZES[-1] * 2, SIZES[-1] * 40)


def novel_law(n, d):
    return E + A * n**-0.348 + B * d**-0.366


def ladder(slope: float, noise: float = 0.003, seed: int = 0, replicate_sd: tuple[float, float] | None = None):
    """6 sizes x 3 budgets; the repeats' loss is ``ratio(C) x novel`` with ``ratio = 0.95 (C / C_min)^slope``.
    ``replicate_sd``: a second seed of the smallest size whose (repeats, novel) move by these sds of log loss."""
    rng = np.random.default_rng(seed)
    n = np.repeat(SIZES, 3)
    d = n * np.tile([10.0, 20.0, 40.0], 6)
    rows = []
    c_min = 6 * n.min() * d.min()
    for i, (nn, dd) in enumerate(zip(n, d)):
        novel = novel_law(nn, dd) * np.exp(rng.normal(0, noise))
        ratio = 0.95 * (6 * nn * dd / c_min) ** slope * np.exp(rng.normal(0, noise))
        rows.append({"params": nn, "tokens": dd, "seed": 0, "loss_novel": novel, "loss_repeats": ratio * novel})
    if replicate_sd is not None:
        for i in range(3):
            base = dict(rows[i])
            base.update(
                seed=1,
                loss_repeats=base["loss_repeats"] * np.exp(rng.normal(0, replicate_sd[0]) + replicate_sd[0]),
                loss_novel=base["loss_novel"] * np.exp(rng.normal(0, replicate_sd[1])),
            )
            rows.append(base)
    df = pd.DataFrame(rows)
    df["repeat_share"] = SHARE
    df["loss"] = SHARE * df["loss_repeats"] + (1 - SHARE) * df["loss_novel"]
    df.index = [f"r{i}" for i in range(len(df))]
    return df


def test_a_ladder_learning_to_copy_is_told_and_each_kind_is_forecast():
    df = ladder(slope=-0.04)
    assert available(df) is None
    near = (SIZES[-1] * 1.5, SIZES[-1] * 30, "near")
    ic = fit_in_context(df, "tied", *HERO, predict=[near], n_boot=40)
    lo, hi = ic.trend["ci90"]
    assert lo <= -0.04 <= hi and hi < 0  # the known slope, inside an interval that excludes 0
    assert ic.trend["ratio_at_largest"] < ic.trend["ratio_at_smallest"] < 1
    assert any("learning to copy" in w for w in ic.warnings)
    novel = ic.forecasts["novel"]
    truth = novel_law(*HERO)
    assert novel["available"] and abs(novel["loss"] / truth - 1) < 0.02 and novel["lo"] <= truth <= novel["hi"]
    comb = ic.forecasts["combined"]
    want = SHARE * ic.forecasts["repeats"]["loss"] + (1 - SHARE) * novel["loss"]
    assert comb["loss"] == pytest.approx(want) and comb["lo"] < comb["loss"] < comb["hi"]
    (pred,) = ic.forecasts["predictions"]  # a prediction point gets each kind too, from the same fits
    assert pred["label"] == "near" and pred["novel"]["available"] and pred["combined"]["available"]
    assert abs(pred["novel"]["loss"] / novel_law(*near[:2]) - 1) < 0.02
    assert pred["novel"]["rollout_rms_pct"] == novel["rollout_rms_pct"]
    assert ic.share == SHARE and len(ic.runs) == len(df)
    assert ic.seeds["configurations"] == 0 and ic.seeds["repeats"] is None  # no replicates, no spread


def test_a_constant_or_barely_falling_copy_ratio_gives_no_warning():
    ic = fit_in_context(ladder(slope=0.0, seed=3), "tied", *HERO, n_boot=20)
    lo, hi = ic.trend["ci90"]
    assert lo < 0 < hi
    assert not ic.warnings
    gentle = fit_in_context(ladder(slope=-0.005, noise=0.0005, seed=3), "tied", *HERO, n_boot=20)
    assert gentle.trend["ci90"][1] < 0  # measurably falling, but by ~3% over the ladder's 1000x compute
    assert gentle.trend["ratio_at_largest"] > 0.95 * gentle.trend["ratio_at_smallest"]
    assert not gentle.warnings


def test_seed_replicates_that_differ_on_the_repeats_are_told():
    ic = fit_in_context(ladder(slope=0.0, seed=1, replicate_sd=(0.08, 0.002)), "tied", *HERO, n_boot=20)
    assert ic.seeds["configurations"] == 3
    assert ic.seeds["repeats"] > 2 * ic.seeds["novel"]
    assert any("when the model learns to copy depends on the seed" in w for w in ic.warnings)
    calm = fit_in_context(ladder(slope=0.0, seed=1, replicate_sd=(0.002, 0.002)), "tied", *HERO, n_boot=20)
    assert not any("depends on the seed" in w for w in calm.warnings)


def test_runs_without_the_split_say_why():
    df = ladder(slope=0.0)
    assert "no loss_repeats" in available(df.drop(columns=["loss_repeats"]))
    few = df.copy()
    few.loc[few.index[3:], "loss_novel"] = np.nan
    assert "3 run(s) carry" in available(few)
    narrow = df[df["params"] <= SIZES[1] * 1.01]
    assert "fewer than 3 model sizes" in available(narrow)
