"""Ablations along the ladder: tied vs untied embeddings, and depth vs width.

Tied vs untied (``fit_tie_ablation``)
    Per rung, each variant's loss is its best configuration (replicates averaged, then the minimum over any
    other axis swept, e.g. LR). The variants are compared at matched compute: when their compute differs by
    more than 1% (untied has more parameters), each variant's loss is moved to the geometric mean of the two
    along that variant's own loss-vs-compute law ``L(C) = E + (C0/C)^g`` (a pure power law with 2 rungs).
    The difference ``untied - tied`` (> 0: tied wins) is fitted, linear in two parameters, as
    ``diff = a + b (C / c_ref)^-g`` with ``g`` the (geometric mean) exponent of the two variants' laws: the
    form the difference of two such laws takes, which may change sign (a power law cannot) and levels off at
    ``a`` instead of growing without bound. Without an exponent (fewer than 2 rungs per variant) it is linear
    in ``log10 C``; otherwise that form is fitted too (``trend_loglinear``, and ``loglinear`` entries in
    ``crossover`` and ``hero``) as a check on the extrapolation. The crossover is where the trend is zero, with
    a Fieller 90% interval (the computes where zero is inside the trend's interval; unbounded when the trend
    is not significant).
    ``crossover.status``: ``within_range`` (between the smallest and largest rung), ``beyond_range`` (predicted
    above the ladder: the winner flips at larger compute), ``none`` (no significant trend, or the gap widens),
    ``unknown`` (too few rungs). At the hero: the predicted difference with a 90% interval, and the
    effective-compute multiplier: the compute the untied variant needs, over C, to reach the tied variant's
    loss (> 1: tied is better; from the inverse of the untied law).

Depth vs width (``fit_depth_width``)
    Per rung, loss vs ``ln(aspect_ratio)`` (d_model / n_layers) is fitted by a parabola around the best shape
    (``ladder.reports.fits.hparams.fit_log_quadratics``: windowed, intervals from t draws, pooled noise, edge
    flags); losses are first moved to the rung's compute along the ladder's loss-vs-compute law when the
    shapes' compute differs (``match_compute``). The best aspect ratio is fitted as a power law of compute
    (and of N), extrapolated to the hero with a 90% interval; the penalty of a factor-2 wrong aspect ratio is
    ``curvature * (ln 2)^2``.

Modules: ``tied`` and ``depth_width`` (the two ablations), ``compute_law`` (each variant's ``L(C)``),
``linear_trend`` (the tie difference's trend and crossover), ``common`` (a variant's best configuration per
rung).
"""

from __future__ import annotations

from ladder.reports.fits.ablations.compute_law import LossLaw, fit_loss_vs_compute
from ladder.reports.fits.ablations.depth_width import (
    AspectScale,
    DepthWidthResult,
    fit_depth_width,
)
from ladder.reports.fits.ablations.linear_trend import LinearTrend, fit_linear_trend
from ladder.reports.fits.ablations.tied import TieAblation, TieScale, fit_tie_ablation

__all__ = [
    "AspectScale",
    "DepthWidthResult",
    "LinearTrend",
    "LossLaw",
    "TieAblation",
    "TieScale",
    "fit_depth_width",
    "fit_linear_trend",
    "fit_loss_vs_compute",
    "fit_tie_ablation",
]
