"""Ablations recover known truths: tie crossover, effective compute, best aspect ratio."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ladder.errors import FitError
from ladder.reports.fits.ablations import (
    fit_depth_width,
    fit_linear_trend,
    fit_loss_vs_compute,
    fit_tie_ablation,
)

G = 0.1
E_T, C0_T = 2.0, 1e17 * 1.5**10  # tied: L = E + (C0 / C)^G, 3.5 at 1e17
UNTIED_EXTRA_COMPUTE = 1.15  # untied has more parameters: 15% more compute at the same rung


def untied_c0(e_u: float, c_cross: float) -> float:
    """C0 of the untied law so that it meets the tied law at c_cross."""
    return c_cross * (E_T + (C0_T / c_cross) ** G - e_u) ** (1 / G)


def law(e, c0, c):
    return e + (c0 / c) ** G


def tie_runs(e_u, c0_u, computes=(1e16, 1e17, 1e18, 1e19, 1e20), *, noise=0.001, seed=0, tie_values=(True, False)):
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        for tied in tie_values:
            cv = c if tied else c * UNTIED_EXTRA_COMPUTE
            loss = law(E_T, C0_T, cv) if tied else law(e_u, c0_u, cv)
            rows.append(
                {"params": cv / 1e11, "tokens": 1e11 / 6, "flops": cv, "loss": loss + rng.normal(0, noise),
                 "tie_embeddings": tied, "d_model": 64 * (i + 1), "n_layers": 2 + i}
            )
    return pd.DataFrame(rows)


def true_diff(e_u, c0_u, c):
    return law(e_u, c0_u, c) - law(E_T, C0_T, c)


def test_loss_law_recovery_and_inverse():
    c = np.geomspace(1e16, 1e20, 5)
    fit = fit_loss_vs_compute(c, law(E_T, C0_T, c))
    assert fit.kind == "saturating"
    assert fit.E == pytest.approx(E_T, rel=0.02) and fit.g == pytest.approx(G, rel=0.05)
    assert fit.inverse(fit(3e18)) == pytest.approx(3e18, rel=1e-6)
    assert fit.inverse(fit.E * 0.99) == math.inf
    two = fit_loss_vs_compute(c[:2], law(E_T, C0_T, c[:2]))
    assert two.kind == "power" and two.E == 0
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_loss_vs_compute(c[:1], [3.0])
    with pytest.raises(FitError, match="does not fall"):
        fit_loss_vs_compute(c[:3], [3.0, 3.1, 3.2])


def test_tie_crossover_within_the_ladder():
    c_cross, e_u = 3e18, 1.95
    c0_u = untied_c0(e_u, c_cross)
    res = fit_tie_ablation(tie_runs(e_u, c0_u), hero_flops=1e22)
    for row in res.scales:
        assert row.adjusted  # compute differed by 15%: matched along each variant's law
        truth = true_diff(e_u, c0_u, row.flops)
        assert row.diff == pytest.approx(truth, abs=0.004)
        assert row.winner == ("tied" if truth > 0 else "untied")
        assert (row.compute_multiplier > 1) == (truth > 0)
    assert [r.winner for r in res.scales] == ["tied", "tied", "tied", "untied", "untied"]
    cross = res.crossover
    assert cross["status"] == "within_range"
    assert cross["flops"] == pytest.approx(c_cross, rel=0.25)
    lo, hi = cross["ci90"]
    assert lo < cross["flops"] < hi and hi / lo < 10
    hero = res.hero
    assert hero["winner"] == "untied" and hero["winner_certain"]
    assert hero["diff"] == pytest.approx(true_diff(e_u, c0_u, 1e22), abs=0.004)
    assert hero["diff_ci90"][0] < hero["diff"] < hero["diff_ci90"][1]
    # effective compute: untied reaches the tied loss with less compute at the hero
    m_true = untied_inverse(e_u, c0_u, law(E_T, C0_T, 1e22)) / 1e22
    assert hero["compute_multiplier"] < 1
    assert hero["compute_multiplier"] == pytest.approx(m_true, rel=0.1)
    lo, hi = hero["compute_multiplier_ci90"]
    assert lo < hero["compute_multiplier"] < hi
    # the log-linear alternative is reported next to it (it over-extrapolates this curved difference)
    assert hero["loglinear"]["diff"] < hero["diff"]
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert {"scales", "trend", "crossover", "hero", "laws"} <= set(d)
    assert {"scale", "flops", "diff", "winner", "compute_multiplier", "loss_tied", "loss_untied"} <= set(d["scales"][0])


def untied_inverse(e_u, c0_u, loss):
    return c0_u * (loss - e_u) ** (-1 / G)


def test_tie_crossover_beyond_the_ladder():
    c_cross, e_u = 1e22, 1.97
    c0_u = untied_c0(e_u, c_cross)
    res = fit_tie_ablation(tie_runs(e_u, c0_u, noise=0.0005), hero_flops=1e23)
    assert all(r.winner == "tied" for r in res.scales)
    assert res.trend.form == "saturating" and res.trend_loglinear is not None
    assert res.crossover["status"] == "beyond_range"
    assert res.crossover["flops"] == pytest.approx(c_cross, rel=0.25)
    assert "below the hero compute" in res.crossover["message"]
    assert res.hero["winner"] == "untied"
    assert res.hero["diff"] == pytest.approx(true_diff(e_u, c0_u, 1e23), abs=0.005)
    assert "loglinear" in res.crossover and "loglinear" in res.hero


@pytest.mark.parametrize("c0_factor", [1.0, 0.9])
def test_no_crossover_says_none(c0_factor):
    # untied's floor is 0.03 higher: a constant gap (same C0) or one that widens (smaller C0)
    e_u = E_T + 0.03
    res = fit_tie_ablation(tie_runs(e_u, C0_T * c0_factor), hero_flops=1e22)
    assert all(r.winner == "tied" for r in res.scales)
    assert res.crossover["status"] == "none"
    assert res.hero["winner"] == "tied"
    assert res.hero["diff"] == pytest.approx(true_diff(e_u, C0_T * c0_factor, 1e22), abs=0.005)
    assert res.hero["compute_multiplier"] is None or res.hero["compute_multiplier"] > 1


def test_gap_that_levels_off_never_crosses():
    """Untied worse at every rung, the gap shrinking towards a positive floor difference: no flip."""
    e_u, c0_u = E_T + 0.01, C0_T * 1.3
    res = fit_tie_ablation(tie_runs(e_u, c0_u, noise=0.0003), hero_flops=1e24)
    assert all(r.winner == "tied" for r in res.scales)
    assert res.crossover["status"] == "none" and "levels off" in res.crossover["message"]
    assert res.hero["winner"] == "tied"


def test_tie_errors_and_reasons():
    df = tie_runs(1.95, untied_c0(1.95, 3e18))
    with pytest.raises(FitError, match="both variants"):
        fit_tie_ablation(df[df["tie_embeddings"]])
    with pytest.raises(FitError, match="tie_embeddings"):
        fit_tie_ablation(df.drop(columns="tie_embeddings"))
    one = df[df["d_model"] == 64]
    res = fit_tie_ablation(one, hero_flops=1e22)
    assert res.trend is None and "at least 2 rungs" in res.reason
    assert res.crossover["status"] == "unknown" and res.hero is None
    assert "no loss-vs-compute law" in res.scales[0].notes[0]
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_tie_ablation(one, require=True)
    lonely = df[~((df["d_model"] == 128) & ~df["tie_embeddings"])]
    res = fit_tie_ablation(lonely)
    skipped = [r for r in res.scales if r.skipped]
    assert len(skipped) == 1 and "no untied run" in skipped[0].skipped
    json.dumps(res.to_dict(), allow_nan=False)


def test_tie_column_as_strings_and_replicates_give_uncertainty():
    df = pd.concat([tie_runs(1.95, untied_c0(1.95, 3e18), seed=s) for s in range(3)], ignore_index=True)
    df["tie_embeddings"] = df["tie_embeddings"].map({True: "true", False: "false"})
    res = fit_tie_ablation(df, hero_flops=1e21)
    assert all(r.n_tied == 3 and r.diff_se is not None for r in res.scales)
    assert res.crossover["status"] == "within_range"


def test_linear_trend_two_points():
    t = fit_linear_trend([1e17, 1e18], [0.02, 0.01])
    assert t.slope == pytest.approx(-0.01) and t.interval(1e20) is None
    s = fit_linear_trend([1e17, 1e18, 1e19], [0.02 + 0.1 * c**-0.1 for c in (1e17, 1e18, 1e19)], g=0.1)
    assert s.form == "saturating" and s(1e30) == pytest.approx(0.02 + 0.1 * 1e-3, abs=1e-9)
    t = fit_linear_trend([1e17, 1e18], [0.02, 0.01], noise=0.002)
    lo, hi = t.interval(1e20)
    assert lo < t(1e20) < hi


# --------------------------------------------------------------------------------------------- depth/width

AR_K, AR_A = 20.0, 0.15  # best aspect = 20 (C / 1e17)^0.15
AR_CURV = 0.04


def best_aspect(c):
    return AR_K * (c / 1e17) ** AR_A


def shape_runs(computes=(1e17, 1e18, 1e19), aspects=(6, 12, 24, 48, 96), *, noise=0.0005, seed=0,
               compute_spread=0.0, shift=None):
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        grid = np.array(aspects, dtype=float) * (shift.get(i, 1.0) if shift else 1.0)
        for ar in grid:
            cr = c * (1 + compute_spread * math.log2(ar / 24))
            loss = law(E_T, C0_T, cr) + AR_CURV * math.log(ar / best_aspect(c)) ** 2 + rng.normal(0, noise)
            n_layers = max(1, round(math.sqrt(cr / 1e11 / 12 / ar)))
            rows.append({"scale": f"r{i}", "params": cr / 1e11, "tokens": 1e11 / 6, "flops": cr, "loss": loss,
                         "aspect_ratio": ar, "d_model": ar * n_layers, "n_layers": n_layers})
    return pd.DataFrame(rows)


def test_depth_width_recovers_best_aspect_and_law():
    res = fit_depth_width(shape_runs(), hero_flops=1e21, hero_params=1e10)
    for row in res.scales:
        assert row.fit.status == "ok"
        assert row.fit.opt == pytest.approx(best_aspect(row.flops), rel=0.05)
        assert min(abs(math.log(row.fit.opt / g)) for g in row.fit.grid) > 0.1  # off-grid
        assert row.fit.penalty_2x == pytest.approx(AR_CURV * math.log(2) ** 2, rel=0.1)
    assert res.aspect.law.a == pytest.approx(AR_A, abs=0.03)
    lo, hi = res.aspect.hero_ci90
    assert lo < res.aspect.hero_value < hi
    assert res.aspect.hero_value == pytest.approx(best_aspect(1e21), rel=0.15)
    assert res.penalty.hero_value == pytest.approx(AR_CURV * math.log(2) ** 2, rel=0.2)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    pts = d["scales"][0]["points"]
    assert {"aspect_ratio", "loss", "loss_compared", "used"} <= set(pts[0])
    assert {"opt", "ci90", "poly", "status"} <= set(d["scales"][0]["fit"])
    assert d["hero"]["aspect_ratio"] == res.aspect.hero_value and d["hero"]["aspect_ratio_from_params"] is not None


def test_depth_width_matches_compute_between_shapes():
    """Deeper shapes get 10% more compute per doubling: uncorrected, the optimum drifts towards them."""
    df = shape_runs(compute_spread=0.1)
    raw = fit_depth_width(df, match_compute=False)
    matched = fit_depth_width(df)
    assert matched.compute_law is not None
    for r, m in zip(raw.scales, matched.scales):
        truth = best_aspect(m.flops)
        assert abs(math.log(m.fit.opt / truth)) < abs(math.log(r.fit.opt / truth))
        assert m.fit.opt == pytest.approx(truth, rel=0.06)


def test_depth_width_edge_and_too_few_shapes():
    df = shape_runs(shift={2: 0.1})  # the largest rung swept only deep, narrow shapes (aspect 0.6-9.6)
    res = fit_depth_width(df, hero_flops=1e21)
    assert res.scales[2].fit.status == "edge" and "widen the sweep" in res.scales[2].fit.message
    assert "r2" in res.aspect.excluded and res.aspect.law.n_points == 2
    few = shape_runs(aspects=(12, 24))
    res = fit_depth_width(few)
    assert all(r.fit is None and "at least 3" in r.skipped for r in res.scales)
    assert res.aspect.law is None and "no depth-vs-width sweep" in res.aspect.reason
    with pytest.raises(FitError, match="no depth-vs-width sweep"):
        fit_depth_width(few, require=True)


def test_depth_width_from_shape_columns():
    df = shape_runs().drop(columns="aspect_ratio")
    res = fit_depth_width(df)
    assert all(r.fit is not None for r in res.scales)
    with pytest.raises(FitError, match="aspect_ratio, or d_model and n_layers"):
        fit_depth_width(df.drop(columns="n_layers"))
