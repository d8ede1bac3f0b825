"""The task forecasts assembled (``fit_task``, ``fit_tasks``): pick the step-1 form, fit both steps, bootstrap
them together and carry the hero through the chain; the method is in :mod:`ladder.reports.fits.tasks`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.reports.fits.approach3 import collinearity
from ladder.reports.fits.tasks.accuracy import AccuracyLaw, fit_step2, sigmoid
from ladder.reports.fits.tasks.columns import (
    LOSS_METRICS,
    column,
    task_columns,
    task_frame,
)
from ladder.reports.fits.tasks.intervals import dof_factor, quantiles, stretch
from ladder.reports.fits.tasks.task_loss import (
    CURVE_POINTS,
    LossLaw,
    fit_step1,
    step1_curves,
    step1_named,
    step1_predict,
)

FORMS = ("auto", "nd", "compute")
COLLINEAR_TOL = 0.05  # std of log D about its best affine fit in log N below which N and D are collinear
MIN_RUNS = {"nd": 6, "compute": 4, "sigmoid": 5}  # parameters + 1
AUTO_ND_RUNS = 8  # "auto" picks the five-parameter form only with at least this many runs
DEFAULT_BOOT = 200


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


def collinear(params: np.ndarray, tokens: np.ndarray, tol: float = COLLINEAR_TOL) -> tuple[bool, float]:
    """Whether log D is (nearly) an affine function of log N, and the scatter of log D about that line."""
    if np.ptp(np.log(params)) < 1e-9 or np.ptp(np.log(tokens)) < 1e-9:
        return True, 0.0
    scatter = collinearity(params, tokens)[2]
    return scatter < tol, scatter


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
    frame, lm, am, warnings = task_frame(runs, task, loss_metric, acc_metric if accuracy else None, need_acc=False)
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
    s1 = fit_step1(form_used, n, d, c, loss)
    if s1 is None:
        raise FitError(f"task {task!r}: the step-1 fit ({form_used}) did not converge")
    theta1 = s1[0]
    loss_fit = step1_predict(form_used, theta1, n, d, c)
    res1 = np.log(loss_fit) - np.log(loss)
    theta2 = None
    res2 = None
    if am:
        s2 = fit_step2(loss, acc)
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
        b1 = fit_step1(form_used, n[idx], d[idx], c[idx], loss[idx], warm=theta1, top=1)
        if b1 is None:
            continue
        if am:
            b2 = fit_step2(loss[idx], acc[idx], warm=theta2, top=1)
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
    # small-sample correction of the bootstrap spread, per step (see dof_factor)
    f1 = dof_factor(n_runs, len(theta1), level) if correct else 1.0
    f2 = dof_factor(n_runs, 4, level) if correct else 1.0
    named1 = step1_named(form_used, theta1)
    p1_draws = np.array([list(step1_named(form_used, t).values()) for t in T1]) if len(T1) else np.empty((0, 0))
    step1 = LossLaw(
        form=form_used,
        params=named1,
        intervals={k: quantiles(stretch(v, p1_draws[:, i], f1, log=k in ("E", "A", "B", "C0")), level)
                   if len(p1_draws) else (None, None) for i, (k, v) in enumerate(named1.items())},
        rmse_log=float(np.sqrt(np.mean(res1**2))),
        reason=reason,
    )
    step2 = None
    if am:
        names2 = ("a", "b", "k", "L0")
        step2 = AccuracyLaw(
            params=dict(zip(names2, map(float, theta2))),
            intervals={k: quantiles(stretch(theta2[i], T2[:, i], f2), level) if len(T2) else (None, None)
                       for i, k in enumerate(names2)},
            rmse=float(np.sqrt(np.mean(res2**2))),
        )

    # ---- hero
    hero_fc = None
    if hero_pt:
        l_hero = float(step1_predict(form_used, theta1, hero_nv, hero_dv, hero_cv)[0])
        l_raw = np.array([step1_predict(form_used, t, hero_nv, hero_dv, hero_cv)[0] for t in T1])
        l_draws = stretch(l_hero, l_raw, f1, log=True)
        e1 = f1 * rng.choice(res1, size=len(l_draws)) if len(l_draws) else np.empty(0)
        l_pred_draws = l_draws * np.exp(-e1)  # res1 = log(fit / observed): observed = fit * exp(-res)
        hero_fc = HeroForecast(
            params=hero_n, tokens=hero_d, flops=hero_c, loss=l_hero,
            loss_interval=quantiles(l_draws, level),
            loss_prediction_interval=quantiles(l_pred_draws, level),
            flops_estimated=bool(hero_pt[3]),
        )
        if am:
            a_hero = float(sigmoid(theta2, np.array([l_hero]))[0])

            def chain(t2, lh):
                centre = sigmoid(theta2, np.array([lh]))[0]
                return float(np.clip(stretch(centre, sigmoid(t2, np.array([lh]))[0], f2), 0.0, 1.0))

            a_draws = np.array([chain(t2, lh) for t2, lh in zip(T2, l_draws)])
            e2 = f2 * rng.choice(res2, size=len(a_draws)) if len(a_draws) else np.empty(0)
            a_pred = np.clip(np.array([chain(t2, lh) for t2, lh in zip(T2, l_pred_draws)]) - e2, 0, 1)
            hero_fc.acc = a_hero
            hero_fc.acc_interval = quantiles(a_draws, level)
            hero_fc.acc_prediction_interval = quantiles(a_pred, level)
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
    curves = {"step1": step1_curves(form_used, theta1, T1, n, d, c, frame.attrs["flops_per_nd"], hero_pt, level, f1),
              "step2": None}
    if am:
        lmin, lmax = float(np.min(loss)), float(np.max(loss))
        if hero_fc is not None:
            lmin = min(lmin, hero_fc.loss, *(x for x in hero_fc.loss_interval if x is not None))
        pad = 0.05 * (lmax - lmin or lmax)
        grid = np.linspace(lmin - pad, lmax + pad, CURVE_POINTS)
        centre = sigmoid(theta2, grid)
        draws = np.array([np.clip(stretch(centre, sigmoid(t, grid), f2), 0, 1) for t in T2]) if len(T2) \
            else np.empty((0, len(grid)))
        band = [quantiles(draws[:, j], level) if len(draws) else (None, None) for j in range(len(grid))]
        curves["step2"] = {"loss": grid, "acc": centre,
                           "acc_lo": [b[0] for b in band], "acc_hi": [b[1] for b in band]}
    return TaskFit(
        task=task, loss_metric=lm, acc_metric=am, level=level, n_runs=n_runs, step1=step1, step2=step2,
        points=points, curves=curves, hero=hero_fc, bootstrap={"requested": n_boot, "succeeded": n_ok},
        warnings=warnings,
    )


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
