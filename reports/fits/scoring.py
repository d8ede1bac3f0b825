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
        out.update(
            available=False,
            reason=f"no finished rung of the hero's schedule has a curve through {pct_of_tokens(frac)} of its tokens",
        )
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
