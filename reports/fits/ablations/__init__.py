"""Ablations along the ladder: tied vs untied embeddings, and depth vs width, on the one fitting engine.

Both follow the loss laws' principles: the effect is measured per rung with its noise, its trend across scale
is chosen by rollout backtests among several forms (fit on the smaller rungs, forecast the larger), the hero's
value is the forms' weighted mixture with a 90% interval calibrated on that rollout, and every call says how
far the rollout has shown the trend to hold.

Tied vs untied (``fit_tie_ablation``, :mod:`.tied`, the calls in :mod:`.calls`)
    Per rung (same shape, same tokens), ``g = ln L_untied - ln L_tied`` (> 0: tied wins) of each variant's best
    configuration. Tied and untied do the same FLOPs per token (the LM head's matmul runs either way; tying
    only reuses the embedding matrix), so a rung compares them at exactly matched compute. Noise: the pooled
    seed-to-seed sd of ln loss where replicates exist, else the scatter of the trend fit. Trend forms of g
    against compute: constant, log-linear (may cross zero), a power that shrinks or grows but never changes
    sign (:class:`~ladder.reports.fits.engine.ScaledPower`), and the difference of the variants' L(C) laws
    fitted with one floor and one exponent (:mod:`.variant_laws`). The hero's gap, the winner and how sure
    (``certain`` / ``likely`` / ``undetermined``), the crossover (stated only where the rungs and the trend
    agree) and the effective-compute multiplier ("untied reaches tied's loss with 0.8x [0.7, 0.9] the compute", from the
    gap and the local slope of the untied L(C) law).

Depth vs width (``fit_depth_width``, :mod:`.depth_width`)
    Per rung, ln loss against ln(aspect ratio) (d_model / n_layers) as a quadratic fitted by the engine around
    the best shape (losses first moved to the rung's compute along the ladder's local loss-vs-compute slope
    when the shapes' compute differs); the optimum with its bootstrap interval and the loss cost of a factor-2
    wrong aspect ratio. The optimum's trend (ln aspect* against ln C: constant or power law) and the
    penalty's are chosen by rollout as above; the hero's aspect ratio is their calibrated mixture.

Modules: ``forms`` (an effect per rung and the trend forms), ``trend`` (the rollout-chosen trend of any effect), ``variant_laws`` (each variant's L(C) law, its
slope, the law-difference form), ``calls``, ``tied``, ``depth_width``, ``common`` (a variant's best
configuration per rung and the seed noise).
"""

from __future__ import annotations

from ladder.reports.fits.ablations.depth_width import (
    AspectScale,
    DepthWidthResult,
    fit_depth_width,
)
from ladder.reports.fits.ablations.tied import TieAblation, TieScale, fit_tie_ablation
from ladder.reports.fits.ablations.trend import Trend, fit_trend
from ladder.reports.fits.ablations.trend_forms import EffectData

__all__ = [
    "AspectScale",
    "DepthWidthResult",
    "EffectData",
    "TieAblation",
    "TieScale",
    "Trend",
    "fit_depth_width",
    "fit_tie_ablation",
    "fit_trend",
]
