"""Step 2 of the task forecasts: accuracy against task loss, the sigmoid
``Acc(L) = a / (1 + exp(-k (L - L0))) + b`` fitted by bounded least squares (``AccuracyLaw``), and its cases
bootstrap. Accuracy is not a log-space quantity and the sigmoid not a law of scale, so this step keeps its own
least squares rather than the engine's Huber-in-log objective."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ladder.layout import jsonable


def sigmoid(theta: Sequence[float], loss: np.ndarray) -> np.ndarray:
    """``a / (1 + exp(-k (L - L0))) + b`` with ``theta = (a, b, k, L0)``."""
    a, b, k, l0 = theta
    z = np.clip(-k * (np.asarray(loss, float) - l0), -500, 500)
    return a / (1.0 + np.exp(z)) + b


def sigmoid_many(thetas: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """The sigmoid of each row of ``thetas`` (n, 4) at ``loss`` (n,) or (n, M): row i at ``loss[i]``."""
    loss = np.asarray(loss, float)
    shape = (-1,) + (1,) * (loss.ndim - 1)
    a, b, k, l0 = (thetas[:, i].reshape(shape) for i in range(4))
    return a / (1.0 + np.exp(np.clip(-k * (loss - l0), -500, 500))) + b


def _sig_from_raw(raw: np.ndarray) -> np.ndarray:
    b, u, k, l0 = raw
    return np.array([u * (1.0 - b), b, k, l0])


def _raw_from_sig(theta2: np.ndarray) -> np.ndarray:
    a, b, k, l0 = theta2
    return np.array([b, a / max(1.0 - b, 1e-12), k, l0])


def fit_step2(loss: np.ndarray, acc: np.ndarray, warm: np.ndarray | None = None, top: int = 3):
    """(theta = (a, b, k, L0), cost) of the sigmoid, or None. Least squares in raw coordinates ``(b, u, k, L0)``
    with ``a = u (1 - b)`` (so ``a + b <= 1``), ``k < 0``; starts from a grid over ``(k, L0)`` with ``a, b`` by
    linear least squares."""
    loss, acc = np.asarray(loss, float), np.asarray(acc, float)
    spread = float(np.ptp(loss)) or float(np.mean(loss)) * 0.1 or 1.0
    lmin, lmax = float(np.min(loss)), float(np.max(loss))
    lo = np.array([0.0, 1e-6, -200.0 / spread, lmin - 10 * spread])
    hi = np.array([1.0 - 1e-6, 1.0, -1e-3 / spread, lmax + 10 * spread])

    def s_of(k, l0):
        return 1.0 / (1.0 + np.exp(np.clip(-k * (loss - l0), -500, 500)))

    def resid(raw):
        b, u, k, l0 = raw
        return u * (1.0 - b) * s_of(k, l0) + b - acc

    def jac(raw):
        b, u, k, l0 = raw
        s = s_of(k, l0)
        a = u * (1.0 - b)
        ds = s * (1.0 - s)
        return np.column_stack([1.0 - u * s, (1.0 - b) * s, a * ds * (loss - l0), -a * k * ds])

    def polish(starts):
        best = None
        for x0 in starts:
            x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
            try:
                r = least_squares(resid, x0, jac=jac, bounds=(lo, hi), max_nfev=500, x_scale="jac")
            except (ValueError, FloatingPointError, np.linalg.LinAlgError):
                continue
            if np.all(np.isfinite(r.x)) and (best is None or r.cost < best[1]):
                best = (_sig_from_raw(r.x), float(r.cost))
        return best

    if warm is not None:
        best = polish([_raw_from_sig(warm)])
        if best is not None:
            return best
    found = []
    for kk in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0):
        for l0 in np.linspace(lmin - spread, lmax + spread, 9):
            s = s_of(-kk / spread, l0)
            X = np.column_stack([s, np.ones_like(s)])
            coef, *_ = np.linalg.lstsq(X, acc, rcond=None)
            a, b = float(coef[0]), float(coef[1])
            b = min(max(b, 0.0), 0.99)
            a = min(max(a, 1e-3), 1.0 - b)
            cost = float(np.sum((a * s + b - acc) ** 2))
            found.append((cost, np.array([b, a / (1.0 - b), -kk / spread, l0])))
    found.sort(key=lambda f: f[0])
    return polish([f[1] for f in found[:top]])


@dataclass
class AccuracyLaw:
    """Step 2: accuracy against task loss, ``a / (1 + exp(-k (L - L0))) + b``."""

    params: dict[str, float]  # a, b, k, L0
    intervals: dict[str, tuple[float | None, float | None]]
    rmse: float

    def to_dict(self) -> dict:
        return jsonable(
            {
                "params": self.params,
                "intervals": self.intervals,
                "rmse": self.rmse,
                "formula": "a / (1 + exp(-k (L - L0))) + b",
            }
        )


def bootstrap_step2(
    loss: np.ndarray, acc: np.ndarray, theta2: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Cases-bootstrap refits of the sigmoid, each warm-started at ``theta2`` (the grid when that fails);
    ``(n_ok, 4)``. A resample with fewer than 4 distinct runs is skipped."""
    n = len(loss)
    out = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        if len(np.unique(idx)) < 4:
            continue
        b2 = fit_step2(loss[idx], acc[idx], warm=theta2, top=1)
        if b2 is not None:
            out.append(b2[0])
    return np.array(out) if out else np.empty((0, 4))
