"""The tie ablation's calls: where the winner flips (the crossover), who wins at the hero and how sure the fit
is, and the effect as an effective-compute multiplier.

Crossover (``crossover``): stated inside the ladder only where the rungs and the trend agree: two rungs whose
gaps differ in sign, each beyond its noise (``|g| > 1.645 se``), with no rung of the other sign beyond noise
between them, AND the trend's point curve crossing zero between them. Beyond the ladder: the trend's first
zero above the largest rung. Its 90% interval comes from the trend's calibrated curves (each a draw of the
mixture without the run noise): the quantiles of each curve's zero (the nearest to the point's inside the
ladder, the first above the largest rung beyond it; a curve that never crosses up to ``CROSS_LIMIT`` x the
hero counts as crossing beyond, so the interval may be open above). A crossing beyond the ladder is stated
(``beyond_range``) only when its 90% interval is closed: at least 95% of the curves cross before that limit;
with 50-95% it is ``possible_beyond`` (a flip that may come, not one the fit claims); below, ``none``.
Statuses: ``within_range``, ``beyond_range``, ``possible_beyond``, ``none`` (no rung sign change beyond noise
and no trend crossing), ``unresolved`` (the rungs and the trend disagree), ``unknown`` (no trend).

Call at the hero (``hero_call``): the winner is the sign of the mixture's point gap; ``p_winner`` the share of
its calibrated draws on that side. ``certain`` only when the 90% interval excludes 0 AND the hero lies within
the rollout's reach (the compute distance up to which the gap forecasts covered the measured gaps); else
``likely`` when ``p_winner >= 0.75``; else ``undetermined``.

Multiplier: the compute the untied variant needs to reach the tied loss, over C, from the gap and the local
slope of the untied variant's L(C) law (the pair law of :mod:`.variant_laws`, else a power law through its
rungs): ``ln L_u(m C) ~ ln L_u(C) + s ln m = ln L_t(C)``, so
``m = exp(-g / s)`` with ``s = d ln L_u / d ln C`` (m > 1: tied better; m < 1: untied reaches tied's loss
with less compute). Its interval pairs the gap's draws with the law's bootstrap slopes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ladder.model.config import format_flops, format_multiple
from ladder.reports.fits.ablations.common import Z90
from ladder.reports.fits.ablations.trend import Trend
from ladder.reports.fits.backtest import interval

LIKELY = 0.75
TOP = "the largest rung with both variants"  # a rung one variant trained alone compares nothing
CROSS_LIMIT = 10.0  # crossings are searched up to this many times the hero's (or the largest rung's) compute
GRID = 400
MAX_LN_M = math.log(1e6)  # a multiplier beyond 1e6 (or below 1e-6) is reported as unbounded (None)
P_STATED = 0.95  # a crossing beyond the ladder is stated when its 90% interval is closed
P_POSSIBLE = 0.5  # and called possible when at least half the trend's curves cross


def winner_of(gap: float) -> str:
    return "tied" if gap > 0 else ("untied" if gap < 0 else "even")


SlopeFn = Callable[[float], tuple[float, "np.ndarray | None"]]


def multiplier(slope_at: SlopeFn | None, c: float, gaps: np.ndarray) -> tuple[float | None, list | None]:
    """``(m at gaps[0], 90% interval over gaps[1:])``; None where the untied loss does not fall at ``c``.
    ``slope_at(c)``: ``d ln L_untied / d ln C`` and its bootstrap draws."""
    if slope_at is None:
        return None, None
    s, s_boot = slope_at(c)
    if not s < 0:
        return None, None
    ln_m = -float(gaps[0]) / s
    m = math.exp(ln_m) if abs(ln_m) <= MAX_LN_M else None
    if len(gaps) < 2 or s_boot is None:
        return m, None
    rng = np.random.default_rng(7)
    sd = s_boot[rng.integers(0, len(s_boot), len(gaps) - 1)]
    g = np.asarray(gaps[1:], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):  # a draw whose loss does not fall never catches up
        logm = np.where(sd < 0, -g / np.where(sd < 0, sd, -1.0), np.sign(g) * np.inf)
    lo, hi = interval(logm, method="inverted_cdf")
    return m, [math.exp(lo) if abs(lo) <= MAX_LN_M else None, math.exp(hi) if abs(hi) <= MAX_LN_M else None]


def _zeros(lc: np.ndarray, v: np.ndarray) -> list[float]:
    """ln C where the piecewise-linear curve ``v(lc)`` crosses zero."""
    s = np.sign(v)
    idx = np.flatnonzero(s[:-1] * s[1:] < 0)
    return [float(lc[i] - v[i] * (lc[i + 1] - lc[i]) / (v[i + 1] - v[i])) for i in idx]


def _curve_zeros(lc: np.ndarray, curves: np.ndarray, pick) -> np.ndarray:
    out = np.full(len(curves), np.inf)
    s = np.sign(curves)
    flips = (s[:, :-1] * s[:, 1:]) < 0
    for r in np.flatnonzero(flips.any(axis=1)):
        zs = _zeros(lc, curves[r])
        z = pick(zs)
        if z is not None:
            out[r] = z
    return out


def _interval(z: np.ndarray) -> list:
    lo, hi = interval(z, method="inverted_cdf")
    return [math.exp(lo) if np.isfinite(lo) else None, math.exp(hi) if np.isfinite(hi) else None]


def _sign_change(rungs: list[dict]) -> tuple[dict, dict, int] | None:
    """The first pair of rungs (by compute) of opposite sign, each beyond its noise; and how many changes."""
    sig = [r for r in sorted(rungs, key=lambda r: r["flops"]) if r["se"] is not None and abs(r["gap"]) > Z90 * r["se"]]
    changes = [(a, b) for a, b in zip(sig, sig[1:]) if np.sign(a["gap"]) != np.sign(b["gap"])]
    return (changes[0][0], changes[0][1], len(changes)) if changes else None


def crossover(trend: Trend | None, rungs: list[dict], hero_flops: float | None) -> dict:
    """Where the winner flips, if the rungs and the trend agree (see the module doc). ``rungs``: dicts with
    ``flops``, ``gap``, ``se``."""
    if trend is None:
        return {"status": "unknown", "flops": None, "ci90": None, "message": "no trend: too few rungs"}
    cmin, cmax = min(r["flops"] for r in rungs), max(r["flops"] for r in rungs)
    limit = CROSS_LIMIT * max(cmax, hero_flops or cmax)
    grid = np.geomspace(cmin, limit, GRID)
    lc = np.log(grid)
    point, curves = trend.curves(grid, noise=False, n_draws=2000)
    zeros = _zeros(lc, point)
    inside = [z for z in zeros if z <= math.log(cmax)]
    above = [z for z in zeros if z > math.log(cmax)]
    change = _sign_change(rungs)
    out: dict = {"flops": None, "ci90": None, "search_limit": limit}
    if change is not None:
        a, b, n = change
        out["rungs"] = [a["scale"], b["scale"]]
        between = [z for z in inside if math.log(a["flops"]) <= z <= math.log(b["flops"])]
        lower, upper = winner_of(a["gap"]), winner_of(b["gap"])
        if between:
            z0 = between[0]
            zs = _curve_zeros(lc, curves, lambda v: min(v, key=lambda z: abs(z - z0)) if v else None)
            c0 = math.exp(z0)
            out.update(status="within_range", flops=c0, ci90=_interval(zs), p_cross=float(np.mean(np.isfinite(zs))))
            out["message"] = (
                f"the winner flips within the ladder: {lower} wins at {a['scale']}, {upper} at "
                f"{b['scale']} (each beyond its noise), and the trend crosses zero between them at "
                f"C = {format_flops(c0)}"
            )
            if n > 1:
                out["message"] += f"; the rungs change sign {n} times beyond their noise"
            return out
        out.update(
            status="unresolved",
            message=(
                f"the rungs change sign beyond their noise ({lower} wins at {a['scale']}, {upper} at "
                f"{b['scale']}) but the backtested trend does not cross zero between them: no "
                "crossover is stated"
            ),
        )
        return out
    if above:
        z0 = above[0]
        zs = _curve_zeros(lc, curves, lambda v: next((z for z in v if z > math.log(cmax)), None))
        c0 = math.exp(z0)
        now, then = winner_of(float(np.interp(math.log(cmax), lc, point))), winner_of(float(point[-1]))
        dist = c0 / cmax
        ci = _interval(zs)
        out.update(
            flops=c0,
            ci90=ci,
            compute_x=dist,
            p_cross=float(np.mean(np.isfinite(zs))),
            within_reach=bool(dist <= trend.reach["compute_x"] * 1.0001),
        )
        where = ""
        if hero_flops:
            out["below_hero"] = bool(c0 < hero_flops)
            out["p_below_hero"] = float(np.mean(zs < math.log(hero_flops)))
            where = " (below the hero's compute)" if c0 < hero_flops else " (above the hero's compute)"
        if out["p_cross"] < P_STATED:
            share = f"{100 * (1 - out['p_cross']):.0f}% of its curves do not cross up to C = {format_flops(limit)}"
            if out["p_cross"] >= P_POSSIBLE:
                out["status"] = "possible_beyond"
                out["message"] = (
                    f"a flip beyond the ladder is possible, not established: the trend crosses zero at "
                    f"C = {format_flops(c0)}{where}, {format_multiple(dist)} beyond {TOP}, but {share}; "
                    f"{now} ahead at {TOP}"
                )
            else:
                out["status"] = "none"
                out["message"] = (
                    f"no flip stated: the trend's point crosses zero at C = {format_flops(c0)}{where}, {format_multiple(dist)} "
                    f"beyond {TOP}, but {share}; {now} ahead at {TOP}"
                )
            return out
        reach = (
            "within the distance the rollout tested"
            if out["within_reach"]
            else f"beyond the {format_multiple(trend.reach['compute_x'])} the rollout showed the gap forecasts right"
        )
        out["status"] = "beyond_range"
        out["message"] = (
            f"no flip within the ladder; extrapolated, the trend crosses zero at C = {format_flops(c0)}{where}, "
            f"{format_multiple(dist)} beyond {TOP} ({reach}): {now} ahead below it, {then} above"
        )
        return out
    if inside:
        out.update(
            status="unresolved",
            message=(
                f"the trend crosses zero inside the ladder (C = {format_flops(math.exp(inside[0]))}) but no two rungs differ in "
                "sign beyond their noise: no crossover is stated"
            ),
        )
        return out
    lead = winner_of(float(point[-1]))
    out.update(
        status="none",
        message=(
            f"no crossover: no two rungs differ in sign beyond their noise and the trend "
            f"keeps {lead} ahead up to C = {format_flops(limit)}"
        ),
    )
    return out


def hero_call(trend: Trend, hero_flops: float, slope_at: SlopeFn | None) -> dict:
    """The gap at the hero (one number: the calibrated mixture's point), the winner, how sure, the multiplier."""
    p = trend.predict(hero_flops)
    g, lo, hi, d = p["point"], p["lo"], p["hi"], p["draws"]
    win = winner_of(g)
    p_win = float(np.mean(np.sign(d) == np.sign(g))) if g != 0 else 0.5
    excludes = bool(lo > 0 or hi < 0)
    if excludes and p["within_reach"]:
        call = "certain"
    elif p_win >= LIKELY:
        call = "likely"
    else:
        call = "undetermined"
    m, m_ci = multiplier(slope_at, hero_flops, np.concatenate([[g], d]))
    out = {
        "flops": hero_flops,
        "gap": g,
        "gap_ci90": [lo, hi],
        "gap_pct": 100.0 * g,
        "winner": win,
        "p_winner": p_win,
        "call": call,
        "interval_excludes_zero": excludes,
        "compute_x": p["compute_x"],
        "reach_compute_x": trend.reach["compute_x"],
        "within_reach": p["within_reach"],
        "by_form": p["by_form"],
        "compute_multiplier": m,
        "compute_multiplier_ci90": m_ci,
    }
    out["message"] = call_text(out)
    return out


def call_text(h: dict) -> str:
    lo, hi = h["gap_ci90"]
    text = (
        f"{h['winner']} wins at the hero ({h['call']}): ln L_untied - ln L_tied = {h['gap']:+.4f} "
        f"(90% [{lo:+.4f}, {hi:+.4f}]; P = {h['p_winner']:.2f})"
    )
    if h["call"] != "certain":
        if h["interval_excludes_zero"]:
            text += (
                f"; the interval excludes 0 but the hero is {format_multiple(h['compute_x'])} beyond {TOP} and "
                f"the rollout showed the gap forecasts right only up to {format_multiple(h['reach_compute_x'])}"
            )
        else:
            text += "; the 90% interval includes 0"
    if h.get("compute_multiplier") is not None:
        text += "; " + multiplier_text(h["compute_multiplier"], h.get("compute_multiplier_ci90"))
    return text


def multiplier_text(m: float, ci: list | None) -> str:
    band = ""
    if ci and ci[0] is None and ci[1] is None:
        band = " [unbounded]"  # as the report says it, not as two clamps in Python's e-notation
    elif ci:
        band = f" [{'<1e-6' if ci[0] is None else format(ci[0], '.3g')}, {'>1e6' if ci[1] is None else format(ci[1], '.3g')}]"
    return f"untied reaches tied's loss with {format_multiple(m)}{band} the compute"
