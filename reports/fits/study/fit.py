"""The assembled fit of a ladder: what ``ladder fit`` prints, ``fit.json`` holds and the report renders.

From a notebook::

    >>> import pandas as pd
    >>> from ladder.reports.fits import fit_study
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

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ladder.errors import FitError
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.approach3 import ChinchillaFit, fit_chinchilla
from ladder.reports.fits.runs import as_runs
from ladder.reports.fits.study import forecast, parts, table
from ladder.reports.fits.study.result import FitResult
from ladder.studies.spec import StudySpec

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

        >>> from ladder.reports.fits import fit_study
        >>> res = fit_study(df, study=study)
        >>> res.to_dict()["hero"]["loss"], res.recommendation.lr
    """
    if n_boot < 0:
        raise FitError(f"fit: n_boot must be >= 0, got {n_boot}")
    predictions_in = forecast.parse_predict(predict)
    warnings: list[str] = []
    notes: list[str] = []
    reasons: dict[str, str] = {}

    raw = table.prepare(runs)
    ok = table.status_ok(raw)
    excluded = table.excluded_rows(raw, ok)
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

    conv = table.convention(df, study, warnings)
    rung, variant, tune, how = table.rung_variant_keys(raw)
    raw["_rung"], raw["_variant"] = rung, variant
    df["_rung"], df["_variant"] = rung[ok], variant[ok]
    law_df, sweep_note = table.best_configs(df, tune)
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
    hero0 = forecast.hero_start(study) if study is not None else None

    # ---- tied vs untied, depth vs width (decide the hero's variant and shape)
    tie = parts.tie(df, hero0, study, reasons, warnings)
    primary, choice = parts.primary(study, tie, fitted, variants, law_df, laws, how)
    law = laws.get(primary)
    if law is None:
        reasons["loss_law"] = reasons.get(f"law:{primary}", "no loss law")
    prim_df = df[df["_variant"] == primary]
    dw = parts.depth_width(prim_df, hero0, study, reasons, warnings, seed)

    tied = aspect = None
    tied_src = aspect_src = None
    if study is not None:
        tied, tied_src = rec.choose_tied(study, tie)
        aspect, aspect_src = rec.choose_aspect(study, dw)

    # ---- isoflop and loss vs compute (on the primary variant's law runs)
    prim_law_df = law_df[law_df["_variant"] == primary]
    iso = parts.isoflop(prim_law_df, study, reasons, warnings, n_boot, seed)
    lvc = parts.loss_vs_compute(prim_law_df, law, reasons, warnings, n_boot, seed)

    # ---- the hero: allocation, shape, forecast
    hero = None
    shape = None
    alloc_src = None
    if study is None:
        reasons["hero"] = "no study given: the hero is defined by a study (pass study=, or use predict=)"
        reasons["recommendation"] = "no study given: the recommendation needs the study's hero and recipe"
    else:
        hero, shape, alloc_src = forecast.size_hero(study, law, iso, tied, aspect, conv, df, raw, warnings)
    hparams = parts.hparams(raw, ok, primary, hero, study, reasons, warnings, seed)

    predictions: list[dict] = []
    variant_hero: dict[str, dict] = {}
    curve = None
    if hero is not None:
        hp = forecast.prediction(law, hero["params"], hero["tokens"], "hero", primary)
        hero.update({k: hp[k] for k in ("loss", "lo", "hi", "ci_lo", "ci_hi")})
        hero["loss_source"] = None if law is None else forecast.law_source(law, primary)
        if hp["reason"] and law is not None:
            hero["loss_reason"] = hp["reason"]
            warnings.append(f"hero forecast unavailable: {hp['reason']}")
        predictions.append(hp)
        for v in fitted:
            variant_hero[v] = forecast.prediction(laws[v], hero["params"], hero["tokens"], "hero", v)
        forecast.extrapolation_warnings(hero, law_df, warnings)
        curve = forecast.curve(law, hero, law_df[law_df["_variant"] == primary])
    for n, d, label in predictions_in:
        p = forecast.prediction(law, n, d, label, primary)
        if p["reason"] and law is not None:
            warnings.append(f"prediction {label}: {p['reason']}")
        predictions.append(p)

    lvc_hero = None
    if lvc is not None and hero is not None:
        c = hero["flops"] if lvc.source == "frontier" else 6 * hero["params"] * hero["tokens"]
        if c:
            lvc_hero = {**lvc.predict(c).to_dict(), "flops_convention": "flops column" if lvc.source == "frontier" else "6ND"}

    compute_optimal = forecast.compute_optimal(law, iso, hero, reasons.get("loss_law"))
    task_fits = parts.tasks(df, hero, reasons, warnings, n_boot, seed)
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
        forecast.law_warnings(law, primary, warnings, notes)

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


def fit_runs_file(path: str | Path, **kwargs: Any) -> FitResult:
    """:func:`fit_study` on a CSV or parquet file of runs (needs ``params``, ``tokens``, ``loss``)."""
    df = table.read_runs_file(path)
    try:
        return fit_study(df, **kwargs)
    except FitError as exc:
        raise FitError(f"{path}: {exc}") from None
