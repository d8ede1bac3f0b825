"""L(C) on the compute-optimal frontier, backtests, input validation of the loss-law fits."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ladder.errors import FitError
from ladder.reports.fits.approach3 import fit_chinchilla
from ladder.reports.fits.backtest import backtest
from ladder.reports.fits.frontier import fit_loss_vs_compute, frontier
from ladder.reports.fits.isoflop import fit_isoflop

E, A, B, ALPHA, BETA = 1.82, 482.0, 2085.0, 0.348, 0.366
G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
GAMMA = ALPHA * BETA / (ALPHA + BETA)
C0 = 6 * (A * G**-ALPHA + B * G**BETA) ** (1 / GAMMA)  # L*(C) = E + (C0 / C)^gamma exactly


def law(n, d):
    return E + A * np.asarray(n, float) ** -ALPHA + B * np.asarray(d, float) ** -BETA


def envelope(c):
    return E + (C0 / np.asarray(c, float)) ** GAMMA


def n_opt(c):
    return G * (np.asarray(c, float) / 6) ** (BETA / (ALPHA + BETA))


def isoflop(budgets, offsets=np.linspace(-1.5, 1.5, 7), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    n = np.concatenate([n_opt(c) * np.exp(offsets) for c in budgets])
    d = np.repeat(budgets, len(offsets)) / (6 * n)
    return pd.DataFrame({"params": n, "tokens": d, "loss": law(n, d) * np.exp(rng.normal(0, noise, len(n)))})


def multipliers(sizes, mults, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(sizes, float), len(mults))
    d = n * np.tile(np.asarray(mults, float), len(sizes))
    return pd.DataFrame({"params": n, "tokens": d, "loss": law(n, d) * np.exp(rng.normal(0, noise, len(n)))})


def test_envelope_constants_are_consistent():
    c = np.array([1e18, 1e21])
    n = n_opt(c)
    np.testing.assert_allclose(envelope(c), law(n, c / (6 * n)), rtol=1e-12)


# ------------------------------------------------------------------------------------ L(C)
def test_frontier_is_the_best_run_per_budget():
    df = isoflop(np.geomspace(1e17, 1e20, 6), noise=0.01, seed=1)
    front = frontier(df)
    assert front.n == 6
    flops = 6 * df["params"] * df["tokens"]
    for c, loss in zip(front.flops, front.loss):
        same = np.isclose(flops, c, rtol=0.05)
        assert loss == df["loss"][same].min()


def test_loss_vs_compute_recovers_the_envelope_from_isoflop_minima():
    budgets = np.geomspace(1e17, 1e21, 9)
    fit = fit_loss_vs_compute(isoflop(budgets, offsets=np.linspace(-0.3, 0.3, 5)), n_boot=50)
    # the lowest run of a budget sits within a few % of N_opt, so it is ~on the envelope
    assert fit.source == "frontier" and fit.n_points == 9
    assert fit.gamma == pytest.approx(GAMMA, abs=0.01)
    assert fit.E == pytest.approx(E, rel=0.02)
    assert fit(1e22) == pytest.approx(envelope(1e22), rel=2e-3)
    p = fit.predict(np.array([1e22, 1e23]))
    assert np.all(p.lo <= p.loss) and np.all(p.loss <= p.hi)
    d = json.loads(json.dumps(fit.to_dict()))
    assert d["form"] == "loss_vs_compute" and set(d["params"]) == {"E", "C0", "gamma"}
    assert d["backtest"]["holdout"] == "compute" and d["backtest"]["n_held_out"] == 1
    assert d["backtest"]["held_out"][0]["flops"] == pytest.approx(1e21)
    assert d["backtest"]["mean_abs_error_pct"] < 0.5


def test_loss_vs_compute_on_a_multiplier_ladder_uses_compute_bins():
    df = multipliers(np.geomspace(1e7, 1e9, 12), (5, 10, 20, 40, 80), noise=0.005, seed=2)
    fit = fit_loss_vs_compute(df, n_boot=30)
    assert fit.n_points < len(df) / 3  # octave bins, not every "best so far" run
    assert fit.gamma == pytest.approx(GAMMA, abs=0.02)
    assert fit(1e22) == pytest.approx(envelope(1e22), rel=0.02)
    lo, hi = fit.ci90["gamma"]
    assert lo < fit.gamma < hi


def test_loss_vs_compute_from_chinchilla_is_the_exact_envelope():
    df = multipliers(np.geomspace(1e7, 1e9, 8), (5, 10, 20, 40, 80), noise=0.005, seed=3)
    ch = fit_chinchilla(df, n_boot=30, backtest=None)
    fit = fit_loss_vs_compute(source="chinchilla", chinchilla=ch)
    assert fit.source == "chinchilla" and fit.n_boot == 30
    c = np.array([1e20, 1e24])
    np.testing.assert_allclose(fit(c), ch.compute_optimal(c).loss, rtol=1e-10)
    assert fit.gamma == pytest.approx(ch.alpha * ch.beta / (ch.alpha + ch.beta))
    lo, hi = fit.predict(1e24).ci_lo, fit.predict(1e24).ci_hi
    np.testing.assert_allclose([lo, hi], ch.compute_optimal(1e24).ci90["loss"], rtol=1e-4)  # interpolation in log vs linear


def test_loss_vs_compute_errors():
    degenerate = multipliers(np.geomspace(1e7, 1e9, 6), (20,))
    with pytest.raises(FitError, match="not identifiable.*source='frontier'"):
        fit_loss_vs_compute(degenerate, source="chinchilla", n_boot=0)
    with pytest.raises(FitError, match=r"needs >= 4 compute budgets on the compute-optimal frontier, got 3"):
        fit_loss_vs_compute(isoflop([1e17, 1e18, 1e19]), n_boot=0)
    with pytest.raises(FitError, match="source must be one of"):
        fit_loss_vs_compute(degenerate, source="hull")


# --------------------------------------------------------------------------------- backtests
def test_backtest_function_reports_the_held_out_rung():
    df = multipliers(np.geomspace(1e7, 1e9, 8), (5, 10, 20, 40), noise=0.01, seed=4)
    bt = backtest(df, holdout="size", n_rungs=2)
    top2 = sorted(df["params"].unique())[-2:]
    assert bt.n_held_out == 8 and {r["params"] for r in bt.held_out} == set(top2)
    assert bt.n_train == len(df) - 8
    assert bt.mean_error_pct == pytest.approx(np.mean([r["error_pct"] for r in bt.held_out]))
    assert bt.max_abs_error_pct == pytest.approx(max(r["abs_error_pct"] for r in bt.held_out))
    assert bt.mean_abs_error_pct < 3.0
    assert json.loads(json.dumps(bt.to_dict()))["n_rungs"] == 2
    bt = backtest(df, form="loss_vs_compute", holdout="compute")
    assert bt.n_held_out == 1 and bt.held_out[0]["flops"] == pytest.approx((6 * df["params"] * df["tokens"]).max())
    with pytest.raises(FitError, match="form must be"):
        backtest(df, form="isoflop")
    with pytest.raises(FitError, match="n_rungs must be at least 1"):
        backtest(df, n_rungs=0)


def test_degenerate_ladder_backtest_forecasts_the_held_out_rung():
    df = multipliers(np.geomspace(1e7, 1e9, 9), (20,), noise=0.003, seed=5)
    bt = backtest(df)
    assert bt.note and "degenerate" in bt.note
    assert bt.n_held_out == 1 and bt.mean_abs_error_pct < 2.0


# ---------------------------------------------------------------------------- input handling
def test_dataframe_labels_appear_in_errors_and_residuals():
    df = multipliers(np.geomspace(1e7, 1e9, 4), (5, 20, 80))
    df.index = [f"r{i}" for i in range(len(df))]
    bad = df.copy()
    bad.loc["r3", "loss"] = np.nan
    with pytest.raises(FitError, match=r"loss has NaN or infinite values in 1 run\(s\) \(rows r3\)"):
        fit_chinchilla(bad)
    bad = df.copy()
    bad.loc["r1", "tokens"] = 0
    with pytest.raises(FitError, match=r"tokens must be positive; 1 run\(s\) are not \(rows r1\)"):
        fit_loss_vs_compute(bad)
    with pytest.raises(FitError, match="lacks column.*params.*has tokens, loss"):
        fit_isoflop(df.drop(columns="params"))
    with pytest.raises(FitError, match="must be a DataFrame or a mapping"):
        fit_chinchilla([1, 2, 3])
    with pytest.raises(FitError, match="column loss is not numeric"):
        fit_chinchilla(df.assign(loss="x"))
    fit = fit_chinchilla(df.to_dict(orient="list"), n_boot=0, backtest=None)  # a plain mapping works
    assert fit.n_runs == len(df)
