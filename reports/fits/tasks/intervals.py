"""The bootstrap intervals of the task fits: the small-sample stretch of a cases bootstrap's spread, and its
quantiles."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t


def dof_factor(n: int, p: int, level: float) -> float:
    """How much to stretch a cases bootstrap's spread for a ``p``-parameter fit to ``n`` runs:
    ``sqrt(n / (n - p))`` (the residual variance a least-squares fit hides) times ``t_{n-p} / z`` at the
    interval's level (Student's t in place of the normal quantile). Without it the 90% intervals covered the
    truth in about 70% of synthetic 15-run ladders; with it in about 90% (see :mod:`ladder.reports.fits.tasks`)."""
    if n <= p:
        return 1.0
    q = (1 + level) / 2
    return math.sqrt(n / (n - p)) * float(student_t.ppf(q, n - p) / norm.ppf(q))


def stretch(centre, draws, f: float, log: bool = False):
    """Bootstrap draws moved ``f`` times as far from the point estimate (in log space for scale quantities)."""
    draws = np.asarray(draws, float)
    if f == 1.0:
        return draws
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            return centre * np.exp(f * np.log(draws / centre))
    return centre + f * (draws - centre)


def quantiles(draws: np.ndarray, level: float) -> tuple[float | None, float | None]:
    draws = np.asarray(draws, float)
    draws = draws[np.isfinite(draws)]
    if len(draws) < 10:
        return (None, None)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
