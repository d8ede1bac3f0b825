"""The hero through both steps: step 1's draws of the hero's task loss (the weighted forms' mixture, calibrated)
carried through step 2's bootstrap sigmoids, with the interval of the curves and the prediction interval of
one evaluation of the hero.

Prediction draws: every draw of the curves (a step-1 loss draw and a step-2 sigmoid) is paired with
``NOISE_PER_DRAW`` new-run scatters (step 1's residual scatter of the task loss, then a resampled accuracy
residual), so the prediction distribution is the curves' distribution convolved with the scatter (one scatter
per draw left a 5% tail of a handful of draws to the noise). Accuracy is clipped to [0, 1] only after the scatter
is added: clipping the curves first piles their tail up at the bound, and the scatter then spreads that pile
inward. A convolution's quantile can still fall inside the curves' where the curves' tail is a tight cluster of
draws: the sigmoid refits that hit the ceiling bound ``a + b = 1`` (the ceiling is not identified by a ladder
below saturation) all forecast nearly the same accuracy at the hero, and the scatter spreads that cluster both
ways. The prediction interval is therefore reported as the hull of the convolution's interval and the curves'
(a new evaluation is at least as uncertain as the curve it scatters about).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ladder.layout import jsonable
from ladder.reports.fits.loss.loss_forecast import SAME_X
from ladder.reports.fits.tasks.accuracy import sigmoid, sigmoid_many
from ladder.reports.fits.tasks.intervals import quantiles, stretch
from ladder.reports.fits.tasks.task_loss import Step1

N_DRAWS = 4000
NOISE_PER_DRAW = 25


@dataclass
class HeroForecast:
    params: float | None
    tokens: float | None
    flops: float | None
    loss: float
    loss_interval: tuple[float | None, float | None]
    loss_prediction_interval: tuple[float | None, float | None]
    acc: float | None = None
    acc_interval: tuple[float | None, float | None] | None = None
    acc_prediction_interval: tuple[float | None, float | None] | None = None
    flops_estimated: bool = False  # flops derived from params x tokens at the ladder's flops per N*D
    params_x: float | None = None  # the hero's params (6ND) over the ladder's largest run's
    compute_x: float | None = None
    beyond_reach: bool | None = None  # beyond the distance at which step 1's rollout stayed within 2%
    by_form: dict = field(default_factory=dict)  # step 1's forecast of each form at the hero

    def to_dict(self) -> dict:
        return jsonable(self.__dict__)


def _hull(pred: tuple, curve: tuple) -> tuple:
    if None in pred or None in curve:
        return pred
    return min(pred[0], curve[0]), max(pred[1], curve[1])


def forecast_hero(
    s1: Step1,
    hero_pt: tuple,
    nd: tuple[float, float],
    ladder: tuple[float, float],
    *,
    theta2: np.ndarray | None,
    boot2: np.ndarray,
    res2: np.ndarray | None,
    f2: float,
    level: float,
    seed: int,
) -> HeroForecast:
    """``hero_pt = (params or None, tokens or None, flops, flops estimated)`` as given; ``nd`` the (N, D) step 1
    forecasts at (the given split, or the target ratio's); ``ladder`` the ladder's largest params and 6ND."""
    rng = np.random.default_rng(seed)
    n, d = nd
    point, curve, noise = s1.draws([n], [d], n_draws=N_DRAWS, seed=seed, n_noise=NOISE_PER_DRAW)
    l_hero = float(np.exp(point[0]))
    with np.errstate(over="ignore"):  # a ladder whose task loss rises with size: far draws overflow to inf
        l_draws = np.exp(curve[:, 0])
        l_pred = np.exp(curve[:, :1] + noise[:, :, 0])  # (N_DRAWS, NOISE_PER_DRAW)
    fc = s1.forecast
    reach = fc.reach.get("2%", {}).get("params_x", 1.0) if fc is not None else 1.0
    px, cx = n / ladder[0], 6.0 * n * d / ladder[1]
    hero = HeroForecast(
        params=hero_pt[0],
        tokens=hero_pt[1],
        flops=hero_pt[2],
        loss=l_hero,
        loss_interval=quantiles(l_draws, level),
        loss_prediction_interval=_hull(quantiles(l_pred.ravel(), level), quantiles(l_draws, level)),
        flops_estimated=bool(hero_pt[3]),
        params_x=px,
        compute_x=cx,
        beyond_reach=bool(px > reach * SAME_X),
        by_form=s1.by_form(n, d, seed=seed),
    )
    if theta2 is None:
        return hero
    hero.acc = float(sigmoid(theta2, np.array([l_hero]))[0])
    if not len(boot2):
        hero.acc_interval = hero.acc_prediction_interval = (None, None)
        return hero
    t2 = boot2[rng.integers(0, len(boot2), N_DRAWS)]

    def chain(loss: np.ndarray) -> np.ndarray:
        centre = sigmoid(theta2, loss)
        return stretch(centre, sigmoid_many(t2, loss), f2)

    # clipped to [0, 1] only at the end: clipping the curves first piles their tail up at the bound, and the
    # scatter then spreads that pile inward, past the curve's own quantile
    a_draws = np.clip(chain(l_draws), 0.0, 1.0)
    e2 = f2 * rng.choice(res2, size=l_pred.shape)
    a_pred = np.clip(chain(l_pred) - e2, 0.0, 1.0)
    hero.acc_interval = quantiles(a_draws, level)
    hero.acc_prediction_interval = _hull(quantiles(a_pred.ravel(), level), hero.acc_interval)
    return hero
