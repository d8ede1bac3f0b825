"""Ablations along the ladder: tied vs untied embeddings, and depth vs width.

Tied vs untied (``fit_tie_ablation``)
    Per rung, each variant's loss is its best configuration (replicates averaged, then the minimum over any
    other axis swept, e.g. LR). The variants are compared at matched compute: when their compute differs by
    more than 1% (untied has more parameters), each variant's loss is moved to the geometric mean of the two
    along that variant's own loss-vs-compute law ``L(C) = E + (C0/C)^g`` (a pure power law with 2 rungs).
    The difference ``untied - tied`` (> 0: tied wins) is fitted, linear in two parameters, as
    ``diff = a + b (C / c_ref)^-g`` with ``g`` the (geometric mean) exponent of the two variants' laws: the
    form the difference of two such laws takes, which may change sign (a power law cannot) and levels off at
    ``a`` instead of growing without bound. Without an exponent (fewer than 2 rungs per variant) it is linear
    in ``log10 C``; otherwise that form is fitted too (``trend_loglinear``, and ``loglinear`` entries in
    ``crossover`` and ``hero``) as a check on the extrapolation. The crossover is where the trend is zero, with
    a Fieller 90% interval (the computes where zero is inside the trend's interval; unbounded when the trend
    is not significant).
    ``crossover.status``: ``within_range`` (between the smallest and largest rung), ``beyond_range`` (predicted
    above the ladder: the winner flips at larger compute), ``none`` (no significant trend, or the gap widens),
    ``unknown`` (too few rungs). At the hero: the predicted difference with a 90% interval, and the
    effective-compute multiplier: the compute the untied variant needs, over C, to reach the tied variant's
    loss (> 1: tied is better; from the inverse of the untied law).

Depth vs width (``fit_depth_width``)
    Per rung, loss vs ``ln(aspect_ratio)`` (d_model / n_layers) is fitted by a parabola around the best shape
    (``hparams.fit_log_quadratics``: windowed, intervals from t draws, pooled noise, edge flags); losses are
    first moved to the rung's compute along the ladder's loss-vs-compute law when the shapes' compute differs
    (``match_compute``). The best aspect ratio is fitted as a power law of compute (and of N), extrapolated to
    the hero with a 90% interval; the penalty of a factor-2 wrong aspect ratio is ``curvature * (ln 2)^2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from ladder.reports.hparams import (
    LN2_SQ,
    REQUIRED,
    AxisOptimum,
    Scale,
    Trend,
    _ci,
    check_columns,
    fit_log_quadratics,
    fit_trend,
    group_scales,
    jsonable,
)
from ladder.reports.powerlaw import fit_power_law, t_quantile
from scipy.optimize import least_squares

from ladder.errors import FitError

COMPUTE_MATCH_TOL = 0.01  # relative compute difference below which variants count as matched
OTHER_AXES = ("lr", "batch_tokens", "tie_embeddings", "aspect_ratio", "d_model", "n_layers")


# ------------------------------------------------------------------------------------- loss vs compute law


@dataclass(frozen=True)
class LossLaw:
    """``L(C) = E + (C0 / C)^g``; ``kind`` is ``saturating`` (E fitted, >= 3 rungs) or ``power`` (E = 0)."""

    E: float
    C0: float
    g: float
    kind: str
    n_points: int

    def __call__(self, c: float | np.ndarray) -> float | np.ndarray:
        out = self.E + (self.C0 / np.asarray(c, dtype=float)) ** self.g
        return float(out) if np.ndim(out) == 0 else out

    def slope(self, c: float) -> float:
        """dL / d ln C (negative)."""
        return float(-self.g * (self.C0 / c) ** self.g)

    def inverse(self, loss: float) -> float:
        """The compute at which the law reaches ``loss`` (inf when at or below the floor E)."""
        if not math.isfinite(loss) or loss <= self.E:
            return math.inf
        return float(self.C0 * (loss - self.E) ** (-1.0 / self.g))

    def to_dict(self) -> dict:
        return jsonable({"E": self.E, "C0": self.C0, "g": self.g, "kind": self.kind, "n_points": self.n_points})


def fit_loss_vs_compute(flops: np.ndarray, loss: np.ndarray, *, what: str = "loss vs compute") -> LossLaw:
    """``L(C) = E + (C0/C)^g`` by least squares (E in [0, min L)); a pure power law with 2 rungs or when the
    floor is not identified. Raises ``FitError`` with fewer than 2 rungs or a loss that does not fall."""
    c = np.asarray(flops, dtype=float)
    y = np.asarray(loss, dtype=float)
    ok = np.isfinite(c) & (c > 0) & np.isfinite(y) & (y > 0)
    c, y = c[ok], y[ok]
    if len(np.unique(c)) < 2:
        raise FitError(f"{what}: needs at least 2 rungs with a finite loss, got {len(np.unique(c))}")
    pl = fit_power_law(c, y, n_boot=0, what=what)
    if pl.a >= 0:
        raise FitError(f"{what}: loss does not fall with compute (slope {pl.a:+.3g} in log-log)")
    log_c0 = -math.log(pl.k) / pl.a
    if not log_c0 < 700:
        raise FitError(f"{what}: loss barely falls with compute (slope {pl.a:+.3g} in log-log); no usable law")
    power = LossLaw(E=0.0, C0=math.exp(log_c0), g=float(-pl.a), kind="power", n_points=len(c))
    if len(np.unique(c)) < 3:
        return power
    lc = np.log(c)
    ref = float(np.mean(lc))

    def resid(p: np.ndarray) -> np.ndarray:
        e, lc0, g = p
        return e + np.exp(g * (lc0 - lc)) - y

    best, best_cost = None, math.inf
    ymin = float(y.min())
    for frac in (0.0, 0.3, 0.6, 0.8, 0.9, 0.97):
        e0 = frac * ymin
        lp = fit_power_law(c, y - e0, n_boot=0)
        if lp.a >= 0:
            continue
        g0 = -lp.a
        lc00 = math.log(lp.k) / g0
        try:
            sol = least_squares(
                resid,
                x0=[e0, lc00, g0],
                bounds=([0.0, ref - 200.0, 1e-4], [ymin * 0.999999, ref + 200.0, 5.0]),
                x_scale=[max(ymin, 1e-3), 1.0, 0.1],
            )
        except ValueError:
            continue
        if sol.success and sol.cost < best_cost:
            best, best_cost = sol.x, sol.cost
    if best is None or best[0] <= 1e-9 * ymin:
        return power
    return LossLaw(E=float(best[0]), C0=float(math.exp(best[1])), g=float(best[2]), kind="saturating", n_points=len(c))


# --------------------------------------------------------------------------------- shared per-rung helpers


def _as_bool(s: pd.Series) -> pd.Series:
    def conv(v: object) -> bool:
        if isinstance(v, str):
            t = v.strip().lower()
            if t in ("true", "1", "yes", "tied"):
                return True
            if t in ("false", "0", "no", "untied"):
                return False
            raise FitError(f"tie_embeddings: cannot read {v!r} as a boolean")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise FitError("tie_embeddings: missing value")
        return bool(v)

    return s.map(conv)


def _best_config(sub: pd.DataFrame, exclude: Sequence[str]) -> dict | None:
    """Replicates averaged per configuration of the other axes, then the configuration with the lowest loss."""
    sub = sub[np.isfinite(sub["loss"].to_numpy(dtype=float))]
    if len(sub) == 0:
        return None
    cols = [c for c in OTHER_AXES if c in sub.columns and c not in exclude]
    keys = sub[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("all", index=sub.index)
    best = None
    for _, g in sub.groupby(keys, sort=False):
        loss = g["loss"].to_numpy(dtype=float)
        f = g["flops"].to_numpy(dtype=float)
        row = {
            "loss": float(loss.mean()),
            "loss_std": float(loss.std(ddof=1)) if len(loss) > 1 else None,
            "n": int(len(loss)),
            "flops": float(np.exp(np.mean(np.log(f)))),
            "params": float(g["params"].median()),
            "config": {c: jsonable(g[c].iloc[0]) for c in cols},
        }
        if best is None or row["loss"] < best["loss"]:
            best = row
    best["n_configs"] = int(keys.nunique())
    return best


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


def _crossover(trend: LinearTrend, cmin: float, cmax: float, hero: float | None) -> dict:
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


# ----------------------------------------------------------------------------------------- tied vs untied


@dataclass(frozen=True)
class TieScale:
    """One rung of the tie ablation: losses at the matched compute ``flops``, their raw values, and
    ``diff = loss_untied - loss_tied`` (> 0: tied better); ``compute_multiplier``: the untied variant's compute
    needed to reach the tied loss, over ``flops``."""

    scale: str
    flops: float | None
    flops_tied: float | None
    flops_untied: float | None
    loss_tied: float | None
    loss_untied: float | None
    loss_tied_raw: float | None
    loss_untied_raw: float | None
    diff: float | None
    diff_se: float | None
    winner: str | None
    compute_multiplier: float | None
    adjusted: bool
    n_tied: int
    n_untied: int
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return jsonable({**self.__dict__, "notes": list(self.notes)})


@dataclass(frozen=True)
class TieAblation:
    """Tied vs untied along the ladder; see the module doc. ``trend`` is None (with ``reason``) below 2 rungs
    with both variants."""

    scales: tuple[TieScale, ...]
    trend: LinearTrend | None
    reason: str | None
    crossover: dict
    laws: dict[str, LossLaw | None]
    hero_flops: float | None
    hero: dict | None
    method: str
    notes: tuple[str, ...] = ()
    trend_loglinear: LinearTrend | None = None  # the alternative form, when ``trend`` is saturating

    def to_dict(self) -> dict:
        return jsonable(
            {
                "method": self.method,
                "scales": [s.to_dict() for s in self.scales],
                "trend": None if self.trend is None else self.trend.to_dict(),
                "trend_loglinear": None if self.trend_loglinear is None else self.trend_loglinear.to_dict(),
                "reason": self.reason,
                "crossover": self.crossover,
                "laws": {k: None if v is None else v.to_dict() for k, v in self.laws.items()},
                "hero_flops": self.hero_flops,
                "hero": self.hero,
                "notes": list(self.notes),
            }
        )


TIE_METHOD = (
    "diff = loss(untied) - loss(tied) per rung at matched compute (each variant moved along its own "
    "L(C) = E + (C0/C)^g when compute differs by > 1%); diff = a + b (C/c_ref)^-g with the laws' g (else "
    "linear in log10 C); crossover with a Fieller 90% interval; multiplier = C_untied needed for the tied "
    "loss / C (> 1: tied better)"
)


def _multiplier(law: LossLaw | None, c: float, diff: float) -> float | None:
    if law is None:
        return None
    need = law.inverse(float(law(c)) - diff)
    return need / c if math.isfinite(need) else None


def fit_tie_ablation(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    loss_noise: float | None = None,
    require: bool = False,
) -> TieAblation:
    """Tied vs untied embeddings per rung and along the ladder (module doc). ``loss_noise``: seed-to-seed
    standard deviation of a run's loss, if known (a floor on each rung's uncertainty). Raises ``FitError`` on
    a table without the needed columns or without both variants; with fewer than 2 comparable rungs the trend
    is None and ``reason`` says why (``require=True`` raises instead)."""
    what = "tied vs untied"
    check_columns(df, (*REQUIRED, "tie_embeddings"), what)
    df = df.reset_index(drop=True)
    df["tie_embeddings"] = _as_bool(df["tie_embeddings"])
    if df["tie_embeddings"].nunique() < 2:
        only = "tied" if bool(df["tie_embeddings"].iloc[0]) else "untied"
        raise FitError(f"{what}: all runs are {only}; the ablation needs both variants")
    scales = group_scales(df, by=("d_model", "n_layers"))
    notes: list[str] = []
    raw: list[tuple[Scale, dict | None, dict | None, str | None]] = []
    for sc in scales:
        sub = df.loc[sc.index]
        t = _best_config(sub[sub["tie_embeddings"]], exclude=("tie_embeddings",))
        u = _best_config(sub[~sub["tie_embeddings"]], exclude=("tie_embeddings",))
        skipped = None
        if t is None or u is None:
            missing = [n for n, v in (("tied", t), ("untied", u)) if v is None]
            skipped = f"{sc.label}: no {' or '.join(missing)} run with a finite loss at this rung"
        raw.append((sc, t, u, skipped))

    laws: dict[str, LossLaw | None] = {}
    for name, pos in (("tied", 1), ("untied", 2)):
        pts = [(r[pos]["flops"], r[pos]["loss"]) for r in raw if r[pos] is not None]
        try:
            laws[name] = fit_loss_vs_compute([p[0] for p in pts], [p[1] for p in pts], what=f"{name} loss vs compute")
        except FitError as e:
            laws[name] = None
            notes.append(str(e))

    rows: list[TieScale] = []
    for sc, t, u, skipped in raw:
        if skipped:
            rows.append(
                TieScale(sc.label, sc.flops, None if t is None else t["flops"], None if u is None else u["flops"],
                         None, None, None if t is None else t["loss"], None if u is None else u["loss"], None, None,
                         None, None, False, 0 if t is None else t["n"], 0 if u is None else u["n"], skipped)
            )
            notes.append(skipped)
            continue
        row_notes: list[str] = []
        cm = math.sqrt(t["flops"] * u["flops"])
        lt, lu = t["loss"], u["loss"]
        adjusted = False
        if abs(math.log(u["flops"] / t["flops"])) > math.log1p(COMPUTE_MATCH_TOL):
            if laws["tied"] is not None and laws["untied"] is not None:
                lt = lt + laws["tied"](cm) - laws["tied"](t["flops"])
                lu = lu + laws["untied"](cm) - laws["untied"](u["flops"])
                adjusted = True
            else:
                row_notes.append(
                    f"{sc.label}: compute differs by {abs(u['flops'] / t['flops'] - 1):.1%} between the variants "
                    "and no loss-vs-compute law to match it (needs 2 rungs); compared as is"
                )
        diff = lu - lt
        se = None
        if t["loss_std"] is not None and u["loss_std"] is not None:
            se = math.sqrt(t["loss_std"] ** 2 / t["n"] + u["loss_std"] ** 2 / u["n"])
        elif loss_noise:
            se = loss_noise * math.sqrt(1 / t["n"] + 1 / u["n"])
        winner = "tied" if diff > 0 else ("untied" if diff < 0 else "even")
        rows.append(
            TieScale(sc.label, cm, t["flops"], u["flops"], lt, lu, t["loss"], u["loss"], diff, se, winner,
                     _multiplier(laws["untied"], cm, diff), adjusted, t["n"], u["n"], None, tuple(row_notes))
        )
        notes.extend(row_notes)

    good = [r for r in rows if r.diff is not None]
    trend = alt = None
    reason = None
    crossover: dict = {"status": "unknown", "flops": None, "ci90": None}
    hero = None
    g = _shared_exponent(laws)
    if len({round(math.log10(r.flops), 9) for r in good}) < 2:
        reason = f"the tie trend needs at least 2 rungs with both variants, got {len(good)}"
        crossover["message"] = reason
        if require:
            raise FitError(f"{what}: {reason}")
    else:
        se = [r.diff_se for r in good]
        xs = [r.flops for r in good]
        kw = dict(
            se=None if any(s is None for s in se) else np.array(se),
            noise=None if loss_noise is None else loss_noise * math.sqrt(2),
        )
        diffs = [r.diff for r in good]
        trend = fit_linear_trend(xs, diffs, g=g, **kw)
        if trend.form == "saturating":
            alt = fit_linear_trend(xs, diffs, **kw)
        else:
            notes.append("no loss-vs-compute exponent for the variants: the difference is fitted linearly in log10 C")
        crossover = _crossover(trend, min(xs), max(xs), hero_flops)
        if alt is not None:
            alt_cross = _crossover(alt, min(xs), max(xs), hero_flops)
            crossover["loglinear"] = {k: alt_cross.get(k) for k in ("status", "flops", "ci90")}
        if hero_flops is not None:
            hero = {"flops": hero_flops, "extrapolation": hero_flops / max(xs)}
            hero.update(_hero_diff(trend, laws["untied"], hero_flops))
            if laws["untied"] is not None and hero["compute_multiplier"] is None:
                hero["note"] = "the untied law never reaches the tied loss (below its fitted floor E)"
            if alt is not None:
                hero["loglinear"] = _hero_diff(alt, laws["untied"], hero_flops)
    return TieAblation(tuple(rows), trend, reason, crossover, laws, hero_flops, hero, TIE_METHOD, tuple(notes), alt)


def _shared_exponent(laws: dict[str, LossLaw | None]) -> float | None:
    """The exponent g of the variants' loss-vs-compute laws (geometric mean), for the saturating trend."""
    gs = [law.g for law in laws.values() if law is not None and law.g > 0]
    if not gs:
        return None
    return float(np.clip(np.exp(np.mean(np.log(gs))), 0.01, 2.0))


def _hero_diff(trend: LinearTrend, law: LossLaw | None, c: float) -> dict:
    d = float(trend(c))
    ci = trend.interval(c)
    m_ci = None
    if ci is not None:
        m_ci = [_multiplier(law, c, ci[0]), _multiplier(law, c, ci[1])]
    return {
        "diff": d,
        "diff_ci90": None if ci is None else list(_ci(*ci)),
        "winner": "tied" if d > 0 else "untied",
        "winner_certain": None if ci is None else bool(ci[0] > 0 or ci[1] < 0),
        "compute_multiplier": _multiplier(law, c, d),
        "compute_multiplier_ci90": m_ci,
    }


# ----------------------------------------------------------------------------------------- depth vs width


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
    """Best aspect ratio per rung and its law (module doc). Needs ``aspect_ratio`` or ``d_model`` and
    ``n_layers``. Rungs with fewer than 3 shapes are skipped with a reason; with fewer than 2 usable rungs
    the trend is None with a reason (``require=True`` raises ``FitError`` instead)."""
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
            b = _best_config(g, exclude=("aspect_ratio", "d_model", "n_layers"))
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


__all__ = [
    "LN2_SQ",
    "AspectScale",
    "DepthWidthResult",
    "LinearTrend",
    "LossLaw",
    "TieAblation",
    "TieScale",
    "fit_depth_width",
    "fit_linear_trend",
    "fit_loss_vs_compute",
    "fit_tie_ablation",
]
