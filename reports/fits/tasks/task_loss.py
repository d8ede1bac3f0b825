"""Step 1 of the task forecasts: the task loss against scale, ``L(N, D) = E + A/N^alpha + B/D^beta`` (form
``nd``) or ``L(C) = E + (C0/C)^gamma`` (form ``compute``), fitted in log space with a Huber loss (``LossLaw``),
and its curves with their bands for the report."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ladder.layout import jsonable
from ladder.reports.fits.tasks.intervals import quantiles, stretch

HUBER_DELTA = 0.02  # in log loss: residuals beyond 2% count linearly
CURVE_POINTS = 60


def step1_predict(form: str, theta: np.ndarray, n: np.ndarray, d: np.ndarray, c: np.ndarray) -> np.ndarray:
    if form == "nd":
        le, a, alpha, b, beta = theta
        return np.exp(le) + np.exp(a - alpha * np.log(n)) + np.exp(b - beta * np.log(d))
    le, c0, gamma = theta
    return np.exp(le) + np.exp(gamma * (c0 - np.log(c)))


def _exp(x: float) -> float:
    """exp that saturates to inf: a degenerate fit (gamma -> 0 pushes log C0 past 709) must not crash."""
    return math.exp(x) if x < 709.0 else math.inf


def step1_named(form: str, theta: np.ndarray) -> dict[str, float]:
    if form == "nd":
        le, a, alpha, b, beta = (float(x) for x in theta)
        return {"E": _exp(le), "A": _exp(a), "alpha": alpha, "B": _exp(b), "beta": beta}
    le, c0, gamma = (float(x) for x in theta)
    return {"E": _exp(le), "C0": _exp(c0), "gamma": gamma}


class _Step1:
    """Step-1 fitting in centred coordinates: ``x = log N - mean``, ``y = log D - mean`` (``z = log C - mean``);
    ``nd``: ``L = e^le + e^(ac - alpha x) + e^(bc - beta y)``, ``compute``: ``L = e^le + e^(g0 - gamma z)``.
    Starts from a variable-projection grid (exponents on a grid, the linear coefficients by NNLS), then a
    Huber least-squares polish in log space with the analytic Jacobian."""

    EXPONENTS = np.array([0.03, 0.06, 0.1, 0.15, 0.2, 0.27, 0.35, 0.45, 0.6, 0.8, 1.1, 1.5])

    def __init__(self, form: str, n, d, c, loss, delta: float = HUBER_DELTA):
        self.form, self.delta = form, delta
        self.loss = np.asarray(loss, float)
        self.logl = np.log(self.loss)
        if form == "nd":
            self.mx, self.my = float(np.mean(np.log(n))), float(np.mean(np.log(d)))
            self.x, self.y = np.log(n) - self.mx, np.log(d) - self.my
        else:
            self.mz = float(np.mean(np.log(c)))
            self.z = np.log(c) - self.mz
        le_lo, le_hi = math.log(1e-6 * float(np.min(loss))), math.log(float(np.max(loss)))
        if form == "nd":
            self.lo = np.array([le_lo, -60.0, 0.0, -60.0, 0.0])
            self.hi = np.array([le_hi, 60.0, 3.0, 60.0, 3.0])
        else:
            self.lo, self.hi = np.array([le_lo, -60.0, 1e-4]), np.array([le_hi, 60.0, 3.0])

    # centred <-> public coordinates
    def to_public(self, t: np.ndarray) -> np.ndarray:
        if self.form == "nd":
            le, ac, alpha, bc, beta = t
            return np.array([le, ac + alpha * self.mx, alpha, bc + beta * self.my, beta])
        le, g0, gamma = t
        return np.array([le, g0 / gamma + self.mz, gamma])

    def to_centred(self, p: np.ndarray) -> np.ndarray:
        if self.form == "nd":
            le, a, alpha, b, beta = p
            return np.array([le, a - alpha * self.mx, alpha, b - beta * self.my, beta])
        le, c0, gamma = p
        return np.array([le, gamma * (c0 - self.mz), gamma])

    def _terms(self, t):
        if self.form == "nd":
            le, ac, alpha, bc, beta = t
            return np.exp(le), np.exp(ac - alpha * self.x), np.exp(bc - beta * self.y)
        le, g0, gamma = t
        return np.exp(le), np.exp(g0 - gamma * self.z)

    def resid(self, t):
        return np.log(sum(self._terms(t))) - self.logl

    def jac(self, t):
        terms = self._terms(t)
        pred = sum(terms)
        if self.form == "nd":
            e, ta, tb = terms
            return np.column_stack([np.full_like(pred, e), ta, -self.x * ta, tb, -self.y * tb]) / pred[:, None]
        e, tc = terms
        return np.column_stack([np.full_like(pred, e), tc, -self.z * tc]) / pred[:, None]

    def grid_starts(self, top: int = 3) -> list[np.ndarray]:
        from scipy.optimize import nnls

        w = 1.0 / self.loss  # relative errors, like the log-space objective
        ones = np.ones_like(self.loss)
        found = []
        if self.form == "nd":
            combos = [(a, b) for a in self.EXPONENTS for b in self.EXPONENTS]
        else:
            combos = [(g,) for g in self.EXPONENTS]
        for ex in combos:
            if self.form == "nd":
                cols = [ones, np.exp(-ex[0] * self.x), np.exp(-ex[1] * self.y)]
            else:
                cols = [ones, np.exp(-ex[0] * self.z)]
            X = np.column_stack(cols) * w[:, None]
            coef, rnorm = nnls(X, self.loss * w)
            found.append((rnorm, ex, coef))
        found.sort(key=lambda f: f[0])
        starts = []
        lmin = float(np.min(self.loss))
        for _, ex, coef in found[:top]:
            coef = np.maximum(coef, 1e-3 * lmin)
            e = min(coef[0], 0.999 * lmin)
            if self.form == "nd":
                starts.append(np.array([math.log(e), math.log(coef[1]), ex[0], math.log(coef[2]), ex[1]]))
            else:
                starts.append(np.array([math.log(e), math.log(coef[1]), ex[0]]))
        return starts

    def fit(self, starts_centred: list[np.ndarray]) -> tuple[np.ndarray, float] | None:
        best = None
        for x0 in starts_centred:
            x0 = np.clip(x0, self.lo + 1e-9, self.hi - 1e-9)
            try:
                r = least_squares(self.resid, x0, jac=self.jac, bounds=(self.lo, self.hi), loss="huber",
                                  f_scale=self.delta, max_nfev=500, x_scale="jac")
            except (ValueError, FloatingPointError, np.linalg.LinAlgError):
                continue
            if np.all(np.isfinite(r.x)) and (best is None or r.cost < best[1]):
                best = (r.x, float(r.cost))
        return best


def fit_step1(form, n, d, c, loss, warm: np.ndarray | None = None, top: int = 3):
    """(public theta, cost) of the step-1 law, or None when no start converged. With ``warm`` (a bootstrap
    refit) only that start, and the grid when it fails."""
    f = _Step1(form, n, d, c, loss)
    best = f.fit([f.to_centred(warm)]) if warm is not None else None
    if best is None:
        best = f.fit(f.grid_starts(top))
    return None if best is None else (f.to_public(best[0]), best[1])


@dataclass
class LossLaw:
    """Step 1: task loss against scale."""

    form: str  # "nd": E + A/N^alpha + B/D^beta; "compute": E + (C0/C)^gamma
    params: dict[str, float]
    intervals: dict[str, tuple[float | None, float | None]]  # per parameter, from the bootstrap
    rmse_log: float  # root mean square of log(L_fit / L)
    reason: str  # why this form

    def to_dict(self) -> dict:
        return jsonable({"form": self.form, "params": self.params, "intervals": self.intervals,
                   "rmse_log": self.rmse_log, "reason": self.reason,
                   "formula": "E + A / N^alpha + B / D^beta" if self.form == "nd" else "E + (C0 / C)^gamma"})


def step1_curves(form, theta, T, n, d, c, flops_per_nd, hero_pt, level, f1) -> list[dict]:
    """Curves of the fitted task loss against compute: one for the compute form; for the (N, D) form one per
    tokens-per-parameter ratio of the ladder (and the hero's), over the ladder's sizes up to the hero's."""
    cmax = float(np.max(c))
    nmax = float(np.max(n))
    if hero_pt:
        cmax = max(cmax, hero_pt[2])
        if hero_pt[0] is not None:
            nmax = max(nmax, hero_pt[0])
    out = []
    if form == "compute":
        grid = np.geomspace(float(np.min(c)) / 1.5, cmax * 1.5, CURVE_POINTS)
        nan = np.full_like(grid, np.nan)
        out.append(_curve("fit", None, nan, nan, grid, form, theta, T, level, f1))
        return out
    log_r = np.log(d / n)
    keys = np.round(log_r / 0.1)  # ratios within ~10% form one group, drawn at the group's median ratio
    groups = sorted(float(np.exp(np.median(log_r[keys == k]))) for k in np.unique(keys))
    if hero_pt and hero_pt[0] is not None and hero_pt[1] is not None:
        hr = hero_pt[1] / hero_pt[0]
        if all(abs(math.log(hr / g)) > 0.1 for g in groups):
            groups.append(hr)
    for r in groups:
        pn = np.geomspace(float(np.min(n)) / 1.5, nmax * 1.5, CURVE_POINTS)
        pd_ = r * pn
        out.append(_curve(f"{r:.3g} tokens/param", float(r), pn, pd_, flops_per_nd * pn * pd_, form, theta, T, level,
                          f1))
    return out


def _curve(label, ratio, pn, pd_, pc, form, theta, T, level, f1) -> dict:
    y = step1_predict(form, theta, pn, pd_, pc)
    draws = np.array([stretch(y, step1_predict(form, t, pn, pd_, pc), f1, log=True) for t in T]) if len(T) \
        else np.empty((0, len(pc)))
    band = [quantiles(draws[:, j], level) if len(draws) else (None, None) for j in range(len(pc))]
    return {"label": label, "tokens_per_param": ratio, "params": pn, "tokens": pd_, "flops": pc, "loss": y,
            "loss_lo": [b[0] for b in band], "loss_hi": [b[1] for b in band]}
