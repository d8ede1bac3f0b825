"""What one more run is worth: the hero's expected 90% half-width after adding it, by refitting the loss
forecast with simulated outcomes (``ladder plan STUDY_DIR --suggest``; the candidates come from
:mod:`ladder.suggest`).

For a candidate run at (N, D): ``k`` outcomes are drawn from the current posterior predictive there (the
primary forecast's mixture of its weighted law forms: bootstrap and residual draws of each, widened by the
rollout's calibration factor, as the hero's own interval is), taken at the ``k`` stratified quantiles
``(i + 1/2) / k`` of the mixture so that a few outcomes cover it evenly. Each outcome is added to the forecast's
runs and the whole forecast is fitted again (law forms, rollout, weights, calibration; ``n_boot`` bootstrap
refits); the hero's half-width of each refit is recorded and their mean is the expected half-width. The
baseline is the same refit without the candidate (the same ``n_boot`` and seed), so the ratio
``expected / baseline`` compares like with like; it is applied to the fit's own interval (``current``), which
the baseline differs from by the bootstrap's noise: after = current x expected / baseline, and the gain is
current - after. Each candidate is valued alone: two suggestions together may be worth less than the sum of
their gains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ladder.model.config import format_count
from ladder.reports.fits.loss import LOSS_FORMS, Forecast, forecast_loss
from ladder.reports.fits.study.loss import loss_data

K = 8
N_BOOT = 50
DRAWS = 4000


@dataclass
class Point:
    """Where a candidate adds a run to the forecast's data (the law's N, D) and with which seed."""

    params: float
    tokens: float
    seed: int


@dataclass
class Value:
    half_width_pct: float | None  # expected hero half-width after the run (mean over the outcomes)
    outcomes: list[float] = field(default_factory=list)  # the simulated final losses
    half_widths: list[float] = field(default_factory=list)  # the hero half-width after each
    reason: str | None = None  # why it could not be valued

    def to_dict(self) -> dict:
        spread = float(np.std(self.half_widths, ddof=1)) if len(self.half_widths) > 1 else None
        return {
            "half_width_pct": self.half_width_pct,
            "half_width_sd": spread,
            "outcomes": self.outcomes,
            "half_widths": self.half_widths,
            "reason": self.reason,
        }


def predictive_draws(fc: Forecast, params: float, tokens: float, *, seed: int = 0, n: int = DRAWS) -> np.ndarray:
    """Log-loss draws of a new run at (params, tokens) from the forecast's calibrated mixture (ValueError when no
    fitted form forecasts there)."""
    rng = np.random.default_rng(seed)
    draws, points = {}, {}
    for k, law in fc.laws.items():
        form = LOSS_FORMS[k]
        if form.applies(params, tokens, fc.data, fc.target_ratio):
            p, d = law.draws(form.raw(params, tokens), n_draws=n, sigma_floor=fc.data.seed_sigma, seed=seed)
            draws[k], points[k] = d[:, 0], float(p[0])
    weights = {k: w for k, w in fc.weights.items() if k in draws and w > 0} or {k: 1.0 for k in draws}
    if not weights:
        raise ValueError(
            f"no fitted law form forecasts {format_count(params)} params x {format_count(tokens)} tokens "
            f"({tokens / params:.3g} tokens/param)"
        )
    total = sum(weights.values())
    counts = rng.multinomial(n, [w / total for w in weights.values()])
    pooled = np.concatenate([rng.choice(draws[k], c) for k, c in zip(weights, counts) if c])
    center = sum(w / total * points[k] for k, w in weights.items())
    return center + fc.factor * (pooled - center)  # widened as the hero's interval is


def _hero_half_width(law_df: pd.DataFrame, hero: tuple[float, float], n_boot: int, seed: int) -> float | None:
    data, _ = loss_data(law_df)
    try:
        fc = forecast_loss(data, hero[0], hero[1], seed=seed, n_boot=n_boot)
    except ValueError:
        return None
    return getattr(fc.points[0], "half_width_pct", None)


def baseline(law_df: pd.DataFrame, hero: tuple[float, float], *, n_boot: int = N_BOOT, seed: int = 0) -> float | None:
    """The hero's half-width refitted on the current runs as every candidate is refitted."""
    return _hero_half_width(law_df, hero, n_boot, seed)


def value(
    fc: Forecast,
    law_df: pd.DataFrame,
    hero: tuple[float, float],
    point: Point,
    *,
    k: int = K,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Value:
    """The expected hero half-width after a run at ``point`` (see the module doc)."""
    try:
        draws = predictive_draws(fc, point.params, point.tokens, seed=seed)
    except ValueError as exc:
        return Value(None, reason=str(exc))
    outcomes = np.exp(np.quantile(draws, (np.arange(k) + 0.5) / k))
    widths = []
    for i, loss in enumerate(outcomes):
        row = {"params": point.params, "tokens": point.tokens, "loss": float(loss), "run_id": f"candidate-{i}"}
        if "seed" in law_df.columns:
            row["seed"] = point.seed
        sim = pd.concat([law_df, pd.DataFrame([row], index=[row["run_id"]])], ignore_index=False)
        w = _hero_half_width(sim, hero, n_boot, seed)
        if w is not None and math.isfinite(w):
            widths.append(float(w))
    if not widths:
        return Value(None, [float(x) for x in outcomes], reason="no refit could forecast the hero")
    return Value(float(np.mean(widths)), [float(x) for x in outcomes], widths)
