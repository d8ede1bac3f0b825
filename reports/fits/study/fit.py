"""The assembled fit of a ladder: what ``ladder fit`` prints, ``fit.json`` holds and the report renders.

From a notebook::

    >>> import pandas as pd
    >>> from ladder.reports.fits import fit_study
    >>> from ladder.studies import load_study
    >>> runs = pd.read_parquet("ladder-runs/default/results.parquet")
    >>> result = fit_study(runs, study=load_study("default"), predict=["10M:200M"])
    >>> result.hero["loss"], result.hero["lo"], result.hero["hi"]      # forecast with its calibrated 90% interval
    >>> result.loss.predict(1e6, 2e7)                                    # the primary variant's Forecast itself
    >>> print(result.recommendation.to_yaml_snippet())                 # the hero config to paste
    >>> json.dumps(result.to_dict(), allow_nan=False)                   # what fit.json holds

A table exported from another tool works too: ``fit_runs_file("runs.csv")`` (CSV or parquet) needs only
``params``, ``tokens`` and ``loss`` (optional ``flops``, else ``6 * params * tokens``; ``lr``;
``batch_tokens`` or its alias ``batch_size``; ``variant``; ``tie_embeddings``; ``aspect_ratio``; ``status``;
``seed``; ``axis/<name>`` columns).

Decisions (also listed in ``meta.decisions`` of every result):

* Runs whose ``status`` is not ``done`` (failed, diverged, cancelled, interrupted, ...) are excluded from every
  fit and listed in ``excluded`` with their state, error and the FLOPs they spent. Hero runs (``role`` hero,
  planned by ``ladder hero``) are never fitted, whatever their state: they score the frozen forecast; they are
  listed in ``excluded`` too, and neither their FLOPs nor their rows count in the ladder's cost or its
  ``meta.results_sha256`` (:func:`ladder.reports.fits.study.table.results_hash`). A remaining run with a
  missing, NaN or non-positive ``params``/``tokens``/``loss`` is a ``FitError`` naming the rows.
* Variants: one loss forecast per *model variant* (the study's structural axis, tied vs untied embeddings; a
  table without ``axis/`` columns is grouped by its ``variant`` column, else by ``tie_embeddings``).
  Hyperparameter and shape axes are not variants: the loss laws use, per rung and variant, the runs of the
  configuration with the lowest mean loss (the tuned loss). Seed replicates are kept as separate runs: their
  spread is the noise floor of every interval.
* Each variant's forecast fits every identifiable law form (Chinchilla L(N, D), the over-training law,
  L(C) at the hero's tokens/param, L(C) on the frontier; :mod:`ladder.reports.fits.loss.loss_forms`), backtests them
  by rollout (fit the smallest sizes, forecast the larger), weights them by that evidence and calibrates the
  90% interval on it (:mod:`ladder.reports.fits.loss.loss_forecast`).
* The primary variant (the hero's): the one asked for (``variant=``); else the tied-vs-untied ablation's winner at
  the hero's compute; else the study's hero/family default; without a study, the variant with the lowest mean
  loss at the largest size every variant trained (on the rungs they share), or the first in the table when they
  share no rung.
* N is the ``params`` column (the study's param_count convention); the laws' compute is ``C = 6 N D`` in it.
  The ladder's cost is the exact FLOPs every run spent (failed and cancelled ones too), over the hero's exact
  FLOPs (its shape's FLOPs per token x tokens).
* Hero: params and tokens as given; params with the tokens-per-param rule; or a compute budget split by the
  compute-optimal allocation of the weighted L(N, D) law when one is identifiable, else IsoFLOP, else the rule.
* Optional parts (IsoFLOP, hyperparameter laws, ablations, tasks) never fail the fit: each is
  ``{"available": false, "reason": ...}`` when the data cannot support it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from ladder.errors import FitError, shell_word
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.loss import track_record
from ladder.reports.fits.runs import MAX_LOSS, MIN_LOSS, as_runs, implausible_losses
from ladder.reports.fits.study import loss, parts, runs_file, study_hero, table, table_sense
from ladder.reports.fits.study.result import FitResult
from ladder.studies.spec import StudySpec

DECISIONS = (
    "runs whose status is not 'done' are excluded from every fit and listed in 'excluded' (with the FLOPs they spent)",
    "hero runs (role 'hero') are never fitted: they score the frozen forecast (`ladder forecast score`)",
    "one loss forecast per model variant (tied vs untied); lr, batch and aspect-ratio sweeps are not variants: "
    "the loss laws use the best (tuned) configuration of each rung; seed replicates stay separate runs",
    "every identifiable law form is fitted (Huber on log residuals, delta 1e-3; residual bootstrap from fresh "
    "starts) and weighted by its rollout-backtest error (equally when the ladder is too small for a rollout); forms "
    "beyond 2x the best error get no weight",
    "hero interval: 90%, mixture of the weighted forms' draws (bootstrap + residual scatter or the seed noise "
    "floor, Student-t for few degrees of freedom), widened by the rollout's conformal factor when it covered "
    "less than 90%",
    "the primary variant is the one asked for (--variant), else the tied-vs-untied ablation's winner at the hero, "
    "else the study's default, else the lowest mean loss at the largest size every variant trained",
    "N is the params column (the study's param_count convention); the laws' compute is 6ND in it; "
    "ablation and hyperparameter trends use the exact FLOPs column",
    "ladder cost = exact FLOPs spent by every run in the table (excluded runs included) / the hero's exact FLOPs",
)


def fit_study(
    runs: pd.DataFrame,
    *,
    study: StudySpec | None = None,
    predict: Sequence = (),
    n_boot: int = 200,
    seed: int = 0,
    variant: str | None = None,
    study_dir: str | Path | None = None,
) -> FitResult:
    """Fit a ladder's runs: per-variant loss forecasts (law forms, rollout, calibration), compute-optimal
    allocation, IsoFLOP, hyperparameter laws, tied-vs-untied and depth-vs-width ablations, task forecasts, the
    hero forecast and the recommended hero configuration (the last two need ``study``).

    ``runs``: a results table (``results.parquet`` of ``ladder collect``, or any table with ``params``,
    ``tokens``, ``loss``; see the module doc). ``predict``: extra forecasts, each ``"PARAMS:TOKENS"``,
    ``(params, tokens)`` or ``(params, tokens, label)``. ``n_boot``: bootstrap refits per law. ``variant``: the
    variant whose law forecasts the hero and the predictions (else chosen as the module doc says). ``study_dir``:
    where the runs are, for the commands an error names. Raises
    ``FitError`` for input the user must fix; optional parts that cannot be fitted only give a reason.
    """
    if n_boot < 1:
        raise FitError(f"fit: n_boot must be >= 1, got {n_boot}")
    predictions_in = study_hero.parse_predict(predict)
    warnings: list[str] = []
    notes: list[str] = []
    reasons: dict[str, str] = {}

    raw = table.prepare(runs)
    heroes = table.is_hero(raw)
    hero_rows = raw[heroes]
    if heroes.all():
        raise FitError(
            f"fit: the runs table holds only hero runs ({', '.join(map(str, hero_rows.index))}): "
            "a hero is scored (`ladder forecast score`), never fitted; fit the ladder's own runs"
        )
    raw = raw[~heroes].copy()
    ok = table.status_ok(raw)
    excluded = table.excluded_rows(raw, ok)
    # commands to type as printed: with the study directory
    at = f" {shell_word(study_dir)}" if study_dir is not None else " STUDY_DIR"
    left_out = ""  # said with a fit that fails for too few runs: the runs not done are often why
    if excluded:  # each run with its reason is in ``excluded`` (and on its own line in `ladder fit`'s summary)
        states = pd.Series([str(e["status"]) for e in excluded]).value_counts()
        counts = ", ".join(f"{n} {state}" for state, n in states.items())
        are = "is" if len(excluded) == 1 else "are"
        left_out = f"{len(excluded)} of the {len(raw)} runs {are} not done ({counts}), so not fitted" + (
            f" (`ladder status{at}` shows them)" if study is not None else ""
        )
        warnings.append(
            f"{len(excluded)} run(s) excluded from the fits (not done: {counts}); "
            "each is listed under 'excluded' with why"
        )
    if len(hero_rows):
        notes.append(
            f"hero run(s) {', '.join(map(str, hero_rows.index))} not fitted: a forecast is checked "
            "against the hero (`ladder forecast score`), so the hero never feeds it"
        )
    ladder_states = sorted({str(e["status"]) for e in excluded})  # of the ladder's runs, the hero's not among them
    excluded.extend(table.hero_excluded(hero_rows))
    if not ok.any():
        # a plain submit skips failed runs
        retry = " --retry-failed" if {str(e["status"]) for e in excluded} & {"failed", "diverged", "corrupt"} else ""
        raise FitError(
            f"fit: no finished runs to fit: none of the {len(raw)} run(s) is done "
            f"({', '.join(ladder_states)})"
            # the study's books count the hero too: "6 runs" in status and collect, "5" here, said why
            + (f", besides the {len(hero_rows)} hero run(s), which are never fitted" if len(hero_rows) else "")
            + "; "
            + (
                f"train them (`ladder submit{at}{retry}`), then `ladder collect{at}` and fit again; "
                f"`ladder status{at}` shows where they are"
                if study is not None
                else f"the status column of a runs table says which to fit ({', '.join(sorted(table.KEEP_STATUS))}, "
                "or empty)"
            )
        )
    flops_given = "flops" in raw.columns
    if not flops_given:
        raw["flops"] = 6.0 * raw["params"] * raw["tokens"]
        notes.append("no flops column: FLOPs are 6 x params x tokens")
    df = raw[ok].copy()
    try:
        as_runs(df[["params", "tokens", "loss", "flops"]], what="fit")  # names NaN / non-positive rows
    except FitError as exc:
        if study_dir is not None or "NaN" not in str(exc):
            raise
        # a runs file's finished run without a loss (W&B keeps a crashed run's state at times): say both ways out
        raise FitError(
            f"{exc}: give those runs their values, or a status column (as W&B's state) that marks them not done "
            "(crashed, failed) to leave them out"
        ) from None
    implausible = implausible_losses(df["loss"].to_numpy(float))
    if implausible.any():  # 1e-300 broke the law fits with a numpy message; 1e5 was fitted as if it were a loss
        rows = df.index[implausible]
        shown = ", ".join(f"{r} ({df['loss'][r]:g})" for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
        raise FitError(
            f"fit: column loss holds {len(rows)} value(s) outside {MIN_LOSS:g} to {MAX_LOSS:g} nats/token, the "
            f"range of any language model's loss: {shown}; is the loss column the eval loss in nats/token?"
        )

    rises = table.loss_rises_with_compute(df)
    if rises is not None:  # a flat law with a huge rollout error, and no word why (issue 28)
        warnings.append(
            f"the loss rises with compute in these runs (rank correlation {rises:+.2f}): a scaling law expects it "
            "to fall, so its forecasts mean little; is the loss column an eval loss (lower is better), not an "
            "accuracy or a reward?"
        )
    conv = table.convention(df, study, warnings)
    rung, variant_of, tune, how = table.rung_variant_keys(raw)
    raw["_rung"], raw["_variant"] = rung, variant_of
    df["_rung"], df["_variant"] = rung[ok], variant_of[ok]
    law_df, sweep_note = table.best_configs(df, tune)
    if sweep_note:
        notes.append(sweep_note)
    if study is None:  # a table from elsewhere: no trainer of ladder's marked its diverged runs nor wrote its counts
        odd = (table_sense.odd_tokens_per_param(df), table_sense.batch_as_sequences(df), table_sense.flops_not_6nd(df))
        repeats = table_sense.repeats_without_seed(law_df)
        warnings.extend(w for w in (*odd, table_sense.worse_than_smaller(law_df), repeats) if w)
    variants = sorted(law_df["_variant"].unique().tolist())
    if variant is not None and variant not in variants:  # before any law is fitted
        have = (
            "the runs have no variant column (one law, fitted on them all)"
            if variants == [table.ALL_RUNS]
            else f"the variants (from {how}) are {', '.join(variants)}"
        )
        raise FitError(f"fit: no variant {variant!r} to forecast with; {have}")

    hero0 = study_hero.hero_start(study) if study is not None else None
    target = (hero0["params"], hero0["tokens"]) if hero0 is not None else None
    by_flops = study is None and flops_given  # a runs table's flops column says how its budgets were counted
    forecasts, noise = loss.fit_variants(
        law_df, variants, target, predictions_in, n_boot=n_boot, seed=seed, reasons=reasons, levels_by_flops=by_flops
    )
    fitted = [v for v in variants if forecasts[v] is not None]
    for v in variants:
        if forecasts[v] is None:
            warnings.append(reasons[f"law:{v}"])

    tie = parts.tie(df, hero0, study, reasons, warnings, n_boot=min(n_boot, parts.ABLATION_BOOT), seed=seed)
    primary, choice = parts.primary(study, tie, fitted, variants, law_df, forecasts, how, variant, reasons)
    if untrained := parts.untrained_hero_tie(study, variants):
        warnings.append(untrained)
    fc = forecasts.get(primary)
    if fc is None:
        reasons["loss"] = reasons.get(f"law:{primary}", "no loss law")
    prim_df = df[df["_variant"] == primary]
    dw = parts.depth_width(prim_df, hero0, study, reasons, warnings, seed, n_boot=min(n_boot, parts.ABLATION_BOOT))

    tied = aspect = None
    tied_src = aspect_src = None
    if study is not None:
        tied, tied_src = rec.choose_tied(study, tie)
        aspect, aspect_src = rec.choose_aspect(study, dw)

    prim_law_df = law_df[law_df["_variant"] == primary]
    iso = parts.isoflop(prim_law_df, study, reasons, warnings, n_boot, seed)

    hero = shape = alloc_src = None
    if study is None:
        reasons["hero"] = (
            "no study given: a hero is defined by a study (fit a study, or forecast points with --predict)"
        )
        reasons["recommendation"] = "no study given: the recommendation needs the study's hero and recipe"
    else:
        hero, shape, alloc_src = study_hero.size_hero(study, fc, iso, tied, aspect, conv, df, raw, warnings)
        if fc is not None and abs(hero["tokens"] / hero["params"] / fc.target_ratio - 1) > 0.1:
            # a compute budget split by the fit: forecast again at the hero's own tokens/param
            forecasts, noise = loss.fit_variants(
                law_df,
                variants,
                (hero["params"], hero["tokens"]),
                predictions_in,
                n_boot=n_boot,
                seed=seed,
                reasons=reasons,
                levels_by_flops=by_flops,
            )
            fc = forecasts.get(primary)
    hparams = parts.hparams(raw, ok, primary, hero, study, reasons, warnings, seed)

    predictions: list[dict] = []
    curve = None
    if fc is None and hero is not None:
        hero.update(loss=None, lo=None, hi=None, loss_reason=reasons["loss"])
    if fc is not None:
        # fc.points[0] is the forecast's target (the hero, or a stand-in without a study); then the predictions
        if hero is not None:
            try:
                fc.points[0] = fc.predict(hero["params"], hero["tokens"], seed=seed)
            except ValueError as exc:
                hero.update(loss=None, lo=None, hi=None, loss_reason=str(exc))
                warnings.append(f"hero forecast unavailable: {exc}")
                predictions.append({**loss.point_row(fc, 0, "hero", primary), "reason": str(exc)})
            else:
                hero.update(study_hero.hero_loss(fc.points[0], fc, primary))
                predictions.append({**loss.point_row(fc, 0, "hero", primary), "track_record": hero["track_record"]})
                curve = loss.curve(fc, hero, float(prim_law_df["params"].min()))
                study_hero.reach_warnings(hero, fc, warnings)
        for i, (_n, _d, label) in enumerate(predictions_in):
            row = loss.point_row(fc, i + 1, label, primary)
            # hparams: LR and batch at this (N, D), at the exact FLOPs `ladder hero --params N --tokens D` plans
            row.update(parts.hparams_at(hparams, reasons, _n, _d, study_hero.point_flops(study, _n, _d)))
            if row["loss"] is None:
                warnings.append(f"prediction {label}: {row['reason']}")
            else:
                # each forecast carries the published ladders' record at its own distance, as the hero does
                row["track_record"] = track_record.at(row["compute_x"])
                if row["beyond_tested"] or row["beyond_reach"]:
                    warnings.append(f"prediction {label}: {study_hero.prediction_beyond(row, fc)}")
                # judged at its own distance: the rollout's far rows may lean where its near ones do not
                lean = study_hero.lean_text((row.get("distance") or {}).get("lean"), "it probably runs")
                if lean:
                    warnings.append(f"prediction {label}: {lean}")
            predictions.append(row)
        for key, why in fc.skipped.items():
            notes.append(f"law form {key} not fitted: {why}")
    compute_optimal = study_hero.compute_optimal(fc, iso, hero, reasons.get("loss"))
    in_context = parts.in_context(prim_law_df, primary, hero, fc, predictions_in, reasons, warnings, seed, n_boot)
    # the loss laws' runs (the hero's variant, each rung's best configuration): fitted on every run, the main job's
    # task laws mixed in the untied rungs, and put the tied hero at 3.97x "the ladder's largest model" (the untied
    # extra rung) beside the loss law's 7.96x
    task_fits = parts.tasks(prim_law_df, hero, reasons, warnings, n_boot, seed)
    if fc is None:
        standalone = (hparams is not None and (hparams.has_lr_sweep or hparams.has_batch_sweep)) or (
            tie is not None or dw is not None
        )
        if not standalone:
            why = reasons["loss"] if len(variants) == 1 else _no_variant_law(law_df, variants, how, reasons)
            raise FitError(f"{left_out}; on the rest, {why}" if left_out else why)

    recommendation = None
    if study is not None and hero is not None:
        hero_loss = None
        if hero.get("loss") is not None:
            hero_loss = {"loss": hero["loss"], "lo": hero["lo"], "hi": hero["hi"], "source": hero["loss_source"]}
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
            loss=hero_loss,
            shape=shape,
        )
        warnings.extend(f"recommendation: {n}" for n in recommendation.notes)

    from ladder import __version__

    meta = {
        "n_runs": int(len(raw)),
        "n_hero_runs": int(len(hero_rows)),
        "n_used": int(len(df)),
        "n_excluded": len(excluded),
        "n_law_runs": int(len(prim_law_df)),
        "param_convention": conv,
        "flops_source": "flops column" if flops_given else "6 x params x tokens",
        "variants": variants,
        "variants_from": how,
        "study": None if study is None else study.name,
        "n_boot": n_boot,
        "seed": seed,
        "ladder_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "results_sha256": table.results_hash(runs),
        "decisions": list(DECISIONS),
    }
    return FitResult(
        loss=fc,
        primary_variant=primary,
        variant_choice=choice,
        loss_by_variant=forecasts,
        noise_floor=noise,
        predictions=predictions,
        hero=hero,
        compute_optimal=compute_optimal,
        isoflop=iso,
        hparams=hparams,
        tied_vs_untied=tie,
        depth_vs_width=dw,
        recommendation=recommendation,
        excluded=excluded,
        warnings=warnings,
        notes=notes,
        reasons=reasons,
        meta=meta,
        tasks=task_fits,
        in_context=in_context,
        forecast_curve=curve,
        runs=df.drop(columns=["_rung", "_variant"]).assign(rung=df["_rung"], law_variant=df["_variant"]),
        law_runs=law_df.drop(columns=["_rung", "_variant"]).assign(
            rung=law_df["_rung"], law_variant=law_df["_variant"]
        ),
    )


def _no_variant_law(law_df: pd.DataFrame, variants: list[str], how: str, reasons: dict) -> str:
    """Why no variant has a loss law, in a line: how the runs split and the first variant's reason (every variant's
    reason joined ran to kilobytes when a run-name column was read as the variant)."""
    counts = law_df.groupby("_variant")["params"].nunique()
    sizes = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()} to {counts.max()}"
    first = variants[0]
    hint = (
        f" (variants from {how}: a model variant shared by many runs, not a run name?)"
        if counts.max() < 3 and len(variants) > 3
        else ""
    )
    return (
        f"no variant's loss law could be fitted: the runs split into {len(variants)} variants of {sizes} model "
        f"size(s) each{hint}, and each variant needs a ladder of its own; first, {reasons[f'law:{first}']}"
    )


def fit_runs_file(path: str | Path, **kwargs: Any) -> FitResult:
    """:func:`fit_study` on a CSV or parquet file of runs (needs ``params``, ``tokens``, ``loss``)."""
    df = runs_file.read_runs_file(path)
    try:
        return fit_study(df, **kwargs)
    except FitError as exc:
        raise FitError(f"{path}: {exc}") from None
