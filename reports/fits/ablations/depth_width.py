"""Depth vs width along the ladder (``fit_depth_width``): the best aspect ratio per rung and its law; the
method is in :mod:`ladder.reports.fits.ablations`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.ablations.common import COMPUTE_MATCH_TOL, best_config
from ladder.reports.fits.ablations.compute_law import LossLaw, fit_loss_vs_compute
from ladder.reports.fits.hparams.optimum import AxisOptimum
from ladder.reports.fits.hparams.rungs import (
    REQUIRED,
    Scale,
    check_columns,
    group_scales,
)
from ladder.reports.fits.hparams.sweep import fit_log_quadratics
from ladder.reports.fits.hparams.trend import Trend, fit_trend


@dataclass(frozen=True)
class AspectScale:
    """One rung of the depth-vs-width sweep: ``points`` per aspect ratio (loss as run and as compared, at the
    rung's compute), and the fitted parabola in ``ln aspect`` (``fit``); ``skipped`` says why there is none."""

    scale: str
    flops: float
    params: float
    tokens: float
    n_runs: int
    points: tuple[dict, ...]
    fit: AxisOptimum | None
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
                "points": list(self.points),
                "fit": None if self.fit is None else self.fit.to_dict(),
                "skipped": self.skipped,
                "notes": list(self.notes),
            }
        )


@dataclass(frozen=True)
class DepthWidthResult:
    """Depth vs width along the ladder. ``aspect``/``aspect_vs_params``: best aspect ratio vs compute / N,
    with the recommendation at the hero (``hero_value``, ``hero_ci90``); ``penalty``: loss cost of a factor-2
    wrong aspect ratio vs compute."""

    scales: tuple[AspectScale, ...]
    aspect: Trend
    aspect_vs_params: Trend
    penalty: Trend
    compute_law: LossLaw | None
    hero_flops: float | None
    hero_params: float | None
    method: str
    notes: tuple[str, ...] = ()

    def hero(self) -> dict:
        """The recommended aspect ratio (and the cost of missing it by 2x) at the hero, with 90% intervals."""
        return jsonable(
            {
                "flops": self.hero_flops,
                "params": self.hero_params,
                "aspect_ratio": self.aspect.hero_value,
                "aspect_ratio_ci90": self.aspect.hero_ci90,
                "aspect_ratio_from_params": self.aspect_vs_params.hero_value,
                "aspect_ratio_from_params_ci90": self.aspect_vs_params.hero_ci90,
                "penalty_2x": self.penalty.hero_value,
                "penalty_2x_ci90": self.penalty.hero_ci90,
            }
        )

    def to_dict(self) -> dict:
        return jsonable(
            {
                "method": self.method,
                "hero": self.hero(),
                "scales": [s.to_dict() for s in self.scales],
                "aspect": self.aspect.to_dict(),
                "aspect_vs_params": self.aspect_vs_params.to_dict(),
                "penalty": self.penalty.to_dict(),
                "compute_law": None if self.compute_law is None else self.compute_law.to_dict(),
                "hero_flops": self.hero_flops,
                "hero_params": self.hero_params,
                "notes": list(self.notes),
            }
        )


DW_METHOD = (
    "per rung: parabola of loss in ln(aspect ratio) within a factor {window} of the best shape, losses "
    "{matched}; best aspect vs compute as a power law (rungs with an unbracketed optimum {edge}); penalty of a "
    "2x wrong aspect ratio = curvature * ln(2)^2"
)


def fit_depth_width(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    hero_params: float | None = None,
    window: float | None = 8.0,
    loss_noise: float | None = None,
    match_compute: bool = True,
    use_edge: bool = False,
    n_draws: int = 2000,
    seed: int = 0,
    require: bool = False,
) -> DepthWidthResult:
    """Best aspect ratio per rung and its law (:mod:`ladder.reports.fits.ablations`). Needs ``aspect_ratio``
    or ``d_model`` and ``n_layers``. Rungs with fewer than 3 shapes are skipped with a reason; with fewer than
    2 usable rungs the trend is None with a reason (``require=True`` raises ``FitError`` instead)."""
    what = "depth vs width"
    check_columns(df, REQUIRED, what)
    df = df.reset_index(drop=True)
    if "aspect_ratio" not in df.columns:
        if "d_model" in df.columns and "n_layers" in df.columns:
            df["aspect_ratio"] = df["d_model"].astype(float) / df["n_layers"].astype(float)
        else:
            raise FitError(f"{what}: the runs table needs aspect_ratio, or d_model and n_layers")
    scales = group_scales(df)
    notes: list[str] = []
    per: list[tuple[Scale, pd.DataFrame]] = []
    for sc in scales:
        sub = df.loc[sc.index]
        rows = []
        for ar, g in sub.groupby(sub["aspect_ratio"].astype(float).round(9), sort=True):
            b = best_config(g, exclude=("aspect_ratio", "d_model", "n_layers"))
            if b is not None:
                rows.append(
                    {"aspect_ratio": float(ar), **{k: b[k] for k in ("loss", "loss_std", "n", "flops", "params")}}
                )
        per.append((sc, pd.DataFrame(rows, columns=["aspect_ratio", "loss", "loss_std", "n", "flops", "params"])))

    # The ladder's loss-vs-compute law (best shape per rung), to compare the shapes of a rung at one compute.
    law = None
    spread = max((p["flops"].max() / p["flops"].min() for _, p in per if len(p)), default=1.0)
    matched = "compared as run"
    if match_compute and spread > 1 + COMPUTE_MATCH_TOL:
        best = [tuple(p.loc[p["loss"].idxmin(), ["flops", "loss"]].astype(float)) for _, p in per if len(p)]
        try:
            law = fit_loss_vs_compute(
                [b[0] for b in best], [b[1] for b in best], what="loss vs compute (best shape per rung)"
            )
            matched = "moved to the rung's compute along the ladder's loss-vs-compute law"
        except FitError as e:
            notes.append(f"shapes of a rung differ in compute by up to {spread - 1:.0%}, not matched: {e}")

    items = []
    for sc, p in per:
        adj = p["loss"].to_numpy(dtype=float).copy()
        if law is not None and len(p):
            adj = adj - np.array([law.slope(sc.flops) * math.log(f / sc.flops) for f in p["flops"]])
        p["loss_compared"] = adj
        items.append((sc.label, p["aspect_ratio"].to_numpy(dtype=float), adj))
    fits = fit_log_quadratics(
        items, name="aspect_ratio", window=window, loss_noise=loss_noise, n_draws=n_draws, seed=seed
    )

    out_rows: list[AspectScale] = []
    for (sc, p), f in zip(per, fits):
        skipped = f if isinstance(f, str) else None
        fit = None if isinstance(f, str) else f
        used = (fit.extra.get("used") if fit is not None else None) or [False] * len(p)
        pts = [
            {
                "aspect_ratio": r["aspect_ratio"],
                "loss": r["loss"],
                "loss_compared": r["loss_compared"],
                "flops": r["flops"],
                "params": r["params"],
                "n_runs": r["n"],
                "used": bool(used[i]) if i < len(used) else False,
            }
            for i, (_, r) in enumerate(p.iterrows())
        ]
        row_notes = [skipped] if skipped else ([fit.message] if fit is not None and fit.message else [])
        out_rows.append(
            AspectScale(sc.label, sc.flops, sc.params, sc.tokens, len(sc.index), tuple(jsonable(pts)), fit, skipped,
                        tuple(row_notes))
        )
        notes.extend(row_notes)

    def collect(value: str, versus: str) -> tuple[list[dict], dict[str, str]]:
        pts, excl = [], {}
        for r in out_rows:
            if r.fit is None:
                excl[r.scale] = r.skipped or "no fit"
            elif r.fit.status == "no_minimum" or (r.fit.status == "edge" and not use_edge):
                excl[r.scale] = r.fit.message or r.fit.status
            else:
                y, ci = (r.fit.opt, r.fit.ci90) if value == "opt" else (r.fit.penalty_2x, r.fit.penalty_2x_ci90)
                pts.append({"scale": r.scale, "x": r.flops if versus == "flops" else r.params, "y": y, "y_ci90": ci})
        return pts, excl

    no_sweep = None
    if not any(r.fit is not None for r in out_rows):
        no_sweep = "this study has no depth-vs-width sweep (no rung has 3 or more aspect ratios)"

    def trend(value: str, versus: str, quantity: str) -> Trend:
        pts, excl = collect(value, versus)
        hero = hero_flops if versus == "flops" else hero_params
        return fit_trend(
            pts, quantity=quantity, versus=versus, hero_x=hero, excluded=excl, no_data_reason=no_sweep
        )

    aspect = trend("opt", "flops", "aspect_ratio")
    if require and aspect.law is None:
        raise FitError(f"{what}: {aspect.reason}")
    return DepthWidthResult(
        scales=tuple(out_rows),
        aspect=aspect,
        aspect_vs_params=trend("opt", "params", "aspect_ratio"),
        penalty=trend("penalty", "flops", "aspect_penalty_2x"),
        compute_law=law,
        hero_flops=hero_flops,
        hero_params=hero_params,
        method=DW_METHOD.format(window=window, matched=matched, edge="kept" if use_edge else "left out"),
        notes=tuple(notes),
    )
