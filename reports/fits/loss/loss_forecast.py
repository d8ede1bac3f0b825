"""The loss forecast: every identifiable form fitted on the whole ladder, weighted by its rollout evidence,
with a 90% interval that combines parameter uncertainty (bootstrap from fresh starts), residual scatter, the
seed noise floor (replicates) and the forms' disagreement (a mixture of their draws), checked against the
rollout and widened by a stated factor where it covered less than it promised.

Weights: ``w_f ∝ 1 / rms_f^2`` (the rollout's distance-weighted RMS error of form f) over the forms whose RMS is
within 2x of the best (the rollout's interval score is reported beside it; weighing by it favoured sharp but
misspecified forms on a 6-size ladder); a form with no rollout forecasts gets weight only when no form has any (then every
identifiable form counts equally and the forecast says there is no rollout evidence).

Student-t factor: the forms' own intervals carry ``kappa = t_dof / z`` for few degrees of freedom
(:class:`~ladder.reports.fits.engine.LawFit`). Here they are checked against the rollout instead, which widens
them when they fall short: with both, nominal 90% intervals covered 95% of synthetic heroes (200 ladders,
tests/reports/fits/test_loss.py), with the check alone 92%. The factor stays where nothing checks them (a
ladder too short to backtest).

Calibration: on the rollout's mixture forecasts (each (prefix, run) forecast by the weighted forms), ``z_i =
|log actual - log forecast| / half-width`` on the side of the error. If the share with ``z <= 1`` falls short
of the nominal level by more than chance (a one-sided binomial test at ``backtest.SHORTFALL_P``: one miss in six rows
is what a calibrated interval does 47% of the time, and widening on it made 90% intervals cover 95-96% of
synthetic heroes), every interval half-width is multiplied by the conformal factor: the
``ceil((m + 1) level)``-th smallest ``z`` (never below 1; the interval is never narrowed).

Distance: a forecast's distance is the largest log multiple, in parameters, tokens or compute, by which it lies
beyond the runs it was fitted on (:func:`~ladder.reports.fits.loss.loss_rollout.log_distance`). The z check above
judges the intervals where the rollout looked; the hero lies farther. So the error that the rollout's rows made
*beyond* their (widened) intervals is read as a rate per unit of distance, ``r_i = max(0, |e_i| - factor h_i) /
d_i`` (rows at ``d_i >= log 2``: nearer rows say more about noise than about drift), and the hero's half-width
grows by ``r d`` with ``r`` the rows' conformal 90% quantile: the rollout's error-versus-distance trend,
extrapolated linearly in log distance, as a misestimated exponent makes it (a wrong exponent by ``delta`` errs
by ``delta log(C_hero / C_ladder)``). And the half-width is never below ``PUBLIC_RATE d``: the typical error per
unit of distance of this engine's forecasts on published ladders (benchmarks/public_ladders.py), so that a ladder
whose own rollout happens to look clean, or tested only short distances, still gets no interval narrower than
the engine's track record at that distance. A forecast beyond the farthest distance the rollout tested says so
(``beyond_tested``).

Reach: sorted by distance in each axis, the largest multiple up to which every mixture forecast stayed within 1%
(2%); a point beyond the 2% reach in any axis is ``beyond_reach``. The reach is never more than the rollout tested.

Lean: the side the rollout's forecasts near the target's distance erred to (:mod:`~ladder.reports.fits.loss.loss_lean`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.model.config import format_count
from ladder.reports.fits import progress
from ladder.reports.fits.backtest import (
    LEVEL,
    RELATIVE_RMS_CUT,
    calibrate,
    conformal,
    interval,
    mix,
    reach,
    rms_weights,
)
from ladder.reports.fits.engine import LawFit, fit
from ladder.reports.fits.loss.loss_forms import (
    FIT_SPAN,
    LOSS_FORMS,
    far_from_optimum_why,
    isoflop_design,
    near_optimum,
    top_budgets,
)
from ladder.reports.fits.loss.loss_lean import lean_near
from ladder.reports.fits.loss.loss_rollout import (
    ROLLOUT_BOOT,
    Rollout,
    RolloutRow,
    far_error,
    far_floor,
    log_distance,
    rollout,
)
from ladder.reports.fits.runs import Runs

HALF_FLOOR = 1e-3  # an interval is judged at least this wide in log loss (the fits' Huber delta): on noiseless
# data a zero-width interval made z ~ 1e10 and the widened hero interval overflowed
N_BOOT = 200
WIDEST = math.log(1e6)  # an interval's half-width is capped at a factor of 1e6, which says "unknown" already: a
# nonsense ladder (a loss of 1e-3 nats beside losses of 3) once widened so far that exp() overflowed
RATE_MIN_DISTANCE = math.log(2.0)  # rows nearer than 2x say more about noise than about drift
# The loss forecast's typical |log error| per unit of log distance on published ladders: the median over ladders of
# each ladder's median |log(actual / forecast)| / distance, forecasts >= 2x beyond their fit, as
# benchmarks/public_ladders.py prints it (`error_rate`; 2026-12-06: Porian et al. 2024's three isoFLOP ladders
# 0.0115, 0.0103, 0.0194; Beck et al. 2025's Llama 0.0139; Li et al. 2025 0.0043; Epoch's Chinchilla 0.0025; median
# 0.0109; it was 0.0075, half what its comment derived). A 20x forecast (distance 3.0) gets at least +-3.3%.
PUBLIC_RATE = 0.011


def run_noise(n_runs: int, n_boot: int, seed: int) -> np.ndarray:
    """The bootstrap's standard normals, one column per run of the data: each form takes the columns of the
    runs it is fitted on, so that replicate ``b`` of every form sees the same redrawn runs."""
    return np.random.default_rng(seed).standard_normal((n_boot, n_runs))


SHORT_EVIDENCE = 0.5  # a form's rollout must reach this share of the farthest tested distance to be weighted
REACH_TOLS = (1.0, 2.0)


@dataclass
class PointForecast:
    params: float
    tokens: float
    loss: float
    lo: float
    hi: float
    by_form: dict[str, dict]
    params_x: float  # distance from the ladder's largest run
    compute_x: float
    beyond_reach: bool
    note: str = ""
    tokens_x: float = 1.0
    distance: dict = field(default_factory=dict)  # how far, what the rollout tested there, how much it widened

    @property
    def half_width_pct(self) -> float:
        return 100.0 * (self.hi - self.lo) / 2.0 / self.loss

    @property
    def beyond_tested(self) -> bool:
        return bool(self.distance.get("beyond_tested"))

    def to_dict(self) -> dict:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "compute_6nd": 6.0 * self.params * self.tokens,
            "loss": self.loss,
            "lo": self.lo,
            "hi": self.hi,
            "level": LEVEL,
            "half_width_pct": self.half_width_pct,
            "by_form": self.by_form,
            "params_x": self.params_x,
            "tokens_x": self.tokens_x,
            "compute_x": self.compute_x,
            "beyond_reach": self.beyond_reach,
            "beyond_tested": self.beyond_tested,
            "distance": self.distance,
            "note": self.note,
        }


@dataclass
class NoForecast:
    """A point no fitted form can forecast, and why."""

    params: float
    tokens: float
    reason: str
    loss = lo = hi = None
    by_form: dict = field(default_factory=dict)
    params_x = compute_x = tokens_x = None
    beyond_reach = beyond_tested = False
    half_width_pct = None
    distance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "compute_6nd": 6.0 * self.params * self.tokens,
            "loss": None,
            "lo": None,
            "hi": None,
            "level": LEVEL,
            "half_width_pct": None,
            "by_form": {},
            "params_x": None,
            "tokens_x": None,
            "compute_x": None,
            "beyond_reach": False,
            "beyond_tested": False,
            "distance": {},
            "note": self.reason,
        }


@dataclass
class Forecast:
    data: Runs
    target_ratio: float
    laws: dict[str, LawFit]
    skipped: dict[str, str]
    rollout: Rollout
    weights: dict[str, float]
    why: str
    mixture_rows: list[dict]
    coverage: float | None
    factor: float
    reach: dict[str, dict]
    lean: dict = field(default_factory=dict)
    drift: dict = field(default_factory=dict)
    far_error: dict | None = None
    left_out: list[str] = field(default_factory=list)  # runs far from their isoFLOP budget's optimum, not fitted
    isoflop: bool = False  # whether the runs are an isoFLOP design (forms.isoflop_design): left_out's words
    below_span: list[str] = field(default_factory=list)  # runs below the top decade of isoFLOP budgets, not fitted
    fitted: Runs | None = None  # the runs the laws were fitted on (data less below_span)
    points: list[PointForecast] = field(default_factory=list)

    @property
    def primary(self) -> str | None:
        return max(self.weights, key=self.weights.get) if self.weights else None

    @property
    def weighted_by_rollout(self) -> bool:
        """Whether the forms were weighted by their rollout errors (some fitted form was scored on a rollout
        forecast); else every identifiable form counted equally (:func:`_weights`)."""
        return bool(rollout_scored(self.rollout, self.laws))

    def predict(self, params, tokens, *, seed: int = 0) -> PointForecast:
        """The calibrated forecast of a new run at (params, tokens)."""
        return _point(self, float(params), float(tokens), seed)

    def to_dict(self) -> dict:
        return {
            "target_ratio": self.target_ratio,
            "n_runs": len(self.data),
            "seed_sigma": self.data.seed_sigma,
            "forms": {
                k: {
                    "title": LOSS_FORMS[k].title,
                    "formula": LOSS_FORMS[k].formula,
                    **law.to_dict(),
                    "weight": self.weights.get(k, 0.0),
                    "rollout": self.rollout.scores.get(k),
                    "residuals": _residual_rows(law),
                }
                for k, law in self.laws.items()
            },
            "skipped": self.skipped,
            "weights": self.weights,
            "selection": self.why,
            "left_out": {
                "runs": self.left_out,
                "why": far_from_optimum_why(self.isoflop) if self.left_out else None,
                "below_span": {
                    "runs": self.below_span,
                    "why": (
                        f"at isoFLOP budgets more than {FIT_SPAN:g}x below the largest: the laws are fitted on the "
                        "budgets nearest the hero (the rollout's prefixes likewise)"
                    )
                    if self.below_span
                    else None,
                },
            },
            "rollout": {
                "rows": [r.to_dict() for r in self.rollout.rows],
                "prefixes": self.rollout.prefixes,
                "scores": self.rollout.scores,
                "mixture": self.mixture_rows,
            },
            "calibration": {
                "level": LEVEL,
                "coverage": self.coverage,
                "factor": self.factor,
                "n": len(self.mixture_rows),
                "n_judged": sum(r["at_target_ratio"] for r in self.mixture_rows) or len(self.mixture_rows),
                "drift": self.drift,
                "far_error": self.far_error,
            },
            "lean": self.lean,
            "reach": self.reach,
            "points": [p.to_dict() for p in self.points],
        }


def _residual_rows(law: LawFit) -> list[dict]:
    """Per run of the fit: ``pct`` = (observed - fitted) / fitted in percent."""
    pct = 100.0 * (np.exp(-law.residuals) - 1.0)
    ids = law.labels or [str(i) for i in range(law.n)]
    return [{"run": i, "pct": float(v)} for i, v in zip(ids, pct)]


def rollout_scored(ro: Rollout, laws: dict[str, LawFit]) -> dict[str, dict]:
    """The rollout's scores of the fitted forms that it scored on at least one forecast."""
    return {k: s for k, s in ro.scores.items() if k in laws and s.get("n", 0) > 0}


def _weights(ro: Rollout, laws: dict[str, LawFit]) -> tuple[dict[str, float], str]:
    scored = rollout_scored(ro, laws)
    if not scored:
        w = {k: 1.0 / len(laws) for k in laws}
        return w, (
            "no rollout forecasts (the ladder has too few sizes or budgets to backtest), so every identifiable form "
            f"counts equally: {', '.join(laws)}"
        )
    # a form whose own rollout forecasts never reached half the distance the best-tested form reached (the ratio
    # form tested on the few runs at the hero's ratio) is judged on evidence too short for the hero: not weighted
    far = max(s.get("tested_distance", 0.0) for s in scored.values())
    short = [k for k, s in scored.items() if s.get("tested_distance", 0.0) < SHORT_EVIDENCE * far]
    scored = {k: s for k, s in scored.items() if k not in short}
    key = "rms_pct"
    w, dropped = rms_weights({k: s[key] for k, s in scored.items()}, 1e-3)
    parts = [f"{k} {s[key]:.2f}%" for k, s in sorted(scored.items(), key=lambda kv: kv[1][key])]
    why = f"weighted by rollout error (distance-weighted RMS: {', '.join(parts)}); weights " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(w.items(), key=lambda kv: -kv[1])
    )
    if dropped:
        why += f"; left out (more than {RELATIVE_RMS_CUT:g}x the best error): {', '.join(dropped)}"
    if short:
        why += (
            f"; left out (its rollout reached less than {SHORT_EVIDENCE:g} of the farthest distance tested): "
            + ", ".join(short)
        )
    return w, why


def _mixture_rows(ro: Rollout, weights: dict[str, float]) -> list[dict]:
    rng = np.random.default_rng(0)
    groups: dict[tuple, list[RolloutRow]] = {}
    for r in ro.rows:
        groups.setdefault((r.prefix, r.run_id), []).append(r)
    out = []
    current, held = None, []
    for (prefix, run_id), rs in groups.items():
        # the weighted forms this prefix fitted, mixed as the hero's forecast mixes the weighted forms that apply
        # to it: what the procedure would have forecast from those runs (requiring every weighted form left only
        # the last prefix on a 6-size ladder, where the bounded form is fitted from 5 sizes on)
        have = {r.form: r for r in rs if weights.get(r.form, 0) > 0}
        if not have:
            continue
        if prefix != current:  # a prefix's rows come together: its draws are read, then dropped (RowDraws)
            _release(held)
            current, held = prefix, []
        held += [r.source for r in have.values() if r.source is not None]
        mixed = mix(
            {k: r.draws for k, r in have.items()}, {k: math.log(r.point) for k, r in have.items()}, weights, rng
        )
        point, pooled = mixed
        lo, hi = interval(pooled)
        r0 = rs[0]
        actual = math.log(r0.actual)
        err = actual - point
        half = (hi - point) if err > 0 else (point - lo)
        out.append(
            {
                "prefix": prefix,
                "run_id": run_id,
                "params": r0.params,
                "tokens": r0.tokens,
                "actual": r0.actual,
                "forecast": math.exp(point),
                "interval": [math.exp(lo), math.exp(hi)],
                "err_pct": 100.0 * (math.exp(point) - r0.actual) / r0.actual,
                "inside": bool(lo <= actual <= hi),
                "z": float(abs(err) / max(half, HALF_FLOOR)),
                "params_x": r0.dist_params,
                "compute_x": r0.dist_compute,
                "tokens_x": r0.dist_tokens,
                "distance": r0.distance,
                "half_log": float(half),
                "at_target_ratio": r0.at_target_ratio,
            }
        )
    _release(held)
    return out


def _release(sources) -> None:
    for source in sources:
        source.release()


def _calibrate(rows: list[dict]) -> tuple[float | None, float]:
    judged = [r for r in rows if r["at_target_ratio"]] or rows  # to_dict's n_judged counts these
    return calibrate([r["z"] for r in judged])


def _drift(rows: list[dict], factor: float) -> dict:
    """The rollout's error beyond its (widened) intervals per unit of log distance (see the module's doc)."""
    far = [r for r in rows if r["distance"] >= RATE_MIN_DISTANCE]
    rates = [max(0.0, abs(math.log(r["actual"] / r["forecast"])) - factor * r["half_log"]) / r["distance"] for r in far]
    own = conformal(rates) if len(rates) >= 3 else None
    return {
        "n": len(rates),
        "rate": own or 0.0,
        "public_rate": PUBLIC_RATE,
        "tested_distance": max((r["distance"] for r in rows), default=0.0),
    }


AXES = ("params_x", "tokens_x", "compute_x")
SAME_X = 1.0001  # a multiple within 0.01% of the reach or the tested distance is at it, not beyond (rounding)


def _reach(rows: list[dict]) -> dict[str, dict]:
    out = {}
    for tol in REACH_TOLS:
        key = f"{tol:g}%"
        entry = {}
        for dist in AXES:
            entry[dist] = reach(rows, dist, lambda r: not abs(r["err_pct"]) > tol)
        out[key] = entry
    out["tested"] = {ax: max([1.0] + [r[ax] for r in rows]) for ax in AXES}
    out["tested"]["distance_x"] = math.exp(max((r["distance"] for r in rows), default=0.0))
    return out


def _multiples(data: Runs, params: float, tokens: float) -> tuple[float, float, float]:
    """A point's multiples of the ladder's largest params, tokens and compute (6ND)."""
    params, tokens = float(params), float(tokens)  # a table's int64 counts overflowed 6ND in numpy's integers
    return (
        params / float(data.params.max()),
        tokens / float(data.tokens.max()),
        6 * params * tokens / float(data.compute.max()),
    )


def _point(fc: Forecast, params: float, tokens: float, seed: int) -> PointForecast:
    rng = np.random.default_rng(seed)
    draws, points, by_form = {}, {}, {}
    for k, law in fc.laws.items():
        form = LOSS_FORMS[k]
        if not form.applies(params, tokens, fc.fitted or fc.data, fc.target_ratio):
            by_form[k] = {"applies": False, "weight": fc.weights.get(k, 0.0)}
            continue
        # the rollout checks these intervals (and widens them when short): the Student-t factor only when
        # nothing checked them (too few sizes to backtest)
        p, d = law.draws(
            form.raw(params, tokens), sigma_floor=fc.data.seed_sigma, seed=seed, t_factor=fc.coverage is None
        )
        draws[k], points[k] = d[:, 0], float(p[0])
        lo, hi = interval(d[:, 0])
        by_form[k] = {
            "applies": True,
            "loss": math.exp(p[0]),
            "lo": math.exp(lo),
            "hi": math.exp(hi),
            "weight": fc.weights.get(k, 0.0),
        }
    weights = {k: v for k, v in fc.weights.items() if k in draws}
    note = ""
    if not weights:  # the weighted forms do not apply here (e.g. the ratio form at another ratio)
        weights, _ = _weights(fc.rollout, {k: fc.laws[k] for k in draws}) if draws else ({}, "")
        note = (
            "the rollout-weighted forms do not apply at this point; the applicable forms are weighted by their "
            "own rollout errors"
        )
    mixed = mix(draws, points, weights, rng)
    if mixed is None:
        scopes = "; ".join(LOSS_FORMS[k].scope(fc.fitted or fc.data, fc.target_ratio) for k in fc.laws)
        skipped = "; ".join(f"{k} not fitted: {why}" for k, why in fc.skipped.items())
        raise ValueError(
            f"no fitted law form can forecast {format_count(params)} params x {format_count(tokens)} tokens "
            f"({format_count(tokens / params)} tokens/param): {scopes}" + (f"; {skipped}" if skipped else "")
        )
    point, pooled = mixed
    lo, hi = interval(pooled)
    px, tx, cx = _multiples(fc.data, params, tokens)
    d = log_distance(px, tx, cx)
    rate = fc.drift.get("rate", 0.0) or 0.0
    public, far = min(PUBLIC_RATE * d, WIDEST), min(far_floor(fc.far_error, d), WIDEST)
    floor = max(public, far)
    drift = min(rate * d, WIDEST)
    lo = point - min(max(fc.factor * (point - lo) + drift, floor), WIDEST)
    hi = point + min(max(fc.factor * (hi - point) + drift, floor), WIDEST)
    reach2 = fc.reach.get("2%", {})
    tested = fc.reach.get("tested", {})
    beyond = any(x > reach2.get(ax, 1.0) * SAME_X for ax, x in zip(AXES, (px, tx, cx)))
    beyond_axes = [ax[:-2] for ax, x in zip(AXES, (px, tx, cx)) if x > tested.get(ax, 1.0) * SAME_X]
    tested_d = fc.drift.get("tested_distance", 0.0) or 0.0
    dist = {
        "params_x": px,
        "tokens_x": tx,
        "compute_x": cx,
        "distance_x": math.exp(d),
        "tested_distance_x": math.exp(tested_d),
        "tested": tested,
        # the farthest axis within the same tolerance as each axis: a ladder's own top run, typed from a table
        # (32.0000006x), was "beyond what the rollout tested" at "32x, the rollout tested up to 32x"
        "beyond_tested": bool(d > tested_d + math.log(SAME_X) or beyond_axes),
        "beyond_tested_axes": beyond_axes,
        "rollout_error": fc.far_error,
        "lean": lean_near(fc.mixture_rows, d),
        "drift_rate": rate,
        "drift_widening_pct": 100.0 * math.expm1(drift),
        # in the measure of half_width_pct, (hi - lo) / 2 / loss, which an interval at the floor on both sides has:
        # expm1 said "at least 4.8%" beside an interval printed as ±4.67%
        "public_floor_pct": 100.0 * math.sinh(public),
        "far_floor_pct": 100.0 * math.sinh(far),
    }
    return PointForecast(
        params,
        tokens,
        math.exp(point),
        math.exp(lo),
        math.exp(hi),
        by_form,
        px,
        cx,
        beyond,
        note,
        tokens_x=tx,
        distance=dist,
    )


def forecast_loss(
    data: Runs,
    target_params: float,
    target_tokens: float,
    *,
    predict=(),
    seed: int = 0,
    n_boot: int = N_BOOT,
    forms=tuple(LOSS_FORMS),
) -> Forecast:
    """Fit, backtest, weigh and calibrate the loss forms on ``data``; forecast the target (the hero) and any
    extra ``predict`` points ((params, tokens) pairs). The first of ``points`` is the target."""
    target_ratio = target_tokens / target_params
    near, isoflop = near_optimum(data), isoflop_design(data)
    left_out = [r for r, k in zip(data.labels, near) if not k]
    if left_out:  # runs far from their isoFLOP budget's optimum: see forms.near_optimum
        data = data.subset(near)
    # the laws are fitted on the top decade of an isoFLOP ladder's budgets (forms.top_budgets); the rollout sees
    # every run, and fits each of its prefixes the same way
    top = top_budgets(data)
    below_span = [r for r, k in zip(data.labels, top) if not k]
    fitted = data.subset(top)
    laws, skipped = {}, {}
    noise = run_noise(len(fitted.loss), n_boot, seed)
    for i, k in enumerate(forms, start=1):
        form = LOSS_FORMS[k]
        mask = form.fitted_on(fitted, target_ratio)
        sub = fitted.subset(mask)
        why = form.unidentifiable(sub)
        if why:
            if len(sub) < len(fitted):  # say which runs it counted: the header counts them all
                why += f"; it is fitted on {len(sub)} of the {len(fitted)} runs, {form.runs_words(target_ratio)}"
            skipped[k] = why
            continue
        progress.step(f"law form {k} ({i}/{len(forms)}) on {len(sub):,} runs, {n_boot:,} bootstrap refits")
        laws[k] = fit(
            form.engine,
            form.raw(sub.params, sub.tokens),
            np.log(sub.loss),
            n_boot=n_boot,
            seed=seed,
            labels=sub.labels,
            noise=noise[:, np.asarray(mask, dtype=bool)],
        )
    if not laws:
        raise ValueError(
            "no loss form is identifiable on these runs: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        )
    ro = rollout(data, target_ratio, tuple(laws), seed=seed, n_boot=min(ROLLOUT_BOOT, n_boot))
    weights, why = _weights(ro, laws)
    progress.step(f"weighing the forms by {len(ro.rows):,} rollout forecasts")
    rows = _mixture_rows(ro, weights)
    coverage, factor = _calibrate(rows)
    fc = Forecast(
        data=data,
        target_ratio=target_ratio,
        laws=laws,
        skipped=skipped,
        rollout=ro,
        weights=weights,
        why=why,
        mixture_rows=rows,
        coverage=coverage,
        factor=factor,
        reach=_reach(rows),
        lean=lean_near(rows, log_distance(*_multiples(data, target_params, target_tokens))),
        drift=_drift(rows, factor),
        far_error=far_error(rows),
        left_out=left_out,
        isoflop=isoflop,
        below_span=below_span,
        fitted=fitted,
    )
    for p, t in [(target_params, target_tokens), *predict]:
        try:
            fc.points.append(fc.predict(p, t, seed=seed))
        except ValueError as exc:
            fc.points.append(NoForecast(p, t, str(exc)))
    return fc
