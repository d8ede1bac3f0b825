"""The hyperparameter laws of a study (``fit_hparams``): per rung the LR (x batch) sweep's optima, then
LR*(N, D), B*(D) and the penalties of a factor 2 off, evaluated at the hero and at any (N, D) (``at``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.engine import HUBER_DELTA
from ladder.reports.fits.hparams.draws import finite_or_none
from ladder.reports.fits.hparams.optimum_law import N_BOOT, OptimumLaw, fit_optimum_law
from ladder.reports.fits.hparams.optimum_rollout import with_rollout
from ladder.reports.fits.hparams.rungs import REQUIRED, check_columns, group_scales
from ladder.reports.fits.hparams.surface import noise_for, pooled_noise
from ladder.reports.fits.hparams.sweep import SweepFit, fit_one, sweep_from_fit


def _diverged_above(sweep: SweepFit, lr: np.ndarray, loss: np.ndarray) -> SweepFit:
    """A rung whose LR optimum lies beyond the high end of its grid, where the next LR it tried diverged: the
    optimum is between the two, and "widen the sweep" (upwards, into the LR that diverged) led astray. The
    advice becomes to add LRs between them; the numbers stay as fitted."""
    opt = sweep.lr
    if opt is None or not opt.message or opt.edge_side != "high" or opt.status not in ("edge", "no_minimum"):
        return sweep
    top = max(opt.grid)
    above = lr[~np.isfinite(loss) & np.isfinite(lr) & (lr > top * (1 + 1e-9))]
    if not above.size:
        return sweep
    nxt = float(above.min())
    what, _, _ = opt.message.rpartition(": widen the sweep")
    if not what:
        return sweep
    message = f"{what}; the next LR it tried, {nxt:.3g}, diverged: add LRs between {top:.3g} and {nxt:.3g}, not above"
    notes = tuple(message if n == opt.message else n for n in sweep.notes)
    return replace(sweep, lr=replace(opt, message=message), notes=notes)


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
    params_non_embedding: float | None = None  # when the runs table has it (the recipe's rules read it)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "scale": self.scale,
                "flops": self.flops,
                "params": self.params,
                "tokens": self.tokens,
                "params_non_embedding": self.params_non_embedding,
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
    """Hyperparameter laws of a study. ``lr``: LR* in N and D (or compute); ``batch``: B* in D (or compute);
    ``lr_penalty``/``batch_penalty``: the loss cost of a factor 2 off, in compute. ``has_lr_sweep`` is False
    when no rung has 3 LR values (the report says "this study has no LR sweep"). ``hero_*``: where the laws
    were evaluated for the recommendation."""

    scales: tuple[HparamScale, ...]
    lr: OptimumLaw
    lr_penalty: OptimumLaw
    batch: OptimumLaw
    batch_penalty: OptimumLaw
    has_lr_sweep: bool
    has_batch_sweep: bool
    hero_flops: float | None
    hero_params: float | None
    method: str
    hero_tokens: float | None = None
    notes: tuple[str, ...] = ()

    def at(self, params: float | None, tokens: float | None, flops: float | None = None) -> dict:
        """The recommended LR and batch at one (N, D) with their 90% intervals, or why there is none (the
        ``lr_reason``/``batch_reason`` keys). Without ``flops``, a law in compute reads ``6 N D`` times the
        largest rung's FLOPs per 6ND (the laws use the runs' FLOPs column)."""
        if flops is None and params and tokens:
            flops = 6.0 * params * tokens * self._flops_per_6nd()
        out: dict = {}
        for key, law, ci_key in (("lr", self.lr, "lr_ci90"), ("batch_tokens", self.batch, "batch_ci90")):
            value, ci, why = law.at(params, tokens, flops)
            reason_key = "lr_reason" if key == "lr" else "batch_reason"
            out.update({key: value, ci_key: ci, reason_key: why})
            if value is not None:
                out[f"{key}_law"] = law.formula
        return jsonable(out)

    def _flops_per_6nd(self) -> float:
        top = max((s for s in self.scales if s.params > 0 and s.tokens > 0), key=lambda s: s.flops, default=None)
        return 1.0 if top is None else float(top.flops / (6.0 * top.params * top.tokens))

    def hero(self) -> dict:
        """The recommendation at the hero: value and 90% interval of each law (None where there is none)."""
        out = {"flops": self.hero_flops, "params": self.hero_params, "tokens": self.hero_tokens}
        for key, law in (
            ("lr", self.lr),
            ("batch_tokens", self.batch),
            ("lr_penalty_2x", self.lr_penalty),
            ("batch_penalty_2x", self.batch_penalty),
        ):
            out[key] = law.hero_value
            out[f"{key}_ci90"] = law.hero_ci90
            out[f"{key}_law"] = law.formula
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
                "hero_tokens": self.hero_tokens,
                "scales": [s.to_dict() for s in self.scales],
                "lr": self.lr.to_dict(),
                "lr_penalty": self.lr_penalty.to_dict(),
                "batch": self.batch.to_dict(),
                "batch_penalty": self.batch_penalty.to_dict(),
                "notes": list(self.notes),
            }
        )


METHOD = (
    "per rung: quadratic surface of ln loss in (ln lr, ln batch) within a factor {window} of the best run, fitted "
    "by the engine (Huber, delta {delta:g}); LR* at the optimal batch, B* with the LR re-tuned; intervals from "
    "the engine's residual bootstrap (a parametric one from the pooled or known noise where a rung has under 3 "
    "residual degrees of freedom); rungs whose optimum is not bracketed are {edge}; laws ln lr* = c + a ln N + "
    "b ln D and ln B* = c + b ln D (in compute C when the rungs cannot separate N from D), weighted by each "
    "optimum's precision, with bootstrap intervals"
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


def _batches(r: HparamScale) -> int:
    """How many batch sizes a rung's runs with a finite loss cover."""
    return len(
        {
            p["batch_tokens"]
            for p in r.points
            if p.get("batch_tokens") is not None and finite_or_none(p.get("loss")) is not None
        }
    )


def _no_sweep(axis: str, values: str, swept: str | None) -> str:
    # a study that sweeps the axis has a sweep: its runs done so far (or its shapes) lack a rung of 3 values
    if swept:
        return f"the study sweeps {swept}, but no rung has 3 or more {values} among its done runs"
    return f"this study has no {axis} sweep (no rung has 3 or more {values})"


def fit_hparams(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    hero_params: float | None = None,
    hero_tokens: float | None = None,
    window: float | None = 8.0,
    loss_noise: float | None = None,
    use_edge: bool = False,
    n_boot: int = N_BOOT,
    seed: int = 0,
    require: bool = False,
    swept: dict[str, str] | None = None,
) -> HparamResult:
    """LR and batch optima per rung and their laws, evaluated at the hero (``hero_params``, ``hero_tokens``,
    ``hero_flops``; a law needs the ones it reads). ``swept``: the study's own sweep of each axis (``lr``,
    ``batch``) in words, for the reason a law is missing.

    Rungs with fewer than 3 LR values are skipped with a reason; with fewer than 2 usable rungs the laws are
    None and their ``reason`` says why (``require=True`` raises ``FitError`` with it instead). Raises
    ``FitError`` on a table without params/tokens/flops/loss."""
    check_columns(df, REQUIRED, "hyperparameter laws")
    df = df.reset_index(drop=True)  # row labels index the rungs; a concatenated table may repeat them
    hero = {"params": hero_params, "tokens": hero_tokens, "flops": hero_flops}
    method = METHOD.format(window=window, delta=HUBER_DELTA, edge="kept" if use_edge else "left out")
    notes: list[str] = []
    if "lr" not in df.columns:
        why = "this study has no LR sweep (the runs table has no lr column)"
        return _empty_result(why, hero, method, require)
    has_batch_col = "batch_tokens" in df.columns
    prepared = []
    for i, sc in enumerate(group_scales(df)):
        sub, sub_notes = _baseline_subset(df.loc[sc.index], sc.label)
        loss = sub["loss"].to_numpy(dtype=float)
        n_div = int((~np.isfinite(loss)).sum())
        lr = sub["lr"].to_numpy(dtype=float)
        batch = sub["batch_tokens"].to_numpy(dtype=float) if has_batch_col else None
        try:
            parts = fit_one(lr, loss, batch, window=window, label=sc.label, n_boot=n_boot, seed=seed + i)
            if "uu" not in parts[0].terms:
                raise FitError(f"{sc.label}: the LR sweep does not identify a curvature")
            prepared.append((sc, sub, sub_notes, n_div, parts, None))
        except FitError as e:
            prepared.append((sc, sub, sub_notes, n_div, None, str(e)))
    pooled = pooled_noise([p[4][0] for p in prepared if p[4] is not None])
    rows: list[HparamScale] = []
    for i, (sc, sub, sub_notes, n_div, parts, skipped) in enumerate(prepared):
        sweep = None
        if parts is not None:
            fit, u, v, y, ok = parts
            noise = noise_for(fit, loss_noise, pooled)
            sweep = sweep_from_fit(fit, u, v, y, ok, noise, label=sc.label, n_boot=n_boot, seed=seed + i)
            sweep = _diverged_above(sweep, sub["lr"].to_numpy(dtype=float), sub["loss"].to_numpy(dtype=float))
        used = sweep.used if sweep is not None else (False,) * len(sub)
        pts = [
            {
                "lr": r["lr"],
                "batch_tokens": r["batch_tokens"] if has_batch_col else None,
                "loss": r["loss"],
                "used": bool(used[j]) if j < len(used) else False,
            }
            for j, (_, r) in enumerate(sub.iterrows())
        ]
        n_notes = list(sub_notes) + ([] if sweep is None else list(sweep.notes))
        if n_div:
            n_notes.append(f"{sc.label}: {n_div} run(s) without a finite loss (diverged) left out of the fit")
        ne = sub["params_non_embedding"].median() if "params_non_embedding" in sub.columns else None
        rows.append(
            HparamScale(
                sc.label,
                sc.flops,
                sc.params,
                sc.tokens,
                len(sub),
                n_div,
                tuple(jsonable(p) for p in pts),
                sweep,
                skipped,
                tuple(n_notes),
                None if ne is None or not np.isfinite(ne) else float(ne),
            )
        )
        notes.extend(n_notes)
        if skipped:
            notes.append(f"{sc.label} skipped: {skipped}")

    has_lr = any(r.fit is not None for r in rows)
    has_batch = any(r.fit is not None and r.fit.batch is not None for r in rows)
    no_lr = None if has_lr else _no_sweep("LR", "learning rates", (swept or {}).get("lr"))
    no_b = None if has_batch else _no_sweep("batch", "batch sizes", (swept or {}).get("batch"))
    if not has_batch and max((_batches(r) for r in rows), default=0) >= 3:
        no_b = None  # a rung has the batch sizes: the law's reason names why each rung gave no optimum

    def law(axis: str, value: str, quantity: str, prefer: str, no_data: str | None, k: int) -> OptimumLaw:
        pts, excl = _collect(rows, axis, value, use_edge)
        res = fit_optimum_law(
            pts,
            quantity=quantity,
            prefer=prefer,
            hero=hero,
            excluded=excl,
            no_data_reason=no_data,
            n_boot=n_boot,
            seed=seed + 1000 * k,
        )
        return with_rollout(res, n_boot=n_boot, seed=seed + 1000 * k) if value == "opt" else res

    result = HparamResult(
        scales=tuple(rows),
        lr=law("lr", "opt", "lr", "n_d", no_lr, 1),
        lr_penalty=law("lr", "penalty", "lr_penalty_2x", "compute", no_lr, 2),
        batch=law("batch", "opt", "batch_tokens", "d", no_b, 3),
        batch_penalty=law("batch", "penalty", "batch_penalty_2x", "compute", no_b, 4),
        has_lr_sweep=has_lr,
        has_batch_sweep=has_batch,
        hero_flops=hero_flops,
        hero_params=hero_params,
        hero_tokens=hero_tokens,
        method=method,
        notes=tuple(notes),
    )
    if require and result.lr.law is None:
        raise FitError(result.lr.reason or "no LR law")
    return result


def _collect(rows: list[HparamScale], axis: str, value: str, use_edge: bool) -> tuple[list[dict], dict[str, str]]:
    """The rungs' optima (or penalties) of one axis as law points, and why the others are left out."""
    pts, excl = [], {}
    for r in rows:
        if r.fit is None:
            excl[r.scale] = r.skipped or "no fit"
            continue
        opt = r.fit.lr if axis == "lr" else r.fit.batch
        if opt is None:
            few = _batches(r) < 3  # else they were there, without an LR minimum to re-tune at each batch
            excl[r.scale] = f"no batch optimum ({'fewer than 3 batch sizes' if few else 'no LR minimum to profile'})"
            continue
        if opt.status == "no_minimum" or (opt.status == "edge" and not use_edge):
            excl[r.scale] = opt.message or opt.status
            continue
        y, ci = (opt.opt, opt.ci90) if value == "opt" else (opt.penalty_2x, opt.penalty_2x_ci90)
        pts.append(
            {
                "scale": r.scale,
                "params": r.params,
                "tokens": r.tokens,
                "flops": r.flops,
                "params_non_embedding": r.params_non_embedding,
                "y": y,
                "y_ci90": ci,
            }
        )
    return pts, excl


def _empty_result(why: str, hero: dict, method: str, require: bool) -> HparamResult:
    if require:
        raise FitError(why)
    none = lambda q: OptimumLaw(q, None, None, why)  # noqa: E731
    return HparamResult(
        scales=(),
        lr=none("lr"),
        lr_penalty=none("lr_penalty_2x"),
        batch=none("batch_tokens"),
        batch_penalty=none("batch_penalty_2x"),
        has_lr_sweep=False,
        has_batch_sweep=False,
        hero_flops=hero["flops"],
        hero_params=hero["params"],
        hero_tokens=hero["tokens"],
        method=method,
        notes=(why,),
    )
