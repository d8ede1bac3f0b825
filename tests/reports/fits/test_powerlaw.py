"""Power laws: recovery, honest intervals at 2-5 points, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ladder.errors import FitError
from ladder.reports.fits.powerlaw import PowerLaw, fit_power_law


def test_recovers_exact_law():
    x = np.array([1e17, 1e18, 1e19, 1e20])
    law = fit_power_law(x, 3.0 * x**-0.25)
    assert law.k == pytest.approx(3.0, rel=1e-9)
    assert law.a == pytest.approx(-0.25, abs=1e-12)
    assert law.n_points == 4
    assert law(1e21) == pytest.approx(3.0 * 1e21**-0.25)
    lo, hi = law.interval(1e22)
    assert lo == pytest.approx(hi, rel=1e-9)  # no scatter, no width


def test_t_intervals_cover_at_four_points():
    """90% intervals of the exponent and of the extrapolation cover the truth ~90% of the time."""
    rng = np.random.default_rng(0)
    x = np.array([1e16, 1e17, 1e18, 1e19])
    hit_a = hit_pred = 0
    n = 400
    for _ in range(n):
        y = 2e-2 * x**-0.1 * np.exp(rng.normal(0, 0.05, len(x)))
        law = fit_power_law(x, y, n_boot=0)
        lo, hi = law.ci90["a"]
        hit_a += lo <= -0.1 <= hi
        plo, phi = law.interval(1e21)
        hit_pred += plo <= 2e-2 * 1e21**-0.1 <= phi
    assert 0.85 <= hit_a / n <= 0.95
    assert 0.85 <= hit_pred / n <= 0.95


def test_three_points_have_a_wide_not_degenerate_interval():
    x = np.array([1e17, 1e18, 1e19])
    y = 5.0 * x**0.3 * np.exp([0.02, -0.03, 0.01])
    law = fit_power_law(x, y)
    assert law.method == "t" and law.dof == 1
    lo, hi = law.ci90["a"]
    assert lo < 0.3 < hi
    assert hi - lo > 0.05  # one residual degree of freedom: t_{0.95,1} = 6.3
    assert law.boot is not None and law.boot.shape == (1000, 2)
    # interval widens with extrapolation
    w = [math.log(law.interval(c)[1] / law.interval(c)[0]) for c in (1e18, 1e20, 1e22)]
    assert w[0] < w[1] < w[2]


def test_draws_match_the_analytic_interval_and_a_swapped_bootstrap_wins():
    from dataclasses import replace

    rng = np.random.default_rng(2)
    x = np.array([1e16, 1e17, 1e18, 1e19, 1e20])
    y = x**-0.2 * np.exp(rng.normal(0, 0.05, len(x)))
    exact = fit_power_law(x, y, n_boot=0).interval(1e22)
    drawn = fit_power_law(x, y, n_boot=4000).interval(1e22)
    assert drawn[0] == pytest.approx(exact[0], rel=0.05) and drawn[1] == pytest.approx(exact[1], rel=0.05)
    law = fit_power_law(x, y, n_boot=0)
    fixed = replace(law, boot=np.array([[math.log(law.k), -0.2]] * 10))
    lo, hi = fixed.interval(1e22)
    assert lo == pytest.approx(hi) == pytest.approx(law.k * 1e22**-0.2)


def test_two_points_exact_unless_sigma_known():
    x, y = np.array([1e17, 1e18]), np.array([2e-3, 1.6e-3])
    law = fit_power_law(x, y)
    assert law.method == "none" and law.ci90 == {}
    assert law.interval(1e20)[0] == law.interval(1e20)[1]
    known = fit_power_law(x, y, log_sigma=np.array([0.05, 0.05]))
    assert known.method == "known"
    lo, hi = known.interval(1e20)
    assert lo < known(1e20) < hi


def test_known_sigma_inflates_when_scatter_exceeds_it():
    x = np.array([1e16, 1e17, 1e18, 1e19, 1e20])
    y = x**0.2 * np.exp([0.1, -0.1, 0.1, -0.1, 0.1])
    tight = fit_power_law(x, y, log_sigma=0.001)
    assert tight.chi2_red > 1 and tight.dof == 3
    loose = fit_power_law(x, y, log_sigma=1.0)
    assert loose.dof == math.inf


def test_cases_bootstrap_still_available():
    rng = np.random.default_rng(1)
    x = np.geomspace(1e16, 1e20, 9)
    y = x**0.5 * np.exp(rng.normal(0, 0.02, len(x)))
    law = fit_power_law(x, y, method="cases", n_boot=200)
    assert law.method == "cases"
    assert law.ci90["a"][0] < 0.5 < law.ci90["a"][1]


def test_to_dict_is_json():
    law = fit_power_law(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.5, 2.1]))
    d = law.to_dict()
    json.dumps(d, allow_nan=False)
    assert set(d) >= {"k", "a", "n_points", "ci90"}
    assert isinstance(d["ci90"]["a"], list)
    two = fit_power_law(np.array([1.0, 2.0]), np.array([1.0, 1.5])).to_dict()
    json.dumps(two, allow_nan=False)
    assert isinstance(law, PowerLaw)


@pytest.mark.parametrize(
    ("x", "y", "kw", "msg"),
    [
        ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], {}, "at least 2 distinct"),
        ([1.0, 2.0], [1.0, -2.0], {}, "positive"),
        ([1.0, 2.0], [1.0], {}, "same length"),
        ([1.0, 2.0], [1.0, 2.0], {"weights": [1, 1], "log_sigma": [1, 1]}, "not both"),
        ([1.0, 2.0], [1.0, 2.0], {"method": "jackknife"}, "unknown interval method"),
    ],
)
def test_errors(x, y, kw, msg):
    with pytest.raises(FitError, match=msg):
        fit_power_law(np.array(x), np.array(y), what="LR vs C", **kw)
