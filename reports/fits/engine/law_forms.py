"""Law forms: how a parameter vector predicts a log-space target from features, with analytic Jacobians.

A form works on *prepared* features: :meth:`Form.prepare` maps the raw inputs (e.g. params and tokens) to the
matrix the form predicts from, with a centre taken from the fitted data (centred log features make the
intercepts and the exponents nearly uncorrelated, which conditions the problem). Every method is vectorized
over many parameter vectors at once (``thetas`` of shape ``(G, P)``), so that thousands of starts or
bootstrap replicates are scored and refined together.

- :class:`PowerSum`: ``L = E + sum_k A_k X_k^-alpha_{m(k)}`` predicted as ``log L = LSE(e, a_k - alpha_m(k)
  x_k)`` (Epoch's log-sum-exp form), exponents possibly shared between terms (``exp_map``); Chinchilla's
  ``L(N, D)``, the equal-exponent over-training law, ``L(C)``.
- :class:`Bounded`: a PowerSum's reducible part ``R`` capped by a plateau, ``L = E + 1 / (1/R + 1/(U - E))``
  (``U``: the loss the smallest runs cannot get below, near the context-free entropy of the data).
- :class:`Linear`: ``y = Phi(x) beta`` for a design built from the raw inputs (power laws in log-log space,
  quadratic surfaces of log loss over log LR and log batch, log-linear trends).
- :class:`ScaledPower`: ``y = c exp(-gamma x)``, a gap that shrinks (or grows) as a power of scale and never
  changes sign.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product
from typing import Protocol

import numpy as np

EXP_GRID = np.geomspace(0.02, 3.0, 36)
NO_PLATEAU = 8.0  # Bounded's largest log(U - E) above the log of the highest loss: e^8 x, Chinchilla to 0.05%
GRID_BLOCK_BYTES = 64 * 2**20  # variable projection solves its grid in blocks of about this many bytes of temporaries


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


def _lse_parts(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(m, s, tot)`` of a log-sum-exp over the last axis of ``t`` (a handful of terms): ``m`` the largest term,
    ``s = exp(t - m)``, ``tot`` their sum, ``m`` and ``tot`` with that axis kept at length one. Term by term, not
    numpy's reductions: a reduction over a last axis of 2-3 elements runs its inner loop once per element of the
    other axes, the slowest part of a fit; the result is the same to the bit (max is exact, and numpy sums fewer
    than 8 elements in order)."""
    m = t[..., :1].copy()
    for i in range(1, t.shape[-1]):
        np.maximum(m, t[..., i : i + 1], out=m)
    s = np.exp(t - m)
    tot = s[..., :1].copy()
    for i in range(1, t.shape[-1]):
        tot += s[..., i : i + 1]
    return m, s, tot


class PowerSum:
    """``log L = LSE(e, a_1 - alpha_m(1) x_1, ..., a_K - alpha_m(K) x_K)`` on centred log features.

    Parameters (internal): ``[e, a_1..a_K, alpha_1..alpha_J]`` with ``a_k`` in centred coordinates; public:
    ``E = exp(e)``, ``A_k = exp(a_k + alpha_m(k) c_k)`` (raw), ``alpha_j``. ``feature_power`` multiplies each log
    feature (e.g. 2 for N^2) before centring."""

    def __init__(
        self,
        name: str,
        param_names: Sequence[str],
        exp_map: Sequence[int],
        *,
        exp_bounds: tuple[float, float] = (0.0, 5.0),
        exp_grid: np.ndarray | None = None,
    ):
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
        self._own_exponents = self.exp_map == tuple(range(self.k))  # then the selection matrix is the identity

    def prepare(self, raw, center=None):
        return _log_centered(raw, center)

    def _terms(self, thetas: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``[e, a_k - alpha_m(k) x_k]`` per candidate and point, ``(G, n, 1 + K)``."""
        alpha = thetas[:, 1 + self.k :]
        out = np.empty((len(thetas), x.shape[0], 1 + self.k))
        out[..., 0] = thetas[:, 0, None]
        np.subtract(thetas[:, None, 1 : 1 + self.k], self._exponents(alpha)[:, None, :] * x[None], out=out[..., 1:])
        return out

    def _exponents(self, alpha: np.ndarray) -> np.ndarray:
        """Each term's exponent (``alpha_m(k)``): the columns of ``alpha`` themselves when every term has its own."""
        return alpha if self._own_exponents else alpha @ self._m.T

    def predict_many(self, thetas, x):
        m, _, tot = _lse_parts(self._terms(np.atleast_2d(thetas), x))
        return (m + np.log(tot))[..., 0]

    def resid_jac_many(self, thetas, x, y):
        m, s, tot = _lse_parts(self._terms(thetas, x))
        r = (m + np.log(tot))[..., 0] - y
        soft = s / tot
        jac = np.empty(r.shape + (self.n_params,))
        jac[..., : 1 + self.k] = soft
        if self._own_exponents:
            np.negative(soft[..., 1:] * x[None], out=jac[..., 1 + self.k :])
        else:
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
        loss = np.exp(y)
        # in blocks of grid points (each grid point's solve is its own): one (G, n, K) array was 60 KB a run
        step = max(1, GRID_BLOCK_BYTES // (8 * (4 * self.k + 3) * max(1, x.shape[0])))
        coef = np.concatenate([self._projection(exps[i : i + step], x, loss) for i in range(0, len(exps), step)])
        coef = np.maximum(coef, 1e-6 * loss.min())
        return np.concatenate([np.log(coef), exps], axis=1)

    def _projection(self, exps, x, loss):
        """The least-squares ``(E, A_k)`` of the grid points ``exps`` (G, J): (G, 1 + K)."""
        z = np.exp(-(exps @ self._m.T)[:, None, :] * x[None, :, :])  # (G, n, K)
        design = np.concatenate([np.ones(z.shape[:2] + (1,)), z], axis=2) / loss[None, :, None]
        gram = np.einsum("gni,gnj->gij", design, design)
        gram += 1e-10 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(self.k + 1)
        rhs = design.sum(axis=1)
        return np.linalg.solve(gram, rhs[..., None])[..., 0]

    def public(self, thetas, center):
        th = np.atleast_2d(np.asarray(thetas, dtype=float))
        alpha = th[:, 1 + self.k :]
        a_raw = th[:, 1 : 1 + self.k] + (alpha @ self._m.T) * center
        cols = [np.exp(th[:, 0])] + [np.exp(a_raw[:, k]) for k in range(self.k)] + [alpha[:, j] for j in range(self.j)]
        out = dict(zip(self.param_names, cols))
        return {k: (v[0] if np.ndim(thetas) == 1 else v) for k, v in out.items()}


class Bounded:
    """``L = E + R K / (R + K)`` with ``R = sum_k A_k X_k^-alpha_m(k)`` (a :class:`PowerSum` without its E) and
    ``K = U - E``: the reducible loss is the harmonic sum of the power law's and the plateau's, so far above the
    plateau (R << K) it is the power law itself and near it the loss levels off at ``U`` instead of growing
    without bound as N and D shrink. A power law plus a constant is convex in log-log; a ladder of micro models
    starts on the plateau (the loss of a model that has learned little more than token frequencies) and bends
    down from it, so its log-log curve is concave there and the plain law, fitted to it, under-forecasts the gains
    of the next rungs.

    Parameters (internal): the PowerSum's ``[e, a_1..a_K, alpha_1..alpha_J]`` and ``k = log K``; public: the
    PowerSum's and ``U = E + K``. Log loss is ``LSE(e, h)`` with ``h = -LSE(-log R, -k)``."""

    def __init__(self, name: str, power: PowerSum, plateau_name: str = "U"):
        self.name = name
        self.power = power
        self.param_names = power.param_names + (plateau_name,)
        self.n_params = power.n_params + 1

    def prepare(self, raw, center=None):
        return self.power.prepare(raw, center)

    def _parts(self, thetas, x):
        th = np.atleast_2d(thetas)
        p = self.power
        m, s, tot = _lse_parts(p._terms(th[:, :-1], x)[..., 1:])  # the power terms, no E
        log_r = (m + np.log(tot))[..., 0]
        k = th[:, -1][:, None]
        h = -np.logaddexp(-log_r, -k)
        e = np.broadcast_to(th[:, 0][:, None], h.shape)
        return th, e, k, log_r, h, s / tot

    def predict_many(self, thetas, x):
        _, e, _, _, h, _ = self._parts(thetas, x)
        return np.logaddexp(e, h)

    def resid_jac_many(self, thetas, x, y):
        th, e, k, log_r, h, soft = self._parts(thetas, x)
        log_l = np.logaddexp(e, h)
        r = log_l - y
        d_e = np.exp(e - log_l)  # d log L / d e
        d_h = 1.0 - d_e
        w_r = np.exp(h - log_r)  # d h / d log R = K / (R + K)
        d_r = d_h * w_r
        p = self.power
        jac = np.empty(r.shape + (self.n_params,))
        jac[..., 0] = d_e
        jac[..., 1 : 1 + p.k] = d_r[..., None] * soft
        jac[..., 1 + p.k : p.n_params] = -(d_r[..., None] * soft * x[None]) @ p._m
        jac[..., -1] = d_h * (1.0 - w_r)
        return r, jac

    def bounds(self, y):
        lo, hi = self.power.bounds(y)
        return np.r_[lo, np.log(0.01) + float(np.min(y))], np.r_[hi, float(np.max(y)) + NO_PLATEAU]

    def candidates(self, x, y):
        """The power law's candidates, each with the plateau a few multiples of the highest loss above E (and
        one at the upper bound: no plateau in reach, the power law alone)."""
        base = self.power.candidates(x, y)
        top = float(np.max(y))
        ks = np.array([top + np.log(f) for f in (0.25, 0.5, 1.0, 2.0)] + [top + NO_PLATEAU])
        return np.concatenate([np.c_[base, np.full(len(base), k)] for k in ks])

    def public(self, thetas, center):
        th = np.atleast_2d(np.asarray(thetas, dtype=float))
        out = self.power.public(th[:, :-1], center)
        out = {k: np.atleast_1d(v) for k, v in out.items()}
        out[self.param_names[-1]] = np.exp(th[:, 0]) + np.exp(th[:, -1])
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

    def __init__(
        self,
        name: str = "scaled_power",
        param_names: Sequence[str] = ("c", "gamma"),
        gamma_bounds: tuple[float, float] = (-2.0, 2.0),
    ):
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
