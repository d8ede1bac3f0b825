"""Replicates of an engine fit for the intervals of the hyperparameter laws: the engine's residual bootstrap
when the fit's own residuals carry the noise, else a parametric bootstrap from a known noise level, refitted
by the engine's minimizer (``Noise``, ``replicates``, ``spread``); and quantiles that tolerate unbounded draws.

Why two sources: a rung with 3 learning rates fitted by a 3-term parabola has no residuals to resample, and
a law through 2-3 rung optima would have a zero-width residual bootstrap although each optimum is uncertain.
There the noise is known from elsewhere (the residuals pooled over rungs, a stated seed-to-seed noise, the
optima's own intervals), and the replicate targets are the fit plus draws of that noise. Either way every
replicate is a refit by the engine under its Huber objective (a :class:`~ladder.reports.fits.engine.Linear`
form is convex, so one start suffices), and the spread of the replicates around their mean is widened by
``t_{dof, 0.95} / z_{0.95}`` for few degrees of freedom, as :meth:`LawFit.draws` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ladder.reports.fits.engine import LawFit
from ladder.reports.fits.engine.solve import minimize_many

LEVEL = 0.90


@dataclass(frozen=True)
class Noise:
    """The noise behind an interval: a scale per point (log-space), its degrees of freedom (``inf``: known)
    and where it comes from (``own`` residuals: the engine's bootstrap; else a parametric one)."""

    sigma: np.ndarray
    dof: float
    source: str  # "own" (the engine's bootstrap), "pooled", "loss_noise", "optima", "residuals"

    @property
    def scalar(self) -> float:
        return float(np.max(self.sigma))


def kappa(dof: float) -> float:
    """Widening of a bootstrap spread for few degrees of freedom (1 for a known noise)."""
    if not math.isfinite(dof):
        return 1.0
    return float(stats.t.ppf(0.95, max(dof, 1.0)) / stats.norm.ppf(0.95))


def replicates(law: LawFit, noise: Noise, *, n_boot: int, seed: int) -> np.ndarray:
    """``(B, P)`` internal parameter vectors: ``law.boot`` (the engine's residual bootstrap from fresh starts)
    when the noise is the fit's own, else refits of ``fitted + sigma z`` by the engine's minimizer."""
    if noise.source == "own" and law.boot is not None:
        return law.boot
    rng = np.random.default_rng(seed)
    # normal draws: the few degrees of freedom of an estimated sigma widen the spread once, in ``spread``
    ys = law.fitted[None] + np.asarray(noise.sigma, dtype=float)[None] * rng.standard_normal((n_boot, law.n))
    thetas, _ = minimize_many(law.form, law.theta[None], law.x, ys, law.weights[None], delta=law.delta)
    return thetas


def spread(point: np.ndarray, boot: np.ndarray, dof: float) -> np.ndarray:
    """Draws of a quantity: ``point + kappa (boot - mean boot)``, per column; non-finite draws (an optimum sent
    to +-inf when a replicate has no minimum) are kept as they are."""
    boot = np.asarray(boot, dtype=float)
    finite = np.isfinite(boot)
    centre = np.where(finite, boot, np.nan)
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(centre, axis=0) if finite.any() else np.zeros(boot.shape[1:])
    mean = np.where(np.isfinite(mean), mean, point)
    return np.where(finite, point + kappa(dof) * (boot - mean), boot)


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def finite_interval(lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
    """An interval for JSON: an infinite or missing bound is None (unbounded)."""
    return finite_or_none(lo), finite_or_none(hi)


def draw_quantiles(draws: np.ndarray, level: float = LEVEL) -> tuple[float | None, float | None]:
    """Quantiles that tolerate +-inf (an unbounded side gives None); NaN draws count as unbounded both ways."""
    d = np.asarray(draws, dtype=float)
    if len(d) == 0:
        return None, None
    n_nan = int(np.isnan(d).sum())
    d = np.sort(np.where(np.isnan(d), np.inf, d))
    lo_i = int(math.floor((1 - level) / 2 * (len(d) - 1)))
    hi_i = int(math.ceil((1 + level) / 2 * (len(d) - 1)))
    lo, hi = d[lo_i], d[hi_i]
    if n_nan > (1 - level) / 2 * len(d):
        lo = -np.inf
    return finite_interval(float(lo), float(hi))


def log_sd(ci: tuple[float | None, float | None] | None) -> float | None:
    """The log-space standard deviation a positive quantity's 90% interval implies (None when unbounded)."""
    if ci is None or ci[0] is None or ci[1] is None or not (0 < ci[0] < ci[1]):
        return None
    return (math.log(ci[1]) - math.log(ci[0])) / (2 * stats.norm.ppf(0.5 + LEVEL / 2))
