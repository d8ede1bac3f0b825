"""The loss laws of a study fit: one :func:`ladder.reports.fits.loss.forecast_loss` per variant on its law runs
(the tuned configuration of each rung, every seed replicate kept), the hero and the extra predictions forecast
by each, and the seed noise floor."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ladder.reports.fits import progress
from ladder.reports.fits.loss import Forecast, forecast_loss
from ladder.reports.fits.loss.loss_forms import seed_sigma
from ladder.reports.fits.runs import Runs


def loss_data(law_df: pd.DataFrame, levels_by_flops: bool = False) -> tuple[Runs, list[dict]]:
    """The law runs of one variant as :class:`Runs`, with the seed-to-seed scatter of replicates (rows of
    one (params, tokens) configuration that differ in ``seed``) as the noise floor. ``levels_by_flops``: the
    ``flops`` column sets the compute levels (a runs table's, which says how its budgets were counted); a study's
    own levels stay 6ND, in which the plan lines its grid up and judges what the fit can use."""
    seeds = law_df["seed"].tolist() if "seed" in law_df.columns else list(range(len(law_df)))
    ids = law_df["run_id"].astype(str).tolist() if "run_id" in law_df.columns else [str(i) for i in law_df.index]
    sigma, by_size = (
        seed_sigma(law_df["params"], law_df["tokens"], law_df["loss"], seeds) if "seed" in law_df.columns else (0.0, [])
    )
    data = Runs(
        law_df["params"].to_numpy(float),
        law_df["tokens"].to_numpy(float),
        law_df["loss"].to_numpy(float),
        ids,
        flops=law_df["flops"].to_numpy(float) if levels_by_flops else None,
        seed_sigma=sigma,
    )
    return data, by_size


def fit_variants(
    law_df: pd.DataFrame,
    variants: list[str],
    target: tuple[float, float] | None,
    predict: list[tuple[float, float, str]],
    *,
    n_boot: int,
    seed: int,
    reasons: dict,
    levels_by_flops: bool = False,
) -> tuple[dict[str, Forecast | None], dict[str, list[dict]]]:
    """One loss forecast per variant. The target (the hero, or without a study the first prediction, or the
    largest run at the ladder's most common ratio) sets which tokens/param ratio the ``ratio`` form uses."""
    out: dict[str, Forecast | None] = {}
    noise: dict[str, list[dict]] = {}
    for i, v in enumerate(variants, start=1):
        sub = law_df[law_df["_variant"] == v]
        progress.step(f"loss laws of variant {v} ({i}/{len(variants)})" if len(variants) > 1 else "loss laws")
        data, noise[v] = loss_data(sub, levels_by_flops)
        tgt = target
        if tgt is None and predict:
            tgt = predict[0][:2]
        if tgt is None:
            ratios = np.round(np.log(data.ratio), 1)
            common = pd.Series(ratios).mode().iloc[0]
            at = np.flatnonzero(ratios == common)
            i = at[np.argmax(data.params[at])]
            tgt = (float(data.params[i]), float(data.tokens[i]))
        try:
            out[v] = forecast_loss(data, tgt[0], tgt[1], predict=[p[:2] for p in predict], seed=seed, n_boot=n_boot)
        except ValueError as exc:
            out[v] = None
            reasons[f"law:{v}"] = f"loss law{'' if len(variants) == 1 else f' of variant {v!r}'}: {exc}"
    return out, noise


def point_row(fc: Forecast, index: int, label: str, variant: str) -> dict:
    p = fc.points[index]
    d = p.to_dict()
    return {"label": label, "variant": variant, **d, "reason": d.get("note") or None}


def curve(fc: Forecast, hero: dict, n_min: float, points: int = 40) -> list[dict]:
    """The forecast with its calibrated 90% interval along the hero's tokens/param, from just below the
    smallest ladder model to the hero: the band the report draws (so it never refits a law)."""
    hn, hd = float(hero["params"]), float(hero["tokens"])
    out = []
    for n in np.geomspace(n_min / 1.3, hn, points):
        try:
            p = fc.predict(n, n * hd / hn)
        except ValueError:  # no form forecasts this far off the fitted ratios
            continue
        out.append({"params": float(n), "tokens": float(n * hd / hn), "loss": p.loss, "lo": p.lo, "hi": p.hi})
    return out
