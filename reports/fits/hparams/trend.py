"""A per-rung quantity as a power law of compute (or N), extrapolated to the hero (``Trend``, ``fit_trend``):
step 5 of :mod:`ladder.reports.fits.hparams`, and the trends of the depth-vs-width ablation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ladder.layout import jsonable
from ladder.reports.fits.hparams.surface import distinct
from ladder.reports.fits.powerlaw import (
    PowerLaw,
    finite_interval,
    fit_power_law,
    t_quantile,
)


@dataclass(frozen=True)
class Trend:
    """A per-rung quantity as a power law of compute (or N), extrapolated to the hero.

    ``law`` is None when it could not be fitted, and ``reason`` says why. ``points``: the rungs used
    (scale, x, y, y_ci90); ``excluded``: rung -> why it was left out. ``hero_ci90`` is the 90% interval of
    the law at ``hero_x``; ``extrapolation`` is ``hero_x`` over the largest fitted x."""

    quantity: str
    versus: str
    law: PowerLaw | None
    reason: str | None
    points: tuple[dict, ...] = ()
    excluded: dict[str, str] = field(default_factory=dict)
    hero_x: float | None = None
    hero_value: float | None = None
    hero_ci90: tuple[float | None, float | None] | None = None
    extrapolation: float | None = None

    def to_dict(self) -> dict:
        return jsonable(
            {
                "quantity": self.quantity,
                "versus": self.versus,
                "law": None if self.law is None else self.law.to_dict(),
                "reason": self.reason,
                "points": list(self.points),
                "excluded": dict(self.excluded),
                "hero_x": self.hero_x,
                "hero_value": self.hero_value,
                "hero_ci90": self.hero_ci90,
                "extrapolation": self.extrapolation,
            }
        )


def fit_trend(
    rows: Sequence[dict],
    *,
    quantity: str,
    versus: str,
    hero_x: float | None = None,
    excluded: dict[str, str] | None = None,
    no_data_reason: str | None = None,
) -> Trend:
    """Power law of ``y`` in ``x`` over ``rows`` ({"scale", "x", "y", "y_ci90"}); weighted by each point's
    interval when every point has a bounded one. Needs 2 rungs; otherwise ``law`` is None with a reason."""
    excluded = dict(excluded or {})
    good = [r for r in rows if r["x"] is not None and r["y"] is not None and r["x"] > 0 and r["y"] > 0]
    xs = np.array([r["x"] for r in good], dtype=float)
    if len(distinct(np.log(xs))) < 2 if len(xs) else True:
        if no_data_reason:
            why = no_data_reason
        else:
            why = f"{quantity} law needs at least 2 rungs with a usable {quantity} value, got {len(good)}"
            if excluded:
                used = ", ".join(str(r.get("scale")) for r in good)
                why += f" ({used})" if used else ""
                why += "; left out: " + "; ".join(
                    v if str(v).startswith(f"{k}:") else f"{k}: {v}" for k, v in excluded.items()
                )
        return Trend(quantity, versus, None, why, tuple(jsonable(r) for r in good), excluded, hero_x)
    ys = np.array([r["y"] for r in good], dtype=float)
    sig = []
    for r in good:
        ci = r.get("y_ci90")
        if ci is None or ci[0] is None or ci[1] is None or not (0 < ci[0] < ci[1]):
            sig = None
            break
        sig.append((math.log(ci[1]) - math.log(ci[0])) / (2 * t_quantile(0.95, math.inf)))
    if sig is not None and min(sig) <= 1e-9:
        sig = None
    law = fit_power_law(
        xs, ys, log_sigma=None if sig is None else np.array(sig), n_boot=0, what=f"{quantity} vs {versus}"
    )
    hero_value = hero_ci = extrap = None
    if hero_x is not None and hero_x > 0:
        hero_value = float(law(hero_x))
        hero_ci = finite_interval(*law.interval(hero_x)) if law.method != "none" else None
        extrap = float(hero_x / xs.max())
    points = tuple(jsonable(r) for r in good)
    return Trend(quantity, versus, law, None, points, excluded, hero_x, hero_value, hero_ci, extrap)
