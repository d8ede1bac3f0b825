"""The L(C) frontier: ``L(C) = E + (C0/C)^gamma`` through the compute-optimal frontier of a ladder.

:func:`frontier` picks the lowest-loss run of each compute group; :func:`fit_loss_vs_compute` fits the
law to it (Huber/LSE, like Approach 3, with a cases bootstrap and a backtest), or takes the exact envelope
of an Approach-3 fit (``source="chinchilla"``). Takes ``runs`` as :mod:`ladder.reports.fits.runs` does and
raises :class:`ladder.errors.FitError` on input a user can fix.

Not to be confused with the per-variant ``L(C)`` of the ablations
(:mod:`ladder.reports.fits.ablations.compute_law`, a least-squares law through a few rungs): the same form
fitted twice, which one engine is to replace.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ladder.errors import FitError
from ladder.reports.fits import lsefit
from ladder.reports.fits.approach3 import ChinchillaFit, fit_chinchilla
from ladder.reports.fits.backtest import Backtest, run_backtest
from ladder.reports.fits.predictions import (
    Prediction,
    inflated_residuals,
    intervals,
    residual_rows,
    residual_summary,
    squeeze,
)
from ladder.reports.fits.runs import Runs, as_runs, group_budgets, resample_weights

MIN_FRONTIER = 4
SOURCES = ("frontier", "chinchilla")


@dataclass(frozen=True)
class LossComputeFit:
    """``L(C) = E + (C0 / C)^gamma`` on the compute-optimal frontier."""

    E: float
    C0: float
    gamma: float
    ci90: dict
    source: str  # "frontier" (lowest-loss runs) or "chinchilla" (the Approach-3 envelope)
    n_points: int
    points: list[dict]  # the frontier: flops, loss (and run, params, tokens for source "frontier")
    huber_delta: float
    n_boot: int
    residuals: list[dict]
    backtest: Backtest | None = None
    theta: np.ndarray = field(default=None, repr=False, compare=False)  # raw [e, gamma log C0, gamma]
    boot: np.ndarray = field(default=None, repr=False, compare=False)
    scatter: np.ndarray = field(default=None, repr=False, compare=False)
    seed: int = 0

    def __call__(self, flops):
        scalar = np.ndim(flops) == 0
        x = _flops(flops)[:, None]
        return squeeze(np.exp(lsefit.log_predict(self.theta, np.log(x))), scalar)

    def predict(self, flops, level: float = 0.90) -> Prediction:
        """Frontier loss at ``flops`` with a prediction interval (bootstrap + residual scatter)."""
        scalar = np.ndim(flops) == 0
        c = _flops(flops)
        x = np.log(c)[:, None]
        point = lsefit.log_predict(self.theta, x)
        boot = lsefit.log_predict_many(self.boot, x) if self.boot is not None and len(self.boot) else None
        lo, hi, ci_lo, ci_hi = intervals(point, boot, self.scatter, level, self.seed)
        s = lambda a: squeeze(a, scalar)  # noqa: E731
        return Prediction(None, None, s(c), s(np.exp(point)), s(lo), s(hi), s(ci_lo), s(ci_hi), level)

    def to_dict(self) -> dict:
        keys = ("E", "C0", "gamma")
        return {
            "form": "loss_vs_compute",
            "source": self.source,
            "params": {k: float(getattr(self, k)) for k in keys},
            "ci90": {k: (list(self.ci90[k]) if k in self.ci90 else None) for k in keys},
            "n_points": self.n_points,
            "points": [dict(p) for p in self.points],
            "huber_delta": self.huber_delta,
            "n_boot": self.n_boot,
            "residuals": [dict(r) for r in self.residuals],
            "residual_summary": residual_summary(self.residuals),
            "backtest": self.backtest.to_dict() if self.backtest else None,
        }


def frontier(runs=None, *, budget_rtol: float = 0.05, bin_factor: float = 2.0, **columns) -> Runs:
    """The compute-optimal frontier of the runs: the lowest-loss run of each compute group, kept
    only where it beats the best of every smaller group.

    Groups are the ladder's compute budgets (FLOPs within ``budget_rtol``) when it has them (an
    IsoFLOP design: most budgets hold >= 2 runs). In a sizes-x-token-multipliers ladder nearly every
    run has its own FLOPs, and "best run so far" would keep badly allocated runs too; there the
    groups are bins ``bin_factor`` wide in FLOPs (octaves by default) so that each group's best run
    is the best allocation among a few sizes."""
    r = as_runs(runs, what="frontier", **columns)
    labels, _ = group_budgets(r.flops, budget_rtol)
    if np.median(np.bincount(labels)) < 2 and bin_factor > 1:
        labels = np.floor(np.log(r.flops / r.flops.min()) / np.log(bin_factor) + 1e-9).astype(int)
    groups = np.unique(labels)
    best = [np.flatnonzero(labels == g)[np.argmin(r.loss[labels == g])] for g in groups]
    keep, running = [], np.inf
    for i in best:  # groups ascend in FLOPs
        if r.loss[i] < running:
            keep.append(i)
            running = r.loss[i]
    return r.subset(np.array(keep, dtype=int))


@lsefit.single_threaded_blas
def fit_loss_vs_compute(
    runs=None,
    *,
    params=None,
    tokens=None,
    loss=None,
    flops=None,
    source: str = "frontier",
    chinchilla: ChinchillaFit | None = None,
    n_boot: int = 200,
    seed: int = 0,
    budget_rtol: float = 0.05,
    huber_delta: float = lsefit.HUBER_DELTA,
    backtest: str | None = "compute",
    backtest_rungs: int = 1,
) -> LossComputeFit:
    """Fit ``L(C) = E + (C0/C)^gamma``.

    ``source="frontier"``: fitted (Huber/LSE, like Approach 3) to the lowest-loss run per compute
    budget (:func:`frontier`; needs >= 4 frontier points), cases-bootstrap over those points.
    ``source="chinchilla"``: the exact envelope of an Approach-3 fit (``chinchilla``, or one fitted
    here): ``L*(C) = E + K (C/6)^-gamma`` with ``gamma = alpha beta / (alpha + beta)``, per bootstrap
    draw; raises ``FitError`` when that fit's allocation is not identifiable (degenerate ladder)."""
    if source not in SOURCES:
        raise FitError(f"loss-vs-compute fit: source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == "chinchilla":
        if chinchilla is None:
            r = as_runs(runs, params=params, tokens=tokens, loss=loss, flops=flops, what="loss-vs-compute fit")
            chinchilla = fit_chinchilla(r, n_boot=n_boot, seed=seed, huber_delta=huber_delta, backtest=None)
        return _from_chinchilla(chinchilla)
    r = as_runs(runs, params=params, tokens=tokens, loss=loss, flops=flops, what="loss-vs-compute fit")
    fit = _fit_frontier(r, n_boot=n_boot, seed=seed, budget_rtol=budget_rtol, delta=huber_delta)
    if backtest:
        full_front = frontier(r, budget_rtol=budget_rtol)
        on_front = set(zip(full_front.params.tolist(), full_front.tokens.tolist(), full_front.loss.tolist()))

        def forecaster(f: LossComputeFit, held: Runs):
            mask = np.array([(p, t, l) in on_front for p, t, l in zip(held.params, held.tokens, held.loss)])
            if not mask.any():
                raise FitError("none of the held-out runs is on the compute-optimal frontier")
            target = held.subset(mask)
            return target, f(target.flops)

        bt = run_backtest(
            r,
            lambda tr: _fit_frontier(tr, n_boot=0, seed=seed, budget_rtol=budget_rtol, delta=huber_delta),
            forecaster,
            holdout=backtest,
            n_rungs=backtest_rungs,
        )
        fit = replace(fit, backtest=bt)
    return fit


# ------------------------------------------------------------------------------------------ helpers
def _flops(flops) -> np.ndarray:
    c = np.atleast_1d(np.asarray(flops, dtype=float))
    if not (np.all(np.isfinite(c)) and np.all(c > 0)):
        raise FitError("loss-vs-compute: flops must be finite and positive")
    return c


def _named(theta: np.ndarray) -> dict:
    t = np.asarray(theta)
    gamma = t[..., 2]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return {"E": np.exp(t[..., 0]), "C0": np.exp(t[..., 1] / gamma), "gamma": gamma}


def _ci(boot: np.ndarray | None) -> dict:
    if boot is None or len(boot) < 2:
        return {}
    out = {}
    for k, v in _named(boot).items():
        lo, hi = np.nanquantile(v, [0.05, 0.95])
        out[k] = (float(lo), float(hi))
    return out


def _fit_frontier(r: Runs, *, n_boot: int, seed: int, budget_rtol: float, delta: float) -> LossComputeFit:
    front = frontier(r, budget_rtol=budget_rtol)
    if front.n < MIN_FRONTIER:
        raise FitError(
            f"loss-vs-compute fit: E + (C0/C)^gamma needs >= {MIN_FRONTIER} compute budgets on the "
            f"compute-optimal frontier, got {front.n}"
        )
    prob = lsefit.Problem.build(front.flops, front.loss, delta)
    theta_c, _ = lsefit.fit(prob, n_starts=4)
    theta = lsefit.to_raw(theta_c, prob.center)
    boot = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        weights = resample_weights(rng, front.n, n_boot)
        weights = weights[(weights > 0).sum(axis=1) >= 3]
        if len(weights):
            draws, _ = lsefit.refit_many(theta_c, prob, weights)
            boot = lsefit.to_raw(draws, prob.center)
    pred = np.exp(lsefit.log_predict(theta, np.log(front.flops)[:, None]))
    rows = residual_rows(front.labels, front.params, front.tokens, front.flops, front.loss, pred)
    vals = _named(theta)
    points = [
        {"run": front.labels[i], "params": float(front.params[i]), "tokens": float(front.tokens[i]),
         "flops": float(front.flops[i]), "loss": float(front.loss[i])}
        for i in range(front.n)
    ]
    return LossComputeFit(
        E=float(vals["E"]),
        C0=float(vals["C0"]),
        gamma=float(vals["gamma"]),
        ci90=_ci(boot),
        source="frontier",
        n_points=front.n,
        points=points,
        huber_delta=delta,
        n_boot=0 if boot is None else len(boot),
        residuals=rows,
        theta=theta,
        boot=boot,
        scatter=inflated_residuals(np.log(front.loss / pred), 3),
        seed=seed,
    )


def _envelope_theta(thetas: np.ndarray) -> np.ndarray:
    """Exact Approach-3 envelope per raw draw ``[e, a, b, alpha, beta]`` as raw ``[e, gamma log C0, gamma]``:
    ``L*(C) = E + (A G^-alpha + B G^beta) (C/6)^-gamma``, ``gamma = alpha beta / (alpha + beta)``."""
    e, a, b, al, be = (thetas[:, i] for i in range(5))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_g = (np.log(al) + a - np.log(be) - b) / (al + be)
        gamma = al * be / (al + be)
        log_k = np.logaddexp(a - al * log_g, b + be * log_g)
        # K (C/6)^-gamma = exp(log_k + gamma log 6 - gamma log C)
        coef = log_k + gamma * np.log(6.0)
    return np.stack([e, coef, gamma], axis=1)


def _from_chinchilla(fit: ChinchillaFit) -> LossComputeFit:
    reason = fit.allocation_reason()
    if reason:
        raise FitError(
            f"loss-vs-compute fit: the Approach-3 envelope needs an identifiable compute-optimal allocation, "
            f"but it is {reason}; use source='frontier'"
        )
    theta = _envelope_theta(fit.theta[None, :])[0]
    boot = _envelope_theta(fit.boot) if fit.boot is not None and len(fit.boot) else None
    if boot is not None:
        boot = boot[np.all(np.isfinite(boot), axis=1)]
    vals = _named(theta)
    return LossComputeFit(
        E=float(vals["E"]),
        C0=float(vals["C0"]),
        gamma=float(vals["gamma"]),
        ci90=_ci(boot),
        source="chinchilla",
        n_points=fit.n_runs,
        points=[],
        huber_delta=fit.huber_delta,
        n_boot=0 if boot is None else len(boot),
        residuals=[],
        theta=theta,
        boot=boot,
        scatter=fit.scatter,
        seed=fit.seed,
    )
