"""The trend of the tied-vs-untied difference with compute (``LinearTrend``, linear in two parameters) and
where it crosses zero, with a Fieller 90% interval (``find_crossover``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.powerlaw import t_quantile


@dataclass(frozen=True)
class LinearTrend:
    """``y = intercept + slope * x(C)``, linear in its parameters; ``cov`` of (intercept, slope), t intervals
    on ``dof``. ``form``: ``loglinear`` (x = log10 C: slope per decade of compute) or ``saturating``
    (x = (C / c_ref)^-g with the exponent g of the loss-vs-compute laws: y -> intercept as C -> inf)."""

    intercept: float
    slope: float
    n_points: int
    cov: np.ndarray | None = field(default=None, repr=False, compare=False)
    dof: float | None = None
    method: str = "none"  # "t" (residual scatter), "known" (stated errors), "none" (2 exact points)
    sigma: float | None = None
    form: str = "loglinear"
    g: float | None = None
    c_ref: float | None = None

    def x(self, c: float | np.ndarray) -> float | np.ndarray:
        c = np.asarray(c, dtype=float)
        return np.log10(c) if self.form == "loglinear" else (c / self.c_ref) ** (-self.g)

    def c_of_x(self, x: float) -> float | None:
        """The compute at regressor value ``x`` (None when no finite compute has it)."""
        if self.form == "loglinear":
            return 10**x if x < 300 else None
        if x <= 0:
            return None
        c = self.c_ref * x ** (-1.0 / self.g)
        return c if math.isfinite(c) else None

    def __call__(self, c: float | np.ndarray) -> float | np.ndarray:
        out = self.intercept + self.slope * self.x(c)
        return float(out) if np.ndim(out) == 0 else out

    def interval(self, c: float, level: float = 0.90) -> tuple[float, float] | None:
        if self.cov is None or self.dof is None:
            return None
        x = float(self.x(c))
        se = math.sqrt(max(self.cov[0, 0] + 2 * x * self.cov[0, 1] + x * x * self.cov[1, 1], 0.0))
        q = t_quantile((1 + level) / 2, self.dof)
        y = float(self(c))
        return y - q * se, y + q * se

    def ci90(self) -> dict:
        if self.cov is None or self.dof is None:
            return {}
        q = t_quantile(0.95, self.dof)
        se = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        return {
            "intercept": [self.intercept - q * se[0], self.intercept + q * se[0]],
            "slope": [self.slope - q * se[1], self.slope + q * se[1]],
        }

    def to_dict(self) -> dict:
        formula = (
            "diff = intercept + slope * log10(C)"
            if self.form == "loglinear"
            else "diff = intercept + slope * (C / c_ref)^-g"
        )
        return jsonable(
            {
                "form": self.form,
                "formula": formula,
                "intercept": self.intercept,
                "slope": self.slope,
                "g": self.g,
                "c_ref": self.c_ref,
                "ci90": self.ci90(),
                "n_points": self.n_points,
                "method": self.method,
                "dof": self.dof,
                "sigma": self.sigma,
            }
        )


def fit_linear_trend(
    flops: np.ndarray,
    y: np.ndarray,
    *,
    se: np.ndarray | None = None,
    noise: float | None = None,
    g: float | None = None,
) -> LinearTrend:
    """Least squares of ``y`` on ``log10 C`` (or, given an exponent ``g``, on ``(C / c_ref)^-g``). ``se``:
    known standard errors per point (weights; the covariance is inflated by the reduced chi-square when the
    scatter exceeds them). ``noise``: a floor on a point's standard deviation; with 2 points and no ``se``
    it gives the interval."""
    c = np.asarray(flops, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(c)
    if n < 2 or len(np.unique(c)) < 2:
        raise FitError(f"trend with compute: needs at least 2 rungs, got {len(np.unique(c))}")
    form, c_ref = "loglinear", None
    if g is not None and g > 0:
        form, c_ref = "saturating", float(np.exp(np.mean(np.log(c))))
        x = (c / c_ref) ** (-g)
    else:
        g = None
        x = np.log10(c)
    if se is not None:
        se = np.asarray(se, dtype=float)
        if noise is not None:
            se = np.maximum(se, noise)
        if not (np.all(np.isfinite(se)) and np.all(se > 0)):
            se = None
    design = np.stack([np.ones_like(x), x], axis=1)
    w = np.ones(n) if se is None else 1.0 / se**2
    coef, *_ = np.linalg.lstsq(design * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)
    resid = y - design @ coef
    unscaled = np.linalg.pinv(design.T @ (design * w[:, None]))
    dof_res = n - 2
    sigma = math.sqrt(float(resid @ resid) / dof_res) if dof_res > 0 else None
    cov = dof = None
    method = "none"
    if se is not None:
        chi2 = float(np.sum(w * resid**2)) / dof_res if dof_res > 0 else 0.0
        cov, dof, method = (unscaled * chi2, float(dof_res), "t") if chi2 > 1 else (unscaled, math.inf, "known")
    elif noise is not None and noise > 0 and (sigma is None or sigma < noise):
        cov, dof, method = unscaled * noise**2, math.inf, "known"
    elif dof_res > 0:
        cov, dof, method = unscaled * sigma**2, float(dof_res), "t"
    return LinearTrend(float(coef[0]), float(coef[1]), n, cov, dof, method, sigma, form, g, c_ref)


def find_crossover(trend: LinearTrend, cmin: float, cmax: float, hero: float | None) -> dict:
    """Where the trend crosses zero, with the Fieller 90% set {C : 0 inside the trend's 90% interval}."""
    a, b = trend.intercept, trend.slope
    x0 = -a / b if b != 0 else math.nan
    c0 = trend.c_of_x(x0) if math.isfinite(x0) else None
    out: dict = {"flops": c0, "ci90": None}
    significant = True
    if trend.cov is not None and trend.dof is not None:
        q = t_quantile(0.95, trend.dof)
        vaa, vab, vbb = trend.cov[0, 0], trend.cov[0, 1], trend.cov[1, 1]
        qa = b * b - q * q * vbb
        qb = 2 * (a * b - q * q * vab)
        qc = a * a - q * q * vaa
        if qa > 0:
            disc = max(qb * qb - 4 * qa * qc, 0.0)
            roots = [(-qb - math.sqrt(disc)) / (2 * qa), (-qb + math.sqrt(disc)) / (2 * qa)]
            cs = [trend.c_of_x(r) for r in roots]
            # x <= 0 (saturating form) or huge x (log form): beyond every finite compute
            cs = [math.inf if v is None else v for v in cs]
            lo, hi = sorted(cs)
            out["ci90"] = [lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None]
        else:
            significant = False
            out["ci90"] = [None, None]
    else:
        out["note"] = "two rungs and no noise estimate: the crossover has no interval"
    winner_now = "tied" if float(trend(cmax)) > 0 else "untied"
    if not significant:
        out["status"] = "none"
        out["message"] = (
            "no significant trend of the difference with compute; the data support no crossover "
            f"({winner_now} ahead at the largest rung)"
        )
    elif c0 is None:
        out["status"] = "none"
        if trend.form == "saturating" and b != 0:
            out["message"] = (
                f"the difference levels off at {a:+.3g} as compute grows without crossing zero: "
                f"{winner_now} stays ahead"
            )
        else:
            out["message"] = "the difference does not cross zero: no crossover"
    elif cmin <= c0 <= cmax:
        out["status"] = "within_range"
        out["message"] = f"the winner flips within the ladder at C = {c0:.3g} ({winner_now} wins above it)"
    elif c0 > cmax:
        out["status"] = "beyond_range"
        where = ""
        if hero is not None:
            where = " (below the hero compute)" if c0 < hero else " (above the hero compute)"
        out["message"] = (
            f"the gap narrows with compute; extrapolated, the winner flips at C = {c0:.3g}{where}, "
            f"{c0 / cmax:.3g}x beyond the largest rung"
        )
    else:
        out["status"] = "none"
        out["message"] = f"the gap widens with compute; {winner_now} stays ahead (no crossover ahead)"
    return out
