"""How far an optimum's law reaches (``rollout``): fit the law's form on the smallest k rungs (by compute), forecast
the optimum of every larger rung, at every k, as the loss laws are backtested (:mod:`ladder.reports.fits.loss`).

A forecast is *covered* when its error in ln space is within the root-sum-square of the law's 90% half-width
there and the measured optimum's own (the side towards the other). The reach is the largest distance (in
compute multiples of the prefix's largest rung) up to which every forecast was covered, and the largest up to
which every forecast was within 10%; a learning rate 10% off costs a few thousandths of a nat (see the penalty).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ladder.reports.fits.hparams.law import FORMS, OptimumLaw, choose, fit_form

N_BOOT = 50
WITHIN_PCT = 10.0


def _half(value: float, ci, towards: float) -> float:
    """The ln-space half-width of ``ci`` on the side of ``towards`` (inf when unbounded there)."""
    if not ci:
        return math.inf
    bound = ci[1] if towards > value else ci[0]
    return abs(math.log(bound) - math.log(value)) if bound and bound > 0 else math.inf


def _reach(rows: list[dict], ok) -> float | None:
    """The largest compute multiple up to which every forecast passed ``ok`` (None: the nearest failed)."""
    best = None
    for r in sorted(rows, key=lambda r: r["compute_x"]):
        if not ok(r):
            break
        best = r["compute_x"]
    return best


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
            rows.append({"prefix": k, "scale": p["scale"], "compute_x": p["flops"] / top["flops"],
                         "params_x": p["params"] / top["params"], "tokens_x": p["tokens"] / top["tokens"],
                         "actual": p["y"], "forecast": value, "ci90": ci, "error_pct": 100 * math.expm1(err),
                         "covered": bool(abs(err) <= width)})
    if not rows:
        return None
    errs = np.array([r["error_pct"] for r in rows])
    return {
        "rows": rows,
        "n": len(rows),
        "rms_pct": float(np.sqrt(np.mean(errs**2))),
        "max_abs_pct": float(np.max(np.abs(errs))),
        "coverage": float(np.mean([r["covered"] for r in rows])),
        "reach": _reach(rows, lambda r: r["covered"]),
        "reach_within_10pct": _reach(rows, lambda r: abs(r["error_pct"]) <= WITHIN_PCT),
    }


def with_rollout(law: OptimumLaw, *, seed: int = 0) -> OptimumLaw:
    return replace(law, rollout=rollout(law, seed=seed))
