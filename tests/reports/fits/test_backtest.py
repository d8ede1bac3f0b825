"""The pieces every rollout shares (reports/fits/backtest.py), each against a hand-computed case."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ladder.reports.fits.ablations.trend import _paired
from ladder.reports.fits.ablations.trend_forms import EffectData, constant, log_linear
from ladder.reports.fits.backtest import (
    LEVEL,
    calibrate,
    conformal,
    interval,
    mix,
    reach,
    rms_weights,
    side_z,
    weighted_rms,
)


def test_one_level_and_its_central_interval():
    assert LEVEL == 0.90
    lo, hi = interval(np.arange(101.0))
    assert (lo, hi) == pytest.approx((5.0, 95.0))
    lo, hi = interval(np.arange(101.0)[:, None] * [1.0, 2.0], axis=0)
    assert lo == pytest.approx([5.0, 10.0]) and hi == pytest.approx([95.0, 190.0])
    assert interval(np.arange(10.0), method="inverted_cdf") == (0.0, 9.0)  # ends that are draws


def test_the_conformal_quantile_is_the_ceil_m_plus_1_level_th_smallest():
    assert conformal([5, 3, 1, 4, 2], 0.5) == 3.0  # ceil(6 * 0.5) = 3rd smallest
    assert conformal(np.arange(1.0, 11.0)) == 10.0  # ceil(11 * 0.9) = 10th of 10
    assert conformal(np.arange(1.0, 21.0)) == 19.0  # ceil(21 * 0.9) = 19th of 20
    assert conformal([0.2, 0.1, 0.3]) == 0.3  # ceil(4 * 0.9) = 4th of 3: the largest


def test_side_z_reads_the_half_width_on_the_errors_side_with_a_floor():
    assert side_z(1.5, 1.0, 0.0, 1.25, 1e-3) == pytest.approx(2.0)  # above: the upper half-width 0.25
    assert side_z(0.5, 1.0, 0.0, 1.25, 1e-3) == pytest.approx(0.5)  # below: the lower half-width 1.0
    assert side_z(1.01, 1.0, 1.0, 1.0, 1e-3) == pytest.approx(10.0)  # a zero width is judged 1e-3 wide


def test_calibration_widens_exactly_when_the_binomial_test_says_short():
    assert calibrate([]) == (None, 1.0)
    rng = np.random.default_rng(0)
    for n in (6, 20, 60):
        for k in range(n + 1):
            z = np.r_[rng.uniform(0, 1, k), rng.uniform(1.01, 3, n - k)]
            coverage, factor = calibrate(z)
            assert coverage == pytest.approx(k / n)
            short = k / n < LEVEL and stats.binom.cdf(k, n, LEVEL) < 0.05
            assert (factor > 1.0) == short, (n, k)
            if short:
                assert factor == conformal(z)
            else:
                assert factor == 1.0
    # 8 of 10 covered is what calibrated 90% intervals do 26% of the time: no widening
    assert calibrate([0.5] * 8 + [2.0, 3.0]) == (0.8, 1.0)
    # 15 of 20 (p = 0.043): widened to the 19th smallest z
    assert calibrate([0.5] * 15 + [1.5, 2.0, 2.5, 3.0, 4.0]) == (0.75, 3.0)


def test_the_paired_mix_of_identical_forms_is_one_forms_draws():
    d = np.random.default_rng(1).normal(2.0, 0.1, 500)
    point, mixed = mix({"a": d, "b": d.copy()}, {"a": 2.0, "b": 2.0}, {"a": 0.3, "b": 0.7}, np.random.default_rng(0))
    assert point == pytest.approx(2.0, abs=1e-15)
    np.testing.assert_allclose(mixed, d, rtol=0, atol=1e-14)
    curves = np.random.default_rng(2).normal(0.0, 0.1, (300, 4))
    point, mixed = mix(
        {"a": curves, "b": curves}, {"a": np.zeros(4), "b": np.zeros(4)}, {"a": 1, "b": 1}, np.random.default_rng(0)
    )
    np.testing.assert_allclose(mixed, curves, rtol=0, atol=1e-15)
    assert mix({"a": d}, {"a": 2.0}, {"a": 0.0}, np.random.default_rng(0)) is None
    with pytest.raises(ValueError, match="not paired"):
        mix({"a": d, "b": d[:10]}, {"a": 2.0, "b": 2.0}, {"a": 1, "b": 1}, np.random.default_rng(0))


def test_the_paired_mix_adds_only_the_disagreement_beyond_noise():
    noise = np.random.default_rng(3).normal(0, 0.01, 4000)
    # two forms 1.0 apart whose shared noise is tiny: almost all of the disagreement is added
    point, mixed = mix({"a": noise, "b": 1.0 + noise}, {"a": 0.0, "b": 1.0}, {"a": 1, "b": 1}, np.random.default_rng(0))
    assert point == 0.5
    lo, hi = interval(mixed)
    assert lo < 0.05 and hi > 0.95
    # the same centres from independent wide noise: the disagreement is what noise alone puts between them
    wide = np.random.default_rng(4).normal(0, 2.0, (2, 4000))
    _, mixed = mix({"a": wide[0], "b": 1.0 + wide[0]}, {"a": 0.0, "b": 1.0}, {"a": 1, "b": 1}, np.random.default_rng(0))
    assert np.std(mixed) == pytest.approx(math.sqrt(4.0 + 0.25), rel=0.05)  # noise + the excess, paired


def test_unpaired_draws_are_pooled_each_row_one_forms_own_draw():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 1, 1000), rng.normal(10, 1, 1000)
    point, mixed = mix(
        {"a": a, "b": b}, {"a": 0.0, "b": 10.0}, {"a": 0.25, "b": 0.75}, np.random.default_rng(0), paired=False
    )
    assert point == pytest.approx(7.5)
    from_a = mixed < 5
    assert set(mixed[from_a]) <= set(a) and set(mixed[~from_a]) <= set(b)
    np.testing.assert_array_equal(mixed[from_a], a[from_a])  # row i is the picked form's draw i
    assert from_a.mean() == pytest.approx(0.25, abs=0.05)


def test_the_engine_trends_draws_are_paired_and_others_are_not():
    c = np.geomspace(1e17, 1e20, 6)
    y = 0.02 + np.random.default_rng(6).normal(0, 0.002, 6)
    data = EffectData(c, y, [str(i) for i in range(6)], noise=0.002)
    fits = {f.key: f.fit(data, n_boot=60, seed=7) for f in (constant(), log_linear())}
    assert _paired(fits, list(fits)) and not _paired({**fits, "other": object()}, [*fits, "other"])
    devs = [fits[k].draws(np.array([1e21]), n_draws=2000, seed=8, noise=True, sigma_floor=0.002) for k in fits]
    r = np.corrcoef(devs[0][1][:, 0], devs[1][1][:, 0])[0, 1]
    assert r > 0.5  # the same replicates and the same new-run noise


def test_weights_are_inverse_squared_rms_within_twice_the_best_with_a_floor():
    w, dropped = rms_weights({"a": 1.0, "b": 1.5, "c": 3.0}, 1e-3)
    assert dropped == ["c"]
    assert w["a"] == pytest.approx(1 / (1 + 1 / 2.25)) and w["b"] == pytest.approx((1 / 2.25) / (1 + 1 / 2.25))
    w, dropped = rms_weights({"a": 1e-6, "b": 1.9e-3}, 1e-3)  # both below twice the floor: equal-ish, none out
    assert not dropped and w["a"] == pytest.approx(1 / (1 + 1 / 3.61))


def test_the_distance_weighted_rms():
    assert weighted_rms([1.0, 2.0], [0.0, 1.0]) == pytest.approx(math.sqrt((1e-3 + 4.0) / 1.001))
    assert weighted_rms([3.0, 1.0], [2.0, 2.0]) == pytest.approx(math.sqrt(5.0))


def test_reach_stops_at_the_first_failure():
    rows = [{"x": x, "ok": ok} for x, ok in [(16, True), (2, True), (8, False), (4, True)]]
    assert reach(rows, "x", lambda r: r["ok"]) == 4  # 16 passed, but beyond the failure at 8
    assert reach(rows, "x", lambda r: r["x"] > 2) == 1.0  # the nearest failed: the start
    assert reach(rows, "x", lambda r: r["x"] > 2, start=None) is None
    assert reach([], "x", lambda r: True) == 1.0
    assert reach(rows, "x", lambda r: True) == 16


def test_reach_is_never_below_its_start_when_near_rows_pass():
    from ladder.reports.fits.backtest import reach

    rows = [{"x": 0.7, "ok": True}, {"x": 2.0, "ok": True}, {"x": 5.0, "ok": False}]
    assert reach(rows, "x", lambda r: r["ok"]) == 2.0
    assert reach(rows[:1], "x", lambda r: r["ok"]) == 1.0  # a row inside the span (0.7x) never lowers it
    assert reach([{"x": 0.7, "ok": False}], "x", lambda r: r["ok"]) == 1.0
