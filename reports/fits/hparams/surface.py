"""The per-rung quadratic surface of loss in (u, v) = (ln lr, ln batch) and its optimum (steps 2 and 3 of
:mod:`ladder.reports.fits.hparams`): the windowed least-squares fit, its vertex and profile, coefficient draws
and the residual noise behind the intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ladder.reports.fits.powerlaw import finite_interval, mvt_draws

MIN_VALUES = 3  # distinct values of an axis a rung needs for a smooth optimum
_ALL_TERMS = ("1", "u", "uu", "v", "uv", "vv")


def _column(term: str, u: np.ndarray, v: np.ndarray | None) -> np.ndarray:
    return {
        "1": lambda: np.ones_like(u),
        "u": lambda: u,
        "uu": lambda: u * u,
        "v": lambda: v,
        "uv": lambda: u * v,
        "vv": lambda: v * v,
    }[term]()


def distinct(a: np.ndarray) -> np.ndarray:
    """Distinct values up to rounding (1e-9 relative in log space)."""
    return np.unique(np.round(a, 9))


def distinct_values(a: np.ndarray) -> np.ndarray:
    """One original value per distinct (rounded) value, sorted: for reporting grids."""
    _, idx = np.unique(np.round(a, 9), return_index=True)
    return np.asarray(a)[idx]


def _window_values(values: np.ndarray, centre: float, half_width: float | None) -> np.ndarray:
    """Distinct values within ``half_width`` of ``centre``, widened to the MIN_VALUES nearest."""
    d = distinct(values)
    if half_width is None:
        return d
    dist = np.abs(d - centre)
    keep = dist <= half_width + 1e-9
    if keep.sum() < MIN_VALUES:
        keep = np.zeros_like(keep)
        keep[np.argsort(dist, kind="stable")[: min(MIN_VALUES, len(d))]] = True
    return d[keep]


@dataclass
class QFit:
    terms: tuple[str, ...]
    coef: np.ndarray
    unscaled: np.ndarray  # (X^T X)^-1
    ssr: float
    dof: int
    used: np.ndarray  # mask over the input points
    u_best: float
    v_best: float | None

    def c(self, name: str, coef: np.ndarray | None = None) -> np.ndarray | float:
        coef = self.coef if coef is None else coef
        if name not in self.terms:
            return np.zeros(coef.shape[:-1]) if coef.ndim > 1 else 0.0
        if coef.ndim == 1:
            return float(coef[self.terms.index(name)])
        return coef[..., self.terms.index(name)]


def _best_point(u: np.ndarray, v: np.ndarray | None, y: np.ndarray) -> tuple[float, float | None]:
    """The grid point with the lowest mean loss (replicates averaged)."""
    key = np.round(u, 9) if v is None else np.round(u, 9) + 1j * np.round(v, 9)
    frame = pd.DataFrame({"k": key, "y": y, "u": u, "v": u if v is None else v})
    means = frame.groupby("k", sort=False).agg(y=("y", "mean"), u=("u", "first"), v=("v", "first"))
    best = means.loc[means["y"].idxmin()]
    return float(best["u"]), (None if v is None else float(best["v"]))


def _fit_surface(
    u: np.ndarray, v: np.ndarray | None, y: np.ndarray, half_width: float | None, centre: tuple[float, float | None]
) -> QFit:
    u_keep = _window_values(u, centre[0], half_width)
    mask = np.isin(np.round(u, 9), u_keep)
    if v is not None:
        v_keep = _window_values(v, centre[1], half_width)
        mask &= np.isin(np.round(v, 9), v_keep)
    uu, yy = u[mask], y[mask]
    vv = None if v is None else v[mask]
    n_u = len(distinct(uu))
    n_v = 0 if vv is None else len(distinct(vv))
    terms = ["1", "u", "uu"] if n_u >= 3 else ["1", "u"]
    if n_v >= 2:
        terms += ["v", "uv"]
    if n_v >= 3:
        terms += ["vv"]
    design = np.stack([_column(t, uu, vv) for t in terms], axis=1)
    # Drop what the design cannot identify (a cross design has no information on cuv).
    for drop in ("uv", "vv", "v"):
        if np.linalg.matrix_rank(design) >= len(terms):
            break
        if drop in terms:
            j = terms.index(drop)
            terms.pop(j)
            design = np.delete(design, j, axis=1)
    coef, *_ = np.linalg.lstsq(design, yy, rcond=None)
    resid = yy - design @ coef
    return QFit(
        terms=tuple(terms),
        coef=coef,
        unscaled=np.linalg.pinv(design.T @ design),
        ssr=float(resid @ resid),
        dof=int(len(yy) - len(terms)),
        used=mask,
        u_best=centre[0],
        v_best=centre[1],
    )


def quad_fit(u: np.ndarray, v: np.ndarray | None, y: np.ndarray, window: float | None) -> QFit:
    """Fit around the best run, then re-centre once on the fitted optimum (clipped to the grid)."""
    half = None if window is None else math.log(window)
    best = _best_point(u, v, y)
    fit = _fit_surface(u, v, y, half, best)
    if half is None:
        return fit
    opt_u, opt_v = vertex(fit, fit.coef[None, :], centre=best)
    cu = float(np.clip(opt_u[0], u.min(), u.max())) if np.isfinite(opt_u[0]) else best[0]
    cv = None
    if v is not None:
        cv = float(np.clip(opt_v[0], v.min(), v.max())) if np.isfinite(opt_v[0]) else best[1]
    refit = _fit_surface(u, v, y, half, (cu, cv))
    if "uu" in refit.terms:
        refit.u_best, refit.v_best = best
        return refit
    return fit


def profile_coefs(fit: QFit, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients (p0, p1, p2) in v of min_u loss(u, v) (the LR re-tuned at every batch)."""
    cuu = fit.c("uu", coef)
    safe = np.where(cuu > 0, cuu, np.nan)
    cu, cuv = fit.c("u", coef), fit.c("uv", coef)
    p0 = fit.c("1", coef) - cu**2 / (4 * safe)
    p1 = fit.c("v", coef) - cu * cuv / (2 * safe)
    p2 = fit.c("vv", coef) - cuv**2 / (4 * safe)
    return p0, p1, p2


def vertex(fit: QFit, coef: np.ndarray, centre: tuple[float, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Optimum (u*, v*) per coefficient row. No minimum along an axis -> +-inf towards lower loss."""
    has_v = "vv" in fit.terms
    v_fix = centre[1] if centre[1] is not None else 0.0
    if has_v:
        _, p1, p2 = profile_coefs(fit, coef)
        with np.errstate(divide="ignore", invalid="ignore"):
            v_opt = -p1 / (2 * p2)
        slope = p1 + 2 * p2 * v_fix
        bad = ~(p2 > 0)
        v_opt = np.where(bad, np.where(slope < 0, np.inf, -np.inf), v_opt)
        v_opt = np.where(fit.c("uu", coef) > 0, v_opt, np.nan)  # no LR minimum: no profile either
        v_use = np.where(np.isfinite(v_opt), v_opt, v_fix)
    else:
        v_opt = np.full(coef.shape[0], np.nan)
        v_use = np.full(coef.shape[0], v_fix)
    u_opt = conditional_u(fit, coef, v_use, centre[0])
    return np.asarray(u_opt, dtype=float), np.asarray(v_opt, dtype=float)


def coef_draws(fit: QFit, sigma: float, dof: float, n: int, seed: int) -> np.ndarray:
    """``n`` draws of the coefficients: multivariate t around the fit with the residual scale ``sigma``."""
    return mvt_draws(fit.coef, fit.unscaled * sigma**2, dof, n, np.random.default_rng(seed))


def draw_quantiles(draws: np.ndarray, level: float = 0.90) -> tuple[float | None, float | None]:
    """Quantiles that tolerate +-inf (an unbounded side gives None); NaN draws count as unbounded both ways."""
    d = np.asarray(draws, dtype=float)
    if len(d) == 0:
        return None, None
    n_nan = int(np.isnan(d).sum())
    d = np.sort(np.where(np.isnan(d), np.inf, d))
    lo_i = int(math.floor((1 - level) / 2 * (len(d) - 1)))
    hi_i = int(math.ceil((1 + level) / 2 * (len(d) - 1)))
    lo, hi = d[lo_i], d[hi_i]
    if n_nan > (1 - level) / 2 * len(d):
        lo = -np.inf
    return finite_interval(float(lo), float(hi))


def noise_for(fit: QFit, loss_noise: float | None, pooled: tuple[float, float] | None) -> tuple[float, float] | None:
    """(sigma, dof) behind a rung's intervals: its own residuals with >= 3 dof, else the pooled ones; a
    known ``loss_noise`` is a floor (and, when it dominates, a known sigma: dof inf)."""
    noise: tuple[float, float] | None = None
    if fit.dof >= 3:
        noise = (math.sqrt(fit.ssr / fit.dof), float(fit.dof))
    elif pooled is not None:
        noise = pooled
    if loss_noise is not None and loss_noise > 0 and (noise is None or noise[0] < loss_noise):
        noise = (float(loss_noise), math.inf)
    return noise


def pooled_noise(fits: Sequence[QFit]) -> tuple[float, float] | None:
    ssr = sum(f.ssr for f in fits if f.dof > 0)
    dof = sum(f.dof for f in fits if f.dof > 0)
    return (math.sqrt(ssr / dof), float(dof)) if dof > 0 else None


def conditional_u(fit: QFit, coef: np.ndarray, v0: float, u_centre: float) -> np.ndarray:
    """Vertex in u at a fixed v, per coefficient row (+-inf towards lower loss when there is no minimum)."""
    cuu = fit.c("uu", coef)
    bu = fit.c("u", coef) + fit.c("uv", coef) * v0
    with np.errstate(divide="ignore", invalid="ignore"):
        u_opt = -bu / (2 * cuu)
    slope = bu + 2 * cuu * u_centre
    return np.where(cuu > 0, u_opt, np.where(slope < 0, np.inf, -np.inf))
