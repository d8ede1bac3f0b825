"""Backtests: refit a law without the ladder's largest rung(s) and report how well it forecasts them.

Two ways to pick the held-out rung (``holdout``):

* ``"size"``: the runs of the largest model size(s) (the rung a scaling ladder adds last);
* ``"compute"``: the runs of the largest compute budget(s) (FLOPs grouped within 5%, see
  :func:`ladder.reports.fits.runs.group_budgets`), the natural rung of an IsoFLOP ladder.

Errors are ``100 * (predicted - actual) / actual``: positive means the ladder forecast a higher loss
than the run reached (pessimistic), negative an optimistic forecast.

:func:`run_backtest` is the engine the laws call; :func:`backtest` refits a named law on a runs table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ladder.errors import FitError
from ladder.reports.fits import lsefit
from ladder.reports.fits.runs import Runs, as_runs, group_budgets

HOLDOUTS = ("size", "compute")


@dataclass(frozen=True)
class Backtest:
    holdout: str  # "size" or "compute"
    n_rungs: int
    n_train: int
    n_held_out: int
    held_out: list[dict] = field(default_factory=list)  # per run: params, tokens, flops, loss, predicted, error_pct, abs_error_pct
    mean_error_pct: float | None = None
    mean_abs_error_pct: float | None = None
    max_abs_error_pct: float | None = None
    skipped: str | None = None  # why no backtest could be run (then the numbers are None)
    note: str | None = None  # e.g. the refit was degenerate

    def to_dict(self) -> dict:
        return {
            "holdout": self.holdout,
            "n_rungs": self.n_rungs,
            "n_train": self.n_train,
            "n_held_out": self.n_held_out,
            "held_out": [dict(r) for r in self.held_out],
            "mean_error_pct": self.mean_error_pct,
            "mean_abs_error_pct": self.mean_abs_error_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "skipped": self.skipped,
            "note": self.note,
        }


def holdout_mask(runs: Runs, holdout: str = "size", n_rungs: int = 1) -> np.ndarray:
    """Boolean mask of the held-out runs: the ``n_rungs`` largest sizes or compute budgets."""
    if holdout not in HOLDOUTS:
        raise FitError(f"backtest: holdout must be one of {', '.join(HOLDOUTS)}, got {holdout!r}")
    if n_rungs < 1:
        raise FitError(f"backtest: n_rungs must be at least 1, got {n_rungs}")
    if holdout == "size":
        sizes = np.unique(runs.params)
        return runs.params >= sizes[-min(n_rungs, len(sizes))]
    labels, budgets = group_budgets(runs.flops)
    return labels >= len(budgets) - min(n_rungs, len(budgets))


def run_backtest(
    runs: Runs,
    fitter: Callable[[Runs], object],
    forecaster: Callable[[object, Runs], tuple[Runs, np.ndarray]],
    *,
    holdout: str = "size",
    n_rungs: int = 1,
    note_of: Callable[[object], str | None] | None = None,
) -> Backtest:
    """Refit with ``fitter`` on all but the held-out runs and compare ``forecaster(fit, held)``,
    which returns the held-out runs it forecasts (all, or e.g. the frontier run of a budget) and the
    forecast losses. A ``FitError`` from the reduced fit turns into a skipped backtest, not a failure."""
    mask = holdout_mask(runs, holdout, n_rungs)
    train, held = runs.subset(~mask), runs.subset(mask)
    base = Backtest(holdout=holdout, n_rungs=n_rungs, n_train=train.n, n_held_out=held.n)
    if train.n == 0 or not mask.any():
        return _skip(base, f"holding out the {n_rungs} largest {holdout} rung(s) leaves no runs to fit")
    try:
        fit = fitter(train)
        target, predicted = forecaster(fit, held)
    except FitError as exc:
        return _skip(base, f"the fit without the largest {holdout} rung(s) failed: {exc}")
    predicted = np.asarray(predicted, dtype=float)
    err = 100.0 * (predicted - target.loss) / target.loss
    rows = [
        {
            "run": target.labels[i] if target.labels else i,
            "params": float(target.params[i]),
            "tokens": float(target.tokens[i]),
            "flops": float(target.flops[i]),
            "loss": float(target.loss[i]),
            "predicted": float(predicted[i]),
            "error_pct": float(err[i]),
            "abs_error_pct": float(abs(err[i])),
        }
        for i in range(target.n)
    ]
    return Backtest(
        holdout=holdout,
        n_rungs=n_rungs,
        n_train=train.n,
        n_held_out=target.n,
        held_out=rows,
        mean_error_pct=float(err.mean()),
        mean_abs_error_pct=float(np.abs(err).mean()),
        max_abs_error_pct=float(np.abs(err).max()),
        note=note_of(fit) if note_of else None,
    )


@lsefit.single_threaded_blas
def backtest(
    runs=None,
    *,
    form: str = "chinchilla",
    holdout: str = "size",
    n_rungs: int = 1,
    seed: int = 0,
    huber_delta: float = lsefit.HUBER_DELTA,
    budget_rtol: float = 0.05,
    **columns,
) -> Backtest:
    """Refit ``form`` ("chinchilla" or "loss_vs_compute") without the ``n_rungs`` largest rungs
    (``holdout`` "size" or "compute") and report the forecast error (percent) on the held-out runs."""
    # The laws import this module's engine, so they are imported here, not at the top.
    from ladder.reports.fits.approach3 import fit_chinchilla
    from ladder.reports.fits.frontier import fit_loss_vs_compute

    r = as_runs(runs, what="backtest", **columns)
    if form == "chinchilla":
        fit = fit_chinchilla(r, n_boot=0, seed=seed, huber_delta=huber_delta, backtest=holdout, backtest_rungs=n_rungs)
    elif form == "loss_vs_compute":
        fit = fit_loss_vs_compute(
            r, n_boot=0, seed=seed, huber_delta=huber_delta, budget_rtol=budget_rtol, backtest=holdout, backtest_rungs=n_rungs
        )
    else:
        raise FitError(f"backtest: form must be chinchilla or loss_vs_compute, got {form!r}")
    return fit.backtest



def _skip(base: Backtest, reason: str) -> Backtest:
    return Backtest(
        holdout=base.holdout, n_rungs=base.n_rungs, n_train=base.n_train, n_held_out=base.n_held_out, skipped=reason
    )
