"""One rung, one sweep: the smooth LR (and batch) optimum of a rung (``fit_sweep``, ``SweepFit``), and the
one-axis optima of several rungs with pooled noise (``fit_log_quadratics``, which the depth-vs-width ablation
reuses)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.hparams.draws import Noise
from ladder.reports.fits.hparams.optimum import (
    AxisOptimum,
    axis_optimum,
    grid_value,
    penalty_2x,
)
from ladder.reports.fits.hparams.surface import (
    MIN_VALUES,
    N_BOOT,
    QFit,
    conditional_u,
    distinct,
    distinct_values,
    noise_for,
    pooled_noise,
    profile_coefs,
    quad_fit,
    vertex,
    with_draws,
)


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


def fit_one(
    lr: np.ndarray,
    loss: np.ndarray,
    batch: np.ndarray | None,
    *,
    window: float | None,
    label: str,
    what: str = "learning rate",
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> tuple[QFit, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """The surface of one rung: ``(fit, u, v, ln loss, ok)`` over the points with a finite, positive loss."""
    lr, loss = _prepare(lr, loss, label)
    ok = np.isfinite(lr) & (lr > 0) & np.isfinite(loss) & (loss > 0)
    if batch is not None:
        batch = np.asarray(batch, dtype=float)
        ok &= np.isfinite(batch) & (batch > 0)
    u = np.log(lr[ok])
    n_u = len(distinct(u))
    if n_u < MIN_VALUES:
        raise FitError(
            f"{label}: only {n_u} {what} value(s) with a finite loss; a smooth optimum needs at least "
            f"{MIN_VALUES} (the grid argmin is not an optimum)"
        )
    v = None
    if batch is not None:
        v = np.log(batch[ok])
        if len(distinct(v)) < 2:
            v = None
    y = np.log(loss[ok])
    fit = quad_fit(u, v, y, window, n_boot=n_boot, seed=seed)
    return fit, u, v, y, ok


def sweep_from_fit(
    fit: QFit,
    u: np.ndarray,
    v: np.ndarray | None,
    y: np.ndarray,
    ok: np.ndarray,
    noise: Noise | None,
    *,
    label: str,
    n_boot: int,
    seed: int,
    names: tuple[str, str] = ("lr", "batch_tokens"),
) -> SweepFit:
    """The optima of a fitted rung, with intervals from the coefficient replicates behind ``noise``."""
    notes: list[str] = []
    if "uu" not in fit.terms:
        raise FitError(f"{label}: the {names[0]} sweep does not identify a curvature")
    draws = with_draws(fit, noise, n_boot, seed).draws
    noise_t = None if noise is None else (noise.scalar, noise.dof, noise.source)
    if noise is None:
        notes.append(
            f"{label}: the fit is exact (no residual degrees of freedom): no interval; add points or give loss_noise"
        )
    # Batch: profile over the LR.
    batch_opt: AxisOptimum | None = None
    v_fix = fit.v_best
    if v is not None and "vv" in fit.terms and fit.c("uu") > 0:
        p = tuple(float(np.ravel(x)[0]) for x in profile_coefs(fit, fit.coef[None, :]))
        pd_draws = cd = None
        if draws is not None:
            pd_draws = vertex(fit, draws, centre=(fit.u_best, fit.v_best))[1]
            cd = profile_coefs(fit, draws)[2]
        col = np.isclose(u, fit.u_best)
        col_grid = v[col] if len(distinct(v[col])) >= MIN_VALUES else v
        batch_opt = axis_optimum(
            names[1],
            label,
            p,
            pd_draws,
            cd,
            v,
            col_grid,
            fit.v_best,
            int(fit.used.sum()),
            noise_t,
            extra={
                "curvature_fixed_lr": float(fit.c("vv")),
                "penalty_2x_fixed_lr": (
                    penalty_2x(math.exp(p[0] - p[1] ** 2 / (4 * p[2])), fit.c("vv"))
                    if fit.c("vv") > 0 and p[2] > 0
                    else None
                ),
                "profile": "lr re-tuned at every batch",
            },
        )
        if batch_opt.opt is not None:
            v_fix = math.log(batch_opt.opt)
        if batch_opt.status == "no_minimum" or batch_opt.opt is None:
            v_fix = fit.v_best
    elif v is not None:
        n_v = len(distinct(v))
        # with enough batches, what is missing is an LR minimum to re-tune the LR around at each batch
        why = (
            f"needs {MIN_VALUES}"
            if n_v < MIN_VALUES
            else f"the loss has no minimum in the {names[0]} to profile"
            if not fit.c("uu") > 0
            else f"needs {MIN_VALUES} in the fit window"
        )
        notes.append(
            f"{label}: {n_v} {names[1]} value(s): no batch optimum ({why}); "
            f"{names[0]} optimum at the best batch {math.exp(fit.v_best):.4g}"
        )
        # Pick the batch whose fitted minimum is lowest among those swept.
        if fit.c("uu") > 0:
            best_l, best_v = math.inf, fit.v_best
            for vj in distinct_values(v):
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
            opt_draws = vertex(fit, draws, centre=(fit.u_best, v0))[0]  # joint: v* moves with each draw
        else:
            opt_draws = conditional_u(fit, draws, v0, fit.u_best)
        curv_draws = fit.c("uu", draws)
    row = np.isclose(v, fit.v_best) if v is not None else np.ones_like(u, dtype=bool)
    row_grid = u[row] if len(distinct(u[row])) >= MIN_VALUES else u
    lr_extra = {}
    if v is not None:
        lr_extra["at_batch_tokens"] = math.exp(v0)
    lr_opt = axis_optimum(
        names[0],
        label,
        poly,
        opt_draws,
        curv_draws,
        u,
        row_grid,
        fit.u_best,
        int(fit.used.sum()),
        noise_t,
        lr_extra,
    )
    curves = []
    if v is not None and fit.c("uu") > 0:
        for vj in distinct_values(v):
            q0 = fit.c("1") + fit.c("v") * vj + fit.c("vv") * vj**2
            q1 = fit.c("u") + fit.c("uv") * vj
            q2 = fit.c("uu")
            curves.append(
                {
                    names[1]: math.exp(vj),
                    f"{names[0]}_opt": math.exp(-q1 / (2 * q2)),
                    "loss_min": math.exp(q0 - q1**2 / (4 * q2)),
                    "curvature": q2,
                    "poly": [q0, q1, q2],
                    "poly_of": "ln loss",
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
                "poly_of": "ln loss",
            }
        )
    lr_opt = _blame_the_batch(lr_opt, batch_opt, curves, names, label)
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


def _blame_the_batch(
    lr_opt: AxisOptimum, batch_opt: AxisOptimum | None, curves: list[dict], names: Sequence[str], label: str
) -> AxisOptimum:
    """The LR optimum is read at the batch optimum; when that batch lies off the batch grid, the surface is
    extrapolated there and can put the LR off its grid too, although the loss turned up inside the LR grid at
    every batch tried. Then the advice is to widen the batch sweep, not the LR sweep (a 4K rung said "lr optimum
    at grid edge (high end; fitted 0.468, grid 0.005..0.08): widen the sweep" of LRs whose optimum was 0.03 to
    0.041 at each of its batches, read at a batch of 0.0625 tokens). The numbers stay as fitted."""
    if lr_opt.status != "edge" or batch_opt is None or batch_opt.status != "edge" or batch_opt.opt is None:
        return lr_opt
    at = [float(c[f"{names[0]}_opt"]) for c in curves]
    lo, hi = min(lr_opt.grid), max(lr_opt.grid)
    if lr_opt.opt is None or not at or not all(lo <= x <= hi for x in at):
        return lr_opt
    b_lo, b_hi = (grid_value(names[1])(x) for x in (min(batch_opt.grid), max(batch_opt.grid)))
    message = (
        f"{label}: {names[0]} optimum at grid edge ({lr_opt.edge_side} end; fitted {lr_opt.opt:.3g} at the "
        f"{names[1]} optimum {grid_value(names[1])(batch_opt.opt)}, which is off the {names[1]} grid {b_lo}..{b_hi}; at "
        f"every {names[1]} tried the {names[0]} optimum is inside its grid {lo:.3g}..{hi:.3g}, at "
        f"{min(at):.3g}..{max(at):.3g}): widen the {names[1]} sweep, not the {names[0]} sweep"
    )
    return replace(lr_opt, message=message)


def fit_sweep(
    lr: np.ndarray,
    loss: np.ndarray,
    *,
    batch_tokens: np.ndarray | None = None,
    window: float | None = 8.0,
    loss_noise: float | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    label: str = "sweep",
) -> SweepFit:
    """The smooth LR (and batch) optimum of one rung; see :mod:`ladder.reports.fits.hparams`. Raises
    ``FitError`` when fewer than 3 distinct LR values have a finite loss."""
    fit, u, v, y, ok = fit_one(lr, loss, batch_tokens, window=window, label=label, n_boot=n_boot, seed=seed)
    noise = noise_for(fit, loss_noise, None)
    return sweep_from_fit(fit, u, v, y, ok, noise, label=label, n_boot=n_boot, seed=seed)


def fit_log_quadratics(
    items: Sequence[tuple[str, np.ndarray, np.ndarray]],
    *,
    name: str = "x",
    window: float | None = 8.0,
    loss_noise: float | None = None,
    n_draws: int = N_BOOT,
    seed: int = 0,
) -> list[AxisOptimum | str]:
    """Smooth optima of loss along one axis for several rungs (``items``: label, x, loss), with the residual
    variance pooled over rungs that have too few points of their own. Each entry is an ``AxisOptimum`` or,
    for a rung that cannot be fitted, the reason (a string). ``n_draws``: bootstrap replicates per rung."""
    parts: list[tuple | str] = []
    for i, (label, x, loss) in enumerate(items):
        try:
            fit, u, v, y, ok = fit_one(
                x, loss, None, window=window, label=label, what=name, n_boot=n_draws, seed=seed + i
            )
            if "uu" not in fit.terms:
                raise FitError(f"{label}: the {name} sweep does not identify a curvature")
            parts.append((label, fit, u, y, ok))
        except FitError as e:
            parts.append(str(e))
    pooled = pooled_noise([p[1] for p in parts if not isinstance(p, str)])
    out: list[AxisOptimum | str] = []
    for i, p in enumerate(parts):
        if isinstance(p, str):
            out.append(p)
            continue
        label, fit, u, y, ok = p
        noise = noise_for(fit, loss_noise, pooled)
        sweep = sweep_from_fit(
            fit, u, None, y, ok, noise, label=label, n_boot=n_draws, seed=seed + i, names=(name, "-")
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
    n_draws: int = N_BOOT,
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
