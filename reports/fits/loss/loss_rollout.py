"""Rollout ("grow the ladder") backtests: for each prefix of the ladder (the smallest 3, 4, ... of K sizes, or the
cheapest compute levels, see below), fit every identifiable form on those runs alone and forecast every run
beyond, with the same intervals the hero gets. The rows say how wrong each form was at each extrapolation
distance; they choose the forms, demonstrate the ladder's reach and calibrate the intervals
(:mod:`ladder.reports.fits.loss.loss_forecast`).

Prefixes by size or by compute (:func:`prefix_axis`): the hero lies beyond the ladder in compute and tokens as
well as in parameters, and the rollout must test that. A ladder whose sizes each span their own compute range
(one ratio, or a few budgets per size) is grown by size: a prefix holds every budget of its sizes and forecasts
larger models at larger budgets. On an isoFLOP ladder (several sizes per budget) a prefix of sizes would
forecast larger models at budgets it had already fitted (10x the parameters at ~1x the compute) and vouch for a
hero 20x beyond the top budget that it never tested; there the runs are grouped into compute levels (``6ND``
within 10%) and grown by budget.

Distances: ``params x`` = the run's parameters over the largest fitted run's, ``tokens x`` and ``compute x``
(``6ND``) likewise; the *distance* of a forecast is the largest of their logs (:func:`log_distance`). A form is
scored by the root of the mean squared log error over its forecasts, each weighted by that distance, so that far
forecasts (what the hero needs) count most. Forms are compared on the forecasts they all made (the same prefixes
and runs) when there are at least two of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.reports.fits import progress
from ladder.reports.fits.backtest import NEAR_WEIGHT, interval, weighted_rms
from ladder.reports.fits.engine import fit
from ladder.reports.fits.loss.loss_forms import (
    LOSS_FORMS,
    MIN_SIZES,
    at_ratio,
    compute_levels,
    sizes_per_group,
    top_budgets,
)
from ladder.reports.fits.runs import Runs

MAX_PREFIXES = 8
MIN_COMMON = 2  # forms are compared on the forecasts they share when there are at least this many
ROLLOUT_BOOT = 100
ROW_DRAWS = 800


@dataclass(eq=False)
class RowDraws:
    """A prefix and form's forecast draws at every held-out run, ``(ROW_DRAWS, runs)``: drawn again when asked
    (the same seeded draws, so the same numbers) and dropped by :meth:`release`. Kept with the rows they took ~90
    KB per run of the ladder (9 GB at 10^5 runs), though only the weighted forms' are read, once, by the mixture."""

    law: object  # the prefix's fitted LawFit
    raw: np.ndarray
    sigma_floor: float
    seed: int
    _draws: np.ndarray | None = field(default=None, repr=False)

    def get(self) -> np.ndarray:
        if self._draws is None:
            self._draws = self.law.draws(
                self.raw, n_draws=ROW_DRAWS, sigma_floor=self.sigma_floor, seed=self.seed, t_factor=False
            )[1]
        return self._draws

    def release(self) -> None:
        self._draws = None


@dataclass
class RolloutRow:
    prefix: int  # sizes fitted (the smallest `prefix` sizes)
    form: str
    run_id: str
    params: float
    tokens: float
    actual: float
    point: float  # forecast, loss units
    lo: float
    hi: float
    dist_params: float
    dist_compute: float
    at_target_ratio: bool
    dist_tokens: float = 1.0
    source: RowDraws | None = field(repr=False, default=None)  # the log-loss draws of the forecast ...
    column: int = 0  # ... are this column of its prefix and form's draws

    @property
    def draws(self) -> np.ndarray | None:
        return None if self.source is None else self.source.get()[:, self.column]

    @property
    def err_pct(self) -> float:
        return 100.0 * (self.point - self.actual) / self.actual

    @property
    def inside(self) -> bool:
        return self.lo <= self.actual <= self.hi

    def to_dict(self) -> dict:
        return {
            "prefix": self.prefix,
            "form": self.form,
            "run_id": self.run_id,
            "params": self.params,
            "tokens": self.tokens,
            "actual": self.actual,
            "forecast": self.point,
            "interval": [self.lo, self.hi],
            "err_pct": self.err_pct,
            "inside": self.inside,
            "params_x": self.dist_params,
            "compute_x": self.dist_compute,
            "tokens_x": self.dist_tokens,
            "distance": self.distance,
            "at_target_ratio": self.at_target_ratio,
        }

    @property
    def distance(self) -> float:
        return log_distance(self.dist_params, self.dist_tokens, self.dist_compute)


@dataclass
class Rollout:
    rows: list[RolloutRow]
    prefixes: list[dict]  # per prefix: sizes used, largest params, forms fitted, forms skipped with reasons
    scores: dict[str, dict] = field(default_factory=dict)

    def rows_of(self, form: str) -> list[RolloutRow]:
        return [r for r in self.rows if r.form == form]


def log_distance(params_x: float, tokens_x: float, compute_x: float) -> float:
    """How far a point lies beyond the runs fitted, in any axis: the largest of the logs of its parameter,
    token and compute multiples (0 inside the ladder's span)."""
    return max(0.0, math.log(max(params_x, 1e-300)), math.log(max(tokens_x, 1e-300)), math.log(max(compute_x, 1e-300)))


def prefix_axis(data: Runs) -> str:
    """``compute`` when several model sizes share a compute level (an isoFLOP design: a prefix of sizes would
    forecast larger models at budgets it has fitted), else ``size`` (each level one size, its budgets spread
    above it: a prefix of sizes holds every budget of its sizes and its forecasts reach beyond in both)."""
    return "compute" if len(data) and sizes_per_group(data, compute_levels(data)) >= 2 else "size"


def prefix_groups(data: Runs) -> np.ndarray:
    """The label each run's prefix membership is judged by: its compute level or its size (see
    :func:`prefix_axis`); a prefix is every run whose label is below the first held-out one."""
    return compute_levels(data) if prefix_axis(data) == "compute" else data.sizes


def prefix_levels(data: Runs) -> list[int]:
    """The first held-out group of each prefix: from the first prefix holding >= MIN_SIZES sizes and >= 2
    groups; at most MAX_PREFIXES of them, spread, always keeping the last (the top group held out)."""
    levels, sizes = prefix_groups(data), data.sizes
    n = int(levels.max()) + 1 if len(levels) else 0
    ks = [k for k in range(2, n) if len(np.unique(sizes[levels < k])) >= MIN_SIZES]
    if len(ks) > MAX_PREFIXES:
        pick = np.unique(np.round(np.linspace(0, len(ks) - 1, MAX_PREFIXES)).astype(int))
        ks = [ks[i] for i in pick]
    return ks


def rollout(
    data: Runs, target_ratio: float, forms=tuple(LOSS_FORMS), *, n_boot: int = ROLLOUT_BOOT, seed: int = 0
) -> Rollout:
    levels = prefix_groups(data)
    axis = prefix_axis(data)
    rows: list[RolloutRow] = []
    prefixes = []
    ks = prefix_levels(data)
    for i, k in enumerate(ks, start=1):
        train_mask = levels < k
        train = data.subset(train_mask)
        train = train.subset(top_budgets(train))  # fitted as the final law is (forms.top_budgets)
        test_idx = np.flatnonzero(~train_mask)
        max_n, max_c, max_d = train.params.max(), train.compute.max(), train.tokens.max()
        progress.step(f"rollout prefix {i}/{len(ks)}: fitting {len(train):,} runs, forecasting {len(test_idx):,}")
        info = {
            "prefix": k,
            "by": axis,
            "sizes": int(len(np.unique(train.sizes))),
            "runs": int(len(train)),
            "largest_params": float(max_n),
            "largest_compute": float(max_c),
            "largest_tokens": float(max_d),
            "fitted": [],
            "skipped": {},
        }
        noise = np.random.default_rng(seed + 1000 * k).standard_normal((n_boot, len(train.loss)))  # paired forms
        for key in forms:
            form = LOSS_FORMS[key]
            mask = np.asarray(form.fitted_on(train, target_ratio), dtype=bool)
            sub = train.subset(mask)
            why = form.unidentifiable(sub)
            if why:
                info["skipped"][key] = why
                continue
            law = fit(
                form.engine,
                form.raw(sub.params, sub.tokens),
                np.log(sub.loss),
                n_boot=n_boot,
                seed=seed + 1000 * k,
                noise=noise[:, mask],
            )
            idx = [i for i in test_idx if form.applies(data.params[i], data.tokens[i], sub, target_ratio)]
            if not idx:
                continue
            info["fitted"].append(key)
            # drawn at every held-out run, whether the form applies there or not, so that a run's draws are
            # paired across forms (the same replicate and new-run noise column)
            raw = form.raw(data.params[test_idx], data.tokens[test_idx])
            source = RowDraws(law, raw, data.seed_sigma, seed + k)
            point, draws = law.draws(raw, n_draws=ROW_DRAWS, sigma_floor=data.seed_sigma, seed=seed + k, t_factor=False)
            lo, hi = interval(draws, axis=0)
            del draws  # drawn again, identically, where the mixture reads them (RowDraws)
            ratio_ok = at_ratio(data, target_ratio)
            column = {int(i): j for j, i in enumerate(test_idx)}
            for i in idx:
                j = column[int(i)]
                rows.append(
                    RolloutRow(
                        prefix=k,
                        form=key,
                        run_id=data.labels[i],
                        params=float(data.params[i]),
                        tokens=float(data.tokens[i]),
                        actual=float(data.loss[i]),
                        point=float(np.exp(point[j])),
                        lo=float(np.exp(lo[j])),
                        hi=float(np.exp(hi[j])),
                        dist_params=float(data.params[i] / max_n),
                        dist_compute=float(data.compute[i] / max_c),
                        at_target_ratio=bool(ratio_ok[i]),
                        source=source,
                        column=j,
                        dist_tokens=float(data.tokens[i] / max_d),
                    )
                )
        prefixes.append(info)
    out = Rollout(rows=rows, prefixes=prefixes)
    out.scores = score(out, forms)
    return out


def _distance_weights(rows: list[RolloutRow]) -> np.ndarray:
    w = np.array([r.distance for r in rows])
    return np.where(w > 0, w, NEAR_WEIGHT)


def _weighted_rms(rows: list[RolloutRow]) -> float:
    return 100.0 * weighted_rms([np.log(r.point / r.actual) for r in rows], [r.distance for r in rows])


def _weighted_interval_score(rows: list[RolloutRow], alpha: float = 0.10) -> float:
    """Gneiting and Raftery's interval score of the central ``1 - alpha`` intervals in log space, in percent,
    weighted by distance like the RMS: the width plus ``2 / alpha`` times how far the actual fell outside. A
    proper scoring rule: a form scores best by intervals both calibrated and sharp, not by wide ones."""
    lo = np.log([r.lo for r in rows])
    hi = np.log([r.hi for r in rows])
    y = np.log([r.actual for r in rows])
    s = (hi - lo) + (2 / alpha) * (np.maximum(0, lo - y) + np.maximum(0, y - hi))
    w = _distance_weights(rows)
    return float(100.0 * (w * s).sum() / w.sum())


def score(ro: Rollout, forms) -> dict[str, dict]:
    """Per form: the rows it is judged on (the common set of (prefix, run) every scored form forecast, when
    that has >= MIN_COMMON rows; the rows at the target's ratio when there are some), its distance-weighted RMS error in
    percent, its interval score (:func:`_weighted_interval_score`), its mean absolute error, interval coverage and the farthest distance it was tested at."""
    by_form = {f: [r for r in ro.rows if r.form == f] for f in forms}
    by_form = {f: rs for f, rs in by_form.items() if rs}
    if not by_form:
        return {}

    def judged(rs):
        target = [r for r in rs if r.at_target_ratio]
        return target or rs

    keys = [{(r.prefix, r.run_id) for r in judged(rs)} for rs in by_form.values()]
    common = set.intersection(*keys) if keys else set()
    out = {}
    for f, rs in by_form.items():
        use = [r for r in judged(rs) if (r.prefix, r.run_id) in common] if len(common) >= MIN_COMMON else judged(rs)
        out[f] = {
            "n": len(use),
            "common": len(common) >= MIN_COMMON,
            "rms_pct": _weighted_rms(use),
            "interval_score_pct": _weighted_interval_score(use),
            "mae_pct": float(np.mean([abs(r.err_pct) for r in use])),
            "coverage": float(np.mean([r.inside for r in use])),
            "max_params_x": float(max(r.dist_params for r in use)),
            "max_compute_x": float(max(r.dist_compute for r in use)),
            "max_tokens_x": float(max(r.dist_tokens for r in use)),
            "n_own": len(rs),
            "tested_distance": float(max(r.distance for r in rs)),
        }
    return out


def far_error(rows: list[dict]) -> dict | None:
    """The rollout's error at the farthest distances it tested: the rows in the top third of its distances."""
    if not rows:
        return None
    top = max(r["distance"] for r in rows)
    far = [r for r in rows if r["distance"] >= top * 2 / 3]
    e = np.array([r["err_pct"] for r in far])
    return {
        "n": len(far),
        "min_distance_x": float(math.exp(min(r["distance"] for r in far))),
        "max_distance_x": float(math.exp(top)),
        "median_abs_err_pct": float(np.median(np.abs(e))),
        "worst_abs_err_pct": float(np.max(np.abs(e))),
        "coverage": float(np.mean([r["inside"] for r in far])),
    }


def far_floor(far: dict | None, d: float) -> float:
    """The least half-width (log loss) of a forecast beyond the farthest distance the rollout tested: its farthest
    forecasts' median |error|, the nearest evidence of what such a distance costs (Porian et al.'s top run got
    +-3.9% at 32x beyond forecasts at 8-16x that had erred by 4.1%). Within the tested distances the calibration on
    the rollout's rows stands: there the farthest rows come from the smallest prefixes (two budgets of an isoFLOP
    ladder erred 17-24%), and as a floor they quadrupled intervals whose forecasts erred 4%."""
    if not far or d <= math.log(far["max_distance_x"]) + 1e-4:  # within 0.01%, as beyond_tested judges (SAME_X)
        return 0.0
    return math.log1p(far["median_abs_err_pct"] / 100)
