"""The statistics of scoring a frozen forecast against the hero (``ladder forecast score``,
:mod:`ladder.forecast.score` reads the runs and the freezes and calls these).

- :func:`z_score`: log(forecast / actual) over the 90% interval's half-width read as 1.645 normal standard
  deviations (|z| > 1.645 is outside a symmetric interval), with the sign of the score's error (forecast - actual);
- :func:`partial_forecast`: a hero still training, its FINAL loss forecast from its partial curve and the curves
  of the ladder's largest finished runs (:data:`METHOD`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Z90 = 1.645
METHOD = (
    "final = L_hero(f) / r(f): r(f) = L(f) / L_final of the ladder's largest finished runs with the hero's "
    "schedule at the same fraction f of their tokens (interpolated in log f), whose shape is nearly "
    "scale-free; 90% interval from the spread of r(f) across those runs (Student t)"
)


def z_score(actual: float, forecast: float, lo: float, hi: float) -> float | None:
    """log(forecast / actual) over the interval's half-width in normal standard deviations: positive when the
    forecast was too high, as the error (forecast - actual) is."""
    if not (actual > 0 and forecast > 0 and hi > lo > 0):
        return None
    return math.log(forecast / actual) / (math.log(hi / lo) / 2 / Z90)


def partial_forecast(curve: list[tuple[float, float]], refs: list[dict]) -> dict[str, Any]:
    """The hero's final loss from its last eval point at fraction f of its tokens: L_hero(f) / r(f), one estimate
    per reference run (see :data:`METHOD`); the point is their geometric mean, the 90% interval
    ``mean +- t_{k-1} sd sqrt(1 + 1/k)`` of their logs (none with one reference)."""
    from scipy import stats

    frac, loss = curve[-1]
    out: dict[str, Any] = {"fraction": frac, "loss_now": loss, "method": METHOD, "references": []}
    est = []
    for ref in refs:
        f = ref["f"]
        if not f[0] <= frac <= f[-1] * (1 + 1e-9):
            continue  # no extrapolation along a curve
        log_r = float(np.interp(math.log(frac), np.log(f), ref["log_r"]))
        est.append(math.log(loss) - log_r)
        out["references"].append({"run_id": ref["run_id"], "params": ref["params"], "r": math.exp(log_r)})
    if not est:
        first = min((ref["f"][0] for ref in refs), default=None)
        reason = f"no finished rung of the hero's schedule has a curve through {pct_of_tokens(frac)} of its tokens"
        if first is not None and frac < first:  # too early: when the curve will have something to compare with
            at = f"{math.ceil(1000 * first - 1e-6) / 10:g}%"  # 12.3%, never 12%: a curve at 12% is still early
            reason = (
                f"the curve stops at {pct_of_tokens(frac)} of the hero's tokens, before the first eval point of every "
                f"finished rung of its schedule (the earliest at {at} of the rung's tokens): score again once the "
                f"curve reaches {at}"
            )
        out.update(available=False, reason=reason)
        return out
    e = np.array(est)
    out.update(available=True, final_forecast=float(np.exp(e.mean())), lo=None, hi=None, level=0.90)
    if len(e) >= 2:
        half = float(stats.t.ppf(0.95, len(e) - 1) * e.std(ddof=1) * math.sqrt(1 + 1 / len(e)))
        out.update(lo=float(np.exp(e.mean() - half)), hi=float(np.exp(e.mean() + half)))
    return out


def pct_of_tokens(fraction: float) -> str:
    """A fraction of the hero's tokens as a percentage that reads 100% only when it is done: 0.9996 is 99.96%,
    never 100%."""
    for digits in range(0, 7):
        text = f"{100 * fraction:.{digits}f}"
        if fraction >= 1 or float(text) < 100:
            return text + "%"
    return "<100%"


def same_digits(*values: Any, digits: int = 4) -> list[str]:
    """Losses written side by side (a point, its interval, an actual) in one precision: the same decimals for
    each, at least ``digits`` significant figures in the largest, and more (up to 4 more) until values that differ
    print differently. ``3.000 [2.999, 3.001]``, never ``3 [2.999, 3.001]``; ``3.49998 [3.49901, 3.50004]``, never
    ``3.5 [3.499, 3.5]``. A value that is not a finite number is ``-``."""
    nums = [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
        for v in values
    ]
    real = [abs(v) for v in nums if v is not None]
    top = max(real, default=0.0)
    low = min((v for v in real if v > 0), default=1.0)

    def write(extra: int) -> list[str]:
        if top >= 1e4 or low < 1e-3:  # far from a loss's usual digits: significant figures, as g writes them
            return ["-" if v is None else f"{v:#.{digits + extra}g}" for v in nums]
        decimals = max(0, digits - 1 - math.floor(math.log10(top))) + extra if top > 0 else digits - 1 + extra
        return ["-" if v is None else f"{v:.{decimals}f}" for v in nums]

    for extra in range(5):
        texts = write(extra)
        told = all(
            texts[i] != texts[j]
            for i in range(len(nums))
            for j in range(i + 1, len(nums))
            if nums[i] is not None and nums[j] is not None and nums[i] != nums[j]
        )
        if told:
            return texts
    return texts


def offset_words(offset: object) -> str:
    """How far the scored run lies from the frozen point ("+0.56% params, +0.04% tokens"), as `ladder hero`
    promises the score says it; empty when both agree to 0.05% (or for a loss given by hand)."""
    if not isinstance(offset, dict):
        return ""
    parts = [
        f"{v:+.2g}% {what}"
        for what, key in (("params", "params_pct"), ("tokens", "tokens_pct"))
        if isinstance(v := offset.get(key), (int, float)) and not isinstance(v, bool) and abs(v) >= 0.05
    ]
    return ", ".join(parts)
