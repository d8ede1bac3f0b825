"""The task forecasts assembled (``fit_task``, ``fit_tasks``): choose the step-1 forms, fit step 1 on the engine
and step 2's sigmoid, and carry the hero through the chain; the method is in :mod:`ladder.reports.fits.tasks`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.model.config import format_multiple
from ladder.reports.fits.loss.loss_forecast import SAME_X
from ladder.reports.fits.tasks.accuracy import (
    AccuracyLaw,
    bootstrap_step2,
    fit_step2,
    sigmoid,
)
from ladder.reports.fits.tasks.columns import (
    LOSS_METRICS,
    column,
    task_columns,
    task_frame,
)
from ladder.reports.fits.tasks.intervals import dof_factor, quantiles, stretch
from ladder.reports.fits.tasks.task_hero import HeroForecast, forecast_hero
from ladder.reports.fits.tasks.task_loss import (
    COMPUTE_FORMS,
    CURVE_POINTS,
    MIN_BOOT,
    ND_FORMS,
    LossLaw,
    fit_step1,
    step1_curves,
    summarize,
)

FORMS = ("auto", "nd", "compute")
COLLINEAR_TOL = 0.05  # std of log D about its best affine fit in log N below which N and D are collinear
MIN_RUNS = {"nd": 6, "compute": 4, "sigmoid": 5}  # parameters + 1
DEFAULT_BOOT = 200


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
        return jsonable(
            {
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
            }
        )


@dataclass
class TaskScaling:
    """Fits of several tasks; a task that could not be fitted is in ``errors`` with the reason."""

    fits: dict[str, TaskFit]
    errors: dict[str, str]
    hero: dict[str, float | None] | None

    def to_dict(self) -> dict:
        return jsonable(
            {"hero": self.hero, "tasks": {k: v.to_dict() for k, v in self.fits.items()}, "errors": self.errors}
        )


def collinear(params: np.ndarray, tokens: np.ndarray, tol: float = COLLINEAR_TOL) -> tuple[bool, float]:
    """Whether log D is (nearly) an affine function of log N, and the scatter of log D about that line."""
    ln, ld = np.log(params), np.log(tokens)
    if np.ptp(ln) < 1e-9 or np.ptp(ld) < 1e-9:
        return True, 0.0
    design = np.stack([np.ones_like(ln), ln], axis=1)
    coef, *_ = np.linalg.lstsq(design, ld, rcond=None)
    scatter = float(np.sqrt(np.mean((ld - design @ coef) ** 2)))
    return scatter < tol, scatter


def _choose_forms(form: str, n_runs: int, params, tokens, has_split: bool, task: str) -> tuple[tuple, str]:
    """The step-1 law forms to fit (the rollout weighs them) and why these."""
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
            raise FitError(
                f"task {task!r}: {n_runs} runs; the (N, D) law has 5 parameters and needs at least "
                f"{MIN_RUNS['nd']} runs"
            )
        return ND_FORMS, "the laws in (N, D), as requested"
    if form == "compute":
        return COMPUTE_FORMS, "the laws in compute, as requested"
    if is_col:
        return COMPUTE_FORMS, (
            f"N and D are collinear (log D scatters {scatter:.3f} about a line in log N), so only the laws in compute"
        )
    if not has_split:
        return COMPUTE_FORMS, "the hero is given as compute only, so only the laws in compute"
    return ND_FORMS + COMPUTE_FORMS, (
        f"N and D vary independently (log D scatters {scatter:.3f} about a line in log N): every law form"
    )


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


def _target(hero_pt, n, d, flops_per_nd: float) -> tuple[float, float]:
    """The (N, D) step 1 forecasts: the hero's own split; a hero given as compute only at the ladder's median
    tokens/param ratio (its 6ND from the ladder's FLOPs per N*D); without a hero, the ladder's largest run."""
    if hero_pt is None:
        i = int(np.argmax(n * d))
        return float(n[i]), float(d[i])
    if hero_pt[0] is not None and hero_pt[1] is not None:
        return hero_pt[0], hero_pt[1]
    ratio = float(np.median(d / n))
    c6 = 6.0 * hero_pt[2] / flops_per_nd
    hn = math.sqrt(c6 / (6.0 * ratio))
    return hn, ratio * hn


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
    (every identifiable law form; only the laws in compute when N and D are collinear or the hero is given as
    compute only), ``"nd"`` (the laws in (N, D)) or ``"compute"`` (the laws in compute). ``level``: the
    interval's coverage. ``n_boot``: step 2's bootstrap refits and step 1's (at least ``MIN_BOOT``).
    ``correct``: stretch step 2's bootstrap for its few degrees of freedom. :class:`FitError` for missing
    columns, too few runs, or a fit that does not converge."""
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
    fpn = frame.attrs["flops_per_nd"]
    hero_pt = _hero_point(hero, form, fpn, task)
    has_split = hero_pt is None or (hero_pt[0] is not None and hero_pt[1] is not None)
    forms, reason = _choose_forms(form, n_runs, n, d, has_split, task)
    hn, hd = _target(hero_pt, n, d, fpn)

    # ---- step 1: the loss laws' forms on the task loss, by the engine
    try:
        s1 = fit_step1(
            n,
            d,
            loss,
            frame["run_id"].tolist(),
            forms=forms,
            target_params=hn,
            target_tokens=hd,
            n_boot=n_boot,
            seed=seed,
            reason=reason,
        )
    except ValueError as exc:
        raise FitError(f"task {task!r}: step 1 cannot be fitted: {exc}") from exc
    loss_fit = np.exp(s1.point(n, d))
    res1 = np.log(loss_fit) - np.log(loss)
    step1 = summarize(s1, float(np.sqrt(np.mean(res1**2))))

    # ---- step 2: the sigmoid, with a cases bootstrap
    theta2 = res2 = None
    T2 = np.empty((0, 4))
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
        T2 = bootstrap_step2(loss, acc, theta2, n_boot, np.random.default_rng(seed))
    n_ok = len(T2) if am else max(int(n_boot), 0)
    if am and n_ok < max(10, n_boot // 4) and n_boot > 0:
        warnings.append(f"only {n_ok} of {n_boot} bootstrap refits succeeded; intervals are rough")
    if s1.laws[s1.primary].dof < 3 or (am and n_runs - 4 < 3):
        warnings.append(
            f"{n_runs} runs leave fewer than 3 degrees of freedom for a fit: intervals are wide and "
            "rough; add runs to the ladder"
        )
    f2 = dof_factor(n_runs, 4, level) if correct else 1.0
    step2 = None
    if am:
        names2 = ("a", "b", "k", "L0")
        step2 = AccuracyLaw(
            params=dict(zip(names2, map(float, theta2))),
            intervals={
                k: quantiles(stretch(theta2[i], T2[:, i], f2), level) if len(T2) else (None, None)
                for i, k in enumerate(names2)
            },
            rmse=float(np.sqrt(np.mean(res2**2))),
        )

    # ---- hero
    hero_fc = None
    if hero_pt:
        hero_fc = forecast_hero(
            s1,
            hero_pt,
            (hn, hd),
            (float(n.max()), float((6.0 * n * d).max())),
            theta2=theta2,
            boot2=T2,
            res2=res2,
            f2=f2,
            level=level,
            seed=seed,
        )
        if hero_fc.beyond_reach and s1.forecast is not None:
            reach = s1.forecast.reach.get("2%", {}).get("params_x", 1.0)
            warnings.append(
                f"the hero is {format_multiple(hero_fc.params_x)} the largest model fitted, "
                + (
                    "beyond the distance at which step 1's rollout forecasts stayed within 2% "
                    f"({format_multiple(reach)})"
                    if reach > SAME_X
                    else "and step 1's rollout forecasts erred by more than 2% already at the nearest distance"
                )
            )
        lo_obs = float(np.min(loss))
        if hero_fc.loss < lo_obs and am and theta2[3] < lo_obs - np.ptp(loss):
            warnings.append(
                "the sigmoid's midpoint L0 lies well below the ladder's losses: the hero's accuracy is an "
                "extrapolation of the curve's lower half"
            )

    # ---- points and curves
    points = []
    acc_fit = sigmoid(theta2, loss) if am else None
    acc_chain = sigmoid(theta2, loss_fit) if am else None
    for i in range(n_runs):
        points.append(
            {
                "run_id": frame["run_id"].iloc[i],
                "params": n[i],
                "tokens": d[i],
                "flops": c[i],
                "loss": loss[i],
                "loss_fit": loss_fit[i],
                "acc": None if acc is None else acc[i],
                "acc_fit": None if acc_fit is None else acc_fit[i],
                "acc_chain": None if acc_chain is None else acc_chain[i],
            }
        )
    hero_nd = (hn, hd) if hero_pt else None
    curves = {"step1": step1_curves(s1, n, d, fpn, hero_nd, level), "step2": None}
    if am:
        lmin, lmax = float(np.min(loss)), float(np.max(loss))
        if hero_fc is not None:
            lmin = min(lmin, hero_fc.loss, *(x for x in hero_fc.loss_interval if x is not None))
        pad = 0.05 * (lmax - lmin or lmax)
        grid = np.linspace(lmin - pad, lmax + pad, CURVE_POINTS)
        centre = sigmoid(theta2, grid)
        draws = (
            np.array([np.clip(stretch(centre, sigmoid(t, grid), f2), 0, 1) for t in T2])
            if len(T2)
            else np.empty((0, len(grid)))
        )
        band = [quantiles(draws[:, j], level) if len(draws) else (None, None) for j in range(len(grid))]
        curves["step2"] = {"loss": grid, "acc": centre, "acc_lo": [b[0] for b in band], "acc_hi": [b[1] for b in band]}
    return TaskFit(
        task=task,
        loss_metric=lm,
        acc_metric=am,
        level=level,
        n_runs=n_runs,
        step1=step1,
        step2=step2,
        points=points,
        curves=curves,
        hero=hero_fc,
        bootstrap={"requested": n_boot, "succeeded": n_ok, "step1": max(int(n_boot), MIN_BOOT)},
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
