"""The laws across budgets of the IsoFLOP fit (:mod:`.isoflop_fit`), fitted by the one engine:

* the allocation ``N_opt = k C^a`` and ``D_opt = k' C^b``: the engine's :class:`Linear` form
  ``log y = log k + a log C`` (Huber on the log residuals, delta 1e-3: nearly least absolute deviations, so one
  budget whose optimum the profile misplaced does not tilt the line), with its residual bootstrap over the
  budgets (:class:`AllocationLaw`);
* the loss of each budget's minimum against compute, ``L*(C) = E + A C^-alpha``: the frontier form of the loss
  laws (:data:`ladder.reports.fits.loss.LOSS_FORMS` ``["frontier"]``), the IsoFLOP forecast of a compute-optimal
  run (:class:`MinimumLossLaw`). Its rollout fits the profiles of the smallest ``k`` budgets alone (so a prefix
  borrows nothing from the larger budgets), fits the law on their minima and forecasts the larger budgets'
  minima, as the loss laws' rollout does with runs. Its rows are judged by the one rule of every rollout
  (:mod:`ladder.reports.fits.backtest`): ``z = |log error| / half-width`` on the error's side; when the share
  covered falls short of 90% by more than chance, the forecast's half-widths are multiplied by the conformal
  factor of ``z`` (never below 1); the reach is the largest compute multiple up to which every forecast's
  widened interval covered the budget's minimum.

C is the budgets' FLOPs (the runs' ``flops`` column, ``6ND`` when there is none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.reports.fits.backtest import LEVEL, calibrate, interval, reach, side_z, weighted_rms
from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.loss import LOSS_FORMS

ROLLOUT_BOOT = 100  # at most (the fit's n_boot when smaller, at least MIN_ROLLOUT_BOOT)
MIN_ROLLOUT_BOOT = 20  # a rollout forecast needs an interval, as the law's own does
HALF_FLOOR = 1e-3  # a rollout interval is judged at least this wide in log loss, as the loss forecast's are
MIN_BOOT = 100  # the minimum-loss law always bootstraps: its forecast is an interval
MIN_PREFIX = 4  # budgets a rollout prefix fits the loss law on (3 parameters + a residual degree of freedom)


def _design(raw: np.ndarray) -> np.ndarray:
    return np.c_[np.ones(len(raw)), np.log(raw[:, 0])]


POWER = Linear("isoflop_power", ("log_k", "a"), _design)
LOSS = LOSS_FORMS["frontier"]


def _q(v: np.ndarray) -> tuple[float, float]:
    lo, hi = interval(v)
    return float(lo), float(hi)


@dataclass(frozen=True)
class AllocationLaw:
    """``y = k x^a`` fitted by the engine in log-log space; ``ci90`` holds the bootstrap's 90% intervals of ``k``
    and ``a`` (empty without a bootstrap)."""

    law: LawFit

    @property
    def k(self) -> float:
        return math.exp(self.law.params["log_k"])

    @property
    def a(self) -> float:
        return self.law.params["a"]

    @property
    def boot(self) -> np.ndarray | None:
        """``(n_boot, 2)``: log k, a of the bootstrap refits."""
        if self.law.boot is None:
            return None
        pub = self.law.form.public(self.law.boot, self.law.center)
        return np.stack([pub["log_k"], pub["a"]], axis=1)

    @property
    def ci90(self) -> dict[str, tuple[float, float]]:
        b = self.boot
        if b is None or not len(b):
            return {}
        return {"k": tuple(np.exp(_q(b[:, 0]))), "a": _q(b[:, 1])}

    @property
    def x_range(self) -> tuple[float, float]:
        return float(self.law.raw.min()), float(self.law.raw.max())

    def __call__(self, x):
        y = np.exp(self.law.predict(np.atleast_1d(np.asarray(x, dtype=float))[:, None]))
        return float(y[0]) if np.ndim(x) == 0 else y

    def interval(self, x: float, level: float = LEVEL) -> tuple[float, float]:
        """Interval of the fitted law (not of a new budget's optimum) at ``x``: the bootstrap forecasts'
        quantiles; the fitted point twice without a bootstrap."""
        if self.law.boot is None:
            y = self(x)
            return y, y
        preds = np.exp(self.law.predict_boot(np.array([[float(x)]]))[:, 0])
        lo, hi = interval(preds, level)
        return float(lo), float(hi)

    def extrapolates(self, x: float) -> bool:
        lo, hi = self.x_range
        return not (lo <= x <= hi)

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "a": self.a,
            "n_points": self.law.n,
            "ci90": {k: [float(v[0]), float(v[1])] for k, v in self.ci90.items()},
            "method": "engine: Linear log y = log k + a log C, residual bootstrap over budgets",
            "dof": self.law.dof,
            "sigma_log": self.law.sigma,
            "huber_delta": self.law.delta,
            "n_boot": 0 if self.law.boot is None else len(self.law.boot),
            "x_range": list(self.x_range),
        }


def fit_allocation(compute: np.ndarray, values: np.ndarray, *, n_boot: int, seed: int) -> AllocationLaw:
    return AllocationLaw(
        fit(POWER, np.asarray(compute, dtype=float)[:, None], np.log(values), n_boot=n_boot, seed=seed)
    )


@dataclass
class MinimumLossLaw:
    """``L*(C) = E + A C^-alpha`` through the budgets' minimum losses; ``sigma_floor``: the typical bootstrap
    scatter of one budget's minimum (log loss), the least a new budget's minimum scatters about the law;
    ``coverage``/``factor``: the rollout's calibration (:func:`~ladder.reports.fits.backtest.calibrate`), the
    factor the forecast's half-widths are multiplied by."""

    law: LawFit
    compute: np.ndarray
    sigma_floor: float = 0.0
    rollout: list[dict] = field(default_factory=list)
    coverage: float | None = None
    factor: float = 1.0

    def predict(self, compute) -> tuple[float, float, float]:
        """``(loss, lo, hi)``: the minimum loss of a budget ``compute`` with its 90% prediction interval,
        widened by the rollout's calibration factor."""
        point, lo, hi = self.law.interval(np.array([[float(compute)]]), sigma_floor=self.sigma_floor)
        p, lo, hi = float(point[0]), float(lo[0]), float(hi[0])
        if self.factor != 1.0:
            lo, hi = p - self.factor * (p - lo), p + self.factor * (hi - p)
        return float(np.exp(p)), float(np.exp(lo)), float(np.exp(hi))

    def calibrate_rollout(self) -> None:
        """Judge the rollout's intervals by the one rule: coverage, and the factor when it falls short."""
        self.coverage, self.factor = calibrate([r["z"] for r in self.rollout])

    @property
    def rollout_score(self) -> dict | None:
        if not self.rollout:
            return None
        e = [math.log(r["forecast"] / r["actual"]) for r in self.rollout]
        f = self.factor

        def covered(r):
            lo, hi = (math.log(v) for v in r["interval"])
            p = math.log(r["forecast"])
            return p - f * (p - lo) <= math.log(r["actual"]) <= p + f * (hi - p)

        return {
            "n": len(self.rollout),
            "rms_pct": 100 * weighted_rms(e, np.log([r["compute_x"] for r in self.rollout])),
            "mae_pct": float(np.mean([abs(r["err_pct"]) for r in self.rollout])),
            "coverage": float(np.mean([r["inside"] for r in self.rollout])),
            "max_compute_x": float(max(r["compute_x"] for r in self.rollout)),
            "reach_compute_x": reach(self.rollout, "compute_x", covered),
        }

    def to_dict(self) -> dict:
        return {
            "available": True,
            "title": "IsoFLOP minima L*(C)",
            "formula": "E + A C^-alpha",
            "fitted_on": "the fitted minimum loss of each budget's profile",
            **self.law.to_dict(),
            "sigma_floor": self.sigma_floor,
            "rollout": self.rollout,
            "rollout_score": self.rollout_score,
            "calibration": {"level": LEVEL, "coverage": self.coverage, "factor": self.factor, "n": len(self.rollout)},
        }


def unfit_reason(n_budgets: int) -> str | None:
    need = LOSS.engine.n_params + 1
    if n_budgets < need:
        return f"the minimum-loss law L*(C) = E + A C^-alpha needs >= {need} budgets (has {n_budgets})"
    return None


def fit_minimum_loss(
    compute: np.ndarray, loss_opt: np.ndarray, *, n_boot: int, seed: int, sigma_floor: float, prefix_minima=None
) -> MinimumLossLaw:
    """The law on all budgets' minima; ``prefix_minima(k) -> loss_opt of the smallest k budgets`` refitted on
    those budgets alone, for the rollout (None: no rollout)."""
    compute = np.asarray(compute, dtype=float)
    law = fit(LOSS.engine, compute[:, None], np.log(loss_opt), n_boot=max(n_boot, MIN_BOOT), seed=seed)
    out = MinimumLossLaw(law, compute, sigma_floor)
    if prefix_minima is None:
        return out
    boot = max(MIN_ROLLOUT_BOOT, min(ROLLOUT_BOOT, n_boot))
    for k in range(MIN_PREFIX, len(compute)):
        minima = prefix_minima(k)
        if minima is None or not np.all(np.isfinite(minima)):
            continue
        part = fit(LOSS.engine, compute[:k, None], np.log(minima), n_boot=boot, seed=seed + 1000 * k)
        point, lo, hi = part.interval(compute[k:, None], sigma_floor=sigma_floor, seed=seed + k)
        for j, c in enumerate(compute[k:]):
            actual = float(loss_opt[k + j])
            fc = float(np.exp(point[j]))
            out.rollout.append(
                {
                    "prefix": k,
                    "flops": float(c),
                    "actual": actual,
                    "forecast": fc,
                    "interval": [float(np.exp(lo[j])), float(np.exp(hi[j]))],
                    "err_pct": 100.0 * (fc - actual) / actual,
                    "inside": bool(np.exp(lo[j]) <= actual <= np.exp(hi[j])),
                    "compute_x": float(c / compute[k - 1]),
                    "z": side_z(math.log(actual), float(point[j]), float(lo[j]), float(hi[j]), HALF_FLOOR),
                }
            )
    out.calibrate_rollout()
    return out
