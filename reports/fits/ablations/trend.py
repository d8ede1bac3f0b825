"""The trend of an ablation's effect across scale, chosen and weighted by rollout backtests, as the loss laws
are (:mod:`ladder.reports.fits.loss.loss_forecast`).

An *effect* is a log-space quantity measured at each rung against the rung's compute (the tie gap
``log L_untied - log L_tied``, the log of the best aspect ratio, the log of a 2x penalty). Candidate trend forms
(:class:`EngineTrend`, or any :class:`TrendForm`) are fitted by the one engine on every rung, and:

- rollout: rungs within 10% of each other's compute share a *level*; for each prefix of the smallest k levels
  (k = 1, 2, ..., K-1; at most 6 of them, spread, the last always kept), every form identifiable there is fitted on those rungs alone and forecasts every larger
  rung, with the same draws the hero gets (bootstrap spread + residual scatter or the known point noise);
- weights: ``w_f ∝ 1 / max(rms_f, floor)^2`` over the forms whose RMS is within 2x of the best
  (:func:`~ladder.reports.fits.backtest.rms_weights`); ``rms_f`` is the root mean squared forecast error weighted
  by ``ln(compute x)`` (far forecasts count most; :func:`~ladder.reports.fits.backtest.weighted_rms`), on the forecasts
  every scored form made (a form with more parameters starts at a larger prefix, so the forms are compared on
  the same forecasts, not one at short distances against another at long ones); ``floor`` is the noise of one
  measured effect (errors below it say nothing); without rollout forecasts every identifiable form counts
  equally, and it says so;
- mixture: the weighted forms' draws mixed by :func:`~ladder.reports.fits.backtest.mix`. The engine's forms
  are fitted on the same rungs with the same seed (so the same bootstrap normals) and drawn with one seed (the
  same replicate picks and new-run normals): their draws are paired, and only their disagreement beyond noise is
  added. A form fitted on other data (the variants' pair law, :mod:`.variant_laws`) has replicates of its own:
  a mixture that weighs it pools the forms' draws instead (each draw one form's own, the safe side; see
  :func:`~ladder.reports.fits.backtest.mix`);
- calibration: on the rollout forecasts of the weighted mixture, ``z = |error| / half-width`` on the error's
  side; when the share with ``z <= 1`` falls short of 90% by more than chance (the one-sided binomial test of
  :func:`~ladder.reports.fits.backtest.calibrate`), every half-width is multiplied by the conformal factor
  (the ``ceil((m + 1) 0.9)``-th smallest z; never below 1);
- reach: sorted by compute distance, the largest distance up to which every mixture forecast's calibrated
  90% interval covered the measured effect (1 when the first missed or there were none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ladder.reports.fits.ablations.trend_forms import EffectData, EngineFitted, Fitted, TrendForm
from ladder.reports.fits.backtest import (
    LEVEL,
    RELATIVE_RMS_CUT,
    calibrate,
    interval,
    mix,
    reach,
    rms_weights,
    side_z,
    weighted_rms,
)

MIN_COMMON = 1  # forms are compared on the forecasts they all made whenever there is one
N_BOOT = 200
ROLLOUT_BOOT = 100
MAX_PREFIXES = 6
N_DRAWS = 4000
ROW_DRAWS = 800


@dataclass
class TrendRow:
    prefix: int
    form: str
    label: str
    compute: float
    actual: float
    point: float
    lo: float
    hi: float
    compute_x: float
    draws: np.ndarray = field(repr=False, default=None)

    def to_dict(self) -> dict:
        return {
            "prefix": self.prefix,
            "form": self.form,
            "rung": self.label,
            "compute": self.compute,
            "actual": self.actual,
            "forecast": self.point,
            "interval": [self.lo, self.hi],
            "error": self.point - self.actual,
            "inside": bool(self.lo <= self.actual <= self.hi),
            "compute_x": self.compute_x,
        }


def _fit_all(data: EffectData, forms: Sequence[TrendForm], n_boot: int, seed: int):
    fits, skipped = {}, {}
    for f in forms:
        why = f.unidentifiable(data)
        if why:
            skipped[f.key] = why
        else:
            fits[f.key] = f.fit(data, n_boot=n_boot, seed=seed)
    return fits, skipped


def rollout(data: EffectData, forms: Sequence[TrendForm], *, n_boot: int = ROLLOUT_BOOT, seed: int = 0):
    """Fit each form on the rungs of the smallest k levels, forecast every larger rung; ``(rows, prefixes)``."""
    levels = data.levels
    order = np.unique(levels)
    rows: list[TrendRow] = []
    prefixes = []
    ks = list(range(1, len(order)))
    if len(ks) > MAX_PREFIXES:  # spread them, always keeping the last (the held-out top rung)
        ks = [ks[i] for i in np.unique(np.round(np.linspace(0, len(ks) - 1, MAX_PREFIXES)).astype(int))]
    for k in ks:
        train_mask = levels < order[k]
        train = data.subset(train_mask)
        test = np.flatnonzero(~train_mask)
        fits, skipped = _fit_all(train, forms, n_boot, seed + 1000 * k)
        top = float(train.compute.max())
        prefixes.append({"prefix": k, "largest_compute": top, "fitted": list(fits), "skipped": skipped})
        c = data.compute[test]
        for key, ft in fits.items():
            point, draws = ft.draws(c, n_draws=ROW_DRAWS, seed=seed + k, noise=True, sigma_floor=data.noise)
            lo, hi = interval(draws, axis=0)
            for j, i in enumerate(test):
                rows.append(
                    TrendRow(
                        k,
                        key,
                        data.labels[i],
                        float(c[j]),
                        float(data.y[i]),
                        float(point[j]),
                        float(lo[j]),
                        float(hi[j]),
                        float(c[j] / top),
                        draws[:, j],
                    )
                )
    return rows, prefixes


def _weighted_rms(rows: list[TrendRow]) -> float:
    return weighted_rms([r.point - r.actual for r in rows], [math.log(r.compute_x) for r in rows])


def score(rows: list[TrendRow], forms: Sequence[str]) -> dict[str, dict]:
    by_form = {f: [r for r in rows if r.form == f] for f in forms}
    by_form = {f: rs for f, rs in by_form.items() if rs}
    keys = [{(r.prefix, r.label) for r in rs} for rs in by_form.values()]
    common = set.intersection(*keys) if keys else set()
    out = {}
    for f, rs in by_form.items():
        use = [r for r in rs if (r.prefix, r.label) in common] if len(common) >= MIN_COMMON else rs
        out[f] = {
            "n": len(use),
            "common": len(common) >= MIN_COMMON,
            "rms": _weighted_rms(use),
            "mae": float(np.mean([abs(r.point - r.actual) for r in use])),
            "coverage": float(np.mean([r.lo <= r.actual <= r.hi for r in use])),
            "max_compute_x": float(max(r.compute_x for r in use)),
        }
    return out


def weigh(scores: dict[str, dict], fitted: Sequence[str], floor: float) -> tuple[dict[str, float], str]:
    scored = {k: s for k, s in scores.items() if k in fitted and s["n"] > 0}
    if not scored:
        w = {k: 1.0 / len(fitted) for k in fitted}
        return w, (
            "no rollout forecasts (too few rungs to fit on the smaller ones and check on the larger), so "
            f"every identifiable form counts equally: {', '.join(fitted)}"
        )
    floor = max(floor, 1e-6)
    w, dropped = rms_weights({k: s["rms"] for k, s in scored.items()}, floor)
    parts = [f"{k} {s['rms']:.3g}" for k, s in sorted(scored.items(), key=lambda kv: kv[1]["rms"])]
    why = (
        f"weighted by rollout error (distance-weighted RMS: {', '.join(parts)}; floor {floor:.2g}, the noise "
        "of one rung); weights " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(w.items(), key=lambda kv: -kv[1]))
    )
    if dropped:
        why += f"; left out (more than {RELATIVE_RMS_CUT:g}x the best error): {', '.join(dropped)}"
    return w, why


def _paired(fits: dict[str, Fitted], names) -> bool:
    """Are these forms' draws paired? The engine's forms are fitted on the same rungs with the same seed and
    bootstrap size (the same bootstrap normals) and drawn with one seed (the same replicate picks and new-run
    normals); any other form (the variants' pair law, fitted on their losses) has replicates of its own."""
    return all(isinstance(fits.get(k), EngineFitted) for k in names)


def mixture_rows(rows: list[TrendRow], weights: dict[str, float], paired: bool = True) -> list[dict]:
    rng = np.random.default_rng(0)
    weighted = {k for k, v in weights.items() if v > 0 and any(r.form == k for r in rows)}
    grouped: dict[tuple, list[TrendRow]] = {}
    for r in rows:
        grouped.setdefault((r.prefix, r.label), []).append(r)
    out = []
    for (prefix, label), rs in grouped.items():
        have = {r.form: r for r in rs if r.form in weighted}
        if not have or set(have) != weighted:
            continue  # the mixture is judged only where every weighted form forecast this rung
        point, mixed = mix(
            {k: r.draws for k, r in have.items()}, {k: r.point for k, r in have.items()}, weights, rng, paired=paired
        )
        point = float(point)
        lo, hi = interval(mixed)
        r0 = rs[0]
        out.append(
            {
                "prefix": prefix,
                "rung": label,
                "compute": r0.compute,
                "compute_x": r0.compute_x,
                "actual": r0.actual,
                "forecast": point,
                "interval": [float(lo), float(hi)],
                "error": point - r0.actual,
                "z": side_z(r0.actual, point, lo, hi, 1e-12),
            }
        )
    return out


def trend_reach(rows: list[dict], factor: float) -> dict:
    """The largest compute multiple up to which every mixture forecast's widened interval covered the effect."""

    def covered(r):
        (lo, hi), p = r["interval"], r["forecast"]
        return p - factor * (p - lo) <= r["actual"] <= p + factor * (hi - p)

    return {
        "compute_x": reach(rows, "compute_x", covered),
        "tested_compute_x": max((r["compute_x"] for r in rows), default=1.0),
    }


@dataclass
class Trend:
    """An effect's trend across scale: the forms fitted on every rung, their rollout, weights, calibration and
    reach; :meth:`predict` gives the calibrated mixture at any compute."""

    quantity: str
    data: EffectData
    fits: dict[str, Fitted]
    skipped: dict[str, str]
    titles: dict[str, str]
    rows: list[TrendRow]
    prefixes: list[dict]
    scores: dict[str, dict]
    weights: dict[str, float]
    why: str
    mix_rows: list[dict]
    coverage: float | None
    factor: float
    reach: dict
    seed: int = 0

    @property
    def primary(self) -> str:
        return max(self.weights, key=self.weights.get)

    @property
    def max_compute(self) -> float:
        return float(self.data.compute.max())

    def curves(self, c, *, noise: bool, n_draws: int = N_DRAWS, seed: int | None = None):
        """``(point (m,), draws (n_draws, m))`` of the calibrated mixture at computes ``c``; with
        ``noise=False`` each draw row is one curve of the trend itself (for crossings)."""
        c = np.atleast_1d(np.asarray(c, dtype=float))
        rng = np.random.default_rng(self.seed if seed is None else seed)
        one = int(rng.integers(1 << 31))  # one seed for every form: paired draws (see :func:`_paired`)
        points, draws = {}, {}
        for k, w in self.weights.items():
            if w > 0:
                points[k], draws[k] = self.fits[k].draws(
                    c, n_draws=n_draws, seed=one, noise=noise, sigma_floor=self.data.noise
                )
        point, mixed = mix(draws, points, self.weights, rng, paired=_paired(self.fits, draws))
        return point, point + self.factor * (mixed - point)

    def predict(self, c: float) -> dict:
        """The calibrated forecast of the effect at compute ``c``: point, 90% interval, draws, per-form points."""
        point, d = self.curves([c], noise=True)
        lo, hi = interval(d[:, 0])
        by_form = {k: float(f.predict(np.array([c]))[0]) for k, f in self.fits.items()}
        return {
            "point": float(point[0]),
            "lo": float(lo),
            "hi": float(hi),
            "draws": d[:, 0],
            "by_form": by_form,
            "compute_x": float(c / self.max_compute),
            "within_reach": bool(c / self.max_compute <= self.reach["compute_x"] * 1.0001),
        }

    def band(self, grid) -> dict:
        point, d = self.curves(grid, noise=True, n_draws=1500)
        lo, hi = interval(d, axis=0)
        return {"compute": [float(x) for x in grid], "point": point.tolist(), "lo": lo.tolist(), "hi": hi.tolist()}

    def to_dict(self) -> dict:
        return {
            "quantity": self.quantity,
            "forms": {
                k: {
                    "title": self.titles.get(k, k),
                    **f.to_dict(),
                    "weight": self.weights.get(k, 0.0),
                    "rollout": self.scores.get(k),
                }
                for k, f in self.fits.items()
            },
            "skipped": self.skipped,
            "weights": self.weights,
            "selection": self.why,
            "rollout": {"rows": [r.to_dict() for r in self.rows], "prefixes": self.prefixes, "mixture": self.mix_rows},
            "calibration": {"level": LEVEL, "coverage": self.coverage, "factor": self.factor, "n": len(self.mix_rows)},
            "reach": self.reach,
            "noise": self.data.noise,
        }


def fit_trend(
    data: EffectData,
    forms: Sequence[TrendForm],
    *,
    quantity: str,
    floor: float | Callable = 0.0,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Trend | None:
    """Fit, backtest, weigh and calibrate the trend forms of an effect; None when no form is identifiable.
    ``floor``: the RMS floor of the weights (a number, or a function of the full-data fits)."""
    fits, skipped = _fit_all(data, forms, n_boot, seed)
    if not fits:
        return None
    rows, prefixes = rollout(
        data, [f for f in forms if f.key in fits], n_boot=max(20, min(ROLLOUT_BOOT, n_boot // 2)), seed=seed
    )
    scores = score(rows, list(fits))
    fl = floor(fits) if callable(floor) else floor
    weights, why = weigh(scores, list(fits), fl)
    mixed = mixture_rows(rows, weights, paired=_paired(fits, [k for k, v in weights.items() if v > 0]))
    coverage, factor = calibrate([r["z"] for r in mixed])
    return Trend(
        quantity,
        data,
        fits,
        skipped,
        {f.key: f.title for f in forms},
        rows,
        prefixes,
        scores,
        weights,
        why,
        mixed,
        coverage,
        factor,
        trend_reach(mixed, factor),
        seed,
    )
