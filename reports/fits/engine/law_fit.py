"""The one result type of every fit: :class:`LawFit`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

LEVEL = 0.90


@dataclass
class LawFit:
    """A fitted form: parameters (public names), their bootstrap intervals, residuals, the data used, and
    forecasts with prediction intervals for new runs.

    Prediction interval of a new run at ``raw`` (in the target's log space): draws
    ``point + kappa ((boot_b - mean boot) + sigma z)`` where ``boot_b`` are the bootstrap forecasts (parameter
    uncertainty), ``sigma`` the residual scatter (``sqrt(sum r^2 / dof)``, at least ``sigma_floor``, e.g. the
    seed-to-seed noise of replicates), ``z ~ N(0, 1)``, ``dof = n - p`` and ``kappa = t_{dof, 0.95} / z_{0.95}``:
    for a linear law with Gaussian noise these are the classical ``t_dof s sqrt(1 + h)`` intervals, for the few
    degrees of freedom of a small ladder."""

    form: Any
    theta: np.ndarray
    objective: float
    center: np.ndarray
    x: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    boot: np.ndarray | None
    raw: np.ndarray
    labels: list | None = None
    delta: float = 1e-3
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.y)

    @property
    def dof(self) -> int:
        return max(1, self.n - self.form.n_params)

    @property
    def fitted(self) -> np.ndarray:
        return self.form.predict_many(self.theta[None], self.x)[0]

    @property
    def residuals(self) -> np.ndarray:
        """``fitted - observed`` in the target's log space."""
        return self.fitted - self.y

    @property
    def sigma(self) -> float:
        return float(np.sqrt((self.weights * self.residuals**2).sum() / self.dof))

    @property
    def params(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.form.public(self.theta, self.center).items()}

    @property
    def kappa(self) -> float:
        """``t_{dof, 0.95} / z_{0.95}``: how much the bootstrap spread is widened for few degrees of freedom."""
        return float(stats.t.ppf(0.95, self.dof) / stats.norm.ppf(0.95))

    def intervals(self, level: float = LEVEL) -> dict[str, tuple[float, float] | None]:
        """Per public parameter, the interval of ``theta + kappa (boot_b - mean boot)`` (internal coordinates,
        then mapped), the same widening the forecasts get."""
        if self.boot is None:
            return {k: None for k in self.form.param_names}
        q = [(1 - level) / 2, (1 + level) / 2]
        draws = self.theta + self.kappa * (self.boot - self.boot.mean(axis=0))
        lo, hi = self.form.bounds(self.y)
        pub = self.form.public(np.clip(draws, lo, hi), self.center)
        return {k: (float(np.quantile(v, q[0])), float(np.quantile(v, q[1]))) for k, v in pub.items()}

    def _x(self, raw) -> np.ndarray:
        return self.form.prepare(
            np.atleast_2d(np.asarray(raw, dtype=float))
            if np.ndim(raw) > 1
            else np.asarray(raw, dtype=float).reshape(-1, self.raw.shape[1]),
            self.center,
        )[0]

    def predict(self, raw) -> np.ndarray:
        """Point forecasts of the target at raw inputs (m, F)."""
        return self.form.predict_many(self.theta[None], self._x(raw))[0]

    def predict_boot(self, raw) -> np.ndarray:
        """Bootstrap forecasts (B, m)."""
        if self.boot is None:
            raise ValueError("fitted without a bootstrap")
        return self.form.predict_many(self.boot, self._x(raw))

    def draws(
        self,
        raw,
        *,
        n_draws: int = 20000,
        sigma_floor: float = 0.0,
        seed: int = 0,
        noise: bool = True,
        t_factor: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(point (m,), draws (n_draws, m))`` of a new run's target (``noise=False``: of the law itself).
        ``t_factor=False`` leaves out ``kappa``: for callers that calibrate the intervals against held-out runs
        themselves (the loss forecast's rollout), where it would widen twice for the same few degrees of freedom."""
        rng = np.random.default_rng(seed)
        point = self.predict(raw)
        boot = self.predict_boot(raw)
        pick = rng.integers(0, len(boot), n_draws)
        dev = boot[pick] - boot.mean(axis=0)
        if noise:
            dev = dev + max(self.sigma, sigma_floor) * rng.standard_normal((n_draws, len(point)))
        # one Student-t factor on the sum: for a linear law with Gaussian noise this is exactly the classical
        # prediction interval t_{dof} s sqrt(1 + h) (a t-distributed noise added to a widened spread is wider)
        return point, point + (self.kappa if t_factor else 1.0) * dev

    def interval(self, raw, level: float = LEVEL, **kw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        point, d = self.draws(raw, **kw)
        lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return point, lo, hi

    def to_dict(self) -> dict:
        ci = self.intervals()
        return {
            "form": self.form.name,
            "params": self.params,
            "ci90": {k: (list(v) if v else None) for k, v in ci.items()},
            "n": self.n,
            "dof": self.dof,
            "sigma": self.sigma,
            "huber_delta": self.delta,
            "objective": self.objective,
            "n_boot": 0 if self.boot is None else len(self.boot),
        }
