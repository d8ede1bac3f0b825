"""The per-budget loss profiles of the IsoFLOP fit (:mod:`.isoflop_fit`): a parabola in log N per
budget, or the two-exponential shape the Chinchilla law implies (shared exponents, free linear coefficients per
budget). Both expose ``fit(y)``, ``optima``, ``fitted``, ``loss_at`` and ``n_params`` for the bootstrap; and the
per-run residuals of the profiles (``residual_rows``, ``residual_summary``)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ladder.reports.fits.runs import Runs

SHAPE_GRID = np.geomspace(0.03, 3.0, 30)
EXP_BOUNDS = (1e-3, 5.0)
GRID_BLOCK_BYTES = 64 * 2**20  # the shape fit's grid is solved in blocks of exponent pairs of about this size


def _full_grid() -> np.ndarray:
    return np.array([(a, b) for a in SHAPE_GRID for b in SHAPE_GRID])


class ParabolaFitter:
    """``L = c0 + c1 x + c2 x^2`` per budget, x = log N centered per budget, least squares in L."""

    def __init__(self, r: Runs, groups):
        self.xs = []
        self.centers = []
        for _, idx in groups:
            ln = np.log(r.params[idx])
            self.centers.append(ln.mean())
            self.xs.append(ln - ln.mean())
        self.groups = groups

    def n_params(self, state) -> int:
        return 3 * len(self.groups)

    def fit(self, y: np.ndarray, warm=None):
        coefs = []
        for x, (_, idx) in zip(self.xs, self.groups):
            design = np.stack([np.ones_like(x), x, x * x], axis=1)
            c, *_ = np.linalg.lstsq(design, y[idx], rcond=None)
            coefs.append(c)
        return np.array(coefs)

    def optima(self, state) -> np.ndarray:
        out = np.full(len(state), np.nan)
        for j, (c0, c1, c2) in enumerate(state):
            if c2 > 0:
                out[j] = self.centers[j] - c1 / (2 * c2)
        return out

    def fitted(self, state) -> np.ndarray:
        return np.concatenate([c[0] + c[1] * x + c[2] * x * x for c, x in zip(state, self.xs)])

    def loss_at(self, state, j, log_n) -> float:
        x = log_n - self.centers[j]
        c = state[j]
        return c[0] + c[1] * x + c[2] * x * x

    def shape(self, state):
        return None


class ShapeFitter:
    """``L = c0 + u exp(-alpha x) + v exp(beta x)`` per budget with shared (alpha, beta), least
    squares in relative error, by variable projection (all budgets solved in one batched call)."""

    def __init__(self, r: Runs, groups):
        self.groups = groups
        self.xs, self.centers = [], []
        for _, idx in groups:
            ln = np.log(r.params[idx])
            self.centers.append(ln.mean())
            self.xs.append(ln - ln.mean())
        self.idx = np.concatenate([idx for _, idx in groups])
        self.x = np.concatenate(self.xs)
        self.starts = np.cumsum([0] + [len(idx) for _, idx in groups[:-1]])
        self.budget_of = np.repeat(np.arange(len(groups)), [len(xx) for xx in self.xs])
        self._y = self._yl = None  # the last targets and their runs in budget order (Nelder-Mead reuses them)

    def n_params(self, state) -> int:
        return 3 * len(self.groups) + 2

    def _rows(self, y: np.ndarray) -> np.ndarray:
        if y is not self._y:
            self._y, self._yl = y, y[self.idx]
        return self._yl

    def _block(self, exps: np.ndarray, yl: np.ndarray):
        """Per exponent pair (G, 2): every run's relative residual (G, n) and the coefficients (G, n_budgets, 3).
        A run's residual depends on its own budget alone, so the first k budgets have the first rows of these."""
        x = self.x
        z = np.empty((len(exps), len(x), 3))
        z[:, :, 0] = 1.0
        z[:, :, 1] = np.exp(-exps[:, :1] * x)
        z[:, :, 2] = np.exp(exps[:, 1:] * x)
        z /= yl[None, :, None]
        outer = z[:, :, :, None] * z[:, :, None, :]  # (G, n, 3, 3)
        gram = np.add.reduceat(outer, self.starts, axis=1)  # (G, nb, 3, 3)
        gram += 1e-12 * np.trace(gram, axis1=2, axis2=3)[..., None, None] * np.eye(3)
        rhs = np.add.reduceat(z, self.starts, axis=1)  # (G, nb, 3)
        c = np.linalg.solve(gram, rhs[..., None])[..., 0]
        res = np.einsum("gni,gni->gn", z, c[:, self.budget_of, :]) - 1.0
        return res, c

    def _step(self) -> int:
        """Exponent pairs per block: about GRID_BLOCK_BYTES of temporaries (~16 floats per run and pair), so that
        a grid over many runs is never one (G, n, 3, 3) array (900 pairs x 10^5 runs: 6.5 GB)."""
        return max(1, GRID_BLOCK_BYTES // (128 * max(1, len(self.x))))

    def _solve(self, exps: np.ndarray, y: np.ndarray):
        """Per exponent pair (G, 2): total relative SSE (G,) and coefficients (G, n_budgets, 3)."""
        yl = self._rows(y)
        step = self._step()
        sse, coefs = [], []
        for i in range(0, len(exps), step):
            res, c = self._block(exps[i : i + step], yl)
            sse.append((res * res).sum(axis=1))
            coefs.append(c)
        if len(sse) == 1:
            return sse[0], coefs[0]
        return np.concatenate(sse), np.concatenate(coefs)

    def prefix_starts(self, y: np.ndarray, ks) -> dict[int, np.ndarray]:
        """Per ``k`` of ``ks``, the start :meth:`fit` takes from the grid for the first ``k`` budgets alone (a
        fitter of ``groups[:k]``): the grid's residuals are computed once for every budget, and each prefix sums
        its own first rows, the sums that fitter's grid makes, instead of a pass over the grid per prefix."""
        ends = {k: int(self.starts[k]) if k < len(self.groups) else len(self.x) for k in ks}
        if not ends:
            return {}
        grid = _full_grid()
        yl = self._rows(y)
        sse = {k: np.empty(len(grid)) for k in ks}
        step = self._step()
        for i in range(0, len(grid), step):
            res, _ = self._block(grid[i : i + step], yl)
            sq = res * res
            for k, end in ends.items():
                sse[k][i : i + step] = sq[:, :end].sum(axis=1)
        return {k: np.log(grid[np.argmin(v)]) for k, v in sse.items()}

    def fit(self, y: np.ndarray, warm=None, start=None):
        """``start``: log exponents to start Nelder-Mead from (:meth:`prefix_starts`); else the grid's best."""
        lo, hi = np.log(EXP_BOUNDS[0]), np.log(EXP_BOUNDS[1])
        if warm is not None:
            # Bootstrap replicate: a fine local grid (steps of 0.1 in log exponent, +-0.7) around the
            # full-data exponents; the minimum's location is insensitive to the exponents at that scale.
            steps = np.linspace(-0.7, 0.7, 15)
            le = np.log(warm["exps"])
            grid = np.exp(np.clip(np.array([(le[0] + d0, le[1] + d1) for d0 in steps for d1 in steps]), lo, hi))
            sse, coefs = self._solve(grid, y)
            best = int(np.argmin(sse))
            return {"exps": grid[best], "coefs": coefs[best]}
        if start is None:
            grid = _full_grid()
            sse, _ = self._solve(grid, y)
            start = np.log(grid[np.argmin(sse)])

        def prof(le):
            le = np.clip(le, lo, hi)
            return float(self._solve(np.exp(le)[None, :], y)[0][0])

        res = minimize(prof, start, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-14, "maxiter": 400})
        exps = np.exp(np.clip(res.x, lo, hi))
        _, coefs = self._solve(exps[None, :], y)
        return {"exps": exps, "coefs": coefs[0]}

    def optima(self, state) -> np.ndarray:
        al, be = state["exps"]
        out = np.full(len(self.groups), np.nan)
        for j, (c0, u, v) in enumerate(state["coefs"]):
            if u > 0 and v > 0:
                out[j] = self.centers[j] + np.log(al * u / (be * v)) / (al + be)
        return out

    def _curve(self, state, j, x):
        al, be = state["exps"]
        c0, u, v = state["coefs"][j]
        return c0 + u * np.exp(-al * x) + v * np.exp(be * x)

    def fitted(self, state) -> np.ndarray:
        return np.concatenate([self._curve(state, j, x) for j, x in enumerate(self.xs)])

    def loss_at(self, state, j, log_n) -> float:
        return float(self._curve(state, j, log_n - self.centers[j]))

    def shape(self, state):
        return {"alpha": float(state["exps"][0]), "beta": float(state["exps"][1])}


def residual_rows(labels, params, tokens, flops, loss, predicted) -> list[dict]:
    """Per-run residuals, observed minus predicted: ``log_residual = log L - log L_hat`` and
    ``pct = 100 * (L / L_hat - 1)`` (positive: the run did worse than its profile)."""
    return [
        {
            "run": labels[i] if labels else i,
            "params": float(params[i]),
            "tokens": float(tokens[i]),
            "flops": float(flops[i]),
            "loss": float(loss[i]),
            "predicted": float(predicted[i]),
            "log_residual": float(np.log(loss[i] / predicted[i])),
            "pct": float(100.0 * (loss[i] / predicted[i] - 1.0)),
        }
        for i in range(len(loss))
    ]


def residual_summary(rows: list[dict]) -> dict:
    if not rows:
        return {"rms_log": None, "mean_abs_pct": None, "max_abs_pct": None}
    r = np.array([row["log_residual"] for row in rows])
    p = np.abs([row["pct"] for row in rows])
    return {"rms_log": float(np.sqrt(np.mean(r**2))), "mean_abs_pct": float(p.mean()), "max_abs_pct": float(p.max())}
