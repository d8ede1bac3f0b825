"""Task scaling: forecast a hero run's downstream accuracy from the ladder's task results.

The two-step method of the OLMo ladder (Bhagia et al. 2024, "Establishing Task Scaling Laws via
Compute-Efficient Model Ladders"):

1. **Task loss from scale.** The task loss ``L`` (bits per byte of the correct answer: ``bpb`` for
   multiple-choice tasks evaluated by ``ladder eval``, ``bits_per_byte`` for perplexity tasks) is fitted against
   the runs' parameters ``N`` and tokens ``D`` as ``L(N, D) = E + A / N^alpha + B / D^beta`` (form ``"nd"``), or,
   when ``N`` and ``D`` are collinear (a fixed tokens-per-parameter ladder, where ``A/alpha`` and ``B/beta``
   cannot be told apart) or there are too few runs for five parameters, against compute as
   ``L(C) = E + (C0 / C)^gamma`` (form ``"compute"``). Fitted in log space (residual ``log L_fit - log L``) with
   a Huber loss, from a grid of starts.
2. **Accuracy from task loss.** ``Acc(L) = a / (1 + exp(-k (L - L0))) + b`` with ``0 <= b``, ``a > 0``,
   ``a + b <= 1`` and ``k < 0`` (accuracy falls as the loss rises), fitted by least squares on the runs'
   observed (loss, accuracy) pairs.

The hero's accuracy is step 2 at step 1's loss for the hero's ``N, D`` (or ``C``). Intervals: a cases bootstrap
over runs (resample runs with replacement, refit BOTH steps, predict again); the ``level`` interval (90% by
default) of the draws is the uncertainty of the fitted curves (``interval``). A ladder has few runs for the
parameters it fits, and a plain percentile bootstrap is then too narrow (on synthetic 15-run ladders its 90%
accuracy intervals covered the true value about 70% of the time), so each step's draws are stretched about
the point estimate by ``sqrt(n / (n - p)) * t_{n-p} / z`` (``correct=True``, the default; about 90% coverage
on the same ladders, and on 6-run fixed-ratio ladders). ``prediction_interval`` additionally adds resampled
(equally stretched) residuals of both steps: where one evaluation of the hero would land given the ladder's
own scatter around the curves.

Input: a results table (``results.parquet`` from ``ladder collect``) with ``params``, ``tokens``, ``flops`` and
``task/<task>/<metric>`` columns; rows with a ``status`` other than ``done`` and rows without the task's
numbers are left out (said in ``warnings``). Pure numpy/scipy/pandas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import norm
from scipy.stats import t as student_t

from ladder.errors import FitError
from ladder.layout import jsonable

PREFIX = "task/"
LOSS_METRICS = ("bpb", "bits_per_byte")  # task loss, in order of preference
ACC_METRICS = ("acc", "acc_norm", "exact_match")  # accuracy, in order of preference
FORMS = ("auto", "nd", "compute")
COLLINEAR_TOL = 0.05  # std of log D about its best affine fit in log N below which N and D are collinear
MIN_RUNS = {"nd": 6, "compute": 4, "sigmoid": 5}  # parameters + 1
AUTO_ND_RUNS = 8  # "auto" picks the five-parameter form only with at least this many runs
HUBER_DELTA = 0.02  # in log loss: residuals beyond 2% count linearly
DEFAULT_BOOT = 200
CURVE_POINTS = 60


# ------------------------------------------------------------------------------------------------ columns


def task_columns(runs: pd.DataFrame) -> dict[str, list[str]]:
    """``{task: [metric, ...]}`` of the ``task/<task>/<metric>`` columns of a results table."""
    out: dict[str, list[str]] = {}
    for col in runs.columns:
        if isinstance(col, str) and col.startswith(PREFIX):
            task, _, metric = col[len(PREFIX):].rpartition("/")
            if task and metric:
                out.setdefault(task, []).append(metric)
    return out


def column(task: str, metric: str) -> str:
    return f"{PREFIX}{task}/{metric}"


def _pick(task: str, available: Sequence[str], wanted: str | None, prefs: Sequence[str], what: str,
          required: bool) -> str | None:
    if wanted is not None:
        if wanted not in available:
            raise FitError(
                f"task {task!r}: no column {column(task, wanted)!r} in the results (this task has "
                f"{', '.join(sorted(available)) or 'no metrics'})"
            )
        return wanted
    for m in prefs:
        if m in available:
            return m
    if required:
        raise FitError(
            f"task {task!r}: no {what} column (looked for {', '.join(column(task, m) for m in prefs)}; the task "
            f"has {', '.join(sorted(available)) or 'no metrics'}). Multiple-choice tasks get 'bpb' when evaluated "
            "with `ladder eval`; pass loss_metric= to use another column"
        )
    return None


# ------------------------------------------------------------------------------------------------ step 1


def _step1_predict(form: str, theta: np.ndarray, n: np.ndarray, d: np.ndarray, c: np.ndarray) -> np.ndarray:
    if form == "nd":
        le, a, alpha, b, beta = theta
        return np.exp(le) + np.exp(a - alpha * np.log(n)) + np.exp(b - beta * np.log(d))
    le, c0, gamma = theta
    return np.exp(le) + np.exp(gamma * (c0 - np.log(c)))


def _exp(x: float) -> float:
    """exp that saturates to inf: a degenerate fit (gamma -> 0 pushes log C0 past 709) must not crash."""
    return math.exp(x) if x < 709.0 else math.inf


def _step1_named(form: str, theta: np.ndarray) -> dict[str, float]:
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


def _fit_step1(form, n, d, c, loss, warm: np.ndarray | None = None, top: int = 3):
    """(public theta, cost) of the step-1 law, or None when no start converged. With ``warm`` (a bootstrap
    refit) only that start, and the grid when it fails."""
    f = _Step1(form, n, d, c, loss)
    best = f.fit([f.to_centred(warm)]) if warm is not None else None
    if best is None:
        best = f.fit(f.grid_starts(top))
    return None if best is None else (f.to_public(best[0]), best[1])


# ------------------------------------------------------------------------------------------------ step 2


def sigmoid(theta: Sequence[float], loss: np.ndarray) -> np.ndarray:
    """``a / (1 + exp(-k (L - L0))) + b`` with ``theta = (a, b, k, L0)``."""
    a, b, k, l0 = theta
    z = np.clip(-k * (np.asarray(loss, float) - l0), -500, 500)
    return a / (1.0 + np.exp(z)) + b


def _sig_from_raw(raw: np.ndarray) -> np.ndarray:
    b, u, k, l0 = raw
    return np.array([u * (1.0 - b), b, k, l0])


def _raw_from_sig(theta2: np.ndarray) -> np.ndarray:
    a, b, k, l0 = theta2
    return np.array([b, a / max(1.0 - b, 1e-12), k, l0])


def _fit_step2(loss: np.ndarray, acc: np.ndarray, warm: np.ndarray | None = None, top: int = 3):
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


# ------------------------------------------------------------------------------------------------ results


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


@dataclass
class AccuracyLaw:
    """Step 2: accuracy against task loss, ``a / (1 + exp(-k (L - L0))) + b``."""

    params: dict[str, float]  # a, b, k, L0
    intervals: dict[str, tuple[float | None, float | None]]
    rmse: float

    def to_dict(self) -> dict:
        return jsonable({"params": self.params, "intervals": self.intervals, "rmse": self.rmse,
                   "formula": "a / (1 + exp(-k (L - L0))) + b"})


@dataclass
class HeroForecast:
    params: float | None
    tokens: float | None
    flops: float | None
    loss: float
    loss_interval: tuple[float | None, float | None]
    loss_prediction_interval: tuple[float | None, float | None]
    acc: float | None = None
    acc_interval: tuple[float | None, float | None] | None = None
    acc_prediction_interval: tuple[float | None, float | None] | None = None
    flops_estimated: bool = False  # flops derived from params x tokens at the ladder's flops per N*D

    def to_dict(self) -> dict:
        return jsonable(self.__dict__)


@dataclass
class TaskFit:
    """The two-step fit of one task; ``to_dict()`` holds everything a report plots."""

    task: str
    loss_metric: str
    acc_metric: str | None
    level: float
    n_runs: int
    step1: LossLaw
    step2: AccuracyLaw | None
    points: list[dict]  # per run: params, tokens, flops, loss, loss_fit, acc, acc_fit, acc_chain, run_id
    curves: dict[str, Any]  # "step1": [curve, ...], "step2": curve or None
    hero: HeroForecast | None
    bootstrap: dict[str, int]  # draws requested, succeeded
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return jsonable({
            "task": self.task,
            "loss_metric": self.loss_metric,
            "acc_metric": self.acc_metric,
            "loss_column": column(self.task, self.loss_metric),
            "acc_column": column(self.task, self.acc_metric) if self.acc_metric else None,
            "level": self.level,
            "n_runs": self.n_runs,
            "step1": self.step1.to_dict(),
            "step2": self.step2.to_dict() if self.step2 else None,
            "points": self.points,
            "curves": self.curves,
            "hero": self.hero.to_dict() if self.hero else None,
            "bootstrap": self.bootstrap,
            "warnings": self.warnings,
        })


@dataclass
class TaskScaling:
    """Fits of several tasks; a task that could not be fitted is in ``errors`` with the reason."""

    fits: dict[str, TaskFit]
    errors: dict[str, str]
    hero: dict[str, float | None] | None

    def to_dict(self) -> dict:
        return jsonable({"hero": self.hero, "tasks": {k: v.to_dict() for k, v in self.fits.items()},
                   "errors": self.errors})


# ------------------------------------------------------------------------------------------------ fitting


def collinear(params: np.ndarray, tokens: np.ndarray, tol: float = COLLINEAR_TOL) -> tuple[bool, float]:
    """Whether log D is (nearly) an affine function of log N, and the scatter of log D about that line."""
    x, y = np.log(params), np.log(tokens)
    if np.ptp(x) < 1e-9 or np.ptp(y) < 1e-9:
        return True, 0.0
    coef = np.polyfit(x, y, 1)
    scatter = float(np.std(y - np.polyval(coef, x)))
    return scatter < tol, scatter


def _dof_factor(n: int, p: int, level: float) -> float:
    """How much to stretch a cases bootstrap's spread for a ``p``-parameter fit to ``n`` runs:
    ``sqrt(n / (n - p))`` (the residual variance a least-squares fit hides) times ``t_{n-p} / z`` at the
    interval's level (Student's t in place of the normal quantile). Without it the 90% intervals covered the
    truth in about 70% of synthetic 15-run ladders; with it in about 90% (see the module docstring)."""
    if n <= p:
        return 1.0
    q = (1 + level) / 2
    return math.sqrt(n / (n - p)) * float(student_t.ppf(q, n - p) / norm.ppf(q))


def _stretch(centre, draws, f: float, log: bool = False):
    """Bootstrap draws moved ``f`` times as far from the point estimate (in log space for scale quantities)."""
    draws = np.asarray(draws, float)
    if f == 1.0:
        return draws
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            return centre * np.exp(f * np.log(draws / centre))
    return centre + f * (draws - centre)


def _quantiles(draws: np.ndarray, level: float) -> tuple[float | None, float | None]:
    draws = np.asarray(draws, float)
    draws = draws[np.isfinite(draws)]
    if len(draws) < 10:
        return (None, None)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _prepare(runs: pd.DataFrame, task: str, loss_metric: str | None, acc_metric: str | None,
             need_acc: bool) -> tuple[pd.DataFrame, str, str | None, list[str]]:
    if not isinstance(runs, pd.DataFrame):
        raise FitError(f"task scaling takes a DataFrame of runs, got {type(runs).__name__}")
    cols = task_columns(runs)
    if task not in cols:
        known = ", ".join(sorted(cols)) or "none (evaluate the runs with `ladder eval` and collect again)"
        raise FitError(f"task {task!r}: no task/{task}/<metric> columns in the results; tasks present: {known}")
    lm = _pick(task, cols[task], loss_metric, LOSS_METRICS, "task loss", required=True)
    am = _pick(task, cols[task], acc_metric, ACC_METRICS, "accuracy", required=need_acc)
    missing = [c for c in ("params", "tokens") if c not in runs.columns]
    if missing:
        raise FitError(f"task {task!r}: the results lack column(s) {missing}")
    warnings = []
    df = runs
    if "status" in df.columns:
        bad = df["status"].astype(str) != "done"
        if bad.any():
            warnings.append(f"{int(bad.sum())} run(s) not done left out")
            df = df[~bad]
    use = ["params", "tokens", column(task, lm)] + ([column(task, am)] if am else [])
    frame = pd.DataFrame({
        "params": pd.to_numeric(df["params"], errors="coerce"),
        "tokens": pd.to_numeric(df["tokens"], errors="coerce"),
        "flops": pd.to_numeric(df["flops"], errors="coerce") if "flops" in df.columns else np.nan,
        "loss": pd.to_numeric(df[column(task, lm)], errors="coerce"),
        "acc": pd.to_numeric(df[column(task, am)], errors="coerce") if am else np.nan,
        "run_id": df["run_id"].astype(str) if "run_id" in df.columns else [str(i) for i in df.index],
    })
    ok = np.isfinite(frame["params"]) & np.isfinite(frame["tokens"]) & np.isfinite(frame["loss"])
    ok &= (frame["params"] > 0) & (frame["tokens"] > 0) & (frame["loss"] > 0)
    if am:
        ok &= np.isfinite(frame["acc"]) & (frame["acc"] >= 0) & (frame["acc"] <= 1)
    if (~ok).any():
        warnings.append(f"{int((~ok).sum())} run(s) without usable {', '.join(use[2:])} left out")
    frame = frame[ok].reset_index(drop=True)
    # flops: measured where present, else params x tokens at the ladder's own flops per (N D) (6 by default)
    fl = frame["flops"].to_numpy(float)
    good = np.isfinite(fl) & (fl > 0)
    ratio = float(np.median(fl[good] / (frame["params"].to_numpy()[good] * frame["tokens"].to_numpy()[good]))) \
        if good.any() else 6.0
    if (~good).any():
        fl = np.where(good, fl, ratio * frame["params"].to_numpy() * frame["tokens"].to_numpy())
        frame["flops"] = fl
    frame.attrs["flops_per_nd"] = ratio
    return frame, lm, am, warnings


def _choose_form(form: str, n_runs: int, params, tokens, flops, task: str) -> tuple[str, str]:
    if form not in FORMS:
        raise FitError(f"task {task!r}: form must be one of {FORMS}, got {form!r}")
    is_col, scatter = collinear(params, tokens)
    if form == "nd":
        if is_col:
            raise FitError(
                f"task {task!r}: N and D are collinear in this ladder (log D scatters {scatter:.3f} about a line in "
                "log N): A/N^alpha and B/D^beta cannot be separated; use form='compute'"
            )
        if n_runs < MIN_RUNS["nd"]:
            raise FitError(f"task {task!r}: {n_runs} runs; the (N, D) law has 5 parameters and needs at least "
                           f"{MIN_RUNS['nd']} runs")
        return "nd", "requested"
    if form == "compute":
        return "compute", "requested"
    if is_col:
        return "compute", f"N and D are collinear (log D scatters {scatter:.3f} about a line in log N)"
    if n_runs < AUTO_ND_RUNS:
        return "compute", f"only {n_runs} runs: too few for the five-parameter (N, D) law (auto needs {AUTO_ND_RUNS})"
    return "nd", f"N and D vary independently (log D scatters {scatter:.3f} about a line in log N)"


def _hero_point(hero: Mapping | None, form: str, flops_per_nd: float, task: str):
    if hero is None:
        return None
    n = hero.get("params")
    d = hero.get("tokens")
    c = hero.get("flops")
    estimated = False
    if form == "nd" and (n is None or d is None):
        raise FitError(f"task {task!r}: the (N, D) law needs the hero's params and tokens, got {dict(hero)}")
    if c is None:
        if n is None or d is None:
            raise FitError(f"task {task!r}: the hero needs flops, or params and tokens, got {dict(hero)}")
        c = flops_per_nd * float(n) * float(d)
        estimated = True
    vals = [v for v in (n, d, c) if v is not None]
    if any(not (isinstance(v, (int, float, np.number)) and math.isfinite(float(v)) and float(v) > 0) for v in vals):
        raise FitError(f"task {task!r}: hero values must be positive numbers, got {dict(hero)}")
    return (None if n is None else float(n), None if d is None else float(d), float(c), estimated)


def fit_task(
    runs: pd.DataFrame,
    task: str,
    *,
    hero: Mapping[str, float] | None = None,
    loss_metric: str | None = None,
    acc_metric: str | None = None,
    form: str = "auto",
    level: float = 0.90,
    n_boot: int = DEFAULT_BOOT,
    seed: int = 0,
    accuracy: bool = True,
    correct: bool = True,
) -> TaskFit:
    """Fit the two steps for ``task`` and forecast ``hero`` (``{"params", "tokens", "flops"}``; any of them).

    ``loss_metric``/``acc_metric`` default to the first present of :data:`LOSS_METRICS`/:data:`ACC_METRICS`; a task
    without an accuracy column (a perplexity task) or ``accuracy=False`` gets step 1 only. ``form``: ``"auto"``
    (``"compute"`` when N and D are collinear or there are fewer than ``AUTO_ND_RUNS`` runs), ``"nd"`` or
    ``"compute"``. ``level``: the interval's coverage. :class:`FitError` for missing columns, too few runs, or a
    fit that does not converge."""
    if not 0 < level < 1:
        raise FitError(f"level must be in (0, 1), got {level}")
    frame, lm, am, warnings = _prepare(runs, task, loss_metric, acc_metric if accuracy else None, need_acc=False)
    if not accuracy:
        am = None
    n_runs = len(frame)
    n = frame["params"].to_numpy(float)
    d = frame["tokens"].to_numpy(float)
    c = frame["flops"].to_numpy(float)
    loss = frame["loss"].to_numpy(float)
    acc = frame["acc"].to_numpy(float) if am else None
    if n_runs < MIN_RUNS["compute"]:
        raise FitError(
            f"task {task!r}: {n_runs} run(s) with {column(task, lm)}; step 1 needs at least {MIN_RUNS['compute']}"
        )
    if am and n_runs < MIN_RUNS["sigmoid"]:
        raise FitError(
            f"task {task!r}: {n_runs} runs with {column(task, lm)} and {column(task, am)}; the step-2 sigmoid has 4 "
            f"parameters and needs at least {MIN_RUNS['sigmoid']} runs"
        )
    if np.ptp(np.log(c)) < 1e-6 and np.ptp(np.log(n)) < 1e-6:
        raise FitError(f"task {task!r}: every run has the same size and compute; nothing to fit a scaling law on")
    form_used, reason = _choose_form(form, n_runs, n, d, c, task)
    if form_used == "compute" and np.ptp(np.log(c)) < 1e-6:
        raise FitError(f"task {task!r}: every run has the same compute; the compute law L(C) cannot be fitted")
    hero_pt = _hero_point(hero, form_used, frame.attrs["flops_per_nd"], task)

    # ---- full fits
    s1 = _fit_step1(form_used, n, d, c, loss)
    if s1 is None:
        raise FitError(f"task {task!r}: the step-1 fit ({form_used}) did not converge")
    theta1 = s1[0]
    loss_fit = _step1_predict(form_used, theta1, n, d, c)
    res1 = np.log(loss_fit) - np.log(loss)
    theta2 = None
    res2 = None
    if am:
        s2 = _fit_step2(loss, acc)
        if s2 is None:
            raise FitError(f"task {task!r}: the step-2 sigmoid fit did not converge")
        theta2 = s2[0]
        res2 = sigmoid(theta2, loss) - acc
        if float(np.ptp(acc)) < 0.02:
            warnings.append(
                f"accuracy hardly changes across the ladder ({np.min(acc):.3f}..{np.max(acc):.3f}): the sigmoid is "
                "not determined by these runs; treat the forecast as unreliable"
            )

    # ---- bootstrap over runs, both steps
    rng = np.random.default_rng(seed)
    hero_n = hero_d = hero_c = None
    if hero_pt:
        hero_n, hero_d, hero_c, _ = hero_pt
    hero_nv = np.array([hero_n if hero_n is not None else np.nan])
    hero_dv = np.array([hero_d if hero_d is not None else np.nan])
    hero_cv = np.array([hero_c if hero_c is not None else np.nan])
    thetas1, thetas2 = [], []
    for _ in range(n_boot):
        idx = rng.integers(0, n_runs, n_runs)
        if len(np.unique(idx)) < (len(theta1) if not am else max(len(theta1), 4)):
            continue
        if np.ptp(np.log(c[idx])) < 1e-6:
            continue
        b1 = _fit_step1(form_used, n[idx], d[idx], c[idx], loss[idx], warm=theta1, top=1)
        if b1 is None:
            continue
        if am:
            b2 = _fit_step2(loss[idx], acc[idx], warm=theta2, top=1)
            if b2 is None:
                continue
            thetas2.append(b2[0])
        thetas1.append(b1[0])
    n_ok = len(thetas1)
    if n_ok < max(10, n_boot // 4) and n_boot > 0:
        warnings.append(f"only {n_ok} of {n_boot} bootstrap refits succeeded; intervals are rough")
    T1 = np.array(thetas1) if thetas1 else np.empty((0, len(theta1)))
    T2 = np.array(thetas2) if thetas2 else np.empty((0, 4))
    if n_runs - len(theta1) < 3 or (am and n_runs - 4 < 3):
        warnings.append(f"{n_runs} runs leave fewer than 3 degrees of freedom for a fit: intervals are wide and "
                        "rough; add runs to the ladder")
    # small-sample correction of the bootstrap spread, per step (see _dof_factor)
    f1 = _dof_factor(n_runs, len(theta1), level) if correct else 1.0
    f2 = _dof_factor(n_runs, 4, level) if correct else 1.0
    named1 = _step1_named(form_used, theta1)
    p1_draws = np.array([list(_step1_named(form_used, t).values()) for t in T1]) if len(T1) else np.empty((0, 0))
    step1 = LossLaw(
        form=form_used,
        params=named1,
        intervals={k: _quantiles(_stretch(v, p1_draws[:, i], f1, log=k in ("E", "A", "B", "C0")), level)
                   if len(p1_draws) else (None, None) for i, (k, v) in enumerate(named1.items())},
        rmse_log=float(np.sqrt(np.mean(res1**2))),
        reason=reason,
    )
    step2 = None
    if am:
        names2 = ("a", "b", "k", "L0")
        step2 = AccuracyLaw(
            params=dict(zip(names2, map(float, theta2))),
            intervals={k: _quantiles(_stretch(theta2[i], T2[:, i], f2), level) if len(T2) else (None, None)
                       for i, k in enumerate(names2)},
            rmse=float(np.sqrt(np.mean(res2**2))),
        )

    # ---- hero
    hero_fc = None
    if hero_pt:
        l_hero = float(_step1_predict(form_used, theta1, hero_nv, hero_dv, hero_cv)[0])
        l_raw = np.array([_step1_predict(form_used, t, hero_nv, hero_dv, hero_cv)[0] for t in T1])
        l_draws = _stretch(l_hero, l_raw, f1, log=True)
        e1 = f1 * rng.choice(res1, size=len(l_draws)) if len(l_draws) else np.empty(0)
        l_pred_draws = l_draws * np.exp(-e1)  # res1 = log(fit / observed): observed = fit * exp(-res)
        hero_fc = HeroForecast(
            params=hero_n, tokens=hero_d, flops=hero_c, loss=l_hero,
            loss_interval=_quantiles(l_draws, level),
            loss_prediction_interval=_quantiles(l_pred_draws, level),
            flops_estimated=bool(hero_pt[3]),
        )
        if am:
            a_hero = float(sigmoid(theta2, np.array([l_hero]))[0])

            def chain(t2, lh):
                centre = sigmoid(theta2, np.array([lh]))[0]
                return float(np.clip(_stretch(centre, sigmoid(t2, np.array([lh]))[0], f2), 0.0, 1.0))

            a_draws = np.array([chain(t2, lh) for t2, lh in zip(T2, l_draws)])
            e2 = f2 * rng.choice(res2, size=len(a_draws)) if len(a_draws) else np.empty(0)
            a_pred = np.clip(np.array([chain(t2, lh) for t2, lh in zip(T2, l_pred_draws)]) - e2, 0, 1)
            hero_fc.acc = a_hero
            hero_fc.acc_interval = _quantiles(a_draws, level)
            hero_fc.acc_prediction_interval = _quantiles(a_pred, level)
        lo_obs = float(np.min(loss))
        if l_hero < lo_obs and am and theta2 is not None and theta2[3] < lo_obs - np.ptp(loss):
            warnings.append("the sigmoid's midpoint L0 lies well below the ladder's losses: the hero's accuracy is an "
                            "extrapolation of the curve's lower half")

    # ---- points and curves
    points = []
    acc_fit = sigmoid(theta2, loss) if am else None
    acc_chain = sigmoid(theta2, loss_fit) if am else None
    for i in range(n_runs):
        points.append({
            "run_id": frame["run_id"].iloc[i], "params": n[i], "tokens": d[i], "flops": c[i],
            "loss": loss[i], "loss_fit": loss_fit[i],
            "acc": None if acc is None else acc[i],
            "acc_fit": None if acc_fit is None else acc_fit[i],
            "acc_chain": None if acc_chain is None else acc_chain[i],
        })
    curves = {"step1": _step1_curves(form_used, theta1, T1, n, d, c, frame.attrs["flops_per_nd"], hero_pt, level, f1),
              "step2": None}
    if am:
        lmin, lmax = float(np.min(loss)), float(np.max(loss))
        if hero_fc is not None:
            lmin = min(lmin, hero_fc.loss, *(x for x in hero_fc.loss_interval if x is not None))
        pad = 0.05 * (lmax - lmin or lmax)
        grid = np.linspace(lmin - pad, lmax + pad, CURVE_POINTS)
        centre = sigmoid(theta2, grid)
        draws = np.array([np.clip(_stretch(centre, sigmoid(t, grid), f2), 0, 1) for t in T2]) if len(T2) \
            else np.empty((0, len(grid)))
        band = [_quantiles(draws[:, j], level) if len(draws) else (None, None) for j in range(len(grid))]
        curves["step2"] = {"loss": grid, "acc": centre,
                           "acc_lo": [b[0] for b in band], "acc_hi": [b[1] for b in band]}
    return TaskFit(
        task=task, loss_metric=lm, acc_metric=am, level=level, n_runs=n_runs, step1=step1, step2=step2,
        points=points, curves=curves, hero=hero_fc, bootstrap={"requested": n_boot, "succeeded": n_ok},
        warnings=warnings,
    )


def _step1_curves(form, theta, T, n, d, c, flops_per_nd, hero_pt, level, f1) -> list[dict]:
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
    y = _step1_predict(form, theta, pn, pd_, pc)
    draws = np.array([_stretch(y, _step1_predict(form, t, pn, pd_, pc), f1, log=True) for t in T]) if len(T) \
        else np.empty((0, len(pc)))
    band = [_quantiles(draws[:, j], level) if len(draws) else (None, None) for j in range(len(pc))]
    return {"label": label, "tokens_per_param": ratio, "params": pn, "tokens": pd_, "flops": pc, "loss": y,
            "loss_lo": [b[0] for b in band], "loss_hi": [b[1] for b in band]}


def fit_tasks(
    runs: pd.DataFrame,
    tasks: Sequence[str] | None = None,
    *,
    hero: Mapping[str, float] | None = None,
    **kwargs: Any,
) -> TaskScaling:
    """:func:`fit_task` for each task (default: every task with a task-loss column); a task that cannot be
    fitted lands in ``errors`` with the FitError's message instead of stopping the others."""
    cols = task_columns(runs) if isinstance(runs, pd.DataFrame) else {}
    if tasks is None:
        tasks = sorted(t for t, ms in cols.items() if any(m in ms for m in LOSS_METRICS))
        if not tasks:
            raise FitError(
                "no task results to fit: the table has no task/<task>/bpb or task/<task>/bits_per_byte columns "
                "(evaluate the runs with `ladder eval`, then `ladder collect`)"
            )
    fits, errors = {}, {}
    for t in tasks:
        try:
            fits[t] = fit_task(runs, t, hero=hero, **kwargs)
        except FitError as e:
            errors[t] = str(e)
    return TaskScaling(fits=fits, errors=errors, hero=None if hero is None else dict(hero))
