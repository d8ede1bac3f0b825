"""The hero of a study fit and the forecasts: the hero as the study states it, its allocation, shape and
loss with a 90% interval, extra predictions, the compute-optimal section, the forecast band, and the
warnings about how far and how well the law reaches."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.model.config import format_count, parse_count
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.approach3 import ChinchillaFit
from ladder.studies.spec import StudySpec

FAR_EXTRAPOLATION = 30.0  # warn when the hero is this many times the largest ladder model
BACKTEST_WARN_PCT = 5.0


def parse_predict(items: Iterable) -> list[tuple[float, float, str]]:
    """The ``predict=`` items as (params, tokens, label); ``FitError`` on one that does not read."""
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


def prediction(law: ChinchillaFit | None, n: float, d: float, label: str, variant: str) -> dict:
    """The law's forecast at (n, d) as a ``predictions`` row; a row with the reason when there is none."""
    try:
        if law is None:
            raise FitError("no loss law was fitted (see loss_law.reason)")
        p = law.predict(n, d)
    except FitError as exc:
        return {"label": label, "variant": variant, "params": n, "tokens": d, "flops": 6 * n * d, "loss": None,
                "lo": None, "hi": None, "ci_lo": None, "ci_hi": None, "reason": str(exc)}
    return {"label": label, "variant": variant, "params": n, "tokens": d, "flops": p.flops, "loss": p.loss,
            "lo": p.lo, "hi": p.hi, "ci_lo": p.ci_lo, "ci_hi": p.ci_hi, "level": p.level, "reason": None}


def law_source(law: ChinchillaFit, variant: str) -> str:
    """Where the hero loss comes from, in words."""
    form = "reduced law E + A/N^alpha (degenerate ladder)" if law.degenerate else "E + A/N^alpha + B/D^beta"
    return f"fit: chinchilla {form}, variant {variant}, {law.n_runs} runs at {law.n_sizes} sizes"


def hero_start(study: StudySpec) -> dict:
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


def size_hero(study, law, iso, tied, aspect, conv, df, raw, warnings):
    """The hero: its allocation (given, by rule, or compute-optimal), shape and compute; ``(hero, shape, source)``."""
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


def compute_optimal(law: ChinchillaFit | None, iso, hero: dict | None, no_law: str | None = None) -> dict:
    """The ``compute_optimal`` section: the law's allocation exponents, at the hero, and the IsoFLOP fit's."""
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


def curve(law: ChinchillaFit | None, hero: dict, law_df: pd.DataFrame, points: int = 48) -> list[dict] | None:
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


def extrapolation_warnings(hero: dict, law_df: pd.DataFrame, warnings: list[str]) -> None:
    """Record how far the hero lies beyond the ladder, and warn when it is far."""
    n_max = float(law_df["params"].max())
    c_max = float(law_df["flops"].max())
    hero["extrapolation"] = {"params": hero["params"] / n_max, "flops": hero["flops"] / c_max if hero["flops"] else None}
    if hero["params"] / n_max > FAR_EXTRAPOLATION:
        warnings.append(
            f"the hero is {hero['params'] / n_max:.0f}x the largest ladder model: a forecast this far out is "
            "fragile; add a larger rung"
        )


def law_warnings(law: ChinchillaFit, variant: str, warnings: list[str], notes: list[str]) -> None:
    """Notes and warnings about the primary law: degenerate, backtest skipped or missing by much."""
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
