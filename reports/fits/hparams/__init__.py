"""Hyperparameter laws: the optimal learning rate and batch size per rung, their power laws in compute, and
what it costs to miss them.

Method (one choice, documented here and in every result):

1. Runs are grouped into rungs by the ``scale`` column (or, without one, by compute within 10%).
2. Per rung, loss is fitted by a quadratic *surface* in (u, v) = (ln lr, ln batch_tokens)::

       loss = c0 + cu u + cuu u^2 + cv v + cuv u v + cvv v^2

   keeping only the terms the rung's design identifies: with one batch size it is a parabola in ln lr; with
   two, each batch gets its own level and the LR optimum may move with batch (``cuv``); with three or more
   batch sizes the surface also has a minimum in batch. Loss vs log LR is close to a parabola only near the
   optimum, so the fit uses the points within a factor ``window`` (default 8) of the best run on each axis
   (widened to at least 3 values), re-centred once on the fitted optimum. The optimum is the vertex of the
   fit, not a grid point. The LR optimum is reported at the optimal batch (``u* = -(cu + cuv v*) / 2cuu``);
   the batch optimum is the vertex of the *profile* ``min_u loss(u, v)``, i.e. with the LR re-tuned.
3. Intervals come from draws of the fitted coefficients (multivariate t with the residual variance; when a
   rung has fewer than 3 residual degrees of freedom the residual variance is pooled over rungs; a known
   seed-to-seed noise ``loss_noise`` sets a floor). A draw with no minimum sends the optimum to the side where
   the loss falls, so an interval can be unbounded (``None``).
4. An optimum must be bracketed: it is flagged ``edge`` when the best run is at an end of the grid or the
   vertex lies outside it ("optimum at grid edge, widen the sweep"); ``no_minimum`` when the fit has no
   minimum at all. Such rungs are left out of the laws (``use_edge=True`` keeps the edge ones).
5. LR*(C), B*(C) (and versus N) are power laws (:func:`ladder.reports.fits.powerlaw.fit_power_law`, points
   weighted by the precision of each rung's optimum), extrapolated to the hero with a 90% interval of the law.
6. The penalty of being a factor 2 off is ``curvature * (ln 2)^2`` (loss units), per rung and extrapolated by
   a power law in compute. For batch it is given with the LR re-tuned (profile) and at a fixed LR.

Modules: ``rungs`` (grouping runs into rungs), ``surface`` (the quadratic surface, steps 2-3), ``optimum``
(one axis's optimum, steps 3-4, 6), ``sweep`` (one rung's sweep), ``trend`` (the power laws, step 5), ``laws``
(``fit_hparams``: the whole study). The ablations reuse ``group_scales``, ``fit_log_quadratics`` and ``Trend``.
"""

from __future__ import annotations

from ladder.reports.fits.hparams.laws import HparamResult, HparamScale, fit_hparams
from ladder.reports.fits.hparams.optimum import AxisOptimum
from ladder.reports.fits.hparams.rungs import Scale, group_scales
from ladder.reports.fits.hparams.sweep import (
    SweepFit,
    fit_log_quadratic,
    fit_log_quadratics,
    fit_sweep,
)
from ladder.reports.fits.hparams.trend import Trend, fit_trend

__all__ = [
    "AxisOptimum",
    "HparamResult",
    "HparamScale",
    "Scale",
    "SweepFit",
    "Trend",
    "fit_hparams",
    "fit_log_quadratic",
    "fit_log_quadratics",
    "fit_sweep",
    "fit_trend",
    "group_scales",
]
