"""The one fitting engine: every form recovers known constants, the search is global (it finds the known optimum
from random starts), and the bootstrap refits start afresh and give intervals that cover the truth."""

from __future__ import annotations

import numpy as np
import pytest

from ladder.reports.fits.engine import Bounded, Linear, PowerSum, ScaledPower, fit
from ladder.reports.fits.engine.solve import bootstrap, search
from ladder.reports.fits.loss.loss_forms import LOSS_FORMS

# Epoch AI's full-data constants for Chinchilla (Besiroglu et al. 2024)
E, A, B, ALPHA, BETA = 1.82, 482.0, 2085.0, 0.348, 0.366
SIZES = np.geomspace(1e7, 4e8, 7)
N = np.repeat(SIZES, 3)
D = N * np.tile([5.0, 20.0, 80.0], 7)


def chinchilla(n, d):
    return E + A * n**-ALPHA + B * d**-BETA


class RandomStarts:
    """A form whose candidates are random points in a wide box, instead of its variable-projection grid."""

    def __init__(self, form, rng, n, box):
        self.form, self.rng, self.n, self.box = form, rng, n, np.asarray(box, dtype=float)

    def __getattr__(self, name):
        return getattr(self.form, name)

    def candidates(self, x, y):
        lo, hi = self.box.T
        return lo + (hi - lo) * self.rng.random((self.n, len(lo)))


@pytest.mark.parametrize(
    "key, truth",
    [
        ("chinchilla", {"E": E, "A": A, "B": B, "alpha": ALPHA, "beta": BETA}),
        ("overtrain", {"E": 1.7, "A": 300.0, "B": 900.0, "eta": 0.3}),
    ],
)
def test_two_term_forms_recover_known_constants(key, truth):
    form = LOSS_FORMS[key]
    alpha = truth.get("alpha", truth.get("eta"))
    beta = truth.get("beta", truth.get("eta"))
    loss = truth["E"] + truth["A"] * N**-alpha + truth["B"] * D**-beta
    law = fit(form.engine, form.raw(N, D), np.log(loss), n_boot=20)
    for name, value in truth.items():
        assert law.params[name] == pytest.approx(value, rel=1e-4), name
    assert law.objective < 1e-16


def bounded_law(n, d, e=1.2, a=400.0, b=3000.0, alpha=0.35, beta=0.3, u=4.5):
    r = a * n**-alpha + b * d**-beta
    return e + 1 / (1 / r + 1 / (u - e))


# a micro ladder that starts on the plateau: 3K-400K parameters at 5-80 tokens/param
MICRO_N = np.repeat(np.geomspace(3e3, 4e5, 8), 3)
MICRO_D = MICRO_N * np.tile([5.0, 20.0, 80.0], 8)


def test_the_bounded_form_recovers_a_plateaued_law_and_forecasts_past_it():
    form = LOSS_FORMS["bounded"]
    loss = bounded_law(MICRO_N, MICRO_D)
    assert np.log(loss[0] / loss[3]) < np.log(loss[-4] / loss[-1])  # concave in log-log: the plain law's blind spot
    law = fit(form.engine, form.raw(MICRO_N, MICRO_D), np.log(loss), n_boot=20)
    truth = {"E": 1.2, "A": 400.0, "B": 3000.0, "alpha": 0.35, "beta": 0.3, "U": 4.5}
    for name, value in truth.items():
        assert law.params[name] == pytest.approx(value, rel=0.05), name
    hero = (1.6e6, 3.2e7)
    want = bounded_law(*hero)
    got = float(np.exp(law.predict(form.raw(*hero)))[0])
    assert got == pytest.approx(want, rel=0.005)
    # Chinchilla's form fitted to the same runs misses the hero by several times more
    plain = fit(LOSS_FORMS["chinchilla"].engine, form.raw(MICRO_N, MICRO_D), np.log(loss), n_boot=20)
    assert abs(float(np.exp(plain.predict(form.raw(*hero)))[0]) / want - 1) > 5 * abs(got / want - 1)


def test_the_bounded_form_nests_chinchilla():
    # far below the plateau the form is Chinchilla's: its fit of Chinchilla data forecasts like Chinchilla's own
    form = LOSS_FORMS["bounded"]
    law = fit(form.engine, form.raw(N, D), np.log(chinchilla(N, D)), n_boot=20)
    hero = (4e9, 8e10)
    assert float(np.exp(law.predict(form.raw(*hero)))[0]) == pytest.approx(chinchilla(*hero), rel=2e-3)
    assert law.params["U"] > 3 * chinchilla(N, D).max()  # no plateau in reach


def test_compute_form_recovers_known_constants():
    c = np.geomspace(1e15, 1e20, 9)
    loss = 2.0 + 3e3 * c**-0.21
    law = fit(LOSS_FORMS["ratio"].engine, c[:, None], np.log(loss), n_boot=20)
    assert law.params == pytest.approx({"E": 2.0, "A": 3e3, "alpha": 0.21}, rel=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_search_finds_the_known_optimum_from_random_starts(seed):
    """No grid, no closed form: 64 random starts in a box far wider than the truth (e from -1 to 2, centred
    log-coefficients from -10 to 10, exponents 0.05 to 2.5) reach the known optimum."""
    form = LOSS_FORMS["chinchilla"].engine
    rng = np.random.default_rng(seed)
    noisy = chinchilla(N, D) * np.exp(rng.normal(0, 0.003, len(N)))
    x, _ = form.prepare(np.c_[N, D])
    y = np.log(noisy)
    reference, f_ref, _ = search(form, x, y, np.ones(len(y)))
    random_form = RandomStarts(form, rng, 64, [(-1, 2), (-10, 10), (-10, 10), (0.05, 2.5), (0.05, 2.5)])
    theta, f_rand, _ = search(random_form, x, y, np.ones(len(y)))
    assert f_rand == pytest.approx(f_ref, rel=1e-6)
    assert theta == pytest.approx(reference, abs=1e-4)


def test_bootstrap_refits_start_afresh_and_cover_the_truth():
    """Residual-bootstrap replicates choose their own starts (not all the full-data optimum) and their 90%
    intervals of the exponents cover the truth in most repetitions."""
    form = LOSS_FORMS["chinchilla"].engine
    hits, reps = {"alpha": 0, "beta": 0}, 30
    for seed in range(reps):
        rng = np.random.default_rng(100 + seed)
        noisy = chinchilla(N, D) * np.exp(rng.normal(0, 0.005, len(N)))
        law = fit(form, np.c_[N, D], np.log(noisy), n_boot=100, seed=seed)
        ci = law.intervals()
        for name, truth in (("alpha", ALPHA), ("beta", BETA)):
            hits[name] += ci[name][0] <= truth <= ci[name][1]
    assert hits["alpha"] >= 23 and hits["beta"] >= 23, hits  # nominal 90%: 27 of 30, binomial sd 1.6
    # fresh starts: a replicate started at the full-data optimum only would need the optimum in the pool
    x, _ = form.prepare(np.c_[N, D])
    y = np.log(chinchilla(N, D))
    theta, _, pool = search(form, x, y, np.ones(len(y)))
    far = pool[np.argmax(np.abs(pool - theta).max(axis=1))][None]  # a single start far from the optimum
    boot = bootstrap(form, theta, far, x, y, np.ones(len(y)), n_boot=5, seed=0)
    assert np.allclose(boot, theta, atol=1e-3)  # noiseless data: every replicate refits to the optimum from afar


def test_linear_and_scaled_power_forms():
    rng = np.random.default_rng(0)
    n = np.repeat(np.geomspace(1e6, 1e9, 8), 3)
    d = n * np.tile([10.0, 20.0, 100.0], 8)
    lr = Linear("lr", ("log_k", "a", "b"), lambda r: np.c_[np.ones(len(r)), np.log(r[:, 0]), np.log(r[:, 1])])
    y = np.log(1.79) - 0.713 * np.log(n) + 0.307 * np.log(d) + rng.normal(0, 0.01, len(n))
    law = fit(lr, np.c_[n, d], y, n_boot=100)
    ci = law.intervals()
    assert ci["a"][0] < -0.713 < ci["a"][1] and ci["b"][0] < 0.307 < ci["b"][1]
    assert law.params["log_k"] == pytest.approx(np.log(1.79), abs=0.3)
    c = np.geomspace(1e15, 1e19, 10)
    gap = -0.4 * (c / 1e17) ** -0.3 + rng.normal(0, 0.002, len(c))
    sp = fit(ScaledPower("gap", ("c", "gamma")), c[:, None], gap, n_boot=50)
    assert sp.params["gamma"] == pytest.approx(0.3, abs=0.03)
    assert np.all(sp.predict(np.array([[1e22], [1e25]])) < 0)  # never changes sign


def test_prediction_intervals_of_a_new_run_cover_at_the_nominal_rate():
    """The LawFit's 90% interval for a new run at 4x the largest size covers about 90% of new runs."""
    form = LOSS_FORMS["chinchilla"].engine
    hits, reps = 0, 60
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        noisy = chinchilla(N, D) * np.exp(rng.normal(0, 0.005, len(N)))
        law = fit(form, np.c_[N, D], np.log(noisy), n_boot=100, seed=seed)
        nh, dh = 1.6e9, 3.2e10
        _, lo, hi = law.interval(np.array([[nh, dh]]), seed=seed)
        new = np.log(chinchilla(nh, dh)) + rng.normal(0, 0.005)
        hits += lo[0] <= new <= hi[0]
    assert 0.80 <= hits / reps <= 0.98


def _fd(f, theta, h=1e-7):
    return np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(len(theta))])


@pytest.mark.parametrize(
    "form",
    [
        PowerSum("chinchilla", ("E", "A", "B", "alpha", "beta"), (0, 1)),
        PowerSum("shared", ("E", "A", "B", "eta"), (0, 0)),
        Linear("lin", ("c", "a", "b"), lambda r: np.c_[np.ones(len(r)), np.log(r[:, 0]), np.log(r[:, 1])]),
        ScaledPower("gap", ("c", "gamma")),
        Bounded("bounded", PowerSum("bounded", ("E", "A", "B", "alpha", "beta"), (0, 1))),
    ],
    ids=lambda f: f.name,
)
def test_analytic_jacobians_match_finite_differences(form):
    rng = np.random.default_rng(3)
    raw = np.c_[N, D][:, : (1 if form.name == "gap" else 2)]
    x, _ = form.prepare(raw)
    y = np.log(chinchilla(N, D)) if form.name != "gap" else -0.1 * (N / 1e8) ** -0.2
    for _ in range(4):
        theta = form.candidates(x, y)[rng.integers(0, len(form.candidates(x, y)))] + rng.normal(0, 0.05, form.n_params)
        _, jac = form.resid_jac_many(theta[None], x, y[None])
        for i in range(0, len(y), 5):
            fd = _fd(lambda t: form.predict_many(t[None], x)[0, i], theta)
            np.testing.assert_allclose(jac[0, i], fd, rtol=1e-5, atol=1e-8)


def test_the_objective_is_epochs_huber_of_the_log_sum_exp():
    """Besiroglu et al.'s objective: Huber (delta 1e-3) of LSE(a - alpha log N, b - beta log D, e) - log L."""
    from ladder.reports.fits.engine.solve import HUBER_DELTA, huber

    form = LOSS_FORMS["chinchilla"].engine
    rng = np.random.default_rng(0)
    loss = chinchilla(N, D) * np.exp(rng.normal(0, 0.01, len(N)))
    x, center = form.prepare(np.c_[N, D])
    raw = np.array([np.log(E), np.log(A), np.log(B), ALPHA, BETA])
    theta = raw.copy()
    theta[1:3] -= raw[3:5] * center  # centred coordinates: a_c = a - alpha m
    lse = np.logaddexp(np.logaddexp(np.log(A) - ALPHA * np.log(N), np.log(B) - BETA * np.log(D)), np.log(E))
    r = lse - np.log(loss)
    expected = np.where(np.abs(r) <= 1e-3, 0.5 * r**2, 1e-3 * (np.abs(r) - 0.5e-3)).sum()
    assert HUBER_DELTA == 1e-3
    assert huber(form.predict_many(theta[None], x)[0] - np.log(loss), HUBER_DELTA).sum() == pytest.approx(
        expected, rel=1e-10
    )
    assert form.public(theta, center) == pytest.approx({"E": E, "A": A, "B": B, "alpha": ALPHA, "beta": BETA})


def test_compute_optimal_allocation_matches_the_closed_form_and_minimizes_the_law():
    from ladder.reports.fits.loss.allocation import allocation

    form = LOSS_FORMS["chinchilla"]
    law = fit(form.engine, form.raw(N, D), np.log(chinchilla(N, D)), n_boot=20)
    g = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
    for c in (1e21, 1e24):
        a = allocation(law, c)
        n_true = g * (c / 6) ** (BETA / (ALPHA + BETA))
        assert a["params"] == pytest.approx(n_true, rel=1e-3)
        assert a["params"] * a["tokens"] * 6 == pytest.approx(c, rel=1e-9)
        assert a["a"] == pytest.approx(BETA / (ALPHA + BETA), rel=1e-4) and a["a"] + a["b"] == pytest.approx(1)
        n = a["params"] * np.array([0.7, 1.0, 1.4])
        assert np.argmin(chinchilla(n, c / (6 * n))) == 1  # a minimum along the iso-FLOP line


def test_a_fixed_token_budget_or_size_cannot_separate_the_terms():
    from ladder.reports.fits.runs import Runs

    n = np.geomspace(1e7, 1e9, 6)
    same_d = Runs(n, np.full(6, 1e10), chinchilla(n, 1e10), [str(i) for i in range(6)])
    assert "nearly the same tokens" in LOSS_FORMS["chinchilla"].unidentifiable(same_d)
    d = np.geomspace(1e9, 1e11, 6)
    same_n = Runs(np.full(6, 1e8) * np.linspace(1, 1.2, 6), d, chinchilla(1e8, d), [str(i) for i in range(6)])
    assert LOSS_FORMS["chinchilla"].unidentifiable(same_n) is not None


def test_the_frontier_is_the_runs_no_cheaper_run_beats():
    from ladder.reports.fits.loss.loss_forms import frontier_mask

    c = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 5.0])
    loss = np.array([5.0, 4.0, 4.5, 4.2, 3.0, 3.1])
    assert frontier_mask(c, loss).tolist() == [True, True, False, False, True, False]
