"""The lean of the rollout's forecasts, judged near a forecast's distance."""

from __future__ import annotations

import numpy as np
import pytest

from ladder.reports.fits.loss.loss_lean import LEAN_BAND, LEAN_MIN_N, lean_near


def test_the_lean_is_judged_on_the_rollout_rows_near_the_forecasts_distance():
    """Li et al.'s best-LR ladder: the rollout's rows at 16-267x erred -10% on average, so all 197 "ran low" (141
    of them) and the 1B runs, 1.9x and 3.8x beyond the fit, were said to "probably run low too"; the rows at 1-4x
    leaned neither way, and the 1B forecasts erred +1.4% and +3.0%. Rows here: unbiased within 4x, -10% at
    16-64x. The lean is judged within a factor 2 of the forecast's distance, or of the farthest tested beyond it."""
    rng = np.random.default_rng(0)
    near = [{"distance": np.log(x), "err_pct": e} for x, e in zip(np.geomspace(1.1, 4, 40), rng.normal(0, 1, 40))]
    far = [{"distance": np.log(x), "err_pct": -10 + e} for x, e in zip(np.geomspace(16, 64, 30), rng.normal(0, 1, 30))]
    rows = near + far
    at_2x = lean_near(rows, np.log(2.0))
    assert at_2x["direction"] is None and abs(at_2x["mean_err_pct"]) < 1, at_2x
    assert at_2x["n"] == len(near) and at_2x["of"] == len(rows)  # 1.1-4x: within 2x of 2x
    assert at_2x["min_distance_x"] >= 1 and at_2x["max_distance_x"] <= 2 * LEAN_BAND
    at_32x = lean_near(rows, np.log(32.0))
    assert at_32x["direction"] == "low" and at_32x["n"] == len(far) and at_32x["mean_err_pct"] < -8, at_32x
    beyond = lean_near(rows, np.log(1000.0))  # judged at the farthest distance tested, 64x: its rows lie within 2x
    assert beyond["direction"] == "low" and 0 < beyond["n"] < len(far) and beyond["distance_x"] == pytest.approx(1000)
    assert beyond["min_distance_x"] >= 32 * 0.999


def test_too_few_rows_near_the_distance_are_joined_by_the_nearest_others():
    """The main job: 4 rollout rows lie within 2x of the farthest distance tested (8.3-16.6x; the hero is at
    31.7x), all too high, +1.8%: p = 0.125, which no sign test calls a lean, where the 10 nearest (4-16.6x, 9 of
    10 too high, p = 0.02) do."""
    near = [{"distance": np.log(x), "err_pct": 1.8} for x in (9.0, 11.0, 13.0, 16.0)]
    nearer = [
        {"distance": np.log(x), "err_pct": e} for x, e in zip((4.0, 4.5, 5.0, 6.0, 6.5, 7.0), (2, 2, -0.5, 1, 3, 2))
    ]
    nearest = [{"distance": np.log(x), "err_pct": -1.0} for x in (1.2, 1.5, 2.0)]
    got = lean_near(near + nearer + nearest, np.log(31.7))
    assert got["n"] == LEAN_MIN_N and got["n_high"] == 9 and got["direction"] == "high", got
    assert got["min_distance_x"] == pytest.approx(4.0) and got["max_distance_x"] == pytest.approx(16.0)


def test_the_band_of_rows_is_said_once_when_its_ends_are_one():
    """A 5-size runs table whose one rollout row lay at 2x printed "mean error -1.3%, 0 of 1 too high at 2x-2x"."""
    from ladder.reports.fits.study.study_hero import farthest_span  # as the far error's distances are said

    assert farthest_span(lean_near([{"distance": np.log(2.0), "err_pct": -1.3}], np.log(3.0))) == " at 2x"
    assert farthest_span({"min_distance_x": 1.1354, "max_distance_x": 4.5112}) == " at 1.14-4.51x"
    assert farthest_span({"n": 3, "n_high": 1}) == ""  # judged on every row, before 2026-12: no band to say


def test_the_targets_distance_is_measured_in_floats_whatever_the_counts_type():
    """A target given as numpy int64 counts (a table's integer columns) overflowed 6ND in numpy's integers, so the
    lean was judged at a distance that was no distance (RuntimeWarning: overflow encountered in scalar multiply)."""
    import warnings

    from ladder.reports.fits.loss.loss_forecast import _multiples
    from ladder.reports.fits.runs import Runs

    ladder = Runs([1e9, 2e9, 4e9], [2e10, 4e10, 8e10], [3.0, 2.8, 2.6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _multiples(ladder, np.int64(400_000_000_000), np.int64(8_000_000_000_000))
    assert got == pytest.approx((100.0, 100.0, 10_000.0))
