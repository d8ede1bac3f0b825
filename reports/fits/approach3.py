"""Approach 3 (Chinchilla's parametric fit): ``L(N, D) = E + A / N^alpha + B / D^beta``.

Fitted as Epoch AI's replication does (Besiroglu et al. 2024, epoch-research/analyzing-chinchilla):
parameters ``(a, b, e, alpha, beta) = (log A, log B, log E, alpha, beta)``, prediction
``LSE(a - alpha log N, b - beta log D, e)``, objective ``sum_i Huber_1e-3(LSE_i - log L_i)``
minimized with L-BFGS-B. The search is fast (see :mod:`ladder.reports.fits.lsefit`): analytic gradient,
centered coordinates, and starts chosen by scoring a variable-projection grid plus Epoch's 4,500-point
grid vectorized, then L-BFGS-B from the best few only.

Intervals: cases bootstrap over runs (resampled with replacement, each refit warm-started at the
full-data optimum); 90% intervals are the 5th/95th percentiles of the draws. Prediction intervals
add resampled residual scatter (see :mod:`ladder.reports.fits.predictions`).

Compute-optimal allocation under ``C = 6 N D``:
``N*(C) = G (C/6)^(beta/(alpha+beta))``, ``D*(C) = G^-1 (C/6)^(alpha/(alpha+beta))``,
``G = (alpha A / (beta B))^(1/(alpha+beta))``.

Degenerate ladders: when every run uses the same tokens per parameter (or, generally, ``log D`` is
an affine function of ``log N``: a fixed ratio, a fixed token budget, ``D = c N^s``), ``A/alpha`` and
``B/beta`` cannot be separated. The fit then says so (``degenerate=True`` and a reason), fits the
reduced law ``L = E + A / N^alpha`` along that line (``B`` and ``beta`` are ``None``; ``A`` and
``alpha`` absorb both terms), predicts only on the line (within 25% of its tokens, or 3x the
ladder's own scatter about it), and reports the compute-optimal allocation as not identifiable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits import lsefit
from ladder.reports.fits.backtest import Backtest, run_backtest
from ladder.reports.fits.predictions import (
    Prediction,
    inflated_residuals,
    intervals,
    residual_rows,
    residual_summary,
    squeeze,
)
from ladder.reports.fits.runs import Runs, as_runs, resample_weights

FORM = "chinchilla"
KEYS = ("E", "A", "B", "alpha", "beta")
COLLINEAR_TOL = 0.05  # std of log D about its best affine fit in log N below which D is "tied" to N
LINE_TOL = np.log(1.25)  # how far (in log tokens) off the ladder's line a degenerate fit may predict


@dataclass(frozen=True)
class Allocation:
    """Compute-optimal allocation at given FLOPs (``C = 6 N D``), with bootstrap intervals."""

    flops: float | np.ndarray
    identifiable: bool
    reason: str | None = None
    params: float | np.ndarray | None = None
    tokens: float | np.ndarray | None = None
    tokens_per_param: float | np.ndarray | None = None
    loss: float | np.ndarray | None = None
    ci90: dict = field(default_factory=dict)  # params, tokens, tokens_per_param, loss -> (lo, hi)

    def to_dict(self) -> dict:
        return {
            "flops": jsonable(self.flops),
            "identifiable": self.identifiable,
            "reason": self.reason,
            "params": jsonable(self.params),
            "tokens": jsonable(self.tokens),
            "tokens_per_param": jsonable(self.tokens_per_param),
            "loss": jsonable(self.loss),
            "ci90": {k: [jsonable(v[0]), jsonable(v[1])] for k, v in self.ci90.items()},
        }


@dataclass(frozen=True)
class ChinchillaFit:
    """A fitted ``L(N, D) = E + A / N^alpha + B / D^beta`` (``B``, ``beta`` None when degenerate)."""

    E: float
    A: float
    B: float | None
    alpha: float
    beta: float | None
    ci90: dict
    n_runs: int
    n_sizes: int
    degenerate: bool
    degenerate_reason: str | None
    huber_delta: float
    objective: float
    n_boot: int
    residuals: list[dict]
    backtest: Backtest | None = None
    line: dict | None = None  # degenerate only: log D = log(coef) + slope * log N, tol_log
    theta: np.ndarray = field(default=None, repr=False, compare=False)  # raw [e, a, (b), alpha, (beta)]
    boot: np.ndarray = field(default=None, repr=False, compare=False)  # (n_boot, P) raw draws
    scatter: np.ndarray = field(default=None, repr=False, compare=False)  # inflated log residuals
    seed: int = 0

    # ----------------------------------------------------------------- prediction
    def _features(self, params, tokens) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        scalar = np.ndim(params) == 0 and (tokens is None or np.ndim(tokens) == 0)
        n = np.atleast_1d(np.asarray(params, dtype=float))
        if tokens is None:
            if not self.degenerate:
                raise FitError("predict: tokens are needed (the fit is not degenerate, loss depends on N and D)")
            d = np.exp(np.log(self.line["coef"]) + self.line["slope"] * np.log(n))
        else:
            d = np.atleast_1d(np.asarray(tokens, dtype=float))
        n, d = np.broadcast_arrays(n, d)
        if not (np.all(np.isfinite(n)) and np.all(np.isfinite(d)) and np.all(n > 0) and np.all(d > 0)):
            raise FitError("predict: params and tokens must be finite and positive")
        if self.degenerate:
            off = np.abs(np.log(d) - np.log(self.line["coef"]) - self.line["slope"] * np.log(n))
            if np.any(off > self.line["tol_log"]):
                raise FitError(
                    f"predict: the fit is degenerate ({self.degenerate_reason}); it can only forecast runs "
                    f"on that line (tokens ~ {_line_text(self.line)}), and some requested tokens are off it "
                    f"by up to {100 * (np.exp(off.max()) - 1):.0f}%; add ladder runs at other token multipliers"
                )
            x = np.log(n)[:, None]
        else:
            x = np.stack([np.log(n), np.log(d)], axis=1)
        return n, d, x, scalar

    def __call__(self, params, tokens=None):
        """Point forecast of the loss."""
        _, _, x, scalar = self._features(params, tokens)
        return squeeze(np.exp(lsefit.log_predict(self.theta, x)), scalar)

    def predict(self, params, tokens=None, level: float = 0.90) -> Prediction:
        """Forecast with a ``level`` prediction interval (bootstrap fits + resampled residual scatter)
        and the law's confidence interval. ``tokens`` may be omitted for a degenerate fit (then the
        ladder's own tokens-per-parameter line is used)."""
        n, d, x, scalar = self._features(params, tokens)
        point = lsefit.log_predict(self.theta, x)
        boot = lsefit.log_predict_many(self.boot, x) if self.boot is not None and len(self.boot) else None
        lo, hi, ci_lo, ci_hi = intervals(point, boot, self.scatter, level, self.seed)
        s = lambda a: squeeze(a, scalar)  # noqa: E731
        return Prediction(s(n), s(d), s(6 * n * d), s(np.exp(point)), s(lo), s(hi), s(ci_lo), s(ci_hi), level)

    # ----------------------------------------------------------------- allocation
    def allocation_reason(self) -> str | None:
        """Why the compute-optimal allocation is not identifiable, or None when it is."""
        if self.degenerate:
            return f"not identifiable: {self.degenerate_reason}"
        for name, value, lo, hi in (("alpha", self.alpha, 0.0, lsefit.ALPHA_MAX), ("beta", self.beta, 0.0, lsefit.ALPHA_MAX)):
            if value <= lo + 1e-3 or value >= hi - 1e-3:
                return f"not identifiable: fitted {name} = {value:.3g} sits at its bound"
        for name, value in (("A", self.A), ("B", self.B)):
            if value <= 0 or not np.isfinite(np.log(value)) or abs(np.log(value)) > 55:
                return f"not identifiable: fitted {name} = {value:.3g} sits at its bound"
        return None

    def compute_optimal(self, flops, level: float = 0.90) -> Allocation:
        """``N*``, ``D*``, tokens per parameter and the loss at the optimum for compute ``flops``."""
        scalar = np.ndim(flops) == 0
        c = np.atleast_1d(np.asarray(flops, dtype=float))
        if not (np.all(np.isfinite(c)) and np.all(c > 0)):
            raise FitError("compute_optimal: flops must be finite and positive")
        reason = self.allocation_reason()
        if reason:
            return Allocation(flops=squeeze(c, scalar), identifiable=False, reason=reason)
        est = _allocate(self.theta[None, :], c)
        s = lambda a: squeeze(a, scalar)  # noqa: E731
        ci: dict = {}
        if self.boot is not None and len(self.boot) > 1:
            draws = _allocate(self.boot, c)
            q = [(1 - level) / 2, (1 + level) / 2]
            for key, arr in draws.items():
                lo, hi = np.nanquantile(arr, q, axis=0)
                ci[key] = (s(lo), s(hi))
        return Allocation(
            flops=s(c),
            identifiable=True,
            params=s(est["params"][0]),
            tokens=s(est["tokens"][0]),
            tokens_per_param=s(est["tokens_per_param"][0]),
            loss=s(est["loss"][0]),
            ci90=ci,
        )

    def tokens_per_param(self, flops) -> float | np.ndarray | None:
        """Compute-optimal ``D*/N*`` at ``flops`` (None when not identifiable)."""
        return self.compute_optimal(flops).tokens_per_param

    def allocation_exponents(self, level: float = 0.90) -> dict:
        """``N* ~ C^a``, ``D* ~ C^b`` with ``a = beta/(alpha+beta)``, ``b = alpha/(alpha+beta)``, and ``G``."""
        reason = self.allocation_reason()
        if reason:
            return {"identifiable": False, "reason": reason}
        e = _exponents(self.theta[None, :])
        out = {"identifiable": True, "reason": None, "a": float(e["a"][0]), "b": float(e["b"][0]), "G": float(e["G"][0])}
        if self.boot is not None and len(self.boot) > 1:
            d = _exponents(self.boot)
            q = [(1 - level) / 2, (1 + level) / 2]
            out["ci90"] = {k: [float(v) for v in np.nanquantile(d[k], q)] for k in ("a", "b", "G")}
        return out

    # ----------------------------------------------------------------- output
    def to_dict(self) -> dict:
        out = {
            "form": FORM,
            "params": {k: jsonable(getattr(self, k)) for k in KEYS},
            "ci90": {k: ([jsonable(v) for v in self.ci90[k]] if self.ci90.get(k) else None) for k in KEYS},
            "n_runs": self.n_runs,
            "n_sizes": self.n_sizes,
            "degenerate": self.degenerate,
            "degenerate_reason": self.degenerate_reason,
            "huber_delta": self.huber_delta,
            "objective": self.objective,
            "n_boot": self.n_boot,
            "residuals": [dict(r) for r in self.residuals],
            "residual_summary": residual_summary(self.residuals),
            "compute_optimal": self.allocation_exponents(),
            "backtest": self.backtest.to_dict() if self.backtest else None,
        }
        if self.degenerate:
            out["reduced_form"] = f"L = E + A / N^alpha along tokens = {_line_text(self.line)}"
            out["line"] = dict(self.line)
        return out


# --------------------------------------------------------------------------------------------- fit
@lsefit.single_threaded_blas
def fit_chinchilla(
    runs=None,
    *,
    params=None,
    tokens=None,
    loss=None,
    flops=None,
    n_boot: int = 200,
    seed: int = 0,
    huber_delta: float = lsefit.HUBER_DELTA,
    n_starts: int = 8,
    backtest: str | None = "size",
    backtest_rungs: int = 1,
    collinear_tol: float = COLLINEAR_TOL,
) -> ChinchillaFit:
    """Fit Approach 3 to ``runs`` (DataFrame / mapping with params, tokens, loss, or arrays).

    ``n_boot`` bootstrap refits give the 90% intervals (0: none). ``backtest`` ("size", "compute" or
    None) refits without the ``backtest_rungs`` largest rungs and reports the forecast error on them.
    Raises ``FitError`` for bad input, fewer than 3 model sizes, or too few runs for the form."""
    r = as_runs(runs, params=params, tokens=tokens, loss=loss, flops=flops, what="chinchilla fit")
    fit = _fit(r, n_boot=n_boot, seed=seed, delta=huber_delta, n_starts=n_starts, collinear_tol=collinear_tol)
    if backtest:
        bt = run_backtest(
            r,
            lambda tr: _fit(tr, n_boot=0, seed=seed, delta=huber_delta, n_starts=n_starts, collinear_tol=collinear_tol),
            lambda f, held: (held, f(held.params, held.tokens)),
            holdout=backtest,
            n_rungs=backtest_rungs,
            note_of=lambda f: f"refit is degenerate: {f.degenerate_reason}" if f.degenerate else None,
        )
        fit = replace(fit, backtest=bt)
    return fit


def collinearity(params: np.ndarray, tokens: np.ndarray) -> tuple[float, float, float]:
    """Fit ``log D = c0 + s log N``; return ``(coef = e^c0, slope s, std of log D about it)``."""
    ln, ld = np.log(params), np.log(tokens)
    design = np.stack([np.ones_like(ln), ln], axis=1)
    (c0, s), *_ = np.linalg.lstsq(design, ld, rcond=None)
    spread = float(np.sqrt(np.mean((ld - c0 - s * ln) ** 2)))
    return float(np.exp(c0)), float(s), spread


def _fit(r: Runs, *, n_boot: int, seed: int, delta: float, n_starts: int, collinear_tol: float) -> ChinchillaFit:
    n_sizes = r.n_sizes()
    if n_sizes < 3:
        raise FitError(
            f"chinchilla fit: needs runs at >= 3 distinct model sizes (params) to fit alpha, got {n_sizes}"
        )
    if not delta > 0:
        raise FitError(f"chinchilla fit: huber_delta must be positive, got {delta}")
    coef, slope, spread = collinearity(r.params, r.tokens)
    degenerate = spread < collinear_tol
    reason, line = None, None
    if degenerate:
        reason = _degenerate_reason(r, coef, slope)
        line = {"coef": coef, "slope": slope, "spread_log": spread, "tol_log": float(max(LINE_TOL, 3 * spread))}
        features = r.params[:, None]
        need = 4
    else:
        features = np.stack([r.params, r.tokens], axis=1)
        need = 6
    if r.n < need:
        form = "the reduced law E + A/N^alpha (tokens tied to params)" if degenerate else "E + A/N^alpha + B/D^beta"
        raise FitError(f"chinchilla fit: {form} needs >= {need} runs, got {r.n}")

    prob = lsefit.Problem.build(features, r.loss, delta)
    theta_c, obj = lsefit.fit(prob, n_starts=n_starts)
    theta = lsefit.to_raw(theta_c, prob.center)

    boot = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        weights = resample_weights(rng, r.n, n_boot)
        weights = weights[[len(np.unique(r.params[w > 0])) >= 3 for w in weights]]
        if len(weights):
            draws, _ = lsefit.refit_many(theta_c, prob, weights)
            boot = lsefit.to_raw(draws, prob.center)

    x = np.log(features)
    pred = np.exp(lsefit.log_predict(theta, x))
    rows = residual_rows(r.labels, r.params, r.tokens, r.flops, r.loss, pred)
    scatter = inflated_residuals(np.log(r.loss / pred), prob.n_params)
    vals = _named(theta, degenerate)
    ci = {}
    if boot is not None and len(boot) > 1:
        named = _named(boot, degenerate)
        for k, v in named.items():
            if v is not None:
                lo, hi = np.quantile(v, [0.05, 0.95])
                ci[k] = (float(lo), float(hi))
    return ChinchillaFit(
        E=float(vals["E"]),
        A=float(vals["A"]),
        B=None if degenerate else float(vals["B"]),
        alpha=float(vals["alpha"]),
        beta=None if degenerate else float(vals["beta"]),
        ci90=ci,
        n_runs=r.n,
        n_sizes=n_sizes,
        degenerate=degenerate,
        degenerate_reason=reason,
        huber_delta=delta,
        objective=obj,
        n_boot=0 if boot is None else len(boot),
        residuals=rows,
        line=line,
        theta=theta,
        boot=boot,
        scatter=scatter,
        seed=seed,
    )


def _named(theta: np.ndarray, degenerate: bool) -> dict:
    t = np.asarray(theta)
    if degenerate:  # [e, a, alpha]
        return {"E": np.exp(t[..., 0]), "A": np.exp(t[..., 1]), "B": None, "alpha": t[..., 2], "beta": None}
    return {
        "E": np.exp(t[..., 0]),
        "A": np.exp(t[..., 1]),
        "B": np.exp(t[..., 2]),
        "alpha": t[..., 3],
        "beta": t[..., 4],
    }


def _exponents(thetas: np.ndarray) -> dict:
    a_, b_, al, be = thetas[:, 1], thetas[:, 2], thetas[:, 3], thetas[:, 4]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = al + be
        log_g = (np.log(al) + a_ - np.log(be) - b_) / s
        return {"a": be / s, "b": al / s, "G": np.exp(log_g), "log_G": log_g}


def _allocate(thetas: np.ndarray, flops: np.ndarray) -> dict:
    """Allocation per parameter draw (rows) and compute value (columns)."""
    ex = _exponents(thetas)
    lc = np.log(flops / 6.0)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        ln = ex["log_G"][:, None] + ex["a"][:, None] * lc
        ld = -ex["log_G"][:, None] + ex["b"][:, None] * lc
        e, a_, b_, al, be = (thetas[:, i][:, None] for i in range(5))
        loss = np.exp(e) + np.exp(a_ - al * ln) + np.exp(b_ - be * ld)
        return {"params": np.exp(ln), "tokens": np.exp(ld), "tokens_per_param": np.exp(ld - ln), "loss": loss}


def _degenerate_reason(r: Runs, coef: float, slope: float) -> str:
    tpp = r.tokens / r.params
    if abs(slope - 1) < 0.05:
        what = f"every run trains on the same tokens per parameter (D ~ {np.median(tpp):.3g} N)"
    elif abs(slope) < 0.05:
        what = f"every run trains on the same number of tokens (D ~ {np.median(r.tokens):.3g})"
    else:
        what = f"tokens are tied to model size (D ~ {coef:.3g} N^{slope:.2f})"
    return (
        f"{what}, so N and D are collinear and A/alpha cannot be separated from B/beta; "
        "add runs at several token multipliers per size to identify the law"
    )


def _line_text(line: dict) -> str:
    if abs(line["slope"] - 1) < 1e-3:
        return f"{line['coef']:.3g} x params"
    return f"{line['coef']:.3g} x params^{line['slope']:.3f}"
