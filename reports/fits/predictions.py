"""Predictions with intervals and per-run residuals, shared by the parametric fits.

A prediction interval must cover the loss a *new run* will reach, so it combines two sources:

* parameter uncertainty: the law refitted on bootstrap resamples of the runs gives draws
  ``log L_b(x)``;
* run-to-run scatter: the fit's residuals in log space, inflated by ``sqrt(n / (n - p))`` for the
  ``p`` fitted parameters (in-sample residuals understate the scatter of a new run).

Draws ``log L_b(x) + r_j`` for pairs of a bootstrap fit and a residual (all pairs, or a fixed random
subset of them when there are many) are pooled and the interval is their ``(1 -/+ level) / 2``
quantiles, exponentiated. This is the residual-resampling analogue of adding the two variances, but
it keeps the skew of either source. The confidence interval of the law itself (``ci_lo``/``ci_hi``)
uses the bootstrap draws only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_PAIRS = 20_000


@dataclass(frozen=True)
class Prediction:
    """Forecast loss at given (params, tokens): floats for scalar inputs, arrays otherwise."""

    params: float | np.ndarray | None
    tokens: float | np.ndarray | None
    flops: float | np.ndarray
    loss: float | np.ndarray
    lo: float | np.ndarray  # prediction interval for a new run's loss
    hi: float | np.ndarray
    ci_lo: float | np.ndarray  # confidence interval of the law (parameter uncertainty only)
    ci_hi: float | np.ndarray
    level: float = 0.90

    @property
    def interval(self) -> tuple:
        return self.lo, self.hi

    def to_dict(self) -> dict:
        def j(v):
            if v is None:
                return None
            a = np.asarray(v, dtype=float)
            return float(a) if a.ndim == 0 else a.tolist()

        return {
            "params": j(self.params),
            "tokens": j(self.tokens),
            "flops": j(self.flops),
            "loss": j(self.loss),
            "interval": [j(self.lo), j(self.hi)],
            "ci": [j(self.ci_lo), j(self.ci_hi)],
            "level": self.level,
        }


def inflated_residuals(log_resid: np.ndarray, n_params: int) -> np.ndarray:
    """Residuals scaled up by ``sqrt(n / (n - p))``; empty when there are no degrees of freedom."""
    n = len(log_resid)
    if n <= n_params:
        return np.zeros(0)
    return np.asarray(log_resid, dtype=float) * np.sqrt(n / (n - n_params))


def intervals(
    point_log: np.ndarray,
    boot_log: np.ndarray | None,
    resid: np.ndarray,
    level: float = 0.90,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, ci_lo, ci_hi)`` in loss units for points with point forecasts ``point_log`` (m,),
    bootstrap forecasts ``boot_log`` (B, m) or None, and inflated log residuals ``resid`` (r,)."""
    q = [(1 - level) / 2, (1 + level) / 2]
    point_log = np.asarray(point_log, dtype=float)
    m = point_log.shape[0]
    if boot_log is None or len(boot_log) == 0:
        boot_log = point_log[None, :]
    ci_lo, ci_hi = np.exp(np.quantile(boot_log, q, axis=0)) if len(boot_log) > 1 else (np.exp(point_log),) * 2
    if len(resid) == 0:
        return ci_lo, ci_hi, ci_lo, ci_hi
    n_b, n_r = len(boot_log), len(resid)
    max_pairs = max(2_000, min(MAX_PAIRS, 4_000_000 // max(1, m)))
    if n_b * n_r <= max_pairs:
        ib = np.repeat(np.arange(n_b), n_r)
        ir = np.tile(np.arange(n_r), n_b)
    else:
        rng = np.random.default_rng(seed)
        ib = rng.integers(0, n_b, max_pairs)
        ir = rng.integers(0, n_r, max_pairs)
    lo, hi = np.exp(np.quantile(boot_log[ib] + resid[ir][:, None], q, axis=0))
    return lo, hi, ci_lo, ci_hi


def residual_rows(labels, params, tokens, flops, loss, predicted) -> list[dict]:
    """Per-run residuals, observed minus predicted: ``log_residual = log L - log L_hat`` and
    ``pct = 100 * (L / L_hat - 1)`` (positive: the run did worse than the law)."""
    rows = []
    for i in range(len(loss)):
        rows.append(
            {
                "run": labels[i] if labels else i,
                "params": None if params is None else float(params[i]),
                "tokens": None if tokens is None else float(tokens[i]),
                "flops": float(flops[i]),
                "loss": float(loss[i]),
                "predicted": float(predicted[i]),
                "log_residual": float(np.log(loss[i] / predicted[i])),
                "pct": float(100.0 * (loss[i] / predicted[i] - 1.0)),
            }
        )
    return rows


def residual_summary(rows: list[dict]) -> dict:
    if not rows:
        return {"rms_log": None, "mean_abs_pct": None, "max_abs_pct": None}
    r = np.array([row["log_residual"] for row in rows])
    p = np.abs([row["pct"] for row in rows])
    return {"rms_log": float(np.sqrt(np.mean(r**2))), "mean_abs_pct": float(p.mean()), "max_abs_pct": float(p.max())}


def squeeze(a: np.ndarray, scalar: bool):
    return float(np.asarray(a).reshape(-1)[0]) if scalar else np.asarray(a)
