"""Hyperparameter laws: the optimal learning rate and batch size per rung, their power laws in N and D, and
what it costs to miss them. Every fit is the engine's (:mod:`ladder.reports.fits.engine`).

Method (one choice, documented here and in every result):

1. Runs are grouped into rungs by the ``scale`` column (or, without one, by compute within 10%).
2. Per rung, ln loss is fitted by a quadratic *surface* in (u, v) = (ln lr, ln batch_tokens)::

       ln loss = c0 + cu u + cuu u^2 + cv v + cuv u v + cvv v^2

   jointly, with the engine's :class:`Linear` form under its Huber objective, keeping only the terms the
   rung's design identifies: with one batch size it is a parabola in ln lr; with two, each batch gets its own
   level and the LR optimum may move with batch (``cuv``); with three or more batch sizes the surface also has
   a minimum in batch. Loss vs log LR is close to a parabola only near the optimum, so the fit uses the points
   within a factor ``window`` (default 8) of the best run on each axis (widened to at least 3 values),
   re-centred once on the fitted optimum. The optimum is the vertex of the fit, not a grid point. The LR
   optimum is reported at the optimal batch (``u* = -(cu + cuv v*) / 2cuu``); the batch optimum is the vertex
   of the *profile* ``min_u loss(u, v)``, i.e. with the LR re-tuned.
3. Intervals come from replicates of the coefficients: the engine's residual bootstrap (refits from fresh
   starts) when the rung has 3 or more residual degrees of freedom; else a parametric bootstrap from the
   residual noise pooled over rungs, refitted by the engine's minimizer; a known seed-to-seed ``loss_noise``
   is a floor (:mod:`.draws`). The replicates' spread is widened by ``t_dof / z`` for few degrees of freedom.
   A replicate with no minimum sends the optimum to the side where the loss falls, so an interval can be
   unbounded (``None``).
4. An optimum must be bracketed: it is flagged ``edge`` when the best run is at an end of the grid or the
   vertex lies outside it ("optimum at grid edge, widen the sweep"); ``no_minimum`` when the fit has no
   minimum at all. Such rungs are left out of the laws (``use_edge=True`` keeps the edge ones).
5. Laws (:mod:`.optimum_law`): ``ln lr* = c + a ln N + b ln D`` and ``ln B* = c + b ln D`` (as Step Law and DeepSeek
   find, the LR depends on both, the batch mostly on D), weighted by each optimum's precision, with bootstrap
   intervals; in compute C when the rungs cannot separate N from D (one tokens/param), which the law says.
   A sweep at one size gives no law: its optimum transfers by the recipe's rule (the recommendation cites it).
6. The penalty of being a factor 2 off is ``loss_min (exp(curvature (ln 2)^2) - 1)`` (loss units), per rung
   and as a power law in compute. For batch it is given with the LR re-tuned (profile) and at a fixed LR.

Modules: ``rungs`` (grouping runs into rungs), ``surface`` (the quadratic surface, steps 2-3), ``draws`` (the
replicates behind every interval), ``optimum`` (one axis's optimum, steps 3-4, 6), ``sweep`` (one rung's
sweep), ``law`` (the power laws, step 5), ``laws`` (``fit_hparams``: the whole study). The ablations reuse
``group_scales`` and ``fit_log_quadratics``.
"""

from __future__ import annotations

from ladder.reports.fits.hparams.hparam_laws import HparamResult, HparamScale, fit_hparams
from ladder.reports.fits.hparams.optimum import AxisOptimum
from ladder.reports.fits.hparams.optimum_law import OptimumLaw, fit_optimum_law
from ladder.reports.fits.hparams.rungs import Scale, group_scales
from ladder.reports.fits.hparams.sweep import (
    SweepFit,
    fit_log_quadratic,
    fit_log_quadratics,
    fit_sweep,
)

__all__ = [
    "AxisOptimum",
    "HparamResult",
    "HparamScale",
    "OptimumLaw",
    "Scale",
    "SweepFit",
    "fit_hparams",
    "fit_log_quadratic",
    "fit_log_quadratics",
    "fit_optimum_law",
    "fit_sweep",
    "group_scales",
]
