"""Ablations recover known truths: where the tie winner flips (inside and beyond the ladder), that a constant
gap never flips, the effective-compute multiplier, and the best aspect ratio's trend; and they stay honest
about distance (never "certain" beyond what the rollout tested)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ladder.errors import FitError
from ladder.reports.fits.ablations import fit_depth_width, fit_tie_ablation
from ladder.reports.fits.ablations.variant_laws import (
    fit_law,
    fit_pair,
    law_unidentifiable,
    slope,
)
from tests.parallel import map_reps

G = 0.1
E_T, C0_T = 2.0, 1e17 * 1.5**10  # tied: L = E + (C0 / C)^G, 3.5 at 1e17
LADDER = np.geomspace(1e16, 1e19, 7)
BOOT = 30


def tied_loss(c):
    return E_T + (C0_T / np.asarray(c, dtype=float)) ** G


def tie_runs(untied, computes=LADDER, *, noise=0.001, seed=0, seed_column=False):
    """Both variants at every rung (same shape, same tokens, the same FLOPs: the LM head runs either way);
    ``untied(c)`` is the untied loss; multiplicative noise of sd ``noise`` in ln loss."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        for tied in (True, False):
            loss = float(tied_loss(c)) if tied else float(untied(c))
            row = {
                "params": c / 1e11,
                "tokens": 1e11 / 6,
                "flops": c,
                "loss": loss * math.exp(rng.normal(0, noise)),
                "tie_embeddings": tied,
                "d_model": 64 * (i + 1),
                "n_layers": 2 + i,
            }
            if seed_column:
                row["seed"] = seed
            rows.append(row)
    return pd.DataFrame(rows)


def log_gap(b, c_cross):
    """Untied loss whose gap ln L_u - ln L_t = b ln(C / c_cross): crosses zero at c_cross."""
    return lambda c: float(tied_loss(c)) * math.exp(b * math.log(c / c_cross))


def test_variant_law_recovery_and_slope():
    c = np.geomspace(1e16, 1e20, 5)
    law = fit_law(c, tied_loss(c), n_boot=20, seed=0)
    p = law.params
    assert p["E"] == pytest.approx(E_T, rel=0.02) and p["alpha"] == pytest.approx(G, rel=0.05)
    s, boot = slope(law, 3e18)
    truth = -G * (C0_T / 3e18) ** G / float(tied_loss(3e18))
    assert s == pytest.approx(truth, rel=0.02) and len(boot) == 20
    two = fit_law(c[:2], tied_loss(c[:2]), n_boot=0, seed=0)
    assert set(two.params) == {"a", "b"} and two.params["b"] < 0  # a pure power law through 2 rungs
    assert fit_law(c[:1], tied_loss(c[:1]), n_boot=0, seed=0) is None
    assert "needs >= 4" in law_unidentifiable(c[:3], tied_loss(c[:3]))


def test_the_pair_law_shares_the_floor_and_the_exponent():
    """Untied = tied at 1.3x the compute: L_u = E + A (C / 1.3)^-G, so A_u / A_t = 1.3^G."""
    c = np.geomspace(1e16, 1e20, 5)
    law = fit_pair(c, tied_loss(c), c, tied_loss(c / 1.3), n_boot=20, seed=0)
    p = law.params
    assert p["E"] == pytest.approx(E_T, rel=0.02) and p["alpha"] == pytest.approx(G, rel=0.05)
    assert (p["A_b"] / p["A_a"]) ** (1 / p["alpha"]) == pytest.approx(1.3, rel=0.02)
    s, _ = slope(law, 3e18, 1.0)
    assert s == pytest.approx(-G * (C0_T * 1.3 / 3e18) ** G / float(tied_loss(3e18 / 1.3)), rel=0.02)
    assert fit_pair(c[:2], tied_loss(c[:2]), c, tied_loss(c), n_boot=0, seed=0) is None  # 2 computes: no law


def test_tie_crossover_within_the_ladder():
    c_cross = 3e17
    untied = log_gap(0.004, c_cross)
    res = fit_tie_ablation(tie_runs(untied), hero_flops=1e21, n_boot=BOOT)
    for row in res.scales:
        assert row.flops == row.flops_tied == row.flops_untied  # matched in compute exactly
        truth = 0.004 * math.log(row.flops / c_cross)
        assert row.gap == pytest.approx(truth, abs=0.004)
        if abs(truth) > 0.005:
            assert row.winner == ("tied" if truth > 0 else "untied")
            assert (row.compute_multiplier > 1) == (truth > 0)
    cross = res.crossover
    assert cross["status"] == "within_range", cross["message"]
    assert cross["flops"] == pytest.approx(c_cross, rel=0.5)
    lo, hi = cross["ci90"]
    assert lo < c_cross < hi and hi / lo < 10
    hero = res.hero
    truth = 0.004 * math.log(1e21 / c_cross)
    assert hero["winner"] == "tied"
    assert hero["gap_ci90"][0] < truth < hero["gap_ci90"][1]
    assert hero["gap"] == pytest.approx(truth, abs=0.01)
    assert hero["compute_multiplier"] > 1
    assert hero["compute_multiplier_ci90"][0] < hero["compute_multiplier"] < hero["compute_multiplier_ci90"][1]
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert {"scales", "trend", "band", "crossover", "hero", "laws", "noise"} <= set(d)
    assert {"scale", "flops", "gap", "gap_se", "winner", "compute_multiplier", "loss_tied", "loss_untied"} <= set(
        d["scales"][0]
    )
    assert {"constant", "loglinear", "power", "variant_laws"} <= set(d["trend"]["forms"])


def test_tie_crossover_beyond_the_ladder_is_stated_with_an_interval_and_not_certain():
    c_cross = 3e19  # 3x beyond the largest rung; the hero 1e4x beyond it, far past any rollout
    stated = covered = 0
    for seed in range(5):  # noisy repetitions: the flip is stated in most, its interval covers the truth in most
        r = fit_tie_ablation(tie_runs(log_gap(0.004, c_cross), seed=seed), hero_flops=1e23, n_boot=BOOT)
        if r.crossover["status"] == "beyond_range":
            stated += 1
            lo, hi = r.crossover["ci90"]
            covered += lo < c_cross and (hi is None or c_cross < hi)
    assert stated >= 4 and covered >= 3, (stated, covered)
    res = fit_tie_ablation(tie_runs(log_gap(0.004, c_cross)), hero_flops=1e23, n_boot=BOOT)
    assert all(r.winner == "untied" for r in res.scales)
    cross = res.crossover
    assert cross["below_hero"] and "below the hero's compute" in cross["message"]
    hero = res.hero
    assert hero["winner"] == "tied"  # the flip: the rungs' winner is not the hero's
    assert not hero["within_reach"] and hero["compute_x"] > hero["reach_compute_x"]
    assert hero["call"] != "certain"
    assert "the rollout showed" in hero["message"]


@pytest.mark.parametrize("c0_factor", [1.0, 0.9])
def test_no_crossover_says_none(c0_factor):
    # untied's floor is 0.03 higher: a constant gap in loss (same C0) or one that widens (smaller C0)
    def untied(c):
        return E_T + 0.03 + (C0_T * c0_factor / c) ** G

    res = fit_tie_ablation(tie_runs(untied), hero_flops=1e21, n_boot=BOOT)
    assert all(r.winner == "tied" for r in res.scales)
    assert res.crossover["status"] == "none"
    assert res.hero["winner"] == "tied"
    # 100x beyond the ladder the trend forms only approximate this saturating gap (truth ~0.009-0.011)
    truth = math.log(untied(1e21) / float(tied_loss(1e21)))
    assert 0.5 * truth < res.hero["gap"] < 2.5 * truth
    assert res.hero["compute_multiplier"] is None or res.hero["compute_multiplier"] > 1


def test_gap_that_levels_off_never_crosses():
    """Untied worse at every rung, the gap shrinking towards a positive floor difference: no flip."""

    def untied(c):
        return E_T + 0.01 + (C0_T * 1.3 / c) ** G

    res = fit_tie_ablation(tie_runs(untied, noise=0.0003), hero_flops=1e22, n_boot=BOOT)
    assert all(r.winner == "tied" for r in res.scales)
    assert res.crossover["status"] == "none" and "no " in res.crossover["message"]
    assert res.hero["winner"] == "tied"


def _constant_gap_call(s, n_boot):
    return fit_tie_ablation(
        tie_runs(lambda c: float(tied_loss(c)) * math.exp(0.006), noise=0.003, seed=s),
        hero_flops=1e21,
        n_boot=n_boot,
        seed=s,
    )


def _constant_gap_calls(seeds, n_boot):
    return map_reps(_constant_gap_call, [(s, n_boot) for s in seeds])


def test_a_constant_gap_never_reports_a_flip():
    """A smoke test of 3 repetitions: benchmarks/bench_ablation_flips.py repeats it 40 times (no flip stated, no
    certain call for untied, tied the hero's winner in at least 30 of 40)."""
    results = _constant_gap_calls(range(3), 30)
    for res in results:
        assert res.crossover["status"] not in ("within_range", "beyond_range"), res.crossover["message"]
        assert not (res.hero["winner"] == "untied" and res.hero["call"] == "certain")
    assert sum(r.hero["winner"] == "tied" for r in results) >= 2


@pytest.mark.parametrize("m0", [1.3, 0.7])
def test_the_multiplier_recovers_a_known_compute_multiplier(m0):
    """Untied needs m0 times the compute for the tied loss: L_u(C) = L_t(C / m0)."""
    res = fit_tie_ablation(tie_runs(lambda c: float(tied_loss(c / m0)), noise=0.0005), hero_flops=1e21, n_boot=BOOT)
    for row in res.scales:  # one rung's gap carries its noise: 0.0007 in ln L is ~2% in ln m
        assert row.compute_multiplier == pytest.approx(m0, rel=0.1)
    assert np.median([r.compute_multiplier for r in res.scales]) == pytest.approx(m0, rel=0.03)
    h = res.hero  # 100x beyond the ladder: the gap's extrapolation error (~0.001) is ~5% in m
    assert h["compute_multiplier"] == pytest.approx(m0, rel=0.1)
    lo, hi = h["compute_multiplier_ci90"]
    assert lo < m0 < hi
    assert f"untied reaches tied's loss with {h['compute_multiplier']:.3g}x" in h["message"]


def test_tie_errors_and_reasons():
    df = tie_runs(log_gap(0.004, 3e17))
    with pytest.raises(FitError, match="both variants"):
        fit_tie_ablation(df[df["tie_embeddings"]])
    with pytest.raises(FitError, match="tie_embeddings"):
        fit_tie_ablation(df.drop(columns="tie_embeddings"))
    one = df[df["d_model"] == 64]
    res = fit_tie_ablation(one, hero_flops=1e22, n_boot=BOOT)
    assert res.trend is None and "at least 2 rungs" in res.reason
    assert res.crossover["status"] == "unknown" and res.hero is None
    assert any("no loss-vs-compute law" in n for n in res.notes)
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_tie_ablation(one, require=True)
    lonely = df[~((df["d_model"] == 128) & ~df["tie_embeddings"])]
    res = fit_tie_ablation(lonely, n_boot=BOOT)
    skipped = [r for r in res.scales if r.skipped]
    assert len(skipped) == 1 and "no untied run" in skipped[0].skipped
    json.dumps(res.to_dict(), allow_nan=False)


def test_two_rungs_give_no_rollout_and_no_certainty():
    res = fit_tie_ablation(tie_runs(lambda c: float(tied_loss(c)) * 1.02, LADDER[:2]), hero_flops=1e20, n_boot=BOOT)
    assert list(res.trend.fits) == ["constant"]
    assert "no rollout forecasts" in res.trend.why
    assert res.hero["winner"] == "tied" and res.hero["call"] != "certain"


def test_tie_column_as_strings_and_replicates_give_the_noise():
    df = pd.concat([tie_runs(log_gap(0.004, 3e17), seed=s, seed_column=True) for s in range(3)], ignore_index=True)
    df["tie_embeddings"] = df["tie_embeddings"].map({True: "true", False: "false"})
    res = fit_tie_ablation(df, hero_flops=1e21, n_boot=BOOT)
    assert all(r.n_tied == 3 and r.gap_se is not None for r in res.scales)
    assert res.noise["source"] == "seed replicates" and res.noise["sd_log_loss"] == pytest.approx(0.001, rel=0.4)
    assert res.scales[0].gap_se == pytest.approx(res.noise["sd_log_loss"] * math.sqrt(2 / 3))
    assert res.crossover["status"] == "within_range"


# --------------------------------------------------------------------------------------------- depth/width

AR_K, AR_A = 20.0, 0.15  # best aspect = 20 (C / 1e17)^0.15
AR_CURV = 0.04


def best_aspect(c):
    return AR_K * (c / 1e17) ** AR_A


def law(e, c0, c):
    return e + (c0 / c) ** G


def shape_runs(
    computes=(1e16, 1e17, 1e18, 1e19, 1e20),
    aspects=(6, 12, 24, 48, 96),
    *,
    noise=0.0005,
    seed=0,
    compute_spread=0.0,
    shift=None,
):
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        grid = np.array(aspects, dtype=float) * (shift.get(i, 1.0) if shift else 1.0)
        for ar in grid:
            cr = c * (1 + compute_spread * math.log2(ar / 24))
            loss = law(E_T, C0_T, cr) + AR_CURV * math.log(ar / best_aspect(c)) ** 2 + rng.normal(0, noise)
            n_layers = max(1, round(math.sqrt(cr / 1e11 / 12 / ar)))
            rows.append(
                {
                    "scale": f"r{i}",
                    "params": cr / 1e11,
                    "tokens": 1e11 / 6,
                    "flops": cr,
                    "loss": loss,
                    "aspect_ratio": ar,
                    "d_model": ar * n_layers,
                    "n_layers": n_layers,
                }
            )
    return pd.DataFrame(rows)


def test_depth_width_recovers_best_aspect_and_its_trend():
    res = fit_depth_width(shape_runs(), hero_flops=1e22, n_boot=BOOT)
    for row in res.scales:
        assert row.fit.status == "ok"
        assert row.fit.opt == pytest.approx(best_aspect(row.flops), rel=0.05)
        assert min(abs(math.log(row.fit.opt / g)) for g in row.fit.grid) > 0.1  # off-grid
        assert row.fit.penalty_2x == pytest.approx(AR_CURV * math.log(2) ** 2, rel=0.1)
        assert row.fit.ci90[0] < row.fit.opt < row.fit.ci90[1]
    assert res.aspect.primary == "power"
    assert res.aspect.fits["power"].law.params["b"] == pytest.approx(AR_A, abs=0.03)
    h = res.hero
    lo, hi = h["aspect_ratio_ci90"]
    assert lo < best_aspect(1e22) < hi
    assert h["aspect_ratio"] == pytest.approx(best_aspect(1e22), rel=0.1)
    assert h["penalty_2x"] == pytest.approx(AR_CURV * math.log(2) ** 2, rel=0.2)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    pts = d["scales"][0]["points"]
    assert {"aspect_ratio", "loss", "loss_compared", "used"} <= set(pts[0])
    assert {"opt", "ci90", "poly", "status"} <= set(d["scales"][0]["fit"])
    assert d["hero"]["aspect_ratio"] == h["aspect_ratio"] and d["aspect_band"]["point"]


def test_three_rungs_cannot_backtest_a_power_law_and_say_so():
    res = fit_depth_width(shape_runs(computes=(1e17, 1e18, 1e19)), hero_flops=1e21, n_boot=BOOT)
    assert res.aspect.weights == {"constant": 1.0}  # the power law has no rollout forecast to earn weight
    assert not res.hero["within_reach"] and "beyond" in res.hero["message"]
    lo, hi = res.hero["aspect_ratio_ci90"]
    assert lo < best_aspect(1e21) < hi  # the calibrated interval still covers the truth


def test_depth_width_matches_compute_between_shapes():
    """Deeper shapes get 10% more compute per doubling: uncorrected, the optimum drifts towards them."""
    df = shape_runs(computes=(1e17, 1e18, 1e19), compute_spread=0.1)
    raw = fit_depth_width(df, match_compute=False, n_boot=BOOT)
    matched = fit_depth_width(df, n_boot=BOOT)
    assert matched.compute_law is not None
    for r, m in zip(raw.scales, matched.scales):
        truth = best_aspect(m.flops)
        assert abs(math.log(m.fit.opt / truth)) < abs(math.log(r.fit.opt / truth))
        assert m.fit.opt == pytest.approx(truth, rel=0.06)


def test_depth_width_edge_and_too_few_shapes():
    df = shape_runs(computes=(1e17, 1e18, 1e19), shift={2: 0.1})  # the largest rung swept only deep shapes
    res = fit_depth_width(df, hero_flops=1e21, n_boot=BOOT)
    assert res.scales[2].fit.status == "edge" and "widen the sweep" in res.scales[2].fit.message
    assert "r2" in res.excluded and len(res.aspect.data) == 2
    few = shape_runs(aspects=(12, 24))
    res = fit_depth_width(few, n_boot=BOOT)
    assert all(r.fit is None and "at least 3" in r.skipped for r in res.scales)
    assert res.aspect is None and "no depth-vs-width sweep" in res.reason
    with pytest.raises(FitError, match="no depth-vs-width sweep"):
        fit_depth_width(few, require=True)


def test_depth_width_from_shape_columns():
    df = shape_runs(computes=(1e17, 1e18, 1e19)).drop(columns="aspect_ratio")
    res = fit_depth_width(df, n_boot=BOOT)
    assert all(r.fit is not None for r in res.scales)
    with pytest.raises(FitError, match="aspect_ratio, or d_model and n_layers"):
        fit_depth_width(df.drop(columns="n_layers"))


def test_the_crossover_gives_its_compute_as_flops_are_written_everywhere():
    """User retrial (issue 28): the report's tied-vs-untied table said "the trend keeps untied ahead up to
    C = 6.31e+14" where every other compute in the CLI and the report reads 6.31e13 (the hero's "6.31e13 FLOPs")."""
    from ladder.reports.render.fmt import fmt_flops

    def untied(c):
        return E_T + 0.01 + (C0_T * 1.3 / c) ** G

    res = fit_tie_ablation(tie_runs(untied, noise=0.0003), hero_flops=1e22, n_boot=BOOT)
    msg = res.crossover["message"]
    assert "e+" not in msg, msg
    assert f"C = {fmt_flops(res.crossover['search_limit'])}" in msg, msg


def test_a_one_rung_depth_sweep_says_why_without_a_dangling_colon():
    """A depth-vs-width sweep at one size said "a trend needs bracketed optima at 2 or more rungs, only r0 has one: "
    with nothing after the colon: no other rung was left out to name."""
    res = fit_depth_width(shape_runs(computes=(1e18,)), hero_flops=1e21, n_boot=BOOT)
    assert res.aspect is None and res.reason.endswith("only r0 has one"), res.reason
