"""The hyperparameter laws of a study (``fit_hparams``): per rung the LR (x batch) sweep's optima, then
LR*(C), B*(C), their versions in N and the penalties of a factor 2 off, extrapolated to the hero."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.hparams.rungs import REQUIRED, check_columns, group_scales
from ladder.reports.fits.hparams.surface import noise_for, pooled_noise
from ladder.reports.fits.hparams.sweep import SweepFit, fit_one, sweep_from_fit
from ladder.reports.fits.hparams.trend import Trend, fit_trend


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
            fit, u, v, y, ok = fit_one(lr, loss, batch, window=window, label=sc.label)
            if "uu" not in fit.terms:
                raise FitError(f"{sc.label}: the LR sweep does not identify a curvature")
            prepared.append((sc, sub, sub_notes, n_div, (fit, u, v, y, ok), None))
        except FitError as e:
            prepared.append((sc, sub, sub_notes, n_div, None, str(e)))
    pooled = pooled_noise([p[4][0] for p in prepared if p[4] is not None])
    rows: list[HparamScale] = []
    for i, (sc, sub, sub_notes, n_div, parts, skipped) in enumerate(prepared):
        sweep = None
        if parts is not None:
            fit, u, v, y, ok = parts
            noise = noise_for(fit, loss_noise, pooled)
            sweep = sweep_from_fit(fit, u, v, y, ok, noise, label=sc.label, n_draws=n_draws, seed=seed + i)
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
