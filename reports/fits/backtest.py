"""What every rollout ("grow the ladder") backtest shares: the loss laws (:mod:`ladder.reports.fits.loss`), the
ablation trends (:mod:`ladder.reports.fits.ablations.trend`), the hyperparameter optimum laws
(:mod:`ladder.reports.fits.hparams.optimum_rollout`) and the IsoFLOP minimum-loss law
(:mod:`ladder.reports.fits.isoflop.budget_laws`) each fit on a prefix of their ladder and forecast the rest; they judge
those forecasts by the rules here, so that one ladder's "90%", "widened" and "reach" mean the same thing in
every section of a report.

- :data:`LEVEL`: the one confidence level (0.90) of every interval; :func:`interval`: the central interval of
  draws at it.
- :func:`conformal`: the ``ceil((m + 1) level)``-th smallest of ``m`` values (the largest when there are too
  few): split-conformal's finite-sample quantile.
- :func:`calibrate`: the one widening rule. ``z_i = |error| / half-width`` on the error's side
  (:func:`side_z`); when the share with ``z <= 1`` falls short of :data:`LEVEL` by more than chance (one-sided
  binomial test at :data:`SHORTFALL_P`: one miss in six rows is what a calibrated interval does 47% of the time),
  every half-width is multiplied by ``conformal(z)``, never below 1 (an interval is never narrowed).
- :func:`mix`: the forms' weighted forecast and its draws, from *paired* draws (see its doc for draws that are
  not paired).
- :func:`rms_weights`: ``w_f ∝ 1 / max(rms_f, floor)^2`` over the forms whose RMS is within
  :data:`RELATIVE_RMS_CUT` of the best (the best judged no smaller than ``floor``).
- :func:`weighted_rms`: the root mean squared error with each forecast weighted by its log distance (far
  forecasts, what the target needs, count most; a forecast at no distance weighs ``1e-3``).
- :func:`reach`: the largest distance up to which every forecast passed a predicate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
from scipy import stats

LEVEL = 0.90
SHORTFALL_P = 0.05  # widen when the rollout's coverage is this unlikely for calibrated intervals
RELATIVE_RMS_CUT = 2.0  # forms whose rollout RMS is more than this multiple of the best get no weight
NEAR_WEIGHT = 1e-3  # the weight of a forecast at no distance in the distance-weighted RMS


def interval(draws, level: float = LEVEL, axis=None, method: str = "linear"):
    """``(lo, hi)``: the central ``level`` interval of ``draws`` (along ``axis``; ``method``: numpy's quantile
    method, ``inverted_cdf`` for an interval whose ends are draws)."""
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=axis, method=method)
    return lo, hi


def conformal(values, level: float = LEVEL) -> float:
    """The ``ceil((m + 1) level)``-th smallest of ``values`` (the largest when there are too few)."""
    v = np.sort(np.asarray(values, dtype=float))
    return float(v[min(len(v) - 1, int(math.ceil((len(v) + 1) * level)) - 1)])


def side_z(actual: float, point: float, lo: float, hi: float, floor: float) -> float:
    """``|actual - point|`` over the interval's half-width on the error's side (judged at least ``floor``)."""
    err = actual - point
    half = (hi - point) if err > 0 else (point - lo)
    return float(abs(err) / max(half, floor))


def calibrate(z, level: float = LEVEL) -> tuple[float | None, float]:
    """``(coverage, factor)`` of rollout forecasts with scores ``z`` (:func:`side_z`): the share with ``z <= 1``,
    and the factor every half-width is multiplied by: 1 unless that share falls short of ``level`` by more than
    chance (one-sided binomial test at :data:`SHORTFALL_P`), else ``conformal(z)`` (never below 1). ``(None,
    1.0)`` without rows."""
    if len(z) == 0:
        return None, 1.0
    z = np.sort(np.asarray(z, dtype=float))
    inside = int(np.sum(z <= 1.0))
    coverage = float(np.mean(z <= 1.0))
    if coverage >= level or stats.binom.cdf(inside, len(z), level) >= SHORTFALL_P:
        return coverage, 1.0
    return coverage, max(1.0, conformal(z, level))


def mix(draws: dict[str, np.ndarray], points: dict, weights: dict[str, float], rng, *, paired: bool = True):
    """``(point, draws)`` of the weighted forms (None when no form with weight has draws). ``draws[k]``: form
    k's draws, ``(n,)`` or ``(n, m)`` (each row one curve at ``m`` points); ``points[k]``: its point, a number or
    ``(m,)``; all in the same (log) space.

    Paired draws (``paired=True``): every form's draw ``i`` comes from the same bootstrap replicate of the same
    redrawn data and the same new-run noise (the engine's fits with shared bootstrap normals, drawn with one
    seed), so the weighted point's own uncertainty is the weighted sum of the forms' deviations. The forms'
    disagreement is partly that same noise: the replicates show how far apart noise alone puts the forms
    (``D_noise``, the mean weighted variance of their paired deviations); only the observed disagreement beyond
    it (``D_obs - D_noise``) is added, by centring each draw on one form's point (picked with its weight, one
    pick per row), pulled towards the weighted point by ``sqrt(excess / D_obs)``. Pooling the forms' draws
    instead counted the shared noise once per form and once more as disagreement: on synthetic ladders from a
    known law its nominal 90% intervals covered 96-97%.

    Draws that are not paired (``paired=False``: forms fitted on different data or drawn with different seeds)
    are not paired by index: the weighted sum of *independent* deviations is narrower than any form's own spread
    (by ``sqrt(sum w^2)`` for equal spreads), and their differences measure two worlds' noise, not one, so
    ``D_noise`` would be overstated and the disagreement understated; both make the interval too narrow.
    Instead each row is the picked form's own draw in full (``shrink = 1``): the pool of the forms' draws, which
    keeps every form's spread and adds all of the disagreement. It over-covers (as above), the safe side, and
    the rollout's calibration judges it like any other interval.
    """
    names = [k for k in draws if weights.get(k, 0) > 0]
    if not names:
        return None
    if len({len(draws[k]) for k in names}) != 1:
        raise ValueError("the forms' draws are not paired (different numbers of draws)")
    w = np.array([weights[k] for k in names])
    w = w / w.sum()
    centers = np.array([points[k] for k in names])  # (forms,) or (forms, m)
    point = w @ centers
    devs = np.stack([draws[k] - points[k] for k in names])  # (forms, draws) or (forms, draws, m)
    if not paired:
        pick = rng.choice(len(names), size=devs.shape[1], p=w)
        return point, centers[pick] + devs[pick, np.arange(devs.shape[1])]
    if devs.ndim == 2:  # one point: the loss forecast's mixture, kept operation for operation
        point = float(point)
        dev = w @ devs
        d_obs = float(w @ (centers - point) ** 2)
        d_noise = float(np.mean(w @ (devs - dev) ** 2))
        shrink = math.sqrt(max(0.0, d_obs - d_noise) / d_obs) if d_obs > 0 else 0.0
    else:
        f, n = devs.shape[:2]
        dev = (w @ devs.reshape(f, -1)).reshape(devs.shape[1:])
        d_obs = w @ (centers - point) ** 2
        d_noise = np.mean((w @ ((devs - dev) ** 2).reshape(f, -1)).reshape(devs.shape[1:]), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            shrink = np.where(d_obs > 0, np.sqrt(np.maximum(0.0, d_obs - d_noise) / d_obs), 0.0)
    pick = rng.choice(len(names), size=len(dev), p=w)
    return point, point + shrink * (centers[pick] - point) + dev


def rms_weights(rms: dict[str, float], floor: float) -> tuple[dict[str, float], list[str]]:
    """``(weights, dropped)``: ``w_f ∝ 1 / max(rms_f, floor)^2`` over the forms whose ``rms_f`` is within
    :data:`RELATIVE_RMS_CUT` of the best (the best judged no smaller than ``floor``: errors below the noise of
    one measurement say nothing); ``dropped``: the forms beyond it."""
    best = max(min(rms.values()), floor)
    keep = {k: v for k, v in rms.items() if v <= RELATIVE_RMS_CUT * best}
    raw = {k: 1.0 / max(v, floor) ** 2 for k, v in keep.items()}
    tot = sum(raw.values())
    return {k: v / tot for k, v in raw.items()}, [k for k in rms if k not in keep]


def weighted_rms(errors, distances) -> float:
    """``sqrt(sum w e^2 / sum w)`` with ``w`` the forecasts' log distances (:data:`NEAR_WEIGHT` at none)."""
    e = np.asarray(errors, dtype=float)
    w = np.asarray(distances, dtype=float)
    w = np.where(w > 0, w, NEAR_WEIGHT)
    return float(np.sqrt((w * e**2).sum() / w.sum()))


def reach(rows: Iterable[dict], key: str, ok: Callable[[dict], bool], start=1.0):
    """The largest ``row[key]`` up to which every row, sorted by ``key``, passed ``ok``; ``start`` when the
    nearest failed or there are no rows."""
    best = start
    for r in sorted(rows, key=lambda r: r[key]):
        if not ok(r):
            break
        # a row inside the ladder's span (a smaller model at a larger budget: params x < 1) never lowers it
        best = r[key] if best is None else max(best, r[key])
    return best
