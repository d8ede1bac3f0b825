"""Tied vs untied embeddings along the ladder (``fit_tie_ablation``); the method is in
:mod:`ladder.reports.fits.ablations`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.ablations.common import COMPUTE_MATCH_TOL, best_config
from ladder.reports.fits.ablations.compute_law import LossLaw, fit_loss_vs_compute
from ladder.reports.fits.ablations.linear_trend import (
    LinearTrend,
    find_crossover,
    fit_linear_trend,
)
from ladder.reports.fits.hparams.rungs import (
    REQUIRED,
    Scale,
    check_columns,
    group_scales,
)
from ladder.reports.fits.powerlaw import finite_interval
from ladder.reports.fits.runs import tie_flags


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
    """Tied vs untied along the ladder; see :mod:`ladder.reports.fits.ablations`. ``trend`` is None (with
    ``reason``) below 2 rungs with both variants."""

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
    """Tied vs untied embeddings per rung and along the ladder (:mod:`ladder.reports.fits.ablations`).
    ``loss_noise``: seed-to-seed standard deviation of a run's loss, if known (a floor on each rung's
    uncertainty). Raises ``FitError`` on a table without the needed columns or without both variants; with
    fewer than 2 comparable rungs the trend is None and ``reason`` says why (``require=True`` raises instead)."""
    what = "tied vs untied"
    check_columns(df, (*REQUIRED, "tie_embeddings"), what)
    df = df.reset_index(drop=True)
    df["tie_embeddings"] = tie_flags(df["tie_embeddings"])
    if df["tie_embeddings"].nunique() < 2:
        only = "tied" if bool(df["tie_embeddings"].iloc[0]) else "untied"
        raise FitError(f"{what}: all runs are {only}; the ablation needs both variants")
    scales = group_scales(df, by=("d_model", "n_layers"))
    notes: list[str] = []
    raw: list[tuple[Scale, dict | None, dict | None, str | None]] = []
    for sc in scales:
        sub = df.loc[sc.index]
        t = best_config(sub[sub["tie_embeddings"]], exclude=("tie_embeddings",))
        u = best_config(sub[~sub["tie_embeddings"]], exclude=("tie_embeddings",))
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
        crossover = find_crossover(trend, min(xs), max(xs), hero_flops)
        if alt is not None:
            alt_cross = find_crossover(alt, min(xs), max(xs), hero_flops)
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
        "diff_ci90": None if ci is None else list(finite_interval(*ci)),
        "winner": "tied" if d > 0 else "untied",
        "winner_certain": None if ci is None else bool(ci[0] > 0 or ci[1] < 0),
        "compute_multiplier": _multiplier(law, c, d),
        "compute_multiplier_ci90": m_ci,
    }
