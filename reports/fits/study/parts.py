"""The optional parts of a study fit: tied vs untied, depth vs width, IsoFLOP, hyperparameter
laws and task forecasts, and the choice of the primary variant. Each part that the data cannot support is
``None`` with its reason in ``reasons`` (and a warning when the study asked for it); none fails the fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.reports.fits.ablations.depth_width import fit_depth_width
from ladder.reports.fits.ablations.tied import fit_tie_ablation
from ladder.reports.fits.hparams.hparam_laws import fit_hparams
from ladder.reports.fits.isoflop.isoflop_fit import fit_isoflop
from ladder.reports.fits.runs import group_budgets, tie_kind
from ladder.reports.fits.study import table
from ladder.reports.fits.tasks.columns import task_columns
from ladder.reports.fits.tasks.task_forecast import fit_tasks

ABLATION_BOOT = 100  # bootstrap refits per ablation trend form (the rollout's fits get half)


def _values(values) -> str:
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float | int) else str(v) for v in values) + "]"


LABELS = {"tied_vs_untied": "tied vs untied", "depth_vs_width": "depth vs width"}


def _absent(key: str, asked: bool, reasons: dict, warnings: list) -> None:
    """No such ablation to fit (``reasons[key]`` says why): a warning only where the study asked for it."""
    if asked:
        warnings.append(f"{LABELS[key]}: {reasons[key]}")


def _fitted(key: str, fit, df, hero0, reasons: dict, warnings: list, *, n_boot: int, seed: int):
    """``fit`` on ``df``'s rungs toward the hero's compute; None, with the reason, where the fit refuses."""
    try:
        return fit(table.rungs_as_scale(df), hero0["flops"] if hero0 else None, n_boot=n_boot, seed=seed)
    except FitError as exc:
        reasons[key] = f"{LABELS[key]}: {exc}"
        warnings.append(reasons[key])
        return None


def tie(df, hero0, study, reasons, warnings, *, n_boot: int = ABLATION_BOOT, seed: int = 0):
    """The tied-vs-untied ablation, when the runs have both variants."""
    asked = study is not None and study.ablations.tie_embeddings is not None and len(study.ablations.tie_embeddings) > 1
    if "tie_embeddings" not in df.columns:
        reasons["tied_vs_untied"] = (
            "this study has no tied-vs-untied ablation (the runs table has no tie_embeddings column)"
        )
        return _absent("tied_vs_untied", asked, reasons, warnings)
    kinds = df["tie_embeddings"].map(tie_kind)
    if kinds.nunique() < 2:
        only = kinds.iloc[0] if len(kinds) else "?"
        reasons["tied_vs_untied"] = (
            f"the study compares tied and untied, but all its done runs are {only}"
            if asked
            else f"this study has no tied-vs-untied ablation (all runs are {only})"
        )
        return _absent("tied_vs_untied", asked, reasons, warnings)
    res = _fitted("tied_vs_untied", fit_tie_ablation, df, hero0, reasons, warnings, n_boot=n_boot, seed=seed)
    if res is not None and res.trend is None:
        warnings.append(f"tied vs untied: {res.reason}")
    return res


def primary(study, tie, fitted, variants, law_df, laws, how, asked: str | None = None, reasons=None) -> tuple[str, str]:
    """The recommended variant (its forecast is the hero's and the predictions'), and why. ``asked``: the variant
    the caller names (``ladder fit --runs F --variant NAME``), which must be one of ``variants``."""
    names = set(fitted)
    pool = fitted or variants
    if asked is not None:
        if asked not in names:
            why = (reasons or {}).get(f"law:{asked}", "its loss law could not be fitted")
            raise FitError(f"fit: variant {asked!r} was asked for, but {why}")
        return asked, "the variant asked for (--variant)"
    if len(variants) == 1:
        return variants[0], "the only variant"
    tie_based = set(variants) <= {"tied", "untied", "?", table.NO_VARIANT}
    if tie_based:
        want, why = None, None
        if tie is not None and tie.hero and tie.hero.get("winner") in ("tied", "untied"):
            want = tie.hero["winner"]
            why = f"the tied-vs-untied ablation's winner at the hero's compute ({tie.hero['call']})"
        elif study is not None:
            t = study.model.tie_embeddings if study.hero.tied is None else study.hero.tied
            want = "tied" if t else "untied"
            why = "the study's hero.tied" if study.hero.tied is not None else "the study's default model.tie_embeddings"
        if want is not None and want in variants:
            if want in names or not names:
                return want, why
            other, _ = table.largest_size_winner(law_df, pool)
            return other, f"{why} is {want}, but its law could not be fitted; using {other}"
    if len(fitted) == 1:
        return fitted[0], f"the only variant whose loss law could be fitted (variants from {how})"
    best, why = table.largest_size_winner(law_df, pool)
    return best, f"{why}; variants from {how}"


def untrained_hero_tie(study, variants: list[str]) -> str | None:
    """A warning when the study's hero.tied names a tie that no run of the ladder trained (the ladder's variants, or
    without a tie ablation the study's model.tie_embeddings): the recommendation keeps hero.tied, and the hero's
    forecast is then the other tie's law."""
    if study is None or study.hero.tied is None:
        return None
    trained = set(variants) & {"tied", "untied"} or {"tied" if study.model.tie_embeddings else "untied"}
    want = "tied" if study.hero.tied else "untied"
    if want in trained:
        return None
    return (
        f"hero: the study's hero.tied is {str(study.hero.tied).lower()}, but no {want} run was trained: the hero's "
        f"forecast is the {'/'.join(sorted(trained))} runs' law (add ablations.tie_embeddings [true, false] to "
        f"measure the {want} one)"
    )


def depth_width(prim_df, hero0, study, reasons, warnings, seed, *, n_boot: int = ABLATION_BOOT):
    """The depth-vs-width ablation on the primary variant's runs, when a rung has 3 or more aspect ratios."""
    asked = study is not None and study.ablations.aspect_ratio is not None and len(study.ablations.aspect_ratio) > 1
    if "aspect_ratio" in prim_df.columns:
        ar = prim_df["aspect_ratio"]
    elif "d_model" in prim_df.columns and "n_layers" in prim_df.columns:
        ar = prim_df["d_model"] / prim_df["n_layers"]
    else:
        reasons["depth_vs_width"] = "this study has no depth-vs-width sweep (the runs table has no aspect_ratio column)"
        return _absent("depth_vs_width", asked, reasons, warnings)
    n_shapes = ar.round(6).groupby(prim_df["_rung"]).nunique()
    if not (n_shapes >= 3).any():
        reasons["depth_vs_width"] = (
            # it has one: its done runs, or the shapes its aspect ratios round to, give no rung 3
            f"the study sweeps aspect_ratio {_values(study.ablations.aspect_ratio)}, but no rung has 3 or more "
            "aspect ratios among its done runs (`ladder plan` notes sweep points that build one shape)"
            if asked
            else "this study has no depth-vs-width sweep (no rung has 3 or more aspect ratios)"
        )
        return _absent("depth_vs_width", asked, reasons, warnings)
    res = _fitted("depth_vs_width", fit_depth_width, prim_df, hero0, reasons, warnings, n_boot=n_boot, seed=seed)
    if res is not None and res.aspect is None:
        warnings.append(f"depth vs width: {res.reason}")
    return res


def isoflop(prim_law_df, study, reasons, warnings, n_boot, seed):
    """The IsoFLOP fit on the primary variant's law runs, when the study (or, without one, the runs) has budgets."""
    asked = study is not None and study.ladder.mode == "isoflop"
    if study is not None and not asked:
        reasons["isoflop"] = "this study has no IsoFLOP budgets (ladder mode chinchilla)"
        return None
    # Budgets are the flops column: a study's IsoFLOP budgets are exact counted FLOPs (each run of a budget
    # trains budget / flops_per_token tokens), and a table without FLOPs gets 6ND in its own convention.
    r = prim_law_df[["params", "tokens", "loss", "flops"]]
    labels, _ = group_budgets(r["flops"].to_numpy())
    sizes = pd.Series(r["params"].to_numpy()).groupby(labels).nunique()
    if not asked and int((sizes >= 3).sum()) < 2:
        reasons["isoflop"] = "the runs have no IsoFLOP budgets (needs >= 2 compute budgets with >= 3 model sizes each)"
        return None
    try:
        return fit_isoflop(r, n_boot=n_boot, seed=seed, strict=False)
    except FitError as exc:
        reasons["isoflop"] = str(exc)
        warnings.append(f"isoflop: {exc}")
        return None


def hparams(raw, ok, primary, hero, study, reasons, warnings, seed):
    """The hyperparameter laws on the primary variant's runs (diverged runs kept with a NaN loss)."""
    ab = study.ablations if study is not None else None
    asked = ab is not None and any(
        getattr(ab, k) is not None and len(getattr(ab, k)) > 1
        for k in ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers")
    )
    sel = raw["_variant"] == primary
    sub = raw[sel].copy()
    # Excluded (diverged) runs of the sweep stay in with a NaN loss: the fit counts them per rung. A run not
    # trained yet (or stopped by a crash) says nothing of its LR, and is left out rather than called diverged.
    out = ~ok[sel.to_numpy()]
    if "status" in sub.columns:
        untried = out & (sub["status"].astype(str).str.strip().str.lower() != "diverged").to_numpy()
        sub, out = sub[~untried], out[~untried]
    sub.loc[out, "loss"] = np.nan
    good = np.isfinite(sub["params"]) & np.isfinite(sub["tokens"]) & np.isfinite(sub["flops"])
    sub = sub[good]
    sub = table.rungs_as_scale(sub)
    swept = (
        {
            axis: ", ".join(f"{k} {_values(getattr(ab, k))}" for k in keys if len(getattr(ab, k) or ()) > 1)
            for axis, keys in (("lr", ("lr", "lr_multipliers")), ("batch", ("batch_tokens", "batch_multipliers")))
        }
        if ab is not None
        else None
    )
    known = [c for c in ("lr", "batch_tokens") if c in sub.columns]
    blank = int((np.isfinite(sub["loss"].to_numpy(dtype=float)) & sub[known].isna().any(axis=1).to_numpy()).sum())
    if blank and "lr" in known and sub["lr"].notna().any():
        # a table's empty lr (or batch) cells cost their runs the sweep fits in silence
        warnings.append(
            f"hyperparameter laws: {blank} run(s) with an empty {' or '.join(c.split('_')[0] for c in known)} cell "
            "are left out of the LR "
            "and batch fits (the loss laws use them)"
        )
    try:
        res = fit_hparams(
            sub,
            hero["flops"] if hero else None,
            hero_params=hero["params"] if hero else None,
            hero_tokens=hero["tokens"] if hero else None,
            seed=seed,
            swept=swept,
        )
    except FitError as exc:
        reasons["hparams"] = f"hyperparameter laws: {exc}"
        if asked:
            warnings.append(reasons["hparams"])
        return None
    if not (res.has_lr_sweep or res.has_batch_sweep):
        reasons["hparams"] = res.lr.reason or "this study has no LR sweep"
        if (swept or {}).get("batch") and not (swept or {}).get("lr"):  # its batch sweep would go unmentioned
            reasons["hparams"] += (
                f"; its batch sweep ({swept['batch']}) gives no batch law without one: the batch optimum is read "
                "with the LR tuned again at each batch size"
            )
        if asked:
            warnings.append(f"hyperparameter laws: {reasons['hparams']}")
    elif asked:
        for t in (res.lr, res.batch):
            if t.law is None and ((t is res.lr and res.has_lr_sweep) or (t is res.batch and res.has_batch_sweep)):
                warnings.append(f"hyperparameter laws: {t.quantity}: {t.reason}")
    return res


def hparams_at(hp, reasons: dict, params: float, tokens: float, flops: float | None = None) -> dict:
    """The recommended LR and batch (with 90% intervals) at one predicted (N, D): the keys ``lr``, ``lr_ci90``,
    ``batch_tokens``, ``batch_ci90``, or ``lr_reason``/``batch_reason`` saying why there is none."""
    if hp is None:
        why = reasons.get("hparams", "no hyperparameter laws")
        return {
            "lr": None,
            "lr_ci90": None,
            "lr_reason": why,
            "batch_tokens": None,
            "batch_ci90": None,
            "batch_reason": why,
        }
    return hp.at(params, tokens, flops)


def tasks(df: pd.DataFrame, hero: dict | None, reasons: dict, warnings: list[str], n_boot: int, seed: int):
    """Two-step task forecasts (compute -> task loss -> accuracy) when the runs carry lm-eval results."""
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
    for task, message in result.errors.items():  # a FitError names its task already: "task 'x': ..."
        warnings.append(f"task {task}: {message.removeprefix(f'task {task!r}: ')}")
    return result


def in_context(
    prim_law_df: pd.DataFrame,
    primary: str,
    hero: dict | None,
    fc,
    predict: list,
    reasons: dict,
    warnings: list[str],
    seed: int,
    n_boot: int,
):
    """The primary variant's loss split into in-context repeats and novel tokens, each kind forecast at the hero
    and the ``predict`` points (:mod:`ladder.reports.fits.in_context`); None with a reason when the runs do not
    carry the split."""
    from ladder.reports.fits.in_context import N_BOOT, available, fit_in_context

    why = available(prim_law_df)
    if why is None and hero is None and (fc is None or not fc.points):
        why = "no hero or forecast target to forecast each kind at"
    if why is not None:
        reasons["in_context"] = why
        return None
    target = (hero["params"], hero["tokens"]) if hero is not None else (fc.points[0].params, fc.points[0].tokens)
    result = fit_in_context(
        prim_law_df, primary, float(target[0]), float(target[1]), predict=predict, seed=seed, n_boot=min(n_boot, N_BOOT)
    )
    warnings.extend(result.warnings)
    return result
