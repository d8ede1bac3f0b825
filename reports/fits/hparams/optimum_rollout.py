"""How far an optimum's law reaches (``rollout``): fit the law's form on the smallest k rungs (by compute), forecast
the optimum of every larger rung, at every k, as the loss laws are backtested (:mod:`ladder.reports.fits.loss`).

A forecast is *covered* when its error in ln space is within the root-sum-square of the law's 90% half-width
there and the measured optimum's own (the side towards the other). The reach is the largest distance (in
compute multiples of the prefix's largest rung) up to which every forecast was covered, and the largest up to
which every forecast was within 10%; a learning rate 10% off costs a few thousandths of a nat (see the penalty);
both by the reach of every rollout (:func:`ladder.reports.fits.backtest.reach`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ladder.reports.fits.backtest import reach
from ladder.reports.fits.hparams.optimum_law import FORMS, OptimumLaw, choose, fit_form

N_BOOT = 50  # at most: the fit's own n_boot when smaller
WITHIN_PCT = 10.0


def _half(value: float, ci, towards: float) -> float:
    """The ln-space half-width of ``ci`` on the side of ``towards`` (inf when unbounded there)."""
    if not ci:
        return math.inf
    bound = ci[1] if towards > value else ci[0]
    return abs(math.log(bound) - math.log(value)) if bound and bound > 0 else math.inf


def rollout(law: OptimumLaw, *, n_boot: int = N_BOOT, seed: int = 0) -> dict | None:
    """The backtest rows and their summary (``n``, ``rms_pct``, ``max_abs_pct``, ``coverage``, ``reach``,
    ``reach_within_10pct``), or None when no prefix of the rungs identifies the law's form."""
    if law.law is None:
        return None
    key = law.form
    pts = sorted(law.points, key=lambda p: p["flops"])
    rows = []
    for k in range(2, len(pts)):
        prefix = pts[:k]
        sizes = {tuple(np.round(np.log([p[c] for c in FORMS[key].columns]), 9)) for p in prefix}
        if choose(key, prefix)[0] != key or len(sizes) < 2:
            continue
        sub = fit_form(prefix, key, law.quantity, n_boot=n_boot, seed=seed + k)
        top = prefix[-1]
        for p in pts[k:]:
            value, ci, _ = sub.at(p["params"], p["tokens"], p["flops"])
            if value is None:
                continue
            err = math.log(value / p["y"])
            width = math.hypot(_half(value, ci, p["y"]), _half(p["y"], p.get("y_ci90"), value))
            rows.append(
                {
                    "prefix": k,
                    "scale": p["scale"],
                    "compute_x": p["flops"] / top["flops"],
                    "params_x": p["params"] / top["params"],
                    "tokens_x": p["tokens"] / top["tokens"],
                    "actual": p["y"],
                    "forecast": value,
                    "ci90": ci,
                    "error_pct": 100 * math.expm1(err),
                    "covered": bool(abs(err) <= width),
                }
            )
    if not rows:
        return None
    errs = np.array([r["error_pct"] for r in rows])
    return {
        "rows": rows,
        "n": len(rows),
        "rms_pct": float(np.sqrt(np.mean(errs**2))),
        "max_abs_pct": float(np.max(np.abs(errs))),
        "coverage": float(np.mean([r["covered"] for r in rows])),
        "reach": reach(rows, "compute_x", lambda r: r["covered"], start=None),
        "reach_within_10pct": reach(rows, "compute_x", lambda r: abs(r["error_pct"]) <= WITHIN_PCT, start=None),
    }


def with_rollout(law: OptimumLaw, *, n_boot: int = N_BOOT, seed: int = 0) -> OptimumLaw:
    """The law with its rollout, refitted with ``min(N_BOOT, n_boot)`` replicates per prefix."""
    return replace(law, rollout=rollout(law, n_boot=min(N_BOOT, n_boot), seed=seed))
