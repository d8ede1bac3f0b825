"""The per-rung quadratic surface of log loss in (u, v) = (ln lr, ln batch) and its optimum (steps 2 and 3 of
:mod:`ladder.reports.fits.hparams`): the windowed fit on the engine (a :class:`Linear` form under the Huber
objective), its vertex and profile, the noise behind its intervals and the replicates of its coefficients."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.hparams.draws import Noise, replicates, spread

MIN_VALUES = 3  # distinct values of an axis a rung needs for a smooth optimum
N_BOOT = 200
NAMES = {"1": "c0", "u": "cu", "uu": "cuu", "v": "cv", "uv": "cuv", "vv": "cvv"}


def _column(term: str, u: np.ndarray, v: np.ndarray | None) -> np.ndarray:
    return {
        "1": lambda: np.ones_like(u),
        "u": lambda: u,
        "uu": lambda: u * u,
        "v": lambda: v,
        "uv": lambda: u * v,
        "vv": lambda: v * v,
    }[term]()


def _design(terms: Sequence[str]) -> Callable[[np.ndarray], np.ndarray]:
    def design(raw: np.ndarray) -> np.ndarray:
        u = raw[:, 0]
        v = raw[:, 1] if raw.shape[1] > 1 else None
        return np.stack([_column(t, u, v) for t in terms], axis=1)

    return design


def surface_form(terms: Sequence[str]) -> Linear:
    """``ln loss = sum_t c_t term_t(u, v)`` over the given terms, as an engine form."""
    return Linear("quadratic surface of ln loss", [NAMES[t] for t in terms], _design(terms))


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
    """A rung's surface: the terms the design identifies, the coefficients of the uncentred design (``coef``,
    in ``terms`` order), the engine's fit, the points used and the best grid point. ``draws`` (replicates of
    ``coef``, widened for few degrees of freedom) and the ``noise`` behind them are set by :func:`with_draws`."""

    terms: tuple[str, ...]
    coef: np.ndarray
    law: LawFit
    used: np.ndarray  # mask over the input points
    u_best: float
    v_best: float | None
    draws: np.ndarray | None = None
    noise: Noise | None = None

    @property
    def dof(self) -> int:
        return int(self.law.n - len(self.terms))

    @property
    def ssr(self) -> float:
        return float(self.law.residuals @ self.law.residuals)

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


def _select(
    u: np.ndarray, v: np.ndarray | None, half_width: float | None, centre: tuple[float, float | None]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The points inside the window around ``centre`` and the terms their design identifies."""
    mask = np.isin(np.round(u, 9), _window_values(u, centre[0], half_width))
    if v is not None:
        mask &= np.isin(np.round(v, 9), _window_values(v, centre[1], half_width))
    uu = u[mask]
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
    return mask, tuple(terms)


def _fit(
    u: np.ndarray,
    v: np.ndarray | None,
    y: np.ndarray,
    mask: np.ndarray,
    terms: tuple[str, ...],
    best: tuple[float, float | None],
    n_boot: int,
    seed: int,
) -> QFit:
    raw = u[mask, None] if v is None else np.stack([u[mask], v[mask]], axis=1)
    form = surface_form(terms)
    law = fit(form, raw, y[mask], n_boot=n_boot, seed=seed)
    coef = np.array([law.params[NAMES[t]] for t in terms])
    return QFit(terms=terms, coef=coef, law=law, used=mask, u_best=best[0], v_best=best[1])


def quad_fit(
    u: np.ndarray, v: np.ndarray | None, y: np.ndarray, window: float | None, *, n_boot: int = N_BOOT, seed: int = 0
) -> QFit:
    """Fit ``y`` (ln loss) around the best run, re-centred once on the fitted optimum (clipped to the grid)."""
    half = None if window is None else math.log(window)
    best = _best_point(u, v, y)
    mask, terms = _select(u, v, half, best)
    if half is not None:
        first = _fit(u, v, y, mask, terms, best, 0, seed)
        opt_u, opt_v = vertex(first, first.coef[None, :], centre=best)
        cu = float(np.clip(opt_u[0], u.min(), u.max())) if np.isfinite(opt_u[0]) else best[0]
        cv = None
        if v is not None:
            cv = float(np.clip(opt_v[0], v.min(), v.max())) if np.isfinite(opt_v[0]) else best[1]
        mask2, terms2 = _select(u, v, half, (cu, cv))
        if "uu" in terms2:
            mask, terms = mask2, terms2
    own_dof = int(mask.sum()) - len(terms)
    return _fit(u, v, y, mask, terms, best, n_boot if own_dof >= 3 else 0, seed)


def with_draws(fit_: QFit, noise: Noise | None, n_boot: int, seed: int) -> QFit:
    """Set the coefficient replicates: the engine's residual bootstrap with the rung's own noise, else a
    parametric bootstrap from the pooled or known noise; none without a noise (an exact fit)."""
    fit_.noise = noise
    if noise is None or n_boot <= 0:
        return fit_
    law = fit_.law
    thetas = replicates(law, noise, n_boot=n_boot, seed=seed)
    pub = law.form.public(thetas, law.center)
    boot = np.stack([np.asarray(pub[NAMES[t]], dtype=float) for t in fit_.terms], axis=1)
    fit_.draws = spread(fit_.coef, boot, noise.dof)
    return fit_


def profile_coefs(fit_: QFit, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients (p0, p1, p2) in v of min_u loss(u, v) (the LR re-tuned at every batch)."""
    cuu = fit_.c("uu", coef)
    safe = np.where(cuu > 0, cuu, np.nan)
    cu, cuv = fit_.c("u", coef), fit_.c("uv", coef)
    p0 = fit_.c("1", coef) - cu**2 / (4 * safe)
    p1 = fit_.c("v", coef) - cu * cuv / (2 * safe)
    p2 = fit_.c("vv", coef) - cuv**2 / (4 * safe)
    return p0, p1, p2


def vertex(fit_: QFit, coef: np.ndarray, centre: tuple[float, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Optimum (u*, v*) per coefficient row. No minimum along an axis -> +-inf towards lower loss."""
    has_v = "vv" in fit_.terms
    v_fix = centre[1] if centre[1] is not None else 0.0
    if has_v:
        _, p1, p2 = profile_coefs(fit_, coef)
        with np.errstate(divide="ignore", invalid="ignore"):
            v_opt = -p1 / (2 * p2)
        slope = p1 + 2 * p2 * v_fix
        bad = ~(p2 > 0)
        v_opt = np.where(bad, np.where(slope < 0, np.inf, -np.inf), v_opt)
        v_opt = np.where(fit_.c("uu", coef) > 0, v_opt, np.nan)  # no LR minimum: no profile either
        v_use = np.where(np.isfinite(v_opt), v_opt, v_fix)
    else:
        v_opt = np.full(coef.shape[0], np.nan)
        v_use = np.full(coef.shape[0], v_fix)
    u_opt = conditional_u(fit_, coef, v_use, centre[0])
    return np.asarray(u_opt, dtype=float), np.asarray(v_opt, dtype=float)


def noise_for(fit_: QFit, loss_noise: float | None, pooled: tuple[float, float] | None) -> Noise | None:
    """The noise behind a rung's intervals (ln-loss units): its own residuals with >= 3 dof, else the pooled
    ones; a known ``loss_noise`` (loss units) is a floor and, when it dominates, a known sigma (dof inf)."""
    n = fit_.law.n
    noise: Noise | None = None
    if fit_.dof >= 3:
        noise = Noise(np.full(n, math.sqrt(fit_.ssr / fit_.dof)), float(fit_.dof), "own")
    elif pooled is not None:
        noise = Noise(np.full(n, pooled[0]), pooled[1], "pooled")
    if loss_noise is not None and loss_noise > 0:
        floor = loss_noise / np.exp(fit_.law.y)
        if noise is None or noise.scalar < float(np.min(floor)):
            noise = Noise(floor, math.inf, "loss_noise")
    return noise


def pooled_noise(fits: Sequence[QFit]) -> tuple[float, float] | None:
    """(sigma, dof) of the ln-loss residuals pooled over the rungs that have residual degrees of freedom."""
    ssr = sum(f.ssr for f in fits if f.dof > 0)
    dof = sum(f.dof for f in fits if f.dof > 0)
    return (math.sqrt(ssr / dof), float(dof)) if dof > 0 else None


def conditional_u(fit_: QFit, coef: np.ndarray, v0: float | np.ndarray, u_centre: float) -> np.ndarray:
    """Vertex in u at a fixed v, per coefficient row (+-inf towards lower loss when there is no minimum)."""
    cuu = fit_.c("uu", coef)
    bu = fit_.c("u", coef) + fit_.c("uv", coef) * v0
    with np.errstate(divide="ignore", invalid="ignore"):
        u_opt = -bu / (2 * cuu)
    slope = bu + 2 * cuu * u_centre
    return np.where(cuu > 0, u_opt, np.where(slope < 0, np.inf, -np.inf))
