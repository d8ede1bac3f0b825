"""A smooth optimum along one axis of a rung (``AxisOptimum``): the fitted parabola in ``ln x``, its vertex
with a 90% interval, edge and no-minimum flags, and the penalty of being a factor 2 off."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.layout import jsonable
from ladder.reports.fits.hparams.surface import distinct_values, draw_quantiles
from ladder.reports.fits.powerlaw import finite_interval

LN2_SQ = math.log(2.0) ** 2


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
    noise: tuple[float, float] | None,
    extra: dict | None = None,
) -> AxisOptimum:
    """Build an AxisOptimum from the (log-space) fitted curve and draws of its vertex and curvature."""
    c0, c1, c2 = (float(p) for p in poly)
    lo_g, hi_g = float(row_grid.min()), float(row_grid.max())
    grid = tuple(float(np.exp(g)) for g in distinct_values(grid_all))
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
        lo, hi = draw_quantiles(opt_draws)
        ci = (None if lo is None else math.exp(lo), None if hi is None else math.exp(hi))
        curv_ci = draw_quantiles(curv_draws)
        pen_ci = finite_interval(*(None if b is None else b * LN2_SQ for b in curv_ci))
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
