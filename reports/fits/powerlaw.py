"""y = k * x^a fitted by least squares in log-log space, with intervals that stay honest at 3-5 points.

Used wherever a quantity is extrapolated along scale: N_opt(C), D_opt(C), LR*(C), B*(C), ablation trends.

Intervals. A ladder has few rungs, and resampling 3-5 points (cases bootstrap) is degenerate: a third of the
resamples of 3 points repeat one point, and the quantiles of the rest are unstable. So the default
(``method="t"``) is the classical one for a straight line in log-log space: the covariance of (log k, a) is
``s^2 (X^T W X)^-1`` with ``s`` the residual standard deviation on ``n - 2`` degrees of freedom, and every
interval is a Student-t interval (exact when the log residuals are Gaussian; wide, as it should be, at 3 points).
``boot`` then holds draws from that multivariate t, so code that resamples a law still can.

When the per-point uncertainty of ``log y`` is known (``log_sigma``, e.g. from the interval of each fitted
optimum) the points are weighted by ``1 / sigma^2`` and the covariance is ``(X^T W X)^-1``, inflated by the
reduced chi-square when the scatter exceeds the stated errors; this also gives an interval with only 2 points.
``method="cases"`` keeps the old cases bootstrap for laws fitted on many points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri, stdtrit

from ladder.errors import FitError

METHODS = ("auto", "t", "cases")


def t_quantile(p: float, dof: float) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (the normal one when ``dof`` is inf)."""
    if not math.isfinite(dof):
        return float(ndtri(p))
    return float(stdtrit(dof, p))


def finite_or_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def finite_interval(lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
    """An interval for JSON: an infinite or missing bound is None (unbounded)."""
    return finite_or_none(lo), finite_or_none(hi)


@dataclass(frozen=True)
class PowerLaw:
    """``y = k x^a``. ``ci90`` holds 90% intervals of ``k`` and ``a`` (empty when there is none)."""

    k: float
    a: float
    n_points: int
    ci90: dict[str, tuple[float, float]] = field(default_factory=dict)
    boot: np.ndarray | None = field(default=None, repr=False, compare=False)  # (n_draws, 2): log k, a
    cov: np.ndarray | None = field(default=None, repr=False, compare=False)  # 2x2 covariance of (log k, a)
    dof: float | None = None  # degrees of freedom of the t intervals (inf: known errors, normal)
    method: str = "none"  # "t", "known", "cases" or "none" (2 points, no interval)
    sigma_log: float | None = None  # residual standard deviation of log y
    x_range: tuple[float, float] | None = None  # the fitted x; predictions outside it are extrapolations
    chi2_red: float | None = None  # with log_sigma: residual scatter over the stated errors (> 1 inflates cov)

    def __call__(self, x: float | np.ndarray) -> float | np.ndarray:
        y = self.k * np.asarray(x, dtype=float) ** self.a
        return float(y) if np.ndim(y) == 0 else y

    def interval(self, x: float, level: float = 0.90) -> tuple[float, float]:
        """Interval of the fitted law (the mean response) at ``x``: quantiles of ``boot`` when there are draws
        (so a caller that swaps in its own bootstrap with ``dataclasses.replace`` gets it), else the exact
        Student-t interval from the covariance; the fitted point twice when there is neither."""
        lo_p, hi_p = (1 - level) / 2, (1 + level) / 2
        has_boot = self.boot is not None and len(self.boot) > 0
        if not has_boot and self.cov is not None and self.dof is not None and self.method in ("t", "known"):
            lx = np.log(np.asarray(x, dtype=float))
            centre = math.log(self.k) + self.a * lx
            var = self.cov[0, 0] + 2 * lx * self.cov[0, 1] + lx**2 * self.cov[1, 1]
            half = t_quantile(hi_p, self.dof) * np.sqrt(np.maximum(var, 0.0))
            lo, hi = np.exp(centre - half), np.exp(centre + half)
            if np.ndim(lo) == 0:
                return float(lo), float(hi)
            return lo, hi
        if not has_boot:
            y = self(x)
            return y, y
        preds = np.exp(self.boot[:, 0] + self.boot[:, 1] * np.log(x))
        lo, hi = np.quantile(preds, [lo_p, hi_p])
        return float(lo), float(hi)

    def extrapolates(self, x: float) -> bool:
        """Whether ``x`` lies outside the range of the fitted points."""
        return self.x_range is not None and not (self.x_range[0] <= x <= self.x_range[1])

    def to_dict(self) -> dict:
        return {
            "k": finite_or_none(self.k),
            "a": finite_or_none(self.a),
            "n_points": self.n_points,
            "ci90": {key: [finite_or_none(v[0]), finite_or_none(v[1])] for key, v in self.ci90.items()},
            "method": self.method,
            "dof": finite_or_none(self.dof) if self.dof is not None else None,
            "sigma_log": finite_or_none(self.sigma_log),
            "x_range": list(self.x_range) if self.x_range is not None else None,
            "chi2_red": finite_or_none(self.chi2_red),
        }


def _wlstsq(logx: np.ndarray, logy: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Weighted least squares of ``logy = b0 + b1 logx``: coefficients, (X^T W X)^-1, weighted SSR, residuals."""
    design = np.stack([np.ones_like(logx), logx], axis=1)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(design * sw[:, None], logy * sw, rcond=None)
    xtwx = design.T @ (design * w[:, None])
    unscaled = np.linalg.pinv(xtwx)
    resid = logy - design @ coef
    return coef, unscaled, float(np.sum(w * resid**2)), resid


def mvt_draws(mean: np.ndarray, cov: np.ndarray, dof: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from the multivariate t (normal when ``dof`` is inf) with this mean and scale matrix."""
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = rng.standard_normal((n, len(mean))) @ root.T
    if math.isfinite(dof):
        z *= np.sqrt(dof / rng.chisquare(dof, size=n))[:, None]
    return mean + z


def fit_power_law(
    x: np.ndarray,
    y: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    what: str = "power law",
    log_sigma: np.ndarray | None = None,
    method: str = "auto",
) -> PowerLaw:
    """Fit ``y = k x^a`` by (weighted) least squares of log y on log x.

    ``weights``: relative weights of the points. ``log_sigma``: known standard deviations of ``log y`` per
    point (replaces ``weights``). ``method``: ``"auto"``/``"t"`` (Student-t intervals, see the module doc;
    ``n_boot`` draws of the law go to ``boot``) or ``"cases"`` (bootstrap of the points). With 2 points and no
    ``log_sigma`` the law is exact and has no interval (``method == "none"``). Raises ``FitError`` on fewer
    than 2 distinct x or non-positive values."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if method not in METHODS:
        raise FitError(f"{what}: unknown interval method {method!r}; one of {', '.join(METHODS)}")
    if x.shape != y.shape or x.ndim != 1:
        raise FitError(f"{what}: x and y must be 1-D arrays of the same length")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        raise FitError(f"{what}: needs finite, positive x and y")
    n_distinct = len(np.unique(x))
    if n_distinct < 2:
        raise FitError(f"{what}: needs at least 2 distinct points, got {n_distinct}")
    if weights is not None and log_sigma is not None:
        raise FitError(f"{what}: give weights or log_sigma, not both")
    known = log_sigma is not None
    if known:
        sig = np.broadcast_to(np.asarray(log_sigma, dtype=float), x.shape)
        if not (np.all(np.isfinite(sig)) and np.all(sig > 0)):
            raise FitError(f"{what}: log_sigma must be finite and positive")
        w = 1.0 / sig**2
    else:
        w = np.ones_like(x) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), x.shape)
        if not (np.all(np.isfinite(w)) and np.all(w >= 0) and np.sum(w > 0) >= 2):
            raise FitError(f"{what}: weights must be finite, non-negative, with at least 2 positive")
    logx, logy = np.log(x), np.log(y)
    coef, unscaled, ssr, resid = _wlstsq(logx, logy, w)
    n = len(x)
    dof_res = n - 2
    sigma_log = math.sqrt(float(resid @ resid) / dof_res) if dof_res > 0 else None
    chi2_red = ssr / dof_res if known and dof_res > 0 else None
    x_range = (float(x.min()), float(x.max()))

    cov: np.ndarray | None = None
    dof: float | None = None
    used = "none"
    boot: np.ndarray | None = None
    rng = np.random.default_rng(seed)
    if method == "cases":
        used = "cases"
        if n_boot > 0 and n >= 3:
            draws = []
            for _ in range(n_boot):
                idx = rng.integers(0, n, n)
                if len(np.unique(logx[idx])) < 2 or np.sum(w[idx] > 0) < 2:
                    continue
                draws.append(_wlstsq(logx[idx], logy[idx], w[idx])[0])
            boot = np.asarray(draws) if draws else None
    elif known:
        if chi2_red is not None and chi2_red > 1.0:
            cov, dof = unscaled * chi2_red, float(dof_res)
        else:
            cov, dof = unscaled, math.inf
        used = "known"
    elif dof_res > 0:
        cov, dof = unscaled * ssr / dof_res, float(dof_res)
        used = "t"

    ci90: dict[str, tuple[float, float]] = {}
    if cov is not None and dof is not None:
        q = t_quantile(0.95, dof)
        se_k, se_a = math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0))
        ci90 = {
            "k": (float(np.exp(coef[0] - q * se_k)), float(np.exp(coef[0] + q * se_k))),
            "a": (float(coef[1] - q * se_a), float(coef[1] + q * se_a)),
        }
        if n_boot > 0:
            boot = mvt_draws(coef, cov, dof, n_boot, rng)
    elif boot is not None and len(boot):
        k_lo, k_hi = np.exp(np.quantile(boot[:, 0], [0.05, 0.95]))
        a_lo, a_hi = np.quantile(boot[:, 1], [0.05, 0.95])
        ci90 = {"k": (float(k_lo), float(k_hi)), "a": (float(a_lo), float(a_hi))}
    return PowerLaw(
        k=float(np.exp(coef[0])),
        a=float(coef[1]),
        n_points=n,
        ci90=ci90,
        boot=boot,
        cov=cov,
        dof=dof,
        method=used,
        sigma_log=sigma_log,
        x_range=x_range,
        chi2_red=chi2_red,
    )
