"""The loss-vs-compute law of an ablation variant, ``L(C) = E + (C0/C)^g`` through a few rungs (``LossLaw``):
what moves a variant's loss to a matched compute, and the exponent of the tie trend.

The same form as the L(C) frontier of :mod:`ladder.reports.fits.frontier`, fitted here by plain least squares
on the rungs' best losses; one engine is to replace both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.powerlaw import fit_power_law


@dataclass(frozen=True)
class LossLaw:
    """``L(C) = E + (C0 / C)^g``; ``kind`` is ``saturating`` (E fitted, >= 3 rungs) or ``power`` (E = 0)."""

    E: float
    C0: float
    g: float
    kind: str
    n_points: int

    def __call__(self, c: float | np.ndarray) -> float | np.ndarray:
        out = self.E + (self.C0 / np.asarray(c, dtype=float)) ** self.g
        return float(out) if np.ndim(out) == 0 else out

    def slope(self, c: float) -> float:
        """dL / d ln C (negative)."""
        return float(-self.g * (self.C0 / c) ** self.g)

    def inverse(self, loss: float) -> float:
        """The compute at which the law reaches ``loss`` (inf when at or below the floor E)."""
        if not math.isfinite(loss) or loss <= self.E:
            return math.inf
        return float(self.C0 * (loss - self.E) ** (-1.0 / self.g))

    def to_dict(self) -> dict:
        return jsonable({"E": self.E, "C0": self.C0, "g": self.g, "kind": self.kind, "n_points": self.n_points})


def fit_loss_vs_compute(flops: np.ndarray, loss: np.ndarray, *, what: str = "loss vs compute") -> LossLaw:
    """``L(C) = E + (C0/C)^g`` by least squares (E in [0, min L)); a pure power law with 2 rungs or when the
    floor is not identified. Raises ``FitError`` with fewer than 2 rungs or a loss that does not fall."""
    c = np.asarray(flops, dtype=float)
    y = np.asarray(loss, dtype=float)
    ok = np.isfinite(c) & (c > 0) & np.isfinite(y) & (y > 0)
    c, y = c[ok], y[ok]
    if len(np.unique(c)) < 2:
        raise FitError(f"{what}: needs at least 2 rungs with a finite loss, got {len(np.unique(c))}")
    pl = fit_power_law(c, y, n_boot=0, what=what)
    if pl.a >= 0:
        raise FitError(f"{what}: loss does not fall with compute (slope {pl.a:+.3g} in log-log)")
    log_c0 = -math.log(pl.k) / pl.a
    if not log_c0 < 700:
        raise FitError(f"{what}: loss barely falls with compute (slope {pl.a:+.3g} in log-log); no usable law")
    power = LossLaw(E=0.0, C0=math.exp(log_c0), g=float(-pl.a), kind="power", n_points=len(c))
    if len(np.unique(c)) < 3:
        return power
    lc = np.log(c)
    ref = float(np.mean(lc))

    def resid(p: np.ndarray) -> np.ndarray:
        e, lc0, g = p
        return e + np.exp(g * (lc0 - lc)) - y

    best, best_cost = None, math.inf
    ymin = float(y.min())
    for frac in (0.0, 0.3, 0.6, 0.8, 0.9, 0.97):
        e0 = frac * ymin
        lp = fit_power_law(c, y - e0, n_boot=0)
        if lp.a >= 0:
            continue
        g0 = -lp.a
        lc00 = math.log(lp.k) / g0
        try:
            sol = least_squares(
                resid,
                x0=[e0, lc00, g0],
                bounds=([0.0, ref - 200.0, 1e-4], [ymin * 0.999999, ref + 200.0, 5.0]),
                x_scale=[max(ymin, 1e-3), 1.0, 0.1],
            )
        except ValueError:
            continue
        if sol.success and sol.cost < best_cost:
            best, best_cost = sol.x, sol.cost
    if best is None or best[0] <= 1e-9 * ymin:
        return power
    return LossLaw(E=float(best[0]), C0=float(math.exp(best[1])), g=float(best[2]), kind="saturating", n_points=len(c))
