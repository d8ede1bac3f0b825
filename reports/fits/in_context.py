"""The loss split by token kind: the in-context repeats (targets whose trigram already ended earlier in their
evaluation window, which a model can predict by copying: :mod:`ladder.model.data.repeats`) and the novel targets.

Why a ladder needs it: small language models learn to copy from their context abruptly, at a step that depends
on the seed, and then the loss on the repeats falls by a large factor while the novel tokens keep moving
smoothly with scale. A law of the total loss fitted across that transition cannot see it coming. On the default
study's corpus two seeds of one 400K model ended 11% apart, 1.91 and 1.16 nats on the repeats (29% of the
targets) and 2.54 and 2.50 on the novel ones (docs/in-context.md).

What it gives, for one variant's law runs that carry the split (``loss_repeats``, ``loss_novel``, ``repeat_share``
columns of ``ladder collect``):

* ``copy_ratio`` = repeats' loss / novel loss per run (1: the model copies nothing; it falls as copying is
  learned) and its trend against compute: the slope of ``log copy_ratio`` on ``log C`` with a Student-t 90%
  interval. A slope whose interval is below zero, with the ratio down by more than 5% across the ladder, means
  the ladder is still learning to copy: past it, the repeats can fall faster than any law of the total
  forecasts (a warning);
* the seed spread of each kind where seed replicates exist (pooled sd of log loss): a spread on the repeats
  more than twice the novel one means the transition's timing depends on the seed (a warning);
* each kind forecast at the target by the loss forecast itself (forms, rollout, calibration), and the two
  recombined with the repeats' share, beside the rollout RMS of each: where the novel tokens forecast well and
  the repeats do not, the headline's error is the transition's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ladder.model.config import format_multiple
from ladder.reports.fits.loss import forecast_loss
from ladder.reports.fits.loss.loss_forms import seed_sigma
from ladder.reports.fits.runs import Runs

COLUMNS = ("loss_repeats", "loss_novel", "repeat_share")
MIN_RUNS = 4  # runs with the split needed for a trend
MIN_SIZES = 3
MIN_DROP = 0.05  # a copy ratio that falls by less across the whole ladder is not worth a warning
SEED_RATIO_WARN = 2.0  # repeats' seed spread over the novel tokens' that says the seed sets the transition
N_BOOT = 100  # bootstrap refits per form of each kind's forecast (the headline has its own)
LEVEL = 0.90


def available(law_df: pd.DataFrame) -> str | None:
    """None when the runs carry the split, else why not."""
    missing = [c for c in COLUMNS if c not in law_df.columns]
    if missing:
        return f"the runs table has no {', '.join(missing)} column(s) (runs trained before the split, or another tool)"
    ok = law_df[list(COLUMNS)].notna().all(axis=1)
    if ok.sum() < MIN_RUNS:
        # the loss laws' runs: one per rung of a sweep (its best), not every run the study trained ("3 run(s)
        # carry the split" of a 45-run LR x batch sweep whose every run carried it)
        if ok.all():
            return f"the loss laws use {len(law_df)} run(s), and the repeats/novel split needs >= {MIN_RUNS}"
        # say why the others lack it: a study grown across an upgrade has runs of an older ladder ("1 run(s) carry
        # the split" read as "add runs", though its 4 other runs were trained before ladder split the loss)
        other = int((~ok).sum())
        return (
            f"{int(ok.sum())} run(s) carry the repeats/novel split (needs >= {MIN_RUNS}); the other {other} "
            f"{'has' if other == 1 else 'have'} none (trained by an older ladder, before the split, or by another tool)"
        )
    if len(np.unique(np.round(np.log(law_df.loc[ok, "params"].astype(float)), 1))) < MIN_SIZES:
        return f"the runs with the split span fewer than {MIN_SIZES} model sizes"
    return None


@dataclass
class InContext:
    variant: str
    share: float  # the repeats' share of the evaluation targets
    runs: list[dict]
    trend: dict
    seeds: dict
    forecasts: dict
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "repeat_share": self.share,
            "runs": self.runs,
            "trend": self.trend,
            "seeds": self.seeds,
            "forecasts": self.forecasts,
            "warnings": list(self.warnings),
        }


def _trend(compute: np.ndarray, ratio: np.ndarray) -> dict:
    """OLS of log copy_ratio on log compute, with a Student-t interval on the slope."""
    x, y = np.log(compute), np.log(ratio)
    res = stats.linregress(x, y)
    dof = len(x) - 2
    half = float(stats.t.ppf(0.5 + LEVEL / 2, dof) * res.stderr) if dof > 0 else math.inf
    lo, hi = min(x), max(x)
    return {
        "slope": float(res.slope),
        "ci90": [float(res.slope) - half, float(res.slope) + half],
        "n": len(x),
        "ratio_at_smallest": float(math.exp(res.intercept + res.slope * lo)),
        "ratio_at_largest": float(math.exp(res.intercept + res.slope * hi)),
        "compute_span": float(math.exp(hi - lo)),
    }


def _seed_spread(df: pd.DataFrame) -> dict:
    """Pooled sd of log loss between seeds of one configuration (params, tokens), per kind (the loss laws' own
    noise floor, :func:`~ladder.reports.fits.loss.loss_forms.seed_sigma`); None without replicates."""
    if "seed" not in df.columns:
        return {"repeats": None, "novel": None, "configurations": 0}
    seeds = df["seed"].tolist()
    (rep, rows), (nov, _) = (
        seed_sigma(df["params"], df["tokens"], df[f"loss_{k}"], seeds) for k in ("repeats", "novel")
    )
    if not rows:
        return {"repeats": None, "novel": None, "configurations": 0}
    return {"repeats": rep, "novel": nov, "configurations": sum(r["groups"] for r in rows)}


def _forecast(df: pd.DataFrame, col: str, targets: list[tuple[float, float]], seed: int, n_boot: int) -> list[dict]:
    """One kind's forecast at each target (the first is the hero), with the rollout's RMS error."""
    data = Runs(
        df["params"].to_numpy(float), df["tokens"].to_numpy(float), df[col].to_numpy(float), [str(i) for i in df.index]
    )
    try:
        fc = forecast_loss(data, *targets[0], predict=targets[1:], n_boot=n_boot, seed=seed)
    except ValueError as exc:
        return [{"available": False, "reason": str(exc)} for _ in targets]
    errs = [r["err_pct"] for r in fc.mixture_rows]
    rollout = {
        "weights": fc.weights,
        "rollout_n": len(errs),
        "rollout_rms_pct": float(np.sqrt(np.mean(np.square(errs)))) if errs else None,
    }
    out = []
    for p in fc.points:
        if p.loss is None:
            out.append({"available": False, "reason": p.to_dict().get("note")})
        else:
            out.append(
                {
                    "available": True,
                    "loss": p.loss,
                    "lo": p.lo,
                    "hi": p.hi,
                    "half_width_pct": p.half_width_pct,
                    **rollout,
                }
            )
    return out


def _combine(share: float, novel: dict, repeats: dict) -> dict:
    if not (novel["available"] and repeats["available"]):
        return {"available": False, "reason": "a kind has no forecast"}
    mix = {q: share * repeats[q] + (1 - share) * novel[q] for q in ("loss", "lo", "hi")}
    return {
        "available": True,
        **mix,
        "note": "share-weighted; lo and hi add the kinds' bounds (as if their errors "
        "moved together: a conservative interval)",
    }


def fit_in_context(
    law_df: pd.DataFrame, variant: str, params: float, tokens: float, *, predict=(), seed: int = 0, n_boot: int = N_BOOT
) -> InContext:
    """The split of one variant's law runs (``available(law_df)`` must be None), with each kind forecast at
    (``params``, ``tokens``) and at each ``predict`` point ((params, tokens, label) tuples) with ``n_boot``
    bootstrap refits per form."""
    df = law_df[law_df[list(COLUMNS)].notna().all(axis=1)].copy()
    share = float(df["repeat_share"].median())
    df["copy_ratio"] = df["loss_repeats"] / df["loss_novel"]
    compute = 6.0 * df["params"].to_numpy(float) * df["tokens"].to_numpy(float)
    trend = _trend(compute, df["copy_ratio"].to_numpy(float))
    seeds = _seed_spread(df)
    predict = [(float(p[0]), float(p[1]), str(p[2]) if len(p) > 2 else f"{p[0]:.4g}:{p[1]:.4g}") for p in predict]
    targets = [(params, tokens), *[p[:2] for p in predict]]
    novel, repeats = (_forecast(df, f"loss_{k}", targets, seed, n_boot) for k in ("novel", "repeats"))
    forecasts = {
        "params": params,
        "tokens": tokens,
        "novel": novel[0],
        "repeats": repeats[0],
        "combined": _combine(share, novel[0], repeats[0]),
        "predictions": [
            {"label": label, "params": n, "tokens": d, "novel": nv, "repeats": rp, "combined": _combine(share, nv, rp)}
            for (n, d, label), nv, rp in zip(predict, novel[1:], repeats[1:])
        ],
    }
    warnings = []
    if trend["ci90"][1] < 0 and trend["ratio_at_largest"] < (1 - MIN_DROP) * trend["ratio_at_smallest"]:
        warnings.append(
            f"the ladder is learning to copy from context: the loss on in-context repeats ({100 * share:.0f}% of the "
            f"evaluation targets) over the novel tokens' falls, by its log-log trend, from {trend['ratio_at_smallest']:.3g} to "
            f"{trend['ratio_at_largest']:.3g} across {format_multiple(trend['compute_span'])} compute (6ND; slope "
            f"{trend['slope']:+.3g}, 90% [{trend['ci90'][0]:+.3g}, {trend['ci90'][1]:+.3g}]), so the total mixes two "
            "kinds of target that scale differently. Small models learn to copy abruptly, at a seed-dependent step: "
            "beyond the ladder the repeats can fall much faster than the laws of the total forecast (compare each "
            "kind's forecast)"
        )
    if seeds["repeats"] is not None and seeds["novel"] and seeds["repeats"] > SEED_RATIO_WARN * seeds["novel"]:
        warnings.append(
            # 3 significant digits, as the report's table of the same spread beside it (0.00539, never 0.005)
            f"seed replicates differ more on the in-context repeats (sd of log loss {seeds['repeats']:.3g}) than on "
            f"the novel tokens ({seeds['novel']:.3g}): when the model learns to copy depends on the seed"
        )
    runs = [
        {
            "run": str(i),
            "params": float(r["params"]),
            "tokens": float(r["tokens"]),
            "loss": float(r["loss"]),
            "repeats": float(r["loss_repeats"]),
            "novel": float(r["loss_novel"]),
            "copy_ratio": float(r["copy_ratio"]),
            "seed": int(r["seed"]) if "seed" in df.columns and pd.notna(r["seed"]) else None,
        }
        for i, r in df.sort_values(["params", "tokens"]).iterrows()
    ]
    return InContext(
        variant=variant, share=share, runs=runs, trend=trend, seeds=seeds, forecasts=forecasts, warnings=warnings
    )
