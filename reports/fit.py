"""The assembled fit of a ladder: what ``ladder fit`` prints, ``fit.json`` holds and the report renders.

From a notebook::

    >>> import pandas as pd
    >>> from ladder.reports.fit import fit_study
    >>> from ladder.studies import load_study
    >>> runs = pd.read_parquet("ladder-runs/default/results.parquet")
    >>> result = fit_study(runs, study=load_study("default"), predict=["10M:200M"])
    >>> result.hero["loss"], result.hero["lo"], result.hero["hi"]      # forecast with its 90% interval
    >>> result.loss_law.predict(1e6, 2e7)                               # the ChinchillaFit itself
    >>> print(result.recommendation.to_yaml_snippet())                 # the hero config to paste
    >>> json.dumps(result.to_dict(), allow_nan=False)                   # what fit.json holds

A table exported from another tool works too: ``fit_runs_file("runs.csv")`` (CSV or parquet) needs only
``params``, ``tokens`` and ``loss`` (optional ``flops``, else ``6 * params * tokens``; ``lr``;
``batch_tokens`` or its alias ``batch_size``; ``variant``; ``tie_embeddings``; ``aspect_ratio``; ``status``;
``axis/<name>`` columns).

Decisions (also listed in ``meta.decisions`` of every result):

* Runs whose ``status`` is not ``done`` (diverged, failed, ...) are excluded from every fit, listed in
  ``excluded`` with their reason, and warned about. A remaining run with a missing, NaN or non-positive
  ``params``/``tokens``/``loss``/``flops`` is a ``FitError`` naming the rows (fix or drop them).
* Variants: one Approach-3 law per *model variant*: the study's structural axis (tied vs untied
  embeddings); a table without ``axis/`` columns is grouped by its ``variant`` column (else by
  ``tie_embeddings`` when it varies). Hyperparameter and shape axes (lr, lr_multipliers, batch_tokens,
  batch_multipliers, aspect_ratio) are *not* variants: the loss law uses, per rung and variant, the runs of
  the configuration with the lowest (replicate-averaged) loss, i.e. the tuned loss. A law through
  deliberately bad LRs would be biased high; the cost is a slight optimistic bias from taking a minimum
  over noisy runs, and the forecast assumes the hero is tuned too (the recommendation tunes it from the
  same sweep).
* The primary ``loss_law`` is that of the recommended variant: the tied-vs-untied ablation's winner at
  the hero's compute; else the study's hero/family default (``hero.tied``, ``model.tie_embeddings``);
  without a study, the variant with the lowest loss at the ladder's largest size.
* The law's N is the ``params`` column: the study's ``param_count`` convention; hero params are in that
  convention too. The law's compute is ``C = 6 N D`` in that convention; the ``flops`` column (FLOPs per
  token of the actual shape x tokens) is the ladder's cost and the x-axis of the hyperparameter and
  ablation trends, so those are extrapolated to the hero's FLOPs in the same convention.
* Hero: params and tokens as given (``allocation: given``); params with the tokens-per-param rule
  (``rule``); or a compute budget split by the fit's compute-optimal allocation when it is identifiable
  (``compute_optimal``, from Approach 3, else from the IsoFLOP fit), else by the rule (``rule``, with the
  reason). Its loss is the primary law's forecast with a 90% prediction interval (bootstrap refits of the
  law + resampled, dof-inflated residual scatter). The ladder's cost is the sum of the ``flops`` of every
  run in the table (excluded ones too: they were paid for), as a percentage of the hero's compute.
* Optional parts (IsoFLOP, loss vs compute, hyperparameter laws, ablations) never fail the fit: each is
  ``{"available": false, "reason": ...}`` when the data cannot support it, with a warning when the study
  asked for it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from ladder.model.config import format_count, parse_count
from ladder.reports import recommend as rec
from ladder.reports.ablations import fit_depth_width, fit_tie_ablation
from ladder.reports.approach3 import ChinchillaFit, fit_chinchilla
from ladder.reports.fitdata import as_runs, group_budgets
from ladder.reports.hparams import fit_hparams
from ladder.reports.isoflop import fit_isoflop
from ladder.reports.laws import fit_loss_vs_compute
from ladder.studies.spec import StudySpec

from ladder.errors import FitError
from ladder.layout import jsonable

__all__ = ["FitResult", "fit_runs_file", "fit_study", "read_runs_file"]

REQUIRED = ("params", "tokens", "loss")
NUMERIC = ("params", "tokens", "loss", "flops", "lr", "batch_tokens", "aspect_ratio", "d_model", "n_layers")
KEEP_STATUS = {"done", "ok", "completed", "complete", "success", "succeeded", "finished"}
TUNING_AXES = ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers", "aspect_ratio")
VARIANT_AXES = ("tie_embeddings",)
RUNG_RTOL = 0.05  # runs whose params and tokens agree within 5% share a rung (tables without axis columns)
FAR_EXTRAPOLATION = 30.0  # warn when the hero is this many times the largest ladder model
BACKTEST_WARN_PCT = 5.0

DECISIONS = (
    "runs whose status is not 'done' are excluded from every fit and listed in 'excluded'",
    "one Approach-3 law per model variant (tied vs untied); lr, batch and aspect-ratio sweeps are not variants: "
    "the loss law uses the best (tuned) configuration of each rung",
    "the primary loss_law is the recommended variant's: the tie ablation's winner at the hero, else the "
    "study's hero/family default, else the variant with the lowest loss at the largest size",
    "N is the params column (the study's param_count convention); the law's compute is 6ND in it; "
    "hyperparameter and ablation trends are in the flops column's convention and extrapolated to the hero's "
    "FLOPs per token x tokens",
    "hero interval: 90% prediction interval = bootstrap refits of the law + resampled residual scatter",
    "ladder cost = sum of the flops of every run in the table (excluded runs included) / hero compute",
)


# ------------------------------------------------------------------------------------------------ result


@dataclass
class FitResult:
    """Everything ``ladder fit`` computes. Sub-results are the fit objects (``None`` with a reason in
    ``reasons[name]`` when unavailable); ``to_dict()`` is the JSON of ``fit.json`` (no NaN/inf)."""

    loss_law: ChinchillaFit | None  # None (reason in reasons["loss_law"]) only when a sweep result stands alone
    primary_variant: str
    variant_choice: str
    laws_by_variant: dict[str, ChinchillaFit | None]
    predictions: list[dict]
    hero: dict | None
    compute_optimal: dict
    isoflop: Any | None = None
    loss_vs_compute: Any | None = None
    hparams: Any | None = None
    tied_vs_untied: Any | None = None
    depth_vs_width: Any | None = None
    recommendation: rec.Recommendation | None = None
    excluded: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # section -> why it is unavailable
    meta: dict = field(default_factory=dict)
    variant_hero: dict[str, dict] = field(default_factory=dict)  # variant -> its law's forecast at the hero
    loss_vs_compute_hero: dict | None = None
    tasks: Any | None = None  # task-accuracy forecasts (ladder.reports.tasks.TaskScaling)
    forecast_curve: list[dict] | None = None  # the law's 90% prediction band along the hero's tokens/param
    runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs after exclusion
    law_runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs each variant's law was fitted to

    # --------------------------------------------------------------------------------------------- output
    def _section(self, name: str, obj: Any, extra: dict | None = None) -> dict:
        if obj is None:
            return {"available": False, "reason": self.reasons.get(name, "not computed")}
        out = {"available": True, **obj.to_dict()}
        if extra:
            out.update(extra)
        return out

    def to_dict(self) -> dict:
        if self.loss_law is not None:
            law = {"available": True, **self.loss_law.to_dict()}
        else:
            law = {"available": False, "form": "chinchilla", "reason": self.reasons.get("loss_law")}
        law.update({"variant": self.primary_variant, "variant_choice": self.variant_choice})
        by_variant = {}
        for v, f in self.laws_by_variant.items():
            if f is None:
                by_variant[v] = {"available": False, "reason": self.reasons.get(f"law:{v}", "not fitted")}
            else:
                by_variant[v] = {"available": True, "primary": v == self.primary_variant, **f.to_dict(),
                                 "hero": self.variant_hero.get(v)}
        if self.loss_law is not None and self.loss_law.backtest is not None:
            bt = {"available": True, "form": "chinchilla", "variant": self.primary_variant,
                  **self.loss_law.backtest.to_dict()}
        else:
            bt = {"available": False, "reason": "no backtest was run"}
        lvc_extra = {"hero": self.loss_vs_compute_hero} if self.loss_vs_compute is not None else None
        hp_extra = None
        if self.hparams is not None:
            hp_extra = {"available": bool(self.hparams.has_lr_sweep or self.hparams.has_batch_sweep)}
            if not hp_extra["available"]:
                hp_extra["reason"] = self.hparams.lr.reason
        out = {
            "loss_law": law,
            "laws_by_variant": by_variant,
            "predictions": list(self.predictions),
            "hero": self.hero if self.hero is not None else {"available": False, "reason": self.reasons.get("hero")},
            "compute_optimal": self.compute_optimal,
            "backtest": bt,
            "isoflop": self._section("isoflop", self.isoflop),
            "loss_vs_compute": self._section("loss_vs_compute", self.loss_vs_compute, lvc_extra),
            "hparams": self._section("hparams", self.hparams, hp_extra),
            "tied_vs_untied": self._section("tied_vs_untied", self.tied_vs_untied),
            "depth_vs_width": self._section("depth_vs_width", self.depth_vs_width),
            "recommendation": self._section("recommendation", self.recommendation),
            "tasks": self._section("tasks", self.tasks),
            "forecast_curve": self.forecast_curve,
            "excluded": list(self.excluded),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "meta": dict(self.meta),
        }
        if self.recommendation is not None:
            out["recommendation"]["yaml"] = self.recommendation.to_yaml_snippet()
        return jsonable(out)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def write(self, path: str | Path) -> Path:
        """Write ``to_dict()`` as JSON (atomically: a temporary file renamed into place)."""
        from ladder.layout import atomic_write_text

        path = Path(path)
        atomic_write_text(path, self.to_json() + "\n")
        return path


# ------------------------------------------------------------------------------------------------- input


def read_runs_file(path: str | Path) -> pd.DataFrame:
    """A runs table from a CSV (``.csv``, ``.tsv``) or parquet (``.parquet``, ``.pq``) file."""
    path = Path(path)
    if not path.is_file():
        raise FitError(f"{path}: no such runs file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".tsv", ".txt"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
        raise FitError(f"{path}: cannot read the runs table ({type(exc).__name__}: {exc})") from None
    raise FitError(f"{path}: unsupported runs file type {suffix or '(none)'}; use .csv or .parquet")


def fit_runs_file(path: str | Path, **kwargs: Any) -> FitResult:
    """:func:`fit_study` on a CSV or parquet file of runs (needs ``params``, ``tokens``, ``loss``)."""
    df = read_runs_file(path)
    try:
        return fit_study(df, **kwargs)
    except FitError as exc:
        raise FitError(f"{path}: {exc}") from None


def _prepare(runs: Any) -> pd.DataFrame:
    if isinstance(runs, pd.DataFrame):
        df = runs.copy()
    elif isinstance(runs, dict):
        df = pd.DataFrame(runs)
    else:
        raise FitError(f"fit: runs must be a pandas DataFrame (or a mapping of columns), got {type(runs).__name__}")
    df.columns = [str(c) for c in df.columns]
    if "batch_size" in df.columns:
        if "batch_tokens" in df.columns:
            raise FitError("fit: the runs table has both batch_size and batch_tokens; batch_size is an alias, keep one")
        df = df.rename(columns={"batch_size": "batch_tokens"})
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        have = ", ".join(df.columns) or "none"
        raise FitError(
            f"fit: the runs table lacks column(s) {', '.join(missing)}; it needs params, tokens and loss "
            f"(optional: flops, lr, batch_tokens or batch_size, variant, status); it has {have}"
        )
    if len(df) == 0:
        raise FitError("fit: the runs table has no rows")
    for col in NUMERIC:
        if col in df.columns:
            try:
                df[col] = pd.to_numeric(df[col], errors="raise").astype(float)
            except (TypeError, ValueError) as exc:
                raise FitError(f"fit: column {col} is not numeric ({exc})") from None
    if "run_id" in df.columns and df["run_id"].notna().all() and df["run_id"].is_unique:
        df.index = pd.Index(df["run_id"].astype(str), name="run")
    else:
        df.index = pd.Index([f"row {i}" for i in range(len(df))], name="run")
    return df


def _status_ok(df: pd.DataFrame) -> np.ndarray:
    if "status" not in df.columns:
        return np.ones(len(df), dtype=bool)
    s = df["status"]
    return (s.isna() | s.astype(str).str.strip().str.lower().isin(KEEP_STATUS)).to_numpy()


def _excluded_rows(df: pd.DataFrame, ok: np.ndarray) -> list[dict]:
    out = []
    for label, row in df[~ok].iterrows():
        reason = row.get("reason") if "reason" in df.columns else None
        if reason is None or (isinstance(reason, float) and math.isnan(reason)):
            step = row.get("diverged_at_step") if "diverged_at_step" in df.columns else None
            reason = f"diverged at step {int(step)}" if step is not None and pd.notna(step) else None
        out.append(
            jsonable(
                {
                    "run": str(label),
                    "status": str(row["status"]),
                    "reason": None if reason is None else str(reason),
                    "variant": str(row["variant"]) if "variant" in df.columns and pd.notna(row["variant"]) else None,
                    "params": row.get("params"),
                    "tokens": row.get("tokens"),
                }
            )
        )
    return out


def _bool_text(v: Any) -> str:
    if isinstance(v, str):
        t = v.strip().lower()
        if t in ("true", "1", "yes", "tied"):
            return "tied"
        if t in ("false", "0", "no", "untied"):
            return "untied"
        return t
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return "tied" if bool(v) else "untied"


def _keys(df: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[str], str]:
    """(rung key, law-variant key, tuning columns, how variants were defined) per row."""
    axis_cols = [c for c in df.columns if c.startswith("axis/")]
    if axis_cols:
        tune = [f"axis/{a}" for a in TUNING_AXES if f"axis/{a}" in df.columns]
        var = [f"axis/{a}" for a in VARIANT_AXES if f"axis/{a}" in df.columns]
        rung_cols = [c for c in axis_cols if c not in tune and c not in var]
        rung = (
            df[rung_cols].astype(str).agg(" ".join, axis=1)
            if rung_cols
            else _cluster_key(df)
        )
        if var:
            variant = df[var[0]].map(_bool_text)
            how = "the study's tie_embeddings axis"
        elif "tie_embeddings" in df.columns and df["tie_embeddings"].nunique() > 1:
            variant = df["tie_embeddings"].map(_bool_text)
            how = "the tie_embeddings column"
        else:
            variant = pd.Series("all", index=df.index)
            how = "a single variant"
        return rung, variant, tune, how
    tune = [c for c in ("lr", "batch_tokens", "aspect_ratio") if c in df.columns]
    rung = _cluster_key(df)
    if "variant" in df.columns:
        variant = df["variant"].fillna("?").astype(str)
        how = "the variant column"
    elif "tie_embeddings" in df.columns and df["tie_embeddings"].nunique() > 1:
        variant = df["tie_embeddings"].map(_bool_text)
        how = "the tie_embeddings column"
    else:
        variant = pd.Series("all", index=df.index)
        how = "a single variant"
    return rung, variant, tune, how


def _cluster_key(df: pd.DataFrame) -> pd.Series:
    """Rungs of a table without axis columns: params and tokens each clustered within RUNG_RTOL."""
    out = []
    for col in ("params", "tokens"):
        v = df[col].to_numpy(dtype=float)
        good = np.isfinite(v) & (v > 0)
        lab = np.full(len(v), -1)
        if good.any():
            lab[good], _ = group_budgets(v[good], RUNG_RTOL)
        out.append(lab)
    return pd.Series([f"N{a}/D{b}" for a, b in zip(*out)], index=df.index)


def _best_configs(df: pd.DataFrame, tune: list[str]) -> tuple[pd.DataFrame, str | None]:
    """Per (rung, variant): the runs of the configuration of the tuning axes with the lowest mean loss."""
    varying = [c for c in tune if (df.groupby(["_rung", "_variant"])[c].nunique(dropna=False) > 1).any()]
    if not varying:
        return df, None
    keep: list = []
    for _, g in df.groupby(["_rung", "_variant"], sort=False):
        cfg = g[varying].astype(str).agg("|".join, axis=1)
        best = g["loss"].groupby(cfg).mean().idxmin()
        keep.extend(g.index[cfg == best])
    names = ", ".join(c.removeprefix("axis/") for c in varying)
    dropped = len(df) - len(keep)
    note = (
        f"the loss laws use the best {names} configuration of each rung and variant (the tuned loss); "
        f"{dropped} sweep run(s) at other values are left out of the laws (they feed the hyperparameter "
        "and ablation fits)"
    )
    return df.loc[keep], note


# --------------------------------------------------------------------------------------------- the fit


def _parse_predict(items: Iterable) -> list[tuple[float, float, str]]:
    out = []
    for item in items or ():
        label = None
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) != 2:
                raise FitError(f"predict {item!r}: expected PARAMS:TOKENS, e.g. 3.2M:64M")
            vals = [parse_count(p.strip()) for p in parts]
            label = item.strip()
        else:
            try:
                vals = list(item)
            except TypeError:
                raise FitError(f"predict {item!r}: expected (params, tokens) or 'PARAMS:TOKENS'") from None
            if len(vals) == 3:
                label = str(vals[2])
                vals = vals[:2]
            if len(vals) != 2:
                raise FitError(f"predict {item!r}: expected (params, tokens) or 'PARAMS:TOKENS'")
            vals = [parse_count(v) if isinstance(v, str) else v for v in vals]
        try:
            n, d = float(vals[0]), float(vals[1])
        except (TypeError, ValueError):
            raise FitError(f"predict {item!r}: params and tokens must be numbers like 3.2M or 6.4e7") from None
        if not (math.isfinite(n) and math.isfinite(d) and n > 0 and d > 0):
            raise FitError(f"predict {item!r}: params and tokens must be positive")
        out.append((n, d, label or f"{format_count(n)}:{format_count(d)}"))
    return out


def _prediction(law: ChinchillaFit | None, n: float, d: float, label: str, variant: str) -> dict:
    try:
        if law is None:
            raise FitError("no loss law was fitted (see loss_law.reason)")
        p = law.predict(n, d)
    except FitError as exc:
        return {"label": label, "variant": variant, "params": n, "tokens": d, "flops": 6 * n * d, "loss": None,
                "lo": None, "hi": None, "ci_lo": None, "ci_hi": None, "reason": str(exc)}
    return {"label": label, "variant": variant, "params": n, "tokens": d, "flops": p.flops, "loss": p.loss,
            "lo": p.lo, "hi": p.hi, "ci_lo": p.ci_lo, "ci_hi": p.ci_hi, "level": p.level, "reason": None}


def _law_source(law: ChinchillaFit, variant: str) -> str:
    form = "reduced law E + A/N^alpha (degenerate ladder)" if law.degenerate else "E + A/N^alpha + B/D^beta"
    return f"fit: chinchilla {form}, variant {variant}, {law.n_runs} runs at {law.n_sizes} sizes"


def _largest_size_winner(law_df: pd.DataFrame, fitted: Sequence[str]) -> str:
    sub = law_df[law_df["_variant"].isin(fitted)]
    top = sub[sub["params"] >= sub["params"].max() / (1 + RUNG_RTOL)]
    best = top.groupby("_variant")["loss"].mean()
    return str(best.idxmin()) if len(best) else str(fitted[0])


def fit_study(
    runs: pd.DataFrame,
    *,
    study: StudySpec | None = None,
    predict: Sequence = (),
    n_boot: int = 200,
    seed: int = 0,
) -> FitResult:
    """Fit a ladder's runs: per-variant Approach-3 laws, backtest, compute-optimal allocation, IsoFLOP and
    loss-vs-compute fits, hyperparameter laws, tied-vs-untied and depth-vs-width ablations, the hero
    forecast and the recommended hero configuration (the last two need ``study``).

    ``runs``: a results table (``results.parquet`` of ``ladder collect``, or any table with ``params``,
    ``tokens``, ``loss``; see the module doc). ``predict``: extra forecasts, each ``"PARAMS:TOKENS"``
    (e.g. ``"10M:200M"``), ``(params, tokens)`` or ``(params, tokens, label)``. ``n_boot``: bootstrap refits
    for the intervals. Raises ``FitError`` for input the user must fix (missing columns, NaN or non-positive
    values, too few runs or sizes for the law); optional parts that cannot be fitted only give a reason.

    Example::

        >>> from ladder.reports.fit import fit_study
        >>> res = fit_study(df, study=study)
        >>> res.to_dict()["hero"]["loss"], res.recommendation.lr
    """
    if n_boot < 0:
        raise FitError(f"fit: n_boot must be >= 0, got {n_boot}")
    predictions_in = _parse_predict(predict)
    warnings: list[str] = []
    notes: list[str] = []
    reasons: dict[str, str] = {}

    raw = _prepare(runs)
    ok = _status_ok(raw)
    excluded = _excluded_rows(raw, ok)
    if excluded:
        listed = "; ".join(
            f"{e['run']} ({e['status']}{': ' + e['reason'] if e['reason'] else ''})" for e in excluded[:8]
        )
        more = f"; and {len(excluded) - 8} more" if len(excluded) > 8 else ""
        warnings.append(f"{len(excluded)} run(s) excluded from the fits (not done): {listed}{more}")
    if not ok.any():
        raise FitError(f"fit: no finished runs to fit; all {len(raw)} run(s) are excluded (diverged or failed)")
    flops_given = "flops" in raw.columns
    if not flops_given:
        raw["flops"] = 6.0 * raw["params"] * raw["tokens"]
        notes.append("no flops column: FLOPs are 6 x params x tokens")
    df = raw[ok].copy()
    as_runs(df[["params", "tokens", "loss", "flops"]], what="fit")  # names NaN / non-positive rows

    conv = _convention(df, study, warnings)
    rung, variant, tune, how = _keys(raw)
    raw["_rung"], raw["_variant"] = rung, variant
    df["_rung"], df["_variant"] = rung[ok], variant[ok]
    law_df, sweep_note = _best_configs(df, tune)
    if sweep_note:
        notes.append(sweep_note)
    variants = sorted(law_df["_variant"].unique().tolist())

    # ---- one Approach-3 law per variant
    laws: dict[str, ChinchillaFit | None] = {}
    for v in variants:
        sub = law_df[law_df["_variant"] == v]
        try:
            laws[v] = fit_chinchilla(sub, n_boot=n_boot, seed=seed, backtest="size")
        except FitError as exc:
            laws[v] = None
            what = "loss law" if len(variants) == 1 else f"loss law of variant {v!r}"
            reasons[f"law:{v}"] = f"{what}: {exc}"
    fitted = [v for v in variants if laws[v] is not None]
    for v in variants:
        if laws[v] is None:
            warnings.append(reasons[f"law:{v}"])

    # ---- the hero as the study states it (the ablations' extrapolation target)
    hero0 = _hero_start(study) if study is not None else None

    # ---- tied vs untied, depth vs width (decide the hero's variant and shape)
    tie = _tie(df, hero0, study, reasons, warnings)
    primary, choice = _primary(study, tie, fitted, variants, law_df, laws, how)
    law = laws.get(primary)
    if law is None:
        reasons["loss_law"] = reasons.get(f"law:{primary}", "no loss law")
    prim_df = df[df["_variant"] == primary]
    dw = _depth_width(prim_df, hero0, study, reasons, warnings, seed)

    tied = aspect = None
    tied_src = aspect_src = None
    if study is not None:
        tied, tied_src = rec.choose_tied(study, tie)
        aspect, aspect_src = rec.choose_aspect(study, dw)

    # ---- isoflop and loss vs compute (on the primary variant's law runs)
    prim_law_df = law_df[law_df["_variant"] == primary]
    iso = _isoflop(prim_law_df, study, reasons, warnings, n_boot, seed)
    lvc = _loss_vs_compute(prim_law_df, law, reasons, warnings, n_boot, seed)

    # ---- the hero: allocation, shape, forecast
    hero = None
    shape = None
    alloc_src = None
    if study is None:
        reasons["hero"] = "no study given: the hero is defined by a study (pass study=, or use predict=)"
        reasons["recommendation"] = "no study given: the recommendation needs the study's hero and recipe"
    else:
        hero, shape, alloc_src = _hero(study, law, iso, tied, aspect, conv, df, raw, warnings)
    hparams = _hparams(raw, ok, primary, hero, study, reasons, warnings, seed)

    predictions: list[dict] = []
    variant_hero: dict[str, dict] = {}
    curve = None
    if hero is not None:
        hp = _prediction(law, hero["params"], hero["tokens"], "hero", primary)
        hero.update({k: hp[k] for k in ("loss", "lo", "hi", "ci_lo", "ci_hi")})
        hero["loss_source"] = None if law is None else _law_source(law, primary)
        if hp["reason"] and law is not None:
            hero["loss_reason"] = hp["reason"]
            warnings.append(f"hero forecast unavailable: {hp['reason']}")
        predictions.append(hp)
        for v in fitted:
            variant_hero[v] = _prediction(laws[v], hero["params"], hero["tokens"], "hero", v)
        _extrapolation_warnings(hero, law_df, warnings)
        curve = _forecast_curve(law, hero, law_df[law_df["_variant"] == primary])
    for n, d, label in predictions_in:
        p = _prediction(law, n, d, label, primary)
        if p["reason"] and law is not None:
            warnings.append(f"prediction {label}: {p['reason']}")
        predictions.append(p)

    lvc_hero = None
    if lvc is not None and hero is not None:
        c = hero["flops"] if lvc.source == "frontier" else 6 * hero["params"] * hero["tokens"]
        if c:
            lvc_hero = {**lvc.predict(c).to_dict(), "flops_convention": "flops column" if lvc.source == "frontier" else "6ND"}

    compute_optimal = _compute_optimal(law, iso, hero, reasons.get("loss_law"))
    task_fits = _tasks(df, hero, reasons, warnings, n_boot, seed)
    if law is None:
        # The loss law is the fit's core: without it, only a sweep or ablation result justifies a result.
        standalone = (hparams is not None and (hparams.has_lr_sweep or hparams.has_batch_sweep)) or (
            tie is not None or dw is not None
        )
        if not standalone:
            raise FitError(reasons["loss_law"] if len(variants) == 1 else "; ".join(reasons[f"law:{v}"] for v in variants))

    recommendation = None
    if study is not None and hero is not None:
        loss = None
        if hero.get("loss") is not None:
            loss = {"loss": hero["loss"], "lo": hero["lo"], "hi": hero["hi"], "source": hero["loss_source"]}
        recommendation = rec.recommend(
            study,
            params=hero["params"],
            tokens=hero["tokens"],
            allocation=hero["allocation"],
            allocation_source=alloc_src,
            tied=tied,
            tied_source=tied_src,
            aspect_ratio=aspect,
            aspect_source=aspect_src,
            hparams=hparams,
            loss=loss,
            shape=shape,
        )
        warnings.extend(f"recommendation: {n}" for n in recommendation.notes)

    if law is not None:
        _law_warnings(law, primary, warnings, notes)

    from ladder import __version__

    meta = {
        "n_runs": int(len(raw)),
        "n_used": int(len(df)),
        "n_excluded": len(excluded),
        "n_law_runs": int(len(law_df[law_df["_variant"] == primary])),
        "param_convention": conv,
        "flops_source": "flops column" if flops_given else "6 x params x tokens",
        "variants": variants,
        "variants_from": how,
        "study": None if study is None else study.name,
        "n_boot": n_boot,
        "seed": seed,
        "ladder_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "decisions": list(DECISIONS),
    }
    return FitResult(
        loss_law=law,
        primary_variant=primary,
        variant_choice=choice,
        laws_by_variant=laws,
        predictions=predictions,
        hero=hero,
        compute_optimal=compute_optimal,
        isoflop=iso,
        loss_vs_compute=lvc,
        hparams=hparams,
        tied_vs_untied=tie,
        depth_vs_width=dw,
        recommendation=recommendation,
        excluded=excluded,
        warnings=warnings,
        notes=notes,
        reasons=reasons,
        meta=meta,
        variant_hero=variant_hero,
        loss_vs_compute_hero=lvc_hero,
        tasks=task_fits,
        forecast_curve=curve,
        runs=df.drop(columns=["_rung", "_variant"]).assign(rung=df["_rung"], law_variant=df["_variant"]),
        law_runs=law_df.drop(columns=["_rung", "_variant"]).assign(rung=law_df["_rung"], law_variant=law_df["_variant"]),
    )


# ------------------------------------------------------------------------------------------------ pieces


def _rungs_as_scale(df: pd.DataFrame) -> pd.DataFrame:
    """The table the sweep and ablation fits read: this fit's rung grouping as their ``scale`` column."""
    return df.drop(columns=["scale"], errors="ignore").assign(scale=df["_rung"]).drop(columns=["_rung", "_variant"])


def _tasks(df: pd.DataFrame, hero: dict | None, reasons: dict, warnings: list[str], n_boot: int, seed: int):
    """Two-step task forecasts (compute -> task loss -> accuracy) when the runs carry lm-eval results."""
    from ladder.reports.tasks import fit_tasks, task_columns

    if not task_columns(df):
        reasons["tasks"] = "this study has no task results (run `ladder eval` on the study, then `ladder collect`)"
        return None
    target = None if hero is None else {k: hero[k] for k in ("params", "tokens", "flops") if hero.get(k)}
    try:
        result = fit_tasks(df, hero=target, n_boot=n_boot, seed=seed)
    except FitError as exc:
        reasons["tasks"] = f"task forecasts: {exc}"
        warnings.append(reasons["tasks"])
        return None
    for task, message in result.errors.items():
        warnings.append(f"task {task}: {message}")
    return result


def _convention(df: pd.DataFrame, study: StudySpec | None, warnings: list[str]) -> str:
    col = None
    if "param_convention" in df.columns:
        vals = sorted(df["param_convention"].dropna().astype(str).unique())
        if len(vals) > 1:
            raise FitError(
                f"fit: the runs count parameters in different conventions ({', '.join(vals)}); "
                "a law needs one N: fit them separately"
            )
        col = vals[0] if vals else None
    if study is not None:
        if col is not None and col != study.ladder.param_count:
            warnings.append(
                f"the runs count params as {col!r} but the study's ladder.param_count is "
                f"{study.ladder.param_count!r}; the hero's params are read in the study's convention"
            )
        return study.ladder.param_count
    return col or "as given (params column)"


def _hero_start(study: StudySpec) -> dict:
    """The hero as ``ladder plan`` sizes it (default tying and aspect ratio, tokens by rule when not given):
    the FLOPs the ablation and hyperparameter trends are extrapolated to while the fit decides the rest."""
    h, lad = study.hero, study.ladder
    tied = study.model.tie_embeddings if h.tied is None else h.tied
    aspect = h.aspect_ratio or study.model.aspect_ratio
    if h.params is not None:
        n = float(h.params)
        d = float(h.tokens or lad.tokens_per_param * h.params)
    else:
        n = math.sqrt(h.compute / (6 * lad.tokens_per_param))
        d = lad.tokens_per_param * n
    shape = rec.hero_shape(study, n, tied=tied, aspect_ratio=aspect)
    seq_len = h.seq_len or study.data.seq_len
    return {"params": n, "tokens": d, "flops": float(shape.flops_per_token(seq_len)) * d}


def _tie(df, hero0, study, reasons, warnings):
    asked = study is not None and study.ablations.tie_embeddings is not None and len(study.ablations.tie_embeddings) > 1
    if "tie_embeddings" not in df.columns:
        reasons["tied_vs_untied"] = "this study has no tied-vs-untied ablation (the runs table has no tie_embeddings column)"
        if asked:
            warnings.append(f"tied vs untied: {reasons['tied_vs_untied']}")
        return None
    kinds = df["tie_embeddings"].map(_bool_text)
    if kinds.nunique() < 2:
        only = kinds.iloc[0] if len(kinds) else "?"
        reasons["tied_vs_untied"] = f"this study has no tied-vs-untied ablation (all runs are {only})"
        if asked:
            warnings.append(f"tied vs untied: {reasons['tied_vs_untied']}")
        return None
    sub = _rungs_as_scale(df)
    try:
        res = fit_tie_ablation(sub, hero0["flops"] if hero0 else None)
    except FitError as exc:
        reasons["tied_vs_untied"] = f"tied vs untied: {exc}"
        warnings.append(reasons["tied_vs_untied"])
        return None
    if res.trend is None:
        warnings.append(f"tied vs untied: {res.reason}")
    return res


def _primary(study, tie, fitted, variants, law_df, laws, how) -> tuple[str, str]:
    """The recommended variant (its law is the primary ``loss_law``), and why."""
    names = set(fitted)
    pool = fitted or variants
    if len(variants) == 1:
        return variants[0], "the only variant"
    tie_based = set(variants) <= {"tied", "untied", "?"}
    if tie_based:
        want, why = None, None
        if tie is not None and tie.hero and tie.hero.get("winner") in ("tied", "untied"):
            want, why = tie.hero["winner"], "the tied-vs-untied ablation's winner at the hero's compute"
        elif study is not None:
            t = study.model.tie_embeddings if study.hero.tied is None else study.hero.tied
            want = "tied" if t else "untied"
            why = "the study's hero.tied" if study.hero.tied is not None else "the study's default model.tie_embeddings"
        if want is not None and want in variants:
            if want in names or not names:
                return want, why
            other = _largest_size_winner(law_df, pool)
            return other, f"{why} is {want}, but its law could not be fitted; using {other}"
    best = _largest_size_winner(law_df, pool)
    return best, f"the variant with the lowest loss at the ladder's largest size (variants from {how})"


def _depth_width(prim_df, hero0, study, reasons, warnings, seed):
    asked = study is not None and study.ablations.aspect_ratio is not None and len(study.ablations.aspect_ratio) > 1
    if "aspect_ratio" in prim_df.columns:
        ar = prim_df["aspect_ratio"]
    elif "d_model" in prim_df.columns and "n_layers" in prim_df.columns:
        ar = prim_df["d_model"] / prim_df["n_layers"]
    else:
        reasons["depth_vs_width"] = "this study has no depth-vs-width sweep (the runs table has no aspect_ratio column)"
        if asked:
            warnings.append(f"depth vs width: {reasons['depth_vs_width']}")
        return None
    n_shapes = ar.round(6).groupby(prim_df["_rung"]).nunique()
    if not (n_shapes >= 3).any():
        reasons["depth_vs_width"] = "this study has no depth-vs-width sweep (no rung has 3 or more aspect ratios)"
        if asked:
            warnings.append(f"depth vs width: {reasons['depth_vs_width']}")
        return None
    sub = _rungs_as_scale(prim_df)
    try:
        res = fit_depth_width(
            sub,
            hero0["flops"] if hero0 else None,
            hero_params=hero0["params"] if hero0 else None,
            seed=seed,
        )
    except FitError as exc:
        reasons["depth_vs_width"] = f"depth vs width: {exc}"
        warnings.append(reasons["depth_vs_width"])
        return None
    if res.aspect.law is None:
        warnings.append(f"depth vs width: {res.aspect.reason}")
    return res


def _isoflop(prim_law_df, study, reasons, warnings, n_boot, seed):
    asked = study is not None and study.ladder.mode == "isoflop"
    if study is not None and not asked:
        reasons["isoflop"] = "this study has no IsoFLOP budgets (ladder mode chinchilla)"
        return None
    # Budgets are C = 6 N D in the study's convention (not the flops column, whose attention and embedding
    # terms differ by size and would split a budget).
    r = prim_law_df[["params", "tokens", "loss"]]
    labels, _ = group_budgets(6 * r["params"].to_numpy() * r["tokens"].to_numpy())
    sizes = pd.Series(r["params"].to_numpy()).groupby(labels).nunique()
    if not asked and int((sizes >= 3).sum()) < 2:
        reasons["isoflop"] = (
            "the runs have no IsoFLOP budgets (needs >= 2 compute budgets with >= 3 model sizes each)"
        )
        return None
    try:
        return fit_isoflop(r, n_boot=n_boot, seed=seed, strict=False)
    except FitError as exc:
        reasons["isoflop"] = str(exc)
        warnings.append(f"isoflop: {exc}")
        return None


def _loss_vs_compute(prim_law_df, law, reasons, warnings, n_boot, seed):
    r = prim_law_df[["params", "tokens", "loss", "flops"]]
    try:
        return fit_loss_vs_compute(r, n_boot=n_boot, seed=seed)
    except FitError as first:
        try:
            if law is None:
                raise FitError("no loss law")
            return fit_loss_vs_compute(source="chinchilla", chinchilla=law)
        except FitError as second:
            reasons["loss_vs_compute"] = f"{first}; and the Approach-3 envelope: {second}"
            return None


def _hero(study, law, iso, tied, aspect, conv, df, raw, warnings):
    h, lad = study.hero, study.ladder
    seq_len = h.seq_len or study.data.seq_len
    reason = None
    if h.params is not None:
        n = float(h.params)
        if h.tokens is not None:
            d, allocation = float(h.tokens), "given"
            src = "study: hero.tokens"
        else:
            d, allocation = lad.tokens_per_param * n, "rule"
            src = f"study rule: ladder.tokens_per_param {lad.tokens_per_param:g} x hero.params"
        budget = None
    else:
        budget = float(h.compute)
        a = law.compute_optimal(budget) if law is not None else None
        why = "not available: no loss law" if a is None else a.reason
        if a is not None and a.identifiable:
            n, d, allocation = float(a.params), float(a.tokens), "compute_optimal"
            src = f"fit: compute-optimal allocation of the chinchilla law at C = {budget:.3g} (D/N = {d / n:.3g})"
        elif iso is not None:
            n, d, allocation = float(iso.params_opt(budget)), float(iso.tokens_opt(budget)), "compute_optimal"
            src = f"fit: IsoFLOP N_opt(C), D_opt(C) at C = {budget:.3g} (D/N = {d / n:.3g})"
            reason = f"the chinchilla law's allocation is {why}"
        else:
            n = math.sqrt(budget / (6 * lad.tokens_per_param))
            d, allocation = lad.tokens_per_param * n, "rule"
            reason = f"the fit's compute-optimal allocation is {why}"
            src = f"study rule: ladder.tokens_per_param {lad.tokens_per_param:g} ({reason})"
            warnings.append(
                f"hero compute {budget:.3g} split by the study's tokens_per_param rule, not by the fit: {reason}"
            )
    shape = rec.hero_shape(study, n, tied=tied, aspect_ratio=aspect)
    flops = float(shape.flops_per_token(seq_len)) * d
    compute = budget if budget is not None else flops
    ladder_flops = float(np.nansum(raw["flops"].to_numpy(dtype=float)))
    hero = {
        "params": n,
        "tokens": d,
        "tokens_per_param": d / n,
        "param_convention": conv,
        "compute": compute,
        "compute_6nd": 6 * n * d,
        "flops": flops,
        "allocation": allocation,
        "allocation_source": src,
        "allocation_reason": reason,
        "tied": tied,
        "aspect_ratio": shape.aspect_ratio,
        "shape": shape.public_dict(),
        "seq_len": seq_len,
        "ladder_flops": ladder_flops,
        "ladder_flops_used": float(df["flops"].sum()),
        "ladder_pct_of_hero": 100.0 * ladder_flops / compute,
        "note": (
            f"N is the study's param_count convention ({conv}); compute is "
            + ("the study's budget (C = 6ND)" if budget is not None else "the hero shape's FLOPs per token x tokens")
        ),
    }
    return hero, shape, src


def _hparams(raw, ok, primary, hero, study, reasons, warnings, seed):
    ab = study.ablations if study is not None else None
    asked = ab is not None and any(
        getattr(ab, k) is not None and len(getattr(ab, k)) > 1
        for k in ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers")
    )
    sel = raw["_variant"] == primary
    sub = raw[sel].copy()
    # Excluded (diverged) runs of the sweep stay in with a NaN loss: the fit counts them per rung.
    sub.loc[~ok[sel.to_numpy()], "loss"] = np.nan
    good = np.isfinite(sub["params"]) & np.isfinite(sub["tokens"]) & np.isfinite(sub["flops"])
    sub = sub[good]
    sub = _rungs_as_scale(sub)
    try:
        res = fit_hparams(
            sub,
            hero["flops"] if hero else None,
            hero_params=hero["params"] if hero else None,
            seed=seed,
        )
    except FitError as exc:
        reasons["hparams"] = f"hyperparameter laws: {exc}"
        if asked:
            warnings.append(reasons["hparams"])
        return None
    if not (res.has_lr_sweep or res.has_batch_sweep):
        reasons["hparams"] = res.lr.reason or "this study has no LR sweep"
        if asked:
            warnings.append(f"hyperparameter laws: {reasons['hparams']}")
    elif asked:
        for t in (res.lr, res.batch):
            if t.law is None and ((t is res.lr and res.has_lr_sweep) or (t is res.batch and res.has_batch_sweep)):
                warnings.append(f"hyperparameter laws: {t.quantity}: {t.reason}")
    return res


def _compute_optimal(law: ChinchillaFit | None, iso, hero: dict | None, no_law: str | None = None) -> dict:
    if law is None:
        out = {"identifiable": False, "reason": f"not available: no loss law ({no_law})"}
    else:
        out = dict(law.allocation_exponents())
    out["source"] = "chinchilla" if out.get("identifiable") else None
    out["at_hero"] = None
    if hero is not None and law is not None:
        out["at_hero"] = law.compute_optimal(6 * hero["params"] * hero["tokens"]).to_dict()
    out["isoflop"] = None
    if iso is not None:
        out["isoflop"] = {"a": iso.a, "b": iso.b, "ci90": iso.to_dict()["ci90"]}
        if not out.get("identifiable"):
            out["source"] = "isoflop"
    return jsonable(out)


def _forecast_curve(law: ChinchillaFit | None, hero: dict, law_df: pd.DataFrame, points: int = 48) -> list[dict] | None:
    """The law's forecast with its 90% prediction interval from just below the smallest ladder model to the hero,
    along the hero's tokens per parameter: the band the report draws (so it never refits the law). None for a
    degenerate law, which forecasts only on the ladder's own line."""
    if law is None or law.degenerate or not hero.get("params") or not hero.get("tokens") or law_df.empty:
        return None
    hn, hd = float(hero["params"]), float(hero["tokens"])
    ns = np.geomspace(float(law_df["params"].min()) / 1.3, hn, points)
    try:
        pred = law.predict(ns, ns * hd / hn)
    except FitError:
        return None
    return [{"params": float(n), "tokens": float(n * hd / hn), "loss": float(l), "lo": float(a), "hi": float(b)}
            for n, l, a, b in zip(ns, pred.loss, pred.lo, pred.hi)]


def _extrapolation_warnings(hero: dict, law_df: pd.DataFrame, warnings: list[str]) -> None:
    n_max = float(law_df["params"].max())
    c_max = float(law_df["flops"].max())
    hero["extrapolation"] = {"params": hero["params"] / n_max, "flops": hero["flops"] / c_max if hero["flops"] else None}
    if hero["params"] / n_max > FAR_EXTRAPOLATION:
        warnings.append(
            f"the hero is {hero['params'] / n_max:.0f}x the largest ladder model: a forecast this far out is "
            "fragile; add a larger rung"
        )


def _law_warnings(law: ChinchillaFit, variant: str, warnings: list[str], notes: list[str]) -> None:
    if law.degenerate:
        notes.append(
            f"loss law ({variant}) is degenerate: {law.degenerate_reason}; it forecasts only runs on the "
            "ladder's tokens-per-parameter line and cannot give a compute-optimal allocation"
        )
    bt = law.backtest
    if bt is None:
        return
    if bt.skipped:
        warnings.append(f"backtest skipped: {bt.skipped}")
    elif bt.mean_abs_error_pct is not None and bt.mean_abs_error_pct > BACKTEST_WARN_PCT:
        warnings.append(
            f"backtest: the law fitted without the largest size misses it by {bt.mean_abs_error_pct:.1f}% "
            "on average; treat the hero forecast with care"
        )
