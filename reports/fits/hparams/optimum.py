"""A smooth optimum along one axis of a rung (``AxisOptimum``): the fitted parabola of ln loss in ``ln x``, its
vertex with a 90% interval, edge and no-minimum flags, and the penalty of being a factor 2 off."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.layout import jsonable
from ladder.model.config import format_count
from ladder.reports.fits.hparams.draws import draw_quantiles, finite_interval
from ladder.reports.fits.hparams.surface import distinct_values

LN2_SQ = math.log(2.0) ** 2


def penalty_2x(loss_min: float, curvature: float | None) -> float | None:
    """Loss increase (nats/token) of a factor 2 off the optimum: ``loss_min (exp(curvature ln2^2) - 1)``."""
    if curvature is None or not math.isfinite(curvature):
        return None
    return float(loss_min * math.expm1(curvature * LN2_SQ))


@dataclass(frozen=True)
class AxisOptimum:
    """A smooth optimum along one axis of a rung: ``ln loss = ln loss_min + curvature (ln x - ln opt)^2``.

    ``poly`` = [c0, c1, c2] of the fitted curve of **ln loss** in ``ln x`` (``ln loss = c0 + c1 ln x + c2
    ln x^2``), which a figure can draw (``curve`` gives the loss) even when there is no minimum. ``curvature``
    is ``c2`` (ln-loss units); ``penalty_2x`` is in loss units (nats/token). ``status``: ``ok``, ``edge``
    (vertex not bracketed by the grid; ``opt`` is an extrapolation) or ``no_minimum`` (``opt`` None).
    Intervals are 90%; a ``None`` bound is unbounded; the whole interval is None when the fit leaves no
    residual degrees of freedom and no other noise is known."""

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
    sigma: float | None = None  # ln-loss noise behind the interval
    dof: float | None = None  # its degrees of freedom (None: known noise)
    noise_source: str | None = None  # "own" (the engine's residual bootstrap), "pooled", "loss_noise"
    extra: dict = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.status == "ok"

    def curve(self, x: np.ndarray | float) -> np.ndarray | float:
        """The fitted loss (not ln loss) at ``x``."""
        lx = np.log(np.asarray(x, dtype=float))
        out = np.exp(self.poly[0] + self.poly[1] * lx + self.poly[2] * lx**2)
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
                "poly_of": "ln loss",
                "grid": list(self.grid),
                "best_grid": self.best_grid,
                "n_used": self.n_used,
                "status": self.status,
                "edge_side": self.edge_side,
                "message": self.message,
                "sigma": self.sigma,
                "dof": self.dof,
                "noise_source": self.noise_source,
                **self.extra,
            }
        )


def grid_value(name: str):
    """How a sweep's message gives a value of axis ``name``: a batch as a count, in the digits the tables give
    it (288..1.184K; it said 288..1.18e+03), anything else in 3 significant digits."""
    return format_count if name in ("batch_tokens", "batch") else (lambda x: f"{x:.3g}")


def axis_optimum(
    name: str,
    label: str,
    poly: tuple[float, float, float],
    opt_draws: np.ndarray | None,
    curv_draws: np.ndarray | None,
    grid_all: np.ndarray,
    row_grid: np.ndarray,
    best: float,
    n_used: int,
    noise: tuple[float, float, str] | None,
    extra: dict | None = None,
) -> AxisOptimum:
    """Build an AxisOptimum from the (log-space) fitted curve and draws of its vertex and curvature.
    ``noise``: (sigma, dof, source) behind the draws."""
    c0, c1, c2 = (float(p) for p in poly)
    fmt = grid_value(name)
    lo_g, hi_g = float(row_grid.min()), float(row_grid.max())
    grid = tuple(float(np.exp(g)) for g in distinct_values(grid_all))
    if c2 > 0:
        u_opt = -c1 / (2 * c2)
        loss_min: float | None = math.exp(c0 - c1**2 / (4 * c2))
        at_end = math.isclose(best, lo_g, abs_tol=1e-9) or math.isclose(best, hi_g, abs_tol=1e-9)
        outside = u_opt < lo_g - 1e-9 or u_opt > hi_g + 1e-9
        if outside or at_end:
            side = "low" if (u_opt < lo_g or (at_end and math.isclose(best, lo_g, abs_tol=1e-9))) else "high"
            status = "edge"
            # a vertex inside the grid is flagged for its best run at an end: say so, or "fitted 629.3K, grid
            # 277.5K..1.11M" read as an optimum inside the grid called one at its edge
            why = "" if outside else f"; its best run is at that end, {fmt(math.exp(best))}"
            message = (
                f"{label}: {name} optimum at grid edge ({side} end{why}; fitted {fmt(math.exp(u_opt))}, grid "
                f"{fmt(math.exp(lo_g))}..{fmt(math.exp(hi_g))}): widen the sweep"
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
            f"beyond the {side} end of the grid {fmt(math.exp(lo_g))}..{fmt(math.exp(hi_g))}: widen the sweep"
        )
    ci = curv_ci = pen_ci = None
    if opt_draws is not None:
        lo, hi = draw_quantiles(opt_draws)
        ci = (None if lo is None else math.exp(lo), None if hi is None else math.exp(hi))
        curv_ci = draw_quantiles(curv_draws)
        if loss_min is not None:
            pen_ci = finite_interval(*(None if b is None else penalty_2x(loss_min, b) for b in curv_ci))
    return AxisOptimum(
        name=name,
        opt=opt,
        ci90=ci,
        loss_min=loss_min,
        curvature=c2,
        curvature_ci90=curv_ci,
        penalty_2x=penalty_2x(loss_min, c2) if loss_min is not None else None,
        penalty_2x_ci90=pen_ci,
        poly=(c0, c1, c2),
        grid=grid,
        best_grid=float(math.exp(best)),
        n_used=n_used,
        status=status,
        edge_side=side,
        message=message,
        sigma=None if noise is None else noise[0],
        dof=None if noise is None or not math.isfinite(noise[1]) else noise[1],
        noise_source=None if noise is None else noise[2],
        extra=extra or {},
    )
