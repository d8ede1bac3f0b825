"""Tied vs untied embeddings along the ladder (``fit_tie_ablation``); the method is in
:mod:`ladder.reports.fits.ablations`, the calls (crossover, winner, multiplier) in
:mod:`ladder.reports.fits.ablations.calls`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.ablations import calls
from ladder.reports.fits.ablations.common import (
    COMPUTE_MATCH_TOL,
    Z90,
    best_config,
    pooled_sd,
)
from ladder.reports.fits.ablations.trend import Trend, fit_trend
from ladder.reports.fits.ablations.trend_forms import (
    EffectData,
    constant,
    log_linear,
    scaled_power,
)
from ladder.reports.fits.ablations.variant_laws import (
    LawDifferenceForm,
    fit_law,
    fit_pair,
    law_dict,
    pair_variant_dict,
    slope,
)
from ladder.reports.fits.engine import LawFit
from ladder.reports.fits.hparams.rungs import (
    REQUIRED,
    Scale,
    check_columns,
    group_scales,
)
from ladder.reports.fits.runs import tie_flags

GAP = "g = ln L_untied - ln L_tied"
TIE_FORMS = (
    constant("constant", "g"),
    log_linear("loglinear", "g", "log-linear in compute (can cross zero)"),
    scaled_power("power", "g"),
    LawDifferenceForm(formula="g = ln L_untied(C) - ln L_tied(C), L_v = E + A_v C^-alpha"),
)

TIE_METHOD = (
    f"per rung (same shape, same tokens): {GAP} of each variant's best configuration (replicates averaged in "
    "log space); tied and untied do the same FLOPs per token (the LM head's matmul runs either way, the tied one "
    "reuses the embedding matrix), so a rung compares them at exactly matched compute; the rung's noise from seed "
    "replicates (pooled sd of ln loss) where present, else the scatter of the trend fit; trend forms of g against "
    "compute (constant, log-linear, a power that never changes sign, the difference of the variants' L(C) "
    "laws with one floor and one exponent) fitted by the engine and weighted by rollout backtests (fit on the smaller rungs, forecast the "
    "larger), the 90% interval a mixture of their draws calibrated on the rollout; a crossover only where two "
    "rungs differ in sign beyond their noise and the trend crosses between them (beyond the ladder: the trend's "
    "zero with its interval); 'certain' only when the 90% interval excludes 0 and the hero is within the "
    "rollout's reach; multiplier m = exp(-g / s), s = d ln L_untied / d ln C of the untied L(C) law (local slope)"
)


@dataclass(frozen=True)
class TieScale:
    """One rung of the tie ablation: each variant's best loss, ``gap = ln L_untied - ln L_tied`` (> 0: tied
    better) with its noise ``gap_se`` (``noise_source``), and the untied compute needed to reach the tied loss,
    over the rung's compute (``compute_multiplier``, > 1: tied better)."""

    scale: str
    flops: float | None
    flops_tied: float | None
    flops_untied: float | None
    loss_tied: float | None
    loss_untied: float | None
    gap: float | None
    gap_se: float | None
    noise_source: str | None
    beyond_noise: bool | None
    winner: str | None
    compute_multiplier: float | None
    compute_multiplier_ci90: list | None
    n_tied: int
    n_untied: int
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return jsonable({**self.__dict__, "notes": list(self.notes)})


@dataclass
class TieAblation:
    """Tied vs untied along the ladder. ``trend`` is None (with ``reason``) when no trend form is identifiable;
    ``hero`` (the one gap at the hero, winner, call, multiplier) is None without a hero or a trend."""

    scales: tuple[TieScale, ...]
    trend: Trend | None
    reason: str | None
    crossover: dict
    laws: dict[str, dict | None]  # each variant's L(C) as fit.json shows it
    law: LawFit | None  # the pair law (one floor), when identifiable
    hero_flops: float | None
    hero: dict | None
    noise: dict
    method: str
    notes: tuple[str, ...] = ()

    def band(self) -> dict | None:
        good = [s.flops for s in self.scales if s.gap is not None]
        if self.trend is None or not good:
            return None
        top = max(max(good), self.hero_flops or 0.0) * 1.3
        return self.trend.band(np.geomspace(min(good) / 1.3, top, 60))

    def to_dict(self) -> dict:
        return jsonable(
            {
                "method": self.method,
                "quantity": GAP,
                "scales": [s.to_dict() for s in self.scales],
                "noise": self.noise,
                "trend": None if self.trend is None else self.trend.to_dict(),
                "band": self.band(),
                "reason": self.reason,
                "crossover": self.crossover,
                "laws": self.laws,
                "hero_flops": self.hero_flops,
                "hero": self.hero,
                "notes": list(self.notes),
            }
        )


def _rungs(df: pd.DataFrame) -> list[Scale]:
    """Rungs that pair the variants: the ``scale`` column, else (or when it pairs none) same shape and tokens."""
    scales = group_scales(df)

    def paired(sc: Scale) -> bool:
        return df.loc[sc.index, "tie_embeddings"].nunique() > 1

    if not any(paired(s) for s in scales) and all(c in df.columns for c in ("d_model", "n_layers")):
        shape = df.assign(
            scale=[
                f"{int(d)}x{int(n)}, D={t:.3g}"
                for d, n, t in zip(df["d_model"], df["n_layers"], df["tokens"].astype(float))
            ]
        )
        scales = group_scales(shape)
    return scales


def _floor(noise: float):
    def floor(fits: dict) -> float:
        if noise > 0:
            return noise
        if "loglinear" in fits:
            return fits["loglinear"].sigma
        return min(f.sigma for f in fits.values())

    return floor


def _laws(raw: list, n_boot: int, seed: int, notes: list[str]):
    """The variants' L(C) laws (``laws`` as fit.json shows them, the pair law) and the untied slope for the
    multiplier: the pair law's, else a power law's through the untied rungs, else None."""
    have = {name: [r[i] for r in raw if r[i] is not None] for name, i in (("tied", 1), ("untied", 2))}
    pair = fit_pair(
        *[np.array([b[k] for b in have[v]]) for v in ("tied", "untied") for k in ("flops", "loss")],
        n_boot=n_boot,
        seed=seed,
    )
    if pair is not None:
        return (
            {"tied": pair_variant_dict(pair, 0), "untied": pair_variant_dict(pair, 1)},
            pair,
            lambda c: slope(pair, c, 1.0),
        )
    power = fit_law([b["flops"] for b in have["untied"]], [b["loss"] for b in have["untied"]], n_boot=n_boot, seed=seed)
    notes.append(
        "no L(C) pair law (needs each variant's rungs at >= 3 computes)"
        + (
            "; the multiplier uses a power law through the untied rungs"
            if power is not None
            else "; no loss-vs-compute law for the untied variant (needs rungs at >= 2 computes): no multiplier"
        )
    )
    return {"tied": None, "untied": law_dict(power)}, None, (None if power is None else (lambda c: slope(power, c)))


def _noise(raw: list, loss_noise: float | None) -> tuple[float, dict]:
    """The sd of one run's ln loss: pooled over seed replicates, else as given, else 0 (the trend's scatter)."""
    sd, dof = pooled_sd(p for _, t, u in raw for p in (t, u))
    if dof:
        return sd, {"source": "seed replicates", "sd_log_loss": sd, "dof": dof}
    if loss_noise:
        return float(loss_noise), {"source": "given (loss_noise)", "sd_log_loss": float(loss_noise), "dof": None}
    return 0.0, {"source": "scatter of the trend fit", "sd_log_loss": None, "dof": None}


def fit_tie_ablation(
    df: pd.DataFrame,
    hero_flops: float | None = None,
    *,
    loss_noise: float | None = None,
    n_boot: int = 200,
    seed: int = 0,
    require: bool = False,
) -> TieAblation:
    """Tied vs untied embeddings per rung and along the ladder (:mod:`ladder.reports.fits.ablations`).
    ``loss_noise``: the seed-to-seed sd of one run's ln loss, if known (used when the runs have no replicates).
    Raises ``FitError`` on a table without the needed columns or without both variants; with too few rungs for
    any trend the trend is None and ``reason`` says why (``require=True`` raises instead)."""
    what = "tied vs untied"
    check_columns(df, (*REQUIRED, "tie_embeddings"), what)
    df = df.reset_index(drop=True)
    df["tie_embeddings"] = tie_flags(df["tie_embeddings"])
    if df["tie_embeddings"].nunique() < 2:
        only = "tied" if bool(df["tie_embeddings"].iloc[0]) else "untied"
        raise FitError(f"{what}: all runs are {only}; the ablation needs both variants")
    notes: list[str] = []
    raw = []
    unlike: list[str] = []  # rungs whose variants differ in shape (sizes holding total parameters fixed)
    for sc in _rungs(df):
        sub = df.loc[sc.index]
        t = best_config(sub[sub["tie_embeddings"]], exclude=("tie_embeddings",))
        u = best_config(sub[~sub["tie_embeddings"]], exclude=("tie_embeddings",))
        raw.append((sc, t, u))
        if t is not None and u is not None and _shapes_differ(sub):  # a one-variant rung compares nothing
            unlike.append(sc.label)
    sd, noise = _noise(raw, loss_noise)

    rows: list[dict] = []
    skipped_rows: list[TieScale] = []
    for sc, t, u in raw:
        if t is None or u is None:
            missing = " or ".join(n for n, v in (("tied", t), ("untied", u)) if v is None)
            why = f"{sc.label}: no {missing} run with a finite loss at this rung"
            notes.append(why)
            skipped_rows.append(
                TieScale(
                    sc.label,
                    sc.flops,
                    None if t is None else t["flops"],
                    None if u is None else u["flops"],
                    None if t is None else t["loss"],
                    None if u is None else u["loss"],
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    0 if t is None else t["n"],
                    0 if u is None else u["n"],
                    why,
                )
            )
            continue
        row_notes = []
        if abs(math.log(u["flops"] / t["flops"])) > math.log1p(COMPUTE_MATCH_TOL):
            row_notes.append(
                f"{sc.label}: the table's FLOPs differ by {abs(u['flops'] / t['flops'] - 1):.1%} between the "
                + (
                    "variants, whose bodies differ (the untied head's V x d taken from the body): compared at "
                    "the same parameters and tokens, not at matched compute"
                    if sc.label in unlike
                    else "variants; compared at the same shape and tokens (the same FLOPs per token when the LM "
                    "head is counted for both)"
                )
            )
        se = sd * math.sqrt(1 / t["n"] + 1 / u["n"]) if sd else None
        rows.append(
            {
                "scale": sc.label,
                "flops": math.sqrt(t["flops"] * u["flops"]),
                "t": t,
                "u": u,
                "gap": math.log(u["loss"]) - math.log(t["loss"]),
                "se": se,
                "notes": tuple(row_notes),
            }
        )
        notes.extend(row_notes)

    laws, pair, slope_at = _laws(raw, n_boot, seed, notes)

    trend, reason = None, None
    if rows:
        data = EffectData(
            [r["flops"] for r in rows],
            [r["gap"] for r in rows],
            [r["scale"] for r in rows],
            float(np.median([r["se"] for r in rows])) if sd else 0.0,
            {"loss_a": np.array([r["t"]["loss"] for r in rows]), "loss_b": np.array([r["u"]["loss"] for r in rows])},
        )
        trend = fit_trend(data, TIE_FORMS, quantity=GAP, floor=_floor(data.noise), n_boot=n_boot, seed=seed)
    if trend is None:
        reason = f"the tie trend needs at least 2 rungs with both variants, got {len(rows)}"
        if require:
            raise FitError(f"{what}: {reason}")
    elif not sd:
        sd_trend = trend.fits[trend.primary].sigma
        noise.update(sd_gap=sd_trend, form=trend.primary)
        for r in rows:
            r["se"] = sd_trend
    else:
        noise["sd_gap"] = data.noise

    scales = []
    for r in rows:
        se = r["se"]
        gaps = np.concatenate([[r["gap"]], r["gap"] + (se or 0.0) * np.random.default_rng(3).standard_normal(2000)])
        m, m_ci = calls.multiplier(slope_at, r["flops"], gaps if se else gaps[:1])
        scales.append(
            TieScale(
                r["scale"],
                r["flops"],
                r["t"]["flops"],
                r["u"]["flops"],
                r["t"]["loss"],
                r["u"]["loss"],
                r["gap"],
                se,
                noise["source"],
                None if se is None else bool(abs(r["gap"]) > Z90 * se),
                calls.winner_of(r["gap"]),
                m,
                m_ci,
                r["t"]["n"],
                r["u"]["n"],
                None,
                r["notes"],
            )
        )
    scales.extend(skipped_rows)
    scales.sort(key=lambda s: s.flops if s.flops is not None and math.isfinite(s.flops) else math.inf)

    cross = calls.crossover(
        trend, [{"scale": r["scale"], "flops": r["flops"], "gap": r["gap"], "se": r["se"]} for r in rows], hero_flops
    )
    if reason:
        cross["message"] = reason
    hero = None
    if trend is not None and hero_flops is not None:
        hero = calls.hero_call(trend, float(hero_flops), slope_at)
    method = TIE_METHOD
    if unlike:  # the method's matched compute holds for one shape per rung only
        method += (
            f"; here the variants' shapes differ at {len(unlike)} of {len(rows)} rungs (sizes hold total "
            "parameters fixed, so the untied head takes V x d from the body): those compare the variants at the "
            "same parameters and tokens, not at matched compute"
        )
    return TieAblation(tuple(scales), trend, reason, cross, laws, pair, hero_flops, hero, noise, method, tuple(notes))


def _shapes_differ(sub: pd.DataFrame) -> bool:
    """Whether a rung's tied and untied runs share no body (d_model, n_layers, ffn_dim)."""
    cols = [c for c in ("d_model", "n_layers", "ffn_dim") if c in sub.columns]
    if not cols:
        return False
    shape = sub[cols].astype(str).agg("x".join, axis=1)
    return not set(shape[sub["tie_embeddings"]]) & set(shape[~sub["tie_embeddings"]])


def paired_forecast(primary: str, target: dict, hero_call: dict | None, other: str) -> dict | None:
    """The ``other`` variant's loss at the hero by the paired tied-vs-untied comparison (the call's basis): the
    primary variant's forecast ``target`` moved by the ablation's one gap at the hero, ``ln L_untied - ln
    L_tied``. Its interval is the gap's alone (the primary's own uncertainty is shared by both). None unless the
    two variants are ``tied`` and ``untied`` and the call has a gap. Each variant's own loss law, fitted on its
    runs apart, may weigh other forms and disagree with it; this is the number that agrees with the call."""
    names = {primary, other}
    if names != {"tied", "untied"} or not isinstance(hero_call, dict) or not isinstance(target, dict):
        return None
    g, ci, loss = hero_call.get("gap"), hero_call.get("gap_ci90") or [None, None], target.get("loss")
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (g, loss, *ci)):
        return None
    sign = 1.0 if other == "untied" else -1.0  # the gap is untied minus tied
    lo, hi = sorted((loss * math.exp(sign * ci[0]), loss * math.exp(sign * ci[1])))
    return {
        "variant": other,
        "loss": loss * math.exp(sign * g),
        "lo": lo,
        "hi": hi,
        "from": primary,
        "from_loss": loss,
        "gap": g,
        "log_factor": sign * g,  # ln(loss / from_loss): the gap, its sign turned when the other variant is tied
        "basis": "paired comparison (the tied-vs-untied call)",
    }
