"""Hyperparameter laws: the optimal learning rate and batch size per rung, their power laws in compute, and
what it costs to miss them.

Method (one choice, documented here and in every result):

1. Runs are grouped into rungs by the ``scale`` column (or, without one, by compute within 10%).
2. Per rung, loss is fitted by a quadratic *surface* in (u, v) = (ln lr, ln batch_tokens)::

       loss = c0 + cu u + cuu u^2 + cv v + cuv u v + cvv v^2

   keeping only the terms the rung's design identifies: with one batch size it is a parabola in ln lr; with
   two, each batch gets its own level and the LR optimum may move with batch (``cuv``); with three or more
   batch sizes the surface also has a minimum in batch. Loss vs log LR is close to a parabola only near the
   optimum, so the fit uses the points within a factor ``window`` (default 8) of the best run on each axis
   (widened to at least 3 values), re-centred once on the fitted optimum. The optimum is the vertex of the
   fit, not a grid point. The LR optimum is reported at the optimal batch (``u* = -(cu + cuv v*) / 2cuu``);
   the batch optimum is the vertex of the *profile* ``min_u loss(u, v)``, i.e. with the LR re-tuned.
3. Intervals come from draws of the fitted coefficients (multivariate t with the residual variance; when a
   rung has fewer than 3 residual degrees of freedom the residual variance is pooled over rungs; a known
   seed-to-seed noise ``loss_noise`` sets a floor). A draw with no minimum sends the optimum to the side where
   the loss falls, so an interval can be unbounded (``None``).
4. An optimum must be bracketed: it is flagged ``edge`` when the best run is at an end of the grid or the
   vertex lies outside it ("optimum at grid edge, widen the sweep"); ``no_minimum`` when the fit has no
   minimum at all. Such rungs are left out of the laws (``use_edge=True`` keeps the edge ones).
5. LR*(C), B*(C) (and versus N) are power laws (``powerlaw.fit_power_law``, points weighted by the precision
   of each rung's optimum), extrapolated to the hero with a 90% interval of the law.
6. The penalty of being a factor 2 off is ``curvature * (ln 2)^2`` (loss units), per rung and extrapolated by
   a power law in compute. For batch it is given with the LR re-tuned (profile) and at a fixed LR.

The module also holds the pieces ``ablations`` reuses: ``group_scales``, ``fit_log_quadratic``, ``Trend``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from ladder.reports.powerlaw import PowerLaw, fit_power_law, t_quantile

from ladder.errors import FitError
from ladder.layout import jsonable

LN2_SQ = math.log(2.0) ** 2
REQUIRED = ("params", "tokens", "flops", "loss")
MIN_VALUES = 3  # distinct values of an axis a rung needs for a smooth optimum


# --------------------------------------------------------------------------------------------- JSON helpers


def _ci(lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
    f = lambda v: None if v is None or not math.isfinite(v) else float(v)  # noqa: E731
    return f(lo), f(hi)


# ------------------------------------------------------------------------------------------------- scales


@dataclass(frozen=True)
class Scale:
    """One rung: its label and representative numbers (geometric mean of compute, median N and D)."""

    label: str
    flops: float
    params: float
    tokens: float
    index: pd.Index  # rows of the frame in this rung


def check_columns(df: pd.DataFrame, needed: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise FitError(f"{what}: expected a pandas DataFrame of runs, got {type(df).__name__}")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise FitError(f"{what}: the runs table lacks column(s) {', '.join(missing)}")
    if len(df) == 0:
        raise FitError(f"{what}: the runs table is empty")


def group_scales(df: pd.DataFrame, *, tol: float = 0.10, by: Sequence[str] | None = None) -> list[Scale]:
    """Rungs of the ladder, smallest compute first. By the ``scale`` column when present; else by the
    columns ``by`` when given and present; else runs whose compute is within ``tol`` of the smallest of a
    group share a rung."""
    if not df.index.is_unique:
        raise FitError("runs table: row labels repeat (reset_index() a concatenated table)")
    if "scale" in df.columns and df["scale"].notna().all():
        keys = df["scale"].astype(str)
    elif by and all(c in df.columns for c in by):
        keys = df[list(by)].astype(str).agg("/".join, axis=1)
    else:
        order = np.argsort(df["flops"].to_numpy(dtype=float), kind="stable")
        flops = df["flops"].to_numpy(dtype=float)
        labels = np.empty(len(df), dtype=object)
        anchor, group = None, -1
        for i in order:
            if anchor is None or flops[i] > anchor * (1 + tol):
                anchor, group = flops[i], group + 1
            labels[i] = group
        keys = pd.Series(labels, index=df.index)
        names = {}
        for g in pd.unique(keys):
            f = df.loc[keys == g, "flops"].to_numpy(dtype=float)
            names[g] = f"C={float(np.exp(np.mean(np.log(f)))):.3g}"
        keys = keys.map(names)
    scales = []
    for key in pd.unique(keys):
        idx = df.index[keys == key]
        sub = df.loc[idx]
        f = sub["flops"].to_numpy(dtype=float)
        f = f[np.isfinite(f) & (f > 0)]
        flops = float(np.exp(np.mean(np.log(f)))) if len(f) else math.nan
        scales.append(
            Scale(
                label=str(key),
                flops=flops,
                params=float(sub["params"].median()),
                tokens=float(sub["tokens"].median()),
                index=idx,
            )
        )
    scales.sort(key=lambda s: (s.flops if math.isfinite(s.flops) else math.inf))
    return scales


# ----------------------------------------------------------------------------------- quadratic surface fits

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


def _distinct(a: np.ndarray) -> np.ndarray:
    """Distinct values up to rounding (1e-9 relative in log space)."""
    return np.unique(np.round(a, 9))


def _distinct_values(a: np.ndarray) -> np.ndarray:
    """One original value per distinct (rounded) value, sorted: for reporting grids."""
    _, idx = np.unique(np.round(a, 9), return_index=True)
    return np.asarray(a)[idx]


def _window_values(values: np.ndarray, centre: float, half_width: float | None) -> np.ndarray:
    """Distinct values within ``half_width`` of ``centre``, widened to the MIN_VALUES nearest."""
    d = _distinct(values)
    if half_width is None:
        return d
    dist = np.abs(d - centre)
    keep = dist <= half_width + 1e-9
    if keep.sum() < MIN_VALUES:
        keep = np.zeros_like(keep)
        keep[np.argsort(dist, kind="stable")[: min(MIN_VALUES, len(d))]] = True
    return d[keep]


@dataclass
class _QFit:
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
) -> _QFit:
    u_keep = _window_values(u, centre[0], half_width)
    mask = np.isin(np.round(u, 9), u_keep)
    if v is not None:
        v_keep = _window_values(v, centre[1], half_width)
        mask &= np.isin(np.round(v, 9), v_keep)
    uu, yy = u[mask], y[mask]
    vv = None if v is None else v[mask]
    n_u = len(_distinct(uu))
    n_v = 0 if vv is None else len(_distinct(vv))
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
    return _QFit(
        terms=tuple(terms),
        coef=coef,
        unscaled=np.linalg.pinv(design.T @ design),
        ssr=float(resid @ resid),
        dof=int(len(yy) - len(terms)),
        used=mask,
        u_best=centre[0],
        v_best=centre[1],
    )


def _quad_fit(u: np.ndarray, v: np.ndarray | None, y: np.ndarray, window: float | None) -> _QFit:
    """Fit around the best run, then re-centre once on the fitted optimum (clipped to the grid)."""
    half = None if window is None else math.log(window)
    best = _best_point(u, v, y)
    fit = _fit_surface(u, v, y, half, best)
    if half is None:
        return fit
    opt_u, opt_v = _vertex(fit, fit.coef[None, :], centre=best)
    cu = float(np.clip(opt_u[0], u.min(), u.max())) if np.isfinite(opt_u[0]) else best[0]
    cv = None
    if v is not None:
        cv = float(np.clip(opt_v[0], v.min(), v.max())) if np.isfinite(opt_v[0]) else best[1]
    refit = _fit_surface(u, v, y, half, (cu, cv))
    if "uu" in refit.terms:
        refit.u_best, refit.v_best = best
        return refit
    return fit


def _profile(fit: _QFit, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients (p0, p1, p2) in v of min_u loss(u, v) (the LR re-tuned at every batch)."""
    cuu = fit.c("uu", coef)
    safe = np.where(cuu > 0, cuu, np.nan)
    cu, cuv = fit.c("u", coef), fit.c("uv", coef)
    p0 = fit.c("1", coef) - cu**2 / (4 * safe)
    p1 = fit.c("v", coef) - cu * cuv / (2 * safe)
    p2 = fit.c("vv", coef) - cuv**2 / (4 * safe)
    return p0, p1, p2


def _vertex(fit: _QFit, coef: np.ndarray, centre: tuple[float, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Optimum (u*, v*) per coefficient row. No minimum along an axis -> +-inf towards lower loss."""
    has_v = "vv" in fit.terms
    v_fix = centre[1] if centre[1] is not None else 0.0
    if has_v:
        _, p1, p2 = _profile(fit, coef)
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
    cuu = fit.c("uu", coef)
    bu = fit.c("u", coef) + fit.c("uv", coef) * v_use
    with np.errstate(divide="ignore", invalid="ignore"):
        u_opt = -bu / (2 * cuu)
    slope_u = bu + 2 * cuu * centre[0]
    u_opt = np.where(cuu > 0, u_opt, np.where(slope_u < 0, np.inf, -np.inf))
    return np.asarray(u_opt, dtype=float), np.asarray(v_opt, dtype=float)


def _coef_draws(fit: _QFit, sigma: float, dof: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cov = fit.unscaled * sigma**2
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = rng.standard_normal((n, len(fit.coef))) @ root.T
    if math.isfinite(dof):
        z *= np.sqrt(dof / rng.chisquare(dof, size=n))[:, None]
    return fit.coef + z


def _quantiles(draws: np.ndarray, level: float = 0.90) -> tuple[float | None, float | None]:
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
    return _ci(float(lo), float(hi))


@dataclass(frozen=True)
class AxisOptimum:
    """A smooth optimum along one axis of a rung: ``loss = loss_min + curvature * (ln x - ln opt)^2``.

    ``poly`` = [c0, c1, c2] of the fitted curve in ``ln x`` (``loss = c0 + c1 ln x + c2 ln x^2``), which a
    figure can draw even when there is no minimum. ``status``: ``ok``, ``edge`` (vertex not bracketed by the
    grid; ``opt`` is an extrapolation) or ``no_minimum`` (``opt`` None). Intervals are 90%; a ``None`` bound
    is unbounded; the whole interval is None when the fit leaves no residual degrees of freedom."""

    name: str
    opt: float | None
    ci90: tuple[float | None, float | None] | None
    loss_min: float | None
    curvature: float
    curvature_ci90: tuple[float | None, float | None] | None
    penalty_2x: float | None
    penalty_2x_ci90: tuple[float | None, float | None] | None
    poly: tuple[float, float, float]
    grid: tuple[float, ...]
    best_grid: float
    n_used: int
    status: str
    edge_side: str | None = None
    message: str | None = None
    sigma: float | None = None  # loss noise behind the interval
    dof: float | None = None  # its degrees of freedom (None: known noise)
    extra: dict = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.status == "ok"

    def curve(self, x: np.ndarray | float) -> np.ndarray | float:
        lx = np.log(np.asarray(x, dtype=float))
        out = self.poly[0] + self.poly[1] * lx + self.poly[2] * lx**2
        return float(out) if np.ndim(out) == 0 else out

    def to_dict(self) -> dict:
        return jsonable(
            {
                "name": self.name,
                "opt": self.opt,
                "ci90": self.ci90,
                "loss_min": self.loss_min,
                "curvature": self.curvature,
                "curvature_ci90": self.curvature_ci90,
                "penalty_2x": self.penalty_2x,
                "penalty_2x_ci90": self.penalty_2x_ci90,
                "poly": list(self.poly),
                "grid": list(self.grid),
                "best_grid": self.best_grid,
                "n_used": self.n_used,
                "status": self.status,
                "edge_side": self.edge_side,
                "message": self.message,
                "sigma": self.sigma,
                "dof": self.dof,
                **self.extra,
            }
        )


def _axis_optimum(
    name: str,
    label: str,
    poly: tuple[float, float, float],
    opt_draws: np.ndarray | None,
    curv_draws: np.ndarray | None,
    grid_all: np.ndarray,
    row_grid: np.ndarray,
    best: float,
    n_used: int,
    noise: tuple[float, float] | None,
    extra: dict | None = None,
) -> AxisOptimum:
    """Build an AxisOptimum from the (log-space) fitted curve and draws of its vertex and curvature."""
    c0, c1, c2 = (float(p) for p in poly)
    lo_g, hi_g = float(row_grid.min()), float(row_grid.max())
    grid = tuple(float(np.exp(g)) for g in _distinct_values(grid_all))
    if c2 > 0:
        u_opt = -c1 / (2 * c2)
        loss_min = c0 - c1**2 / (4 * c2)
        at_end = math.isclose(best, lo_g, abs_tol=1e-9) or math.isclose(best, hi_g, abs_tol=1e-9)
        outside = u_opt < lo_g - 1e-9 or u_opt > hi_g + 1e-9
        if outside or at_end:
            side = "low" if (u_opt < lo_g or (at_end and math.isclose(best, lo_g, abs_tol=1e-9))) else "high"
            status = "edge"
            message = (
                f"{label}: {name} optimum at grid edge ({side} end; fitted {math.exp(u_opt):.3g}, grid "
                f"{math.exp(lo_g):.3g}..{math.exp(hi_g):.3g}): widen the sweep"
            )
        else:
            side, status, message = None, "ok", None
        opt: float | None = math.exp(u_opt)
    else:
        # No minimum: the loss falls towards one end of the grid.
        slope_mid = c1 + 2 * c2 * (lo_g + hi_g) / 2
        side = "high" if slope_mid < 0 else "low"
        opt, loss_min, status = None, None, "no_minimum"
        message = (
            f"{label}: {name} sweep has no minimum (the loss does not turn up on both sides); the optimum is "
            f"beyond the {side} end of the grid {math.exp(lo_g):.3g}..{math.exp(hi_g):.3g}: widen the sweep"
        )
    ci = curv_ci = pen_ci = None
    if opt_draws is not None:
        lo, hi = _quantiles(opt_draws)
        ci = (None if lo is None else math.exp(lo), None if hi is None else math.exp(hi))
        curv_ci = _quantiles(curv_draws)
        pen_ci = _ci(*(None if b is None else b * LN2_SQ for b in curv_ci))
    return AxisOptimum(
        name=name,
        opt=opt,
        ci90=ci,
        loss_min=loss_min,
        curvature=c2,
        curvature_ci90=curv_ci,
        penalty_2x=c2 * LN2_SQ if c2 > 0 else None,
        penalty_2x_ci90=pen_ci if c2 > 0 else None,
        poly=(c0, c1, c2),
        grid=grid,
        best_grid=float(math.exp(best)),
        n_used=n_used,
        status=status,
        edge_side=side,
        message=message,
        sigma=None if noise is None else noise[0],
        dof=None if noise is None or not math.isfinite(noise[1]) else noise[1],
        extra=extra or {},
    )


def _noise_for(fit: _QFit, loss_noise: float | None, pooled: tuple[float, float] | None) -> tuple[float, float] | None:
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


def _pooled(fits: Sequence[_QFit]) -> tuple[float, float] | None:
    ssr = sum(f.ssr for f in fits if f.dof > 0)
    dof = sum(f.dof for f in fits if f.dof > 0)
    return (math.sqrt(ssr / dof), float(dof)) if dof > 0 else None


# ------------------------------------------------------------------------------------- one rung, one sweep


@dataclass(frozen=True)
class SweepFit:
    """The smooth optimum of one rung's sweep. ``lr``: the LR optimum (at the optimal batch, or at the best
    grid batch when batch was not swept or has no minimum). ``batch``: the batch optimum with the LR re-tuned
    (None when fewer than 3 batch sizes). ``lr_curves``: one parabola in ln lr per batch size present."""

    lr: AxisOptimum
    batch: AxisOptimum | None
    lr_curves: tuple[dict, ...]
    terms: tuple[str, ...]
    used: tuple[bool, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return jsonable(
            {
                "lr": self.lr.to_dict(),
                "batch": None if self.batch is None else self.batch.to_dict(),
                "lr_curves": list(self.lr_curves),
                "terms": list(self.terms),
                "notes": list(self.notes),
            }
        )


def _prepare(x: np.ndarray, loss: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    loss = np.asarray(loss, dtype=float)
    if x.shape != loss.shape or x.ndim != 1:
        raise FitError(f"{what}: values and losses must be 1-D arrays of the same length")
    return x, loss


def _fit_one(
    lr: np.ndarray,
    loss: np.ndarray,
    batch: np.ndarray | None,
    *,
    window: float | None,
    label: str,
    what: str = "learning rate",
) -> tuple[_QFit, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    lr, loss = _prepare(lr, loss, label)
    ok = np.isfinite(lr) & (lr > 0) & np.isfinite(loss)
    if batch is not None:
        batch = np.asarray(batch, dtype=float)
        ok &= np.isfinite(batch) & (batch > 0)
    u = np.log(lr[ok])
    n_u = len(_distinct(u))
    if n_u < MIN_VALUES:
        raise FitError(
            f"{label}: only {n_u} {what} value(s) with a finite loss; a smooth optimum needs at least "
            f"{MIN_VALUES} (the grid argmin is not an optimum)"
        )
    v = None
    if batch is not None:
        v = np.log(batch[ok])
        if len(_distinct(v)) < 2:
            v = None
    fit = _quad_fit(u, v, loss[ok], window)
    return fit, u, v, loss[ok], ok


def _sweep_from_fit(
    fit: _QFit,
    u: np.ndarray,
    v: np.ndarray | None,
    y: np.ndarray,
    ok: np.ndarray,
    noise: tuple[float, float] | None,
    *,
    label: str,
    n_draws: int,
    seed: int,
    names: tuple[str, str] = ("lr", "batch_tokens"),
) -> SweepFit:
    notes: list[str] = []
    if "uu" not in fit.terms:
        raise FitError(f"{label}: the {names[0]} sweep does not identify a curvature")
    draws = None
    if noise is not None and n_draws > 0:
        draws = _coef_draws(fit, noise[0], noise[1], n_draws, seed)
    elif noise is None:
        notes.append(
            f"{label}: the fit is exact (no residual degrees of freedom): no interval; add points or give loss_noise"
        )
    # Batch: profile over the LR.
    batch_opt: AxisOptimum | None = None
    v_fix = fit.v_best
    if v is not None and "vv" in fit.terms and fit.c("uu") > 0:
        p = tuple(float(np.ravel(x)[0]) for x in _profile(fit, fit.coef[None, :]))
        pd_draws = cd = None
        if draws is not None:
            pd_draws = _vertex(fit, draws, centre=(fit.u_best, fit.v_best))[1]
            cd = _profile(fit, draws)[2]
        col = np.isclose(u, fit.u_best)
        col_grid = v[col] if len(_distinct(v[col])) >= MIN_VALUES else v
        batch_opt = _axis_optimum(
            names[1],
            label,
            p,
            pd_draws,
            cd,
            v,
            col_grid,
            fit.v_best,
            int(fit.used.sum()),
            noise,
            extra={
                "curvature_fixed_lr": float(fit.c("vv")),
                "penalty_2x_fixed_lr": float(fit.c("vv")) * LN2_SQ if fit.c("vv") > 0 else None,
                "profile": "lr re-tuned at every batch",
            },
        )
        if batch_opt.opt is not None:
            v_fix = math.log(batch_opt.opt)
        if batch_opt.status == "no_minimum" or batch_opt.opt is None:
            v_fix = fit.v_best
    elif v is not None:
        n_v = len(_distinct(v))
        notes.append(
            f"{label}: {n_v} {names[1]} value(s): no batch optimum (needs {MIN_VALUES}); "
            f"{names[0]} optimum at the best batch {math.exp(fit.v_best):.4g}"
        )
        # Pick the batch whose fitted minimum is lowest among those swept.
        if fit.c("uu") > 0:
            best_l, best_v = math.inf, fit.v_best
            for vj in _distinct_values(v):
                q0 = fit.c("1") + fit.c("v") * vj + fit.c("vv") * vj**2
                q1 = fit.c("u") + fit.c("uv") * vj
                lmin = q0 - q1**2 / (4 * fit.c("uu"))
                if lmin < best_l:
                    best_l, best_v = lmin, float(vj)
            v_fix = best_v
    v0 = 0.0 if v_fix is None else v_fix
    poly = (
        float(fit.c("1") + fit.c("v") * v0 + fit.c("vv") * v0**2),
        float(fit.c("u") + fit.c("uv") * v0),
        float(fit.c("uu")),
    )
    opt_draws = curv_draws = None
    if draws is not None:
        if batch_opt is not None and batch_opt.opt is not None:
            opt_draws = _vertex(fit, draws, centre=(fit.u_best, v0))[0]  # joint: v* moves with each draw
        else:
            opt_draws = _conditional_u(fit, draws, v0, fit.u_best)
        curv_draws = fit.c("uu", draws)
    row = np.isclose(v, fit.v_best) if v is not None else np.ones_like(u, dtype=bool)
    row_grid = u[row] if len(_distinct(u[row])) >= MIN_VALUES else u
    lr_extra = {}
    if v is not None:
        lr_extra["at_batch_tokens"] = math.exp(v0)
    lr_opt = _axis_optimum(
        names[0], label, poly, opt_draws, curv_draws, u, row_grid, fit.u_best, int(fit.used.sum()), noise, lr_extra
    )
    curves = []
    if v is not None and fit.c("uu") > 0:
        for vj in _distinct_values(v):
            q0 = fit.c("1") + fit.c("v") * vj + fit.c("vv") * vj**2
            q1 = fit.c("u") + fit.c("uv") * vj
            q2 = fit.c("uu")
            curves.append(
                {
                    names[1]: math.exp(vj),
                    f"{names[0]}_opt": math.exp(-q1 / (2 * q2)),
                    "loss_min": q0 - q1**2 / (4 * q2),
                    "curvature": q2,
                    "poly": [q0, q1, q2],
                }
            )
    elif v is None and lr_opt.opt is not None:
        curves.append(
            {
                names[1]: None,
                f"{names[0]}_opt": lr_opt.opt,
                "loss_min": lr_opt.loss_min,
                "curvature": lr_opt.curvature,
                "poly": list(lr_opt.poly),
            }
        )
    used = np.zeros(len(ok), dtype=bool)
    used[np.flatnonzero(ok)[fit.used]] = True
    for m in (lr_opt.message, None if batch_opt is None else batch_opt.message):
        if m:
            notes.append(m)
    return SweepFit(
        lr=lr_opt,
        batch=batch_opt,
        lr_curves=tuple(jsonable(c) for c in curves),
        terms=fit.terms,
        used=tuple(bool(b) for b in used),
        notes=tuple(notes),
    )


def _conditional_u(fit: _QFit, coef: np.ndarray, v0: float, u_centre: float) -> np.ndarray:
    """Vertex in u at a fixed v, per coefficient row (+-inf towards lower loss when there is no minimum)."""
    cuu = fit.c("uu", coef)
    bu = fit.c("u", coef) + fit.c("uv", coef) * v0
    with np.errstate(divide="ignore", invalid="ignore"):
        u_opt = -bu / (2 * cuu)
    slope = bu + 2 * cuu * u_centre
    return np.where(cuu > 0, u_opt, np.where(slope < 0, np.inf, -np.inf))


def fit_sweep(
    lr: np.ndarray,
    loss: np.ndarray,
    *,
    batch_tokens: np.ndarray | None = None,
    window: float | None = 8.0,
    loss_noise: float | None = None,
    n_draws: int = 2000,
    seed: int = 0,
    label: str = "sweep",
) -> SweepFit:
    """The smooth LR (and batch) optimum of one rung; see the module doc. Raises ``FitError`` when fewer than
    3 distinct LR values have a finite loss."""
    fit, u, v, y, ok = _fit_one(lr, loss, batch_tokens, window=window, label=label)
    noise = _noise_for(fit, loss_noise, None)
    return _sweep_from_fit(fit, u, v, y, ok, noise, label=label, n_draws=n_draws, seed=seed)


def fit_log_quadratics(
    items: Sequence[tuple[str, np.ndarray, np.ndarray]],
    *,
    name: str = "x",
    window: float | None = 8.0,
    loss_noise: float | None = None,
    n_draws: int = 2000,
    seed: int = 0,
) -> list[AxisOptimum | str]:
    """Smooth optima of loss along one axis for several rungs (``items``: label, x, loss), with the residual
    variance pooled over rungs that have too few points of their own. Each entry is an ``AxisOptimum`` or,
    for a rung that cannot be fitted, the reason (a string)."""
    parts: list[tuple | str] = []
    for label, x, loss in items:
        try:
            fit, u, v, y, ok = _fit_one(x, loss, None, window=window, label=label, what=name)
            if "uu" not in fit.terms:
                raise FitError(f"{label}: the {name} sweep does not identify a curvature")
            parts.append((label, fit, u, y, ok))
        except FitError as e:
            parts.append(str(e))
    pooled = _pooled([p[1] for p in parts if not isinstance(p, str)])
    out: list[AxisOptimum | str] = []
    for i, p in enumerate(parts):
        if isinstance(p, str):
            out.append(p)
            continue
        label, fit, u, y, ok = p
        noise = _noise_for(fit, loss_noise, pooled)
        sweep = _sweep_from_fit(
            fit, u, None, y, ok, noise, label=label, n_draws=n_draws, seed=seed + i, names=(name, "-")
        )
        lr = sweep.lr
        extra = dict(lr.extra)
        extra["used"] = list(sweep.used)
        if noise is None:
            extra["interval_note"] = sweep.notes[0]
        out.append(AxisOptimum(**{**lr.__dict__, "extra": extra}))
    return out


def fit_log_quadratic(
    x: np.ndarray,
    loss: np.ndarray,
    *,
    name: str = "x",
    window: float | None = 8.0,
    loss_noise: float | None = None,
    n_draws: int = 2000,
    seed: int = 0,
    label: str = "sweep",
) -> AxisOptimum:
    """Smooth optimum of loss along one axis (a parabola in ``ln x``, windowed around the best point).
    Raises ``FitError`` when fewer than 3 distinct values have a finite loss."""
    (res,) = fit_log_quadratics(
        [(label, x, loss)], name=name, window=window, loss_noise=loss_noise, n_draws=n_draws, seed=seed
    )
    if isinstance(res, str):
        raise FitError(res)
    return res


# -------------------------------------------------------------------------------------------------- trends


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
    if len(_distinct(np.log(xs))) < 2 if len(xs) else True:
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
        hero_ci = _ci(*law.interval(hero_x)) if law.method != "none" else None
        extrap = float(hero_x / xs.max())
    points = tuple(jsonable(r) for r in good)
    return Trend(quantity, versus, law, None, points, excluded, hero_x, hero_value, hero_ci, extrap)


# ------------------------------------------------------------------------------------------ the whole study


@dataclass(frozen=True)
class HparamScale:
    """One rung of an LR (x batch) sweep: the runs (``points``, with ``used`` = inside the fit window), the
    fitted optima and the parabolas to draw; ``skipped`` says why a rung has no fit."""

    scale: str
    flops: float
    params: float
    tokens: float
    n_runs: int
    n_diverged: int
    points: tuple[dict, ...]
    fit: SweepFit | None
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return jsonable(
            {
                "scale": self.scale,
                "flops": self.flops,
                "params": self.params,
                "tokens": self.tokens,
                "n_runs": self.n_runs,
                "n_diverged": self.n_diverged,
                "points": list(self.points),
                "lr": None if self.fit is None else self.fit.lr.to_dict(),
                "batch": None if self.fit is None or self.fit.batch is None else self.fit.batch.to_dict(),
                "lr_curves": [] if self.fit is None else list(self.fit.lr_curves),
                "terms": [] if self.fit is None else list(self.fit.terms),
                "skipped": self.skipped,
                "notes": list(self.notes),
            }
        )


@dataclass(frozen=True)
class HparamResult:
    """Hyperparameter laws of a study. ``lr``/``batch``: optimum vs compute; ``lr_vs_params``/
    ``batch_vs_params``: vs N; ``lr_penalty``/``batch_penalty``: loss cost of a factor 2 off vs compute.
    ``has_lr_sweep`` is False when no rung has 3 LR values (the report says "this study has no LR sweep")."""

    scales: tuple[HparamScale, ...]
    lr: Trend
    lr_vs_params: Trend
    lr_penalty: Trend
    batch: Trend
    batch_vs_params: Trend
    batch_penalty: Trend
    has_lr_sweep: bool
    has_batch_sweep: bool
    hero_flops: float | None
    hero_params: float | None
    method: str
    notes: tuple[str, ...] = ()

    def hero(self) -> dict:
        """The recommendation at the hero: value and 90% interval of each law (None where there is none)."""
        out = {"flops": self.hero_flops, "params": self.hero_params}
        for key, t in (
            ("lr", self.lr),
            ("lr_from_params", self.lr_vs_params),
            ("batch_tokens", self.batch),
            ("batch_tokens_from_params", self.batch_vs_params),
            ("lr_penalty_2x", self.lr_penalty),
            ("batch_penalty_2x", self.batch_penalty),
        ):
            out[key] = t.hero_value
            out[f"{key}_ci90"] = t.hero_ci90
        return jsonable(out)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "method": self.method,
                "hero": self.hero(),
                "has_lr_sweep": self.has_lr_sweep,
                "has_batch_sweep": self.has_batch_sweep,
                "hero_flops": self.hero_flops,
                "hero_params": self.hero_params,
                "scales": [s.to_dict() for s in self.scales],
                "lr": self.lr.to_dict(),
                "lr_vs_params": self.lr_vs_params.to_dict(),
                "lr_penalty": self.lr_penalty.to_dict(),
                "batch": self.batch.to_dict(),
                "batch_vs_params": self.batch_vs_params.to_dict(),
                "batch_penalty": self.batch_penalty.to_dict(),
                "notes": list(self.notes),
            }
        )


METHOD = (
    "per rung: quadratic surface of loss in (ln lr, ln batch) within a factor {window} of the best run; LR* at "
    "the optimal batch, B* with the LR re-tuned; intervals from t draws of the coefficients; rungs whose "
    "optimum is not bracketed are {edge}; laws y = k C^a by weighted least squares in log-log with t intervals"
)


def _baseline_subset(sub: pd.DataFrame, label: str) -> tuple[pd.DataFrame, list[str]]:
    """When other axes (tying, shape) vary within a rung, keep the most common variant: the sweep's base."""
    notes = []
    for col in ("tie_embeddings", "aspect_ratio", "d_model", "n_layers"):
        if col in sub.columns and sub[col].nunique(dropna=False) > 1:
            common = sub[col].value_counts(dropna=False).idxmax()
            notes.append(f"{label}: {col} varies within the rung; the LR fit uses the {col}={common} runs")
            sub = sub[sub[col] == common]
    return sub, notes


def fit_hparams(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    hero_params: float | None = None,
    window: float | None = 8.0,
    loss_noise: float | None = None,
    use_edge: bool = False,
    n_draws: int = 2000,
    seed: int = 0,
    require: bool = False,
) -> HparamResult:
    """LR and batch optima per rung and their laws, extrapolated to ``hero_flops`` (and ``hero_params``).

    Rungs with fewer than 3 LR values are skipped with a reason; with fewer than 2 usable rungs the laws are
    None and their ``reason`` says why (``require=True`` raises ``FitError`` with it instead). Raises
    ``FitError`` on a table without params/tokens/flops/loss."""
    check_columns(df, REQUIRED, "hyperparameter laws")
    df = df.reset_index(drop=True)  # row labels index the rungs; a concatenated table may repeat them
    notes: list[str] = []
    if "lr" not in df.columns:
        why = "this study has no LR sweep (the runs table has no lr column)"
        return _empty_result(why, hero_flops, hero_params, window, use_edge, require)
    has_batch_col = "batch_tokens" in df.columns
    scales = group_scales(df)
    prepared = []
    for sc in scales:
        sub, sub_notes = _baseline_subset(df.loc[sc.index], sc.label)
        loss = sub["loss"].to_numpy(dtype=float)
        n_div = int((~np.isfinite(loss)).sum())
        lr = sub["lr"].to_numpy(dtype=float)
        batch = sub["batch_tokens"].to_numpy(dtype=float) if has_batch_col else None
        try:
            fit, u, v, y, ok = _fit_one(lr, loss, batch, window=window, label=sc.label)
            if "uu" not in fit.terms:
                raise FitError(f"{sc.label}: the LR sweep does not identify a curvature")
            prepared.append((sc, sub, sub_notes, n_div, (fit, u, v, y, ok), None))
        except FitError as e:
            prepared.append((sc, sub, sub_notes, n_div, None, str(e)))
    pooled = _pooled([p[4][0] for p in prepared if p[4] is not None])
    rows: list[HparamScale] = []
    for i, (sc, sub, sub_notes, n_div, parts, skipped) in enumerate(prepared):
        sweep = None
        if parts is not None:
            fit, u, v, y, ok = parts
            noise = _noise_for(fit, loss_noise, pooled)
            sweep = _sweep_from_fit(fit, u, v, y, ok, noise, label=sc.label, n_draws=n_draws, seed=seed + i)
        used = sweep.used if sweep is not None else (False,) * len(sub)
        pts = []
        for j, (_, r) in enumerate(sub.iterrows()):
            pts.append(
                {
                    "lr": r["lr"],
                    "batch_tokens": r["batch_tokens"] if has_batch_col else None,
                    "loss": r["loss"],
                    "used": bool(used[j]) if j < len(used) else False,
                }
            )
        n_notes = list(sub_notes) + ([] if sweep is None else list(sweep.notes))
        if n_div:
            n_notes.append(f"{sc.label}: {n_div} run(s) without a finite loss (diverged) left out of the fit")
        rows.append(
            HparamScale(
                sc.label, sc.flops, sc.params, sc.tokens, len(sub), n_div, tuple(jsonable(p) for p in pts), sweep,
                skipped, tuple(n_notes),
            )
        )
        notes.extend(n_notes)
        if skipped:
            notes.append(f"{sc.label} skipped: {skipped}")

    has_lr = any(r.fit is not None for r in rows)
    has_batch = any(r.fit is not None and r.fit.batch is not None for r in rows)
    no_lr = None if has_lr else "this study has no LR sweep (no rung has 3 or more learning rates)"
    no_b = None if has_batch else "this study has no batch sweep (no rung has 3 or more batch sizes)"

    def collect(axis: str, value: str, versus: str) -> tuple[list[dict], dict[str, str]]:
        pts, excl = [], {}
        for r in rows:
            if r.fit is None:
                excl[r.scale] = r.skipped or "no fit"
                continue
            opt = r.fit.lr if axis == "lr" else r.fit.batch
            if opt is None:
                excl[r.scale] = "no batch optimum (fewer than 3 batch sizes)"
                continue
            if opt.status == "no_minimum" or (opt.status == "edge" and not use_edge):
                excl[r.scale] = opt.message or opt.status
                continue
            if value == "opt":
                y, ci = opt.opt, opt.ci90
            else:
                y, ci = opt.penalty_2x, opt.penalty_2x_ci90
            pts.append({"scale": r.scale, "x": r.flops if versus == "flops" else r.params, "y": y, "y_ci90": ci})
        return pts, excl

    def trend(axis: str, value: str, versus: str, quantity: str, no_data: str | None) -> Trend:
        pts, excl = collect(axis, value, versus)
        hero = hero_flops if versus == "flops" else hero_params
        return fit_trend(
            pts, quantity=quantity, versus=versus, hero_x=hero, excluded=excl, no_data_reason=no_data
        )

    lr_t = trend("lr", "opt", "flops", "lr", no_lr)
    result = HparamResult(
        scales=tuple(rows),
        lr=lr_t,
        lr_vs_params=trend("lr", "opt", "params", "lr", no_lr),
        lr_penalty=trend("lr", "penalty", "flops", "lr_penalty_2x", no_lr),
        batch=trend("batch", "opt", "flops", "batch_tokens", no_b),
        batch_vs_params=trend("batch", "opt", "params", "batch_tokens", no_b),
        batch_penalty=trend("batch", "penalty", "flops", "batch_penalty_2x", no_b),
        has_lr_sweep=has_lr,
        has_batch_sweep=has_batch,
        hero_flops=hero_flops,
        hero_params=hero_params,
        method=METHOD.format(window=window, edge="kept" if use_edge else "left out"),
        notes=tuple(notes),
    )
    if require and result.lr.law is None:
        raise FitError(result.lr.reason or "no LR law")
    return result


def _empty_result(
    why: str, hero_flops: float | None, hero_params: float | None, window: float | None, use_edge: bool, require: bool
) -> HparamResult:
    if require:
        raise FitError(why)
    none = lambda q, v, h: Trend(q, v, None, why, hero_x=h)  # noqa: E731
    return HparamResult(
        scales=(),
        lr=none("lr", "flops", hero_flops),
        lr_vs_params=none("lr", "params", hero_params),
        lr_penalty=none("lr_penalty_2x", "flops", hero_flops),
        batch=none("batch_tokens", "flops", hero_flops),
        batch_vs_params=none("batch_tokens", "params", hero_params),
        batch_penalty=none("batch_penalty_2x", "flops", hero_flops),
        has_lr_sweep=False,
        has_batch_sweep=False,
        hero_flops=hero_flops,
        hero_params=hero_params,
        method=METHOD.format(window=window, edge="kept" if use_edge else "left out"),
        notes=(why,),
    )
