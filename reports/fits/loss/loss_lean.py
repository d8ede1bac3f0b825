"""Which way the rollout's forecasts near a target's distance erred.

On the mixture forecasts at the target's distance (within a factor ``LEAN_BAND`` of it, or of the farthest distance
tested when the target lies beyond it; the ``LEAN_MIN_N`` nearest it when fewer lie there; at every ratio: those at
the hero's alone are 3 on a 5-size ladder, too few for any test), the mean signed error and how many forecasts were
too high. When so many fall on one side that unbiased forecasts would do so with probability below ``LEAN_P`` (a
two-sided sign test) and their mean error is at least ``LEAN_MIN_PCT`` (a lean of 0.2% is noise, not news), the
forecast is said to lean that way: the ladder's loss curve bends away from every weighted law, and the target's
forecast probably errs the same way. Judged on every row, the lean was that of the farthest ones: on Li et al.'s
ladder the rows at 16-267x erred -10% and made the whole rollout "run low" (141 of 197) for its 1B runs at 2.26x and
3.77x, whose forecasts erred +1.4% and +3.0%. Near the first, the rows at 1.1-4.5x lean neither way (-0.8%, 39 of 94
high); near the second, those at 1.9-7.5x still lean low (-1.5%): a lean describes the rollout near the target, it
does not promise the target's error. The rows of one prefix share their fits, so the test is a description, not a
calibrated p-value; the forecast is not shifted (how the lean grows with distance is itself an extrapolation). Each
forecast carries the lean at its own distance (``distance.lean``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

LEAN_P = 0.05  # say the forecasts lean when this many on one side is this unlikely for unbiased ones
LEAN_MIN_PCT = 1.0  # ... and their mean error is at least the reach's finer tolerance
LEAN_BAND = 2.0  # ... judged on the rows within this factor of the target's distance (the rollout's error grows
# with distance: its far rows' lean is not its near rows')
LEAN_MIN_N = 10  # ... or on this many rows nearest it, when fewer lie within the band: a sign test cannot find a
# lean in fewer (the main job's 4 rows near its hero, all too high, have p = 0.125; 9 of 10 have p = 0.02)


def lean_near(rows: list[dict], d: float) -> dict:
    """The lean of the rollout's forecasts within a factor ``LEAN_BAND`` of the log distance ``d`` (of the
    farthest distance tested, when ``d`` lies beyond it), or of the ``LEAN_MIN_N`` nearest it when fewer lie there."""
    centre = min(d, max((r["distance"] for r in rows), default=0.0))
    near = [r for r in rows if abs(r["distance"] - centre) <= math.log(LEAN_BAND) + 1e-9]
    if len(near) < LEAN_MIN_N:
        near = sorted(rows, key=lambda r: abs(r["distance"] - centre))[:LEAN_MIN_N]
    errs = [r["err_pct"] for r in near]
    high = sum(e > 0 for e in errs)
    p = float(stats.binomtest(high, len(errs), 0.5).pvalue) if errs else None
    mean = float(np.mean(errs)) if errs else None
    leans = p is not None and p < LEAN_P and abs(mean) >= LEAN_MIN_PCT
    direction = ("high" if 2 * high > len(errs) else "low") if leans else None
    return {
        "n": len(errs),
        "n_high": high,
        "mean_err_pct": mean,
        "p": p,
        "direction": direction,
        "distance_x": math.exp(d),
        "min_distance_x": math.exp(min(r["distance"] for r in near)) if near else None,
        "max_distance_x": math.exp(max(r["distance"] for r in near)) if near else None,
        "of": len(rows),
    }
