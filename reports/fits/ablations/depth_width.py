"""Depth vs width along the ladder (``fit_depth_width``): per rung, the best aspect ratio (d_model / n_layers)
from a quadratic of ln loss in ln(aspect ratio) fitted by the engine; its trend across scale chosen by rollout
(:mod:`ladder.reports.fits.ablations.trend`); the hero's aspect ratio with a calibrated interval; the loss
penalty of being 2x off. The method is in :mod:`ladder.reports.fits.ablations`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.model.config import format_multiple
from ladder.reports.fits.ablations.common import COMPUTE_MATCH_TOL, best_config
from ladder.reports.fits.ablations.trend import Trend, fit_trend
from ladder.reports.fits.ablations.trend_forms import (
    EffectData,
    constant,
    log_linear,
)
from ladder.reports.fits.ablations.variant_laws import fit_law, law_dict, slope
from ladder.reports.fits.backtest import interval
from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.hparams.rungs import REQUIRED, check_columns, group_scales

LN2SQ = math.log(2.0) ** 2
QUADRATIC = Linear(
    "aspect_quadratic",
    ("b0", "b1", "b2"),
    lambda raw: np.c_[np.ones(len(raw)), np.log(raw[:, 0]), np.log(raw[:, 0]) ** 2],
)
ASPECT_FORMS = (constant("constant", "ln a*"), log_linear("power", "ln a*", "power law in compute"))
PENALTY_FORMS = (constant("constant", "ln p"), log_linear("power", "ln p", "power law in compute"))

DW_METHOD = (
    "per rung: ln loss against ln(aspect ratio) as a quadratic fitted by the engine on the shapes within a factor "
    "{window} of the best one, losses {matched}; optimum ln a* = -b1 / (2 b2) with a bootstrap interval (rungs "
    "with an optimum at the sweep's edge {edge}); penalty of a 2x wrong aspect ratio = L* (exp(b2 ln(2)^2) - 1); "
    "trends of ln a* and ln penalty against compute (constant, power law) weighted by rollout backtests, "
    "the hero's value their calibrated mixture"
)


@dataclass(frozen=True)
class AspectFit:
    """The quadratic ``ln L = b0 + b1 x + b2 x^2`` (``poly``, x = ln aspect) of one rung, its optimum ``opt``
    with ``ci90`` (None without residual degrees of freedom), the 2x penalty in loss units, and ``status``
    (``ok``, ``edge``: the optimum outside the fitted shapes, ``no_minimum``: the parabola opens downward)."""

    opt: float | None
    ci90: list | None
    log_sd: float | None  # bootstrap sd of ln opt
    poly: list[float]
    penalty_2x: float | None
    penalty_2x_ci90: list | None
    status: str
    message: str | None
    grid: list[float]
    dof: int
    law: LawFit = field(repr=False, default=None)

    def to_dict(self) -> dict:
        return jsonable(
            {k: v for k, v in self.__dict__.items() if k != "law"}
            | {"sigma": None if self.law is None else self.law.sigma, "poly_of": "ln loss in ln aspect"}
        )


@dataclass(frozen=True)
class AspectScale:
    """One rung of the depth-vs-width sweep: ``points`` per aspect ratio (loss as run and as compared, at the
    rung's compute), and the fitted quadratic (``fit``); ``skipped`` says why there is none."""

    scale: str
    flops: float
    params: float
    tokens: float
    n_runs: int
    points: tuple[dict, ...]
    fit: AspectFit | None
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


@dataclass
class DepthWidthResult:
    """Depth vs width along the ladder. ``aspect``/``penalty``: the trends of the best aspect ratio and of the
    2x penalty (None with ``reason``); ``hero``: the recommended aspect ratio and the penalty there."""

    scales: tuple[AspectScale, ...]
    aspect: Trend | None
    penalty: Trend | None
    excluded: dict[str, str]
    reason: str | None
    compute_law: LawFit | None
    hero_flops: float | None
    hero: dict
    method: str
    notes: tuple[str, ...] = ()

    def band(self) -> dict | None:
        xs = [s.flops for s in self.scales if s.fit is not None]
        if self.aspect is None or not xs:
            return None
        b = self.aspect.band(np.geomspace(min(xs) / 1.3, max(max(xs), self.hero_flops or 0.0) * 1.3, 60))
        return {"compute": b["compute"], **{k: np.exp(b[k]).tolist() for k in ("point", "lo", "hi")}}

    def to_dict(self) -> dict:
        return jsonable(
            {
                "method": self.method,
                "hero": self.hero,
                "scales": [s.to_dict() for s in self.scales],
                "aspect": None if self.aspect is None else self.aspect.to_dict(),
                "aspect_band": self.band(),
                "penalty": None if self.penalty is None else self.penalty.to_dict(),
                "excluded": self.excluded,
                "reason": self.reason,
                "compute_law": law_dict(self.compute_law),
                "hero_flops": self.hero_flops,
                "notes": list(self.notes),
            }
        )


def fit_aspect(
    ar: np.ndarray, y: np.ndarray, *, n_boot: int, seed: int, window: float | None
) -> tuple[AspectFit | None, np.ndarray, str | None]:
    """The quadratic of one rung on the shapes within ``window`` of the best; ``(fit, used, why not)``."""
    if len(np.unique(np.round(np.log(ar), 9))) < 3:
        return None, np.zeros(len(ar), bool), f"needs at least 3 aspect ratios (has {len(np.unique(ar))})"
    used = np.ones(len(ar), bool)
    if window:
        near = np.abs(np.log(ar / ar[np.argmin(y)])) <= math.log(window) + 1e-9
        if len(np.unique(ar[near])) >= 3:
            used = near
    law = fit(QUADRATIC, ar[used][:, None], y[used], n_boot=n_boot, seed=seed)
    p = law.params
    b0, b1, b2 = p["b0"], p["b1"], p["b2"]
    x = np.log(ar[used])
    grid = sorted(float(v) for v in np.unique(ar[used]))
    dof = int(len(x) - 3)
    if not b2 > 0:
        return (
            AspectFit(
                None,
                None,
                None,
                [b0, b1, b2],
                None,
                None,
                "no_minimum",
                "the loss does not curve upward in ln(aspect ratio): no minimum",
                grid,
                dof,
                law,
            ),
            used,
            None,
        )
    xo = -b1 / (2 * b2)
    lstar = math.exp(b0 + b1 * xo + b2 * xo * xo)
    pen = lstar * math.expm1(b2 * LN2SQ)
    ci = pen_ci = log_sd = None
    if law.boot is not None and dof > 0:
        bb = law.form.public(law.boot, law.center)
        good = bb["b2"] > 0
        if good.mean() > 0.5:
            kappa = stats.t.ppf(0.95, dof) / stats.norm.ppf(0.95)
            xb = -bb["b1"][good] / (2 * bb["b2"][good])
            xd = xo + kappa * (xb - xb.mean())
            ci = [float(v) for v in np.exp(interval(xd))]
            log_sd = float(kappa * xb.std())
            pb = lstar * np.expm1(bb["b2"][good] * LN2SQ)
            pen_ci = [float(v) for v in interval(pen + kappa * (pb - pb.mean()))]
    status, msg = "ok", None
    if ci is None and dof == 0:  # else the report's empty 90% column reads as a bootstrap that found nothing
        msg = f"no interval: {len(x)} aspect ratios fit the quadratic exactly (no residual to bootstrap)"
    if not x.min() <= xo <= x.max():
        status = "edge"
        side = "wider" if xo > x.max() else "deeper"
        msg = (
            f"the optimum ({math.exp(xo):.3g}) lies beyond the swept shapes ({grid[0]:.3g}-{grid[-1]:.3g}): "
            f"widen the sweep towards {side} shapes"
        )
    return AspectFit(math.exp(xo), ci, log_sd, [b0, b1, b2], pen, pen_ci, status, msg, grid, dof, law), used, None


def _trend(scales, value, forms, quantity, floor, n_boot, seed, use_edge):
    pts, excl = [], {}
    for r in scales:
        f = r.fit
        if f is None:
            excl[r.scale] = (r.skipped or "no fit").removeprefix(f"{r.scale}: ")  # the reason keys it by rung
        elif f.status == "no_minimum" or (f.status == "edge" and not use_edge):
            excl[r.scale] = f.message or f.status
        elif value(f) is not None and value(f) > 0:
            pts.append((r, math.log(value(f)), f.log_sd))
    if not pts:
        return None, excl
    sds = [s for _, _, s in pts if s]
    data = EffectData(
        [r.flops for r, _, _ in pts],
        [y for _, y, _ in pts],
        [r.scale for r, _, _ in pts],
        float(np.median(sds)) if sds and value is _opt else 0.0,
    )
    return fit_trend(data, forms, quantity=quantity, floor=max(floor, data.noise), n_boot=n_boot, seed=seed), excl


def _opt(f: AspectFit) -> float | None:
    return f.opt


def _pen(f: AspectFit) -> float | None:
    return f.penalty_2x


def _hero(aspect: Trend | None, penalty: Trend | None, hero_flops: float | None) -> dict:
    out: dict = {
        "flops": hero_flops,
        "aspect_ratio": None,
        "aspect_ratio_ci90": None,
        "penalty_2x": None,
        "penalty_2x_ci90": None,
    }
    if hero_flops is None:
        return out
    if aspect is not None:
        p = aspect.predict(hero_flops)
        out.update(
            aspect_ratio=math.exp(p["point"]),
            aspect_ratio_ci90=[math.exp(p["lo"]), math.exp(p["hi"])],
            compute_x=p["compute_x"],
            reach_compute_x=aspect.reach["compute_x"],
            within_reach=p["within_reach"],
            form=aspect.primary,
            weights=aspect.weights,
        )
        lo, hi = out["aspect_ratio_ci90"]
        out["message"] = (
            f"best aspect ratio at the hero {out['aspect_ratio']:.3g} (90% [{lo:.3g}, {hi:.3g}]), "
            f"{format_multiple(p['compute_x'])} beyond the largest rung; "
            + ("within" if p["within_reach"] else "beyond")
            + f" the {format_multiple(aspect.reach['compute_x'])} the rollout showed the trend forecasts right"
        )
    if penalty is not None:
        p = penalty.predict(hero_flops)
        out.update(penalty_2x=math.exp(p["point"]), penalty_2x_ci90=[math.exp(p["lo"]), math.exp(p["hi"])])
    return out


def fit_depth_width(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    window: float | None = 8.0,
    match_compute: bool = True,
    use_edge: bool = False,
    n_boot: int = 200,
    seed: int = 0,
    require: bool = False,
) -> DepthWidthResult:
    """Best aspect ratio per rung and its trend (:mod:`ladder.reports.fits.ablations`). Needs ``aspect_ratio``
    or ``d_model`` and ``n_layers``. Rungs with fewer than 3 shapes are skipped with a reason; without a rung
    to trend the trends are None with a reason (``require=True`` raises ``FitError`` instead)."""
    what = "depth vs width"
    check_columns(df, REQUIRED, what)
    df = df.reset_index(drop=True)
    if "aspect_ratio" not in df.columns:
        if "d_model" in df.columns and "n_layers" in df.columns:
            df["aspect_ratio"] = df["d_model"].astype(float) / df["n_layers"].astype(float)
        else:
            raise FitError(f"{what}: the runs table needs aspect_ratio, or d_model and n_layers")
    notes: list[str] = []
    per = []
    for sc in group_scales(df):
        sub = df.loc[sc.index]
        rows = []
        for ar, g in sub.groupby(sub["aspect_ratio"].astype(float).round(9), sort=True):
            b = best_config(g, exclude=("aspect_ratio", "d_model", "n_layers"))
            if b is not None:
                rows.append({"aspect_ratio": float(ar), **{k: b[k] for k in ("loss", "n", "flops", "params")}})
        per.append((sc, pd.DataFrame(rows, columns=["aspect_ratio", "loss", "n", "flops", "params"])))

    # the ladder's loss-vs-compute law (best shape per rung) moves a rung's shapes to its compute
    law, matched = None, "compared as run"
    spread = max((p["flops"].max() / p["flops"].min() for _, p in per if len(p)), default=1.0)
    if match_compute and spread > 1 + COMPUTE_MATCH_TOL:
        best = [p.loc[p["loss"].idxmin()] for _, p in per if len(p)]
        law = fit_law([b["flops"] for b in best], [b["loss"] for b in best], n_boot=n_boot, seed=seed)
        if law is None:
            notes.append(
                f"shapes of a rung differ in compute by up to {spread - 1:.0%}, not matched: the ladder's "
                "loss-vs-compute law needs rungs at >= 2 computes"
            )
        else:
            matched = "moved to the rung's compute along the local slope of the ladder's loss-vs-compute law"

    out_rows: list[AspectScale] = []
    for i, (sc, p) in enumerate(per):
        y = np.log(p["loss"].to_numpy(dtype=float))
        if law is not None and len(p):
            s, _ = slope(law, sc.flops)
            y = y - s * np.log(p["flops"].to_numpy(dtype=float) / sc.flops)
        f, used, why = (
            fit_aspect(p["aspect_ratio"].to_numpy(dtype=float), y, n_boot=n_boot, seed=seed + i, window=window)
            if len(p)
            else (None, np.zeros(0, bool), "no finite loss")
        )
        pts = [
            {
                "aspect_ratio": r["aspect_ratio"],
                "loss": r["loss"],
                "loss_compared": float(math.exp(y[j])),
                "flops": r["flops"],
                "params": r["params"],
                "n_runs": r["n"],
                "used": bool(used[j]),
            }
            for j, (_, r) in enumerate(p.iterrows())
        ]
        skipped = f"{sc.label}: {why}" if why else None
        row_notes = [skipped] if skipped else ([f"{sc.label}: {f.message}"] if f is not None and f.message else [])
        notes.extend(row_notes)
        out_rows.append(
            AspectScale(
                sc.label,
                sc.flops,
                sc.params,
                sc.tokens,
                len(sc.index),
                tuple(jsonable(pts)),
                f,
                skipped,
                tuple(row_notes),
            )
        )

    aspect, excluded = _trend(out_rows, _opt, ASPECT_FORMS, "ln aspect*", 0.01, n_boot, seed, use_edge)
    penalty, _ = _trend(out_rows, _pen, PENALTY_FORMS, "ln penalty_2x", 0.05, n_boot, seed, use_edge)
    reason = None
    if not any(r.fit is not None for r in out_rows):
        reason = "this study has no depth-vs-width sweep (no rung has 3 or more aspect ratios)"
    elif aspect is None:
        # one rung's optimum is no trend: say which rung had one, not that none had
        kept = [r.scale for r in out_rows if r.fit is not None and r.scale not in excluded]
        head = (
            "no rung has a bracketed optimum to trend"
            if not kept
            else f"a trend needs bracketed optima at 2 or more rungs, only {kept[0]} has one"
            if len(kept) == 1
            else f"no trend form fits the optima of {', '.join(kept)}"
        )
        left_out = "; ".join(f"{k}: {v}" for k, v in excluded.items())
        reason = f"{head}: {left_out}" if left_out else head
    if reason and require:
        raise FitError(f"{what}: {reason}")
    return DepthWidthResult(
        scales=tuple(out_rows),
        aspect=aspect,
        penalty=penalty,
        excluded=excluded,
        reason=reason,
        compute_law=law,
        hero_flops=hero_flops,
        hero=_hero(aspect, penalty, hero_flops),
        method=DW_METHOD.format(window=window, matched=matched, edge="kept" if use_edge else "left out"),
        notes=tuple(notes),
    )
