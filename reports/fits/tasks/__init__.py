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

Modules: ``columns`` (the task columns of a runs table), ``task_loss`` (step 1), ``accuracy`` (step 2),
``intervals`` (the bootstrap's small-sample stretch), ``forecast`` (``fit_task``, ``fit_tasks``: both steps and
the hero).
"""

from __future__ import annotations

from ladder.reports.fits.tasks.accuracy import AccuracyLaw, sigmoid
from ladder.reports.fits.tasks.columns import column, task_columns
from ladder.reports.fits.tasks.forecast import (
    HeroForecast,
    TaskFit,
    TaskScaling,
    collinear,
    fit_task,
    fit_tasks,
)
from ladder.reports.fits.tasks.task_loss import LossLaw

__all__ = [
    "AccuracyLaw",
    "HeroForecast",
    "LossLaw",
    "TaskFit",
    "TaskScaling",
    "collinear",
    "column",
    "fit_task",
    "fit_tasks",
    "sigmoid",
    "task_columns",
]
