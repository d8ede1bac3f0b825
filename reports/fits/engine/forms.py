"""Law forms: how a parameter vector predicts a log-space target from features, with analytic Jacobians.

A form works on *prepared* features: :meth:`Form.prepare` maps the raw inputs (e.g. params and tokens) to the
matrix the form predicts from, with a centre taken from the fitted data (centred log features make the
intercepts and the exponents nearly uncorrelated, which conditions the problem). Every method is vectorized
over many parameter vectors at once (``thetas`` of shape ``(G, P)``), so that thousands of starts or
bootstrap replicates are scored and refined together.

- :class:`PowerSum`: ``L = E + sum_k A_k X_k^-alpha_{m(k)}`` predicted as ``log L = LSE(e, a_k - alpha_m(k)
  x_k)`` (Epoch's log-sum-exp form), exponents possibly shared between terms (``exp_map``); Chinchilla's
  ``L(N, D)``, the equal-exponent over-training law, ``L(C)``.
- :class:`Linear`: ``y = Phi(x) beta`` for a design built from the raw inputs (power laws in log-log space,
  quadratic surfaces of log loss over log LR and log batch, log-linear trends).
- :class:`ScaledPower`: ``y = c exp(-gamma x)``, a gap that shrinks (or grows) as a power of scale and never
  changes sign.
"""

from __future__ import annotations

from itertools import product
from typing import Callable, Protocol, Sequence

import numpy as np

EXP_GRID = np.geomspace(0.02, 3.0, 36)


class Form(Protocol):
    name: str
    param_names: tuple[str, ...]
    n_params: int

    def prepare(self, raw: np.ndarray, center: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]: ...

    def predict_many(self, thetas: np.ndarray, x: np.ndarray) -> np.ndarray: ...

    def resid_jac_many(self, thetas: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def candidates(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def bounds(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def public(self, thetas: np.ndarray, center: np.ndarray) -> dict[str, np.ndarray]: ...


def _log_centered(raw: np.ndarray, center: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    logx = np.log(np.asarray(raw, dtype=float))
    if logx.ndim == 1:
        logx = logx[:, None]
    c = logx.mean(axis=0) if center is None else np.asarray(center, dtype=float)
    return logx - c, c


class PowerSum:
    """``log L = LSE(e, a_1 - alpha_m(1) x_1, ..., a_K - alpha_m(K) x_K)`` on centred log features.

    Parameters (internal): ``[e, a_1..a_K, alpha_1..alpha_J]`` with ``a_k`` in centred coordinates; public:
    ``E = exp(e)``, ``A_k = exp(a_k + alpha_m(k) c_k)`` (raw), ``alpha_j``. ``feature_power`` multiplies each log
    feature (e.g. 2 for N^2) before centring."""

    def __init__(self, name: str, param_names: Sequence[str], exp_map: Sequence[int], *,
                 exp_bounds: tuple[float, float] = (0.0, 5.0), exp_grid: np.ndarray | None = None):
        self.name = name
        self.exp_map = tuple(int(j) for j in exp_map)
        self.k = len(self.exp_map)
        self.j = max(self.exp_map) + 1
        self.n_params = 1 + self.k + self.j
        self.param_names = tuple(param_names)
        assert len(self.param_names) == self.n_params, (name, param_names)
        self.exp_bounds = exp_bounds
        self.exp_grid = EXP_GRID if exp_grid is None else np.asarray(exp_grid, dtype=float)
        self._m = np.zeros((self.k, self.j))
        self._m[np.arange(self.k), self.exp_map] = 1.0

    def prepare(self, raw, center=None):
        return _log_centered(raw, center)

    def _terms(self, thetas: np.ndarray, x: np.ndarray) -> np.ndarray:
        e, a, alpha = thetas[:, 0], thetas[:, 1 : 1 + self.k], thetas[:, 1 + self.k :]
        t = a[:, None, :] - (alpha @ self._m.T)[:, None, :] * x[None]  # (G, n, K)
        e = np.broadcast_to(e[:, None, None], t.shape[:2] + (1,))
        return np.concatenate([e, t], axis=2)

    def predict_many(self, thetas, x):
        t = self._terms(np.atleast_2d(thetas), x)
        m = t.max(axis=2)
        return m + np.log(np.exp(t - m[..., None]).sum(axis=2))

    def resid_jac_many(self, thetas, x, y):
        t = self._terms(thetas, x)
        m = t.max(axis=2, keepdims=True)
        s = np.exp(t - m)
        tot = s.sum(axis=2, keepdims=True)
        r = (m + np.log(tot))[..., 0] - y
        soft = s / tot
        jac = np.empty(r.shape + (self.n_params,))
        jac[..., : 1 + self.k] = soft
        jac[..., 1 + self.k :] = -(soft[..., 1:] * x[None]) @ self._m
        return r, jac

    def bounds(self, y):
        lo = [-30.0] + [-60.0] * self.k + [self.exp_bounds[0]] * self.j
        hi = [float(np.max(y)) + 1.0] + [60.0] * self.k + [self.exp_bounds[1]] * self.j
        return np.array(lo), np.array(hi)

    def candidates(self, x, y):
        """Variable projection: for every exponent tuple of a grid, the least-squares ``(E, A_k)`` of
        ``(E + sum_k A_k exp(-alpha x_k)) / L ~ 1`` (relative errors approximate log errors); coefficients
        that come out non-positive are clipped to tiny ones."""
        exps = np.array(list(product(self.exp_grid, repeat=self.j)))  # (G, J)
        z = np.exp(-(exps @ self._m.T)[:, None, :] * x[None, :, :])  # (G, n, K)
        loss = np.exp(y)
        design = np.concatenate([np.ones(z.shape[:2] + (1,)), z], axis=2) / loss[None, :, None]
        gram = np.einsum("gni,gnj->gij", design, design)
        gram += 1e-10 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(self.k + 1)
        rhs = design.sum(axis=1)
        coef = np.linalg.solve(gram, rhs[..., None])[..., 0]
        coef = np.maximum(coef, 1e-6 * loss.min())
        return np.concatenate([np.log(coef), exps], axis=1)

    def public(self, thetas, center):
        th = np.atleast_2d(np.asarray(thetas, dtype=float))
        alpha = th[:, 1 + self.k :]
        a_raw = th[:, 1 : 1 + self.k] + (alpha @ self._m.T) * center
        cols = [np.exp(th[:, 0])] + [np.exp(a_raw[:, k]) for k in range(self.k)] + [alpha[:, j] for j in range(self.j)]
        out = dict(zip(self.param_names, cols))
        return {k: (v[0] if np.ndim(thetas) == 1 else v) for k, v in out.items()}


class Linear:
    """``y = Phi(raw) beta``: a law linear in its parameters (power laws in log-log space, quadratic surfaces,
    log-linear trends). ``design(raw) -> Phi``; ``center`` centres the design's non-constant columns."""

    def __init__(self, name: str, param_names: Sequence[str], design: Callable[[np.ndarray], np.ndarray]):
        self.name = name
        self.param_names = tuple(param_names)
        self.n_params = len(self.param_names)
        self.design = design

    def prepare(self, raw, center=None):
        phi = np.asarray(self.design(np.asarray(raw, dtype=float)), dtype=float)
        if phi.ndim == 1:
            phi = phi[:, None]
        constant = np.all(phi == phi[:1], axis=0) if len(phi) else np.zeros(phi.shape[1], bool)
        c = np.where(constant, 0.0, phi.mean(axis=0)) if center is None else np.asarray(center, dtype=float)
        return phi - c, c

    def predict_many(self, thetas, x):
        return np.atleast_2d(thetas) @ x.T

    def resid_jac_many(self, thetas, x, y):
        r = thetas @ x.T - y
        return r, np.repeat(x[None], len(r), axis=0)

    def bounds(self, y):
        return np.full(self.n_params, -1e6), np.full(self.n_params, 1e6)

    def candidates(self, x, y):
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        return beta[None]

    def public(self, thetas, center):
        """Coefficients of the uncentred design: the centring moves only the intercept (column 0 when the
        design has a constant first column)."""
        th = np.atleast_2d(np.asarray(thetas, dtype=float)).copy()
        th[:, 0] -= th[:, 1:] @ np.asarray(center)[1:] if len(center) > 1 else 0.0
        out = {name: th[:, i] for i, name in enumerate(self.param_names)}
        return {k: (v[0] if np.ndim(thetas) == 1 else v) for k, v in out.items()}


class ScaledPower:
    """``y = c exp(-gamma x)`` with ``x`` the centred log of one feature: a signed quantity (a gap of log losses)
    that shrinks (gamma > 0) or grows (gamma < 0) as a power of scale and never changes sign."""

    name = "scaled_power"
    n_params = 2

    def __init__(self, name: str = "scaled_power", param_names: Sequence[str] = ("c", "gamma"),
                 gamma_bounds: tuple[float, float] = (-2.0, 2.0)):
        self.name = name
        self.param_names = tuple(param_names)
        self.gamma_bounds = gamma_bounds

    def prepare(self, raw, center=None):
        return _log_centered(raw, center)

    def predict_many(self, thetas, x):
        th = np.atleast_2d(thetas)
        return th[:, :1] * np.exp(-th[:, 1:2] * x[None, :, 0])

    def resid_jac_many(self, thetas, x, y):
        z = np.exp(-thetas[:, 1:2] * x[None, :, 0])
        r = thetas[:, :1] * z - y
        jac = np.stack([z, -thetas[:, :1] * x[None, :, 0] * z], axis=2)
        return r, jac

    def bounds(self, y):
        big = 10.0 * float(np.max(np.abs(y))) + 1.0
        return np.array([-big, self.gamma_bounds[0]]), np.array([big, self.gamma_bounds[1]])

    def candidates(self, x, y):
        gammas = np.linspace(*self.gamma_bounds, 41)
        z = np.exp(-gammas[:, None] * x[None, :, 0])  # (G, n)
        c = (z * y).sum(axis=1) / np.maximum((z * z).sum(axis=1), 1e-300)
        return np.stack([c, gammas], axis=1)

    def public(self, thetas, center):
        th = np.atleast_2d(np.asarray(thetas, dtype=float))
        out = {self.param_names[0]: th[:, 0] * np.exp(th[:, 1] * center[0]), self.param_names[1]: th[:, 1]}
        return {k: (v[0] if np.ndim(thetas) == 1 else v) for k, v in out.items()}
