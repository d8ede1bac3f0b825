"""Fitting a form: a global multi-start search, then residual-bootstrap refits from fresh starts.

The search: the form proposes candidates (a grid, variable projection, or a closed form); all are scored with
the Huber objective at once; the ``n_starts`` best distinct ones are minimized together by a batched, damped
Gauss-Newton on the Huber loss (:func:`minimize_many`, iteratively reweighted Levenberg-Marquardt); the best is
polished by L-BFGS-B with the analytic gradient and kept if it is lower. BLAS runs single-threaded meanwhile
(thousands of tiny solves; a multi-threaded BLAS spends most of each call waking threads).

The bootstrap (:func:`bootstrap`): the design is the ladder the user chose, so it is kept and the noise is
redrawn: replicate ``b`` refits ``y*_b = yhat + sigma z_b`` with ``z ~ N(0, 1)`` and ``sigma`` the residual
scatter with ``n - p`` degrees of freedom (a parametric bootstrap of log-normal noise). Resampling runs instead
(cases) repeats points and leaves some rungs out of a 3-7 rung ladder, which made the spread of far forecasts
~2x too wide in the synthetic checks; resampling the residuals themselves made it ~10% too narrow (a robust fit
leaves several residuals near zero), so that 90% intervals covered 82-87% (60 repetitions,
tests/reports/fits/test_engine.py's design); Gaussian redraws covered 88-92%. Every replicate starts afresh: it
re-scores a pool of distinct candidates from the full-data search under its own data and minimizes from its
own best few, so a replicate can land in another basin than the full-data optimum.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext

import numpy as np
from scipy.optimize import minimize

from ladder.reports.fits.engine.law_fit import LawFit

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - a dependency of the project, optional here
    ThreadpoolController = None

HUBER_DELTA = 1e-3
POOL = 64  # distinct candidates a bootstrap replicate chooses its starts from
BLOCK_BYTES = 64 * 2**20  # the bootstrap scores its replicates in blocks of about this many bytes of temporaries


@functools.lru_cache(maxsize=1)
def _controller():
    return ThreadpoolController() if ThreadpoolController is not None else None


def single_threaded_blas(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        ctl = _controller()
        with ctl.limit(limits=1) if ctl is not None else nullcontext():
            return func(*args, **kwargs)

    return wrapper


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def minimize_many(form, thetas, x, y, weights=None, *, delta=HUBER_DELTA, maxiter=200, rtol=1e-12):
    """Minimize the Huber objective for a batch of starts, each with its own targets ``y`` (S, n) and weights:
    Gauss-Newton with Levenberg-Marquardt damping on the Huber loss majorized by a weighted square (weights
    ``min(1, delta/|r|)``, so the weighted gradient is exactly the Huber gradient); a step is kept only where it
    lowers that row's objective, else the damping grows; bounds by clipping. Returns ``(thetas, objectives)``."""
    thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
    n = x.shape[0]
    w = np.ones((1, n)) if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
    y = np.atleast_2d(np.asarray(y, dtype=float))
    size = max(len(thetas), len(w), len(y))
    thetas = np.array(np.broadcast_to(thetas, (size, thetas.shape[1])))
    w = np.broadcast_to(w, (size, n))
    y = np.broadcast_to(y, (size, n))
    lo, hi = form.bounds(y)
    thetas = np.clip(thetas, lo, hi)
    lam = np.full(size, 1e-3)
    r, jac = form.resid_jac_many(thetas, x, y)
    f = (w * huber(r, delta)).sum(axis=1)
    active = np.ones(size, dtype=bool)
    for _ in range(maxiter):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        ra, ja, wa = r[idx], jac[idx], w[idx]
        omega = wa * np.minimum(1.0, delta / np.maximum(np.abs(ra), 1e-300))
        jwt = (ja * omega[:, :, None]).transpose(0, 2, 1)
        hess = jwt @ ja
        grad = (jwt @ ra[:, :, None])[..., 0]
        diag = np.einsum("spp->sp", hess)  # a view: read before the damping is added in place
        damp = lam[idx, None] * (diag + 1e-12 * diag.max(axis=1)[:, None] + 1e-30)
        damped = hess.copy()
        np.einsum("spp->sp", damped)[...] += damp
        try:
            step = -np.linalg.solve(damped, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = -np.stack([np.linalg.lstsq(h, g, rcond=None)[0] for h, g in zip(damped, grad)])
        cand = np.clip(thetas[idx] + step, lo, hi)
        rc, jc = form.resid_jac_many(cand, x, y[idx])
        fc = (wa * huber(rc, delta)).sum(axis=1)
        better = fc < f[idx]
        gain = np.where(better, (f[idx] - fc) / np.maximum(f[idx], 1e-300), 0.0)
        moved = np.abs(cand - thetas[idx]).max(axis=1)
        b = idx[better]
        thetas[b], r[b], jac[b], f[b] = cand[better], rc[better], jc[better], fc[better]
        lam[idx] = np.where(better, np.maximum(lam[idx] / 3.0, 1e-12), lam[idx] * 4.0)
        done = (better & (gain < rtol)) | (moved < 1e-13) | (lam[idx] > 1e10)
        active[idx[done]] = False
    return thetas, f


def _lbfgs(form, theta0, x, y, w, delta):
    # scaled to O(1), so that L-BFGS-B's relative tolerances mean something at delta = 1e-3
    scale = 1.0 / (delta * w.sum())
    lo, hi = form.bounds(y)

    def fun(th):
        r, jac = form.resid_jac_many(th[None], x, y[None])
        h = (w * huber(r[0], delta)).sum()
        return h * scale, ((np.clip(r[0], -delta, delta) * w) @ jac[0]) * scale

    res = minimize(
        fun,
        np.clip(theta0, lo, hi),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"maxiter": 1000, "ftol": 1e-13, "gtol": 1e-10, "maxcor": 20},
    )
    return res.x, float(res.fun / scale)


def _distinct(order: np.ndarray, scores: np.ndarray, cands: np.ndarray, k: int, tol: float = 1e-2) -> list[int]:
    chosen: list[int] = []
    for i in order:
        if not np.isfinite(scores[i]):
            break
        if all(np.max(np.abs(cands[i] - cands[j])) > tol for j in chosen):
            chosen.append(int(i))
            if len(chosen) >= k:
                break
    return chosen


def _scores(form, cands, x, y, w, delta, chunk=4_000_000):
    out = np.empty(len(cands))
    step = max(1, chunk // max(1, x.size + len(y)))
    for i in range(0, len(cands), step):
        out[i : i + step] = huber(form.predict_many(cands[i : i + step], x) - y, delta) @ w
    return out


def search(form, x, y, w, *, delta=HUBER_DELTA, n_starts=8, extra=None):
    """The global fit. Returns ``(theta, objective, pool)``: the pool holds the best distinct candidates
    (for the bootstrap's fresh starts)."""
    cands = form.candidates(x, y)
    if extra is not None:
        cands = np.concatenate([cands, np.atleast_2d(extra)])
    lo, hi = form.bounds(y)
    cands = np.clip(cands, lo, hi)
    scores = _scores(form, cands, x, y, w, delta)
    order = np.argsort(scores)
    pool = cands[_distinct(order, scores, cands, POOL)]
    starts = pool[:n_starts]
    th, fs = minimize_many(form, starts, x, y, w[None], delta=delta)
    best = int(np.argmin(fs))
    theta, obj = th[best], float(fs[best])
    polished, pf = _lbfgs(form, theta, x, y, w, delta)
    if pf < obj:
        theta, obj = polished, pf
    return theta, obj, np.concatenate([theta[None], th, pool])


def bootstrap(form, theta, pool, x, y, w, *, n_boot, seed, delta=HUBER_DELTA, starts=2, noise=None):
    """Parametric-bootstrap refits, each from its own fresh starts; ``(n_boot, P)``. ``noise`` (``(n_boot, n)``
    standard normals) replaces the seeded draws: several forms fitted to the same runs then see the same
    redrawn data in replicate ``b``, so their replicates are paired (see the loss forecast's mixture)."""
    n, p = len(y), form.n_params
    if noise is None:
        noise = np.random.default_rng(seed).standard_normal((n_boot, n))
    elif noise.shape != (n_boot, n):
        raise ValueError(f"bootstrap noise has shape {noise.shape}, expected {(n_boot, n)}")
    yhat = form.predict_many(theta[None], x)[0]
    sigma = float(np.sqrt((w * (y - yhat) ** 2).sum() / max(1, n - p)))
    ys = yhat + sigma * noise
    preds = form.predict_many(pool, x)  # (G, n): candidates do not depend on the targets
    # every replicate's own best `starts` candidates of the (already distinct) pool; in blocks of replicates
    # (each replicate's scores are its own): one (B, G, n) array and huber's temporaries were ~0.5 MB a run at 200
    step = max(1, BLOCK_BYTES // (4 * 8 * preds.size))
    scores = np.concatenate(
        [
            np.einsum("bgn,n->bg", huber(preds[None] - ys[i : i + step, None, :], delta), w)
            for i in range(0, n_boot, step)
        ]
    )
    k = min(starts, len(pool))
    best = np.argsort(scores, axis=1)[:, :k]  # (B, k)
    th, f = minimize_many(form, pool[best.ravel()], x, np.repeat(ys, k, axis=0), w[None], delta=delta, rtol=1e-10)
    pick = np.argmin(f.reshape(n_boot, k), axis=1)
    return th.reshape(n_boot, k, p)[np.arange(n_boot), pick]


@single_threaded_blas
def fit(
    form,
    raw,
    y,
    *,
    weights=None,
    n_boot: int = 200,
    seed: int = 0,
    delta: float = HUBER_DELTA,
    n_starts: int = 8,
    extra=None,
    labels=None,
    noise=None,
) -> LawFit:
    """Fit ``form`` to targets ``y`` (a log-space quantity) at raw inputs ``raw`` (n, F) and bootstrap it.
    ``labels`` (run ids) are kept with the data used; ``noise``: the bootstrap's standard normals, one column
    per point (:func:`bootstrap`)."""
    y = np.asarray(y, dtype=float)
    x, center = form.prepare(raw)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    theta, obj, pool = search(form, x, y, w, delta=delta, n_starts=n_starts, extra=extra)
    boot = bootstrap(form, theta, pool, x, y, w, n_boot=n_boot, seed=seed, delta=delta, noise=noise) if n_boot else None
    return LawFit(
        form=form,
        theta=theta,
        objective=obj,
        center=center,
        x=x,
        y=y,
        weights=w,
        boot=boot,
        raw=np.asarray(raw, dtype=float),
        labels=None if labels is None else list(labels),
        delta=delta,
    )
