"""Task scaling: forecast a hero run's downstream accuracy from the ladder's task results.

The two-step method of the OLMo ladder (Bhagia et al. 2024, "Establishing Task Scaling Laws via
Compute-Efficient Model Ladders"):

1. **Task loss from scale.** The task loss ``L`` (bits per byte of the correct answer: ``bpb`` for
   multiple-choice tasks evaluated by ``ladder eval``, ``bits_per_byte`` for perplexity tasks) is fitted by the
   one engine with the loss laws' own forms and machinery (:func:`ladder.reports.fits.loss.forecast_loss` on a
   ``Runs`` whose loss is the task loss): Chinchilla ``L(N, D)``, the over-training law, ``L(C)`` at the
   hero's tokens/param and ``L(C)`` on the frontier, each identifiable one fitted (Huber on log residuals),
   backtested by rollout, weighted by its rollout error, with the 90% interval calibrated on the rollout. When N
   and D are collinear (a fixed tokens-per-parameter ladder) or the hero is given as compute only, only the laws
   in compute; a task with too few sizes to backtest gets ``L(C) = E + A C^-alpha`` on all its runs from the
   engine directly. ``step1`` reports the primary form (the largest weight) as ``E + A/N^alpha + B/D^beta``
   (form ``"nd"``) or ``E + (C0/C)^gamma`` (form ``"compute"``, ``C = 6ND``), and every form's weight and rollout
   score.
2. **Accuracy from task loss.** ``Acc(L) = a / (1 + exp(-k (L - L0))) + b`` with ``0 <= b``, ``a > 0``,
   ``a + b <= 1`` and ``k < 0`` (accuracy falls as the loss rises), fitted by least squares on the runs'
   observed (loss, accuracy) pairs. Not a log-space law of scale, so it keeps its own least squares.

The hero's accuracy is step 2 at step 1's loss for the hero's ``N, D``. Intervals: step 1's draws of the hero's
task loss (the weighted forms' bootstrap draws, widened by the rollout's calibration factor) carried through a
cases bootstrap of the sigmoid (resample runs with replacement, refit). A ladder has few runs for the sigmoid's
four parameters, and a plain percentile bootstrap is then too narrow (on synthetic 15-run ladders its 90%
accuracy intervals covered the true value about 70% of the time), so the sigmoid's draws are stretched about the
point estimate by ``sqrt(n / (n - p)) * t_{n-p} / z`` (``correct=True``, the default). ``interval``: the
uncertainty of the curves; ``prediction_interval`` adds a new run's scatter about them (step 1's residual
scatter, then resampled accuracy residuals), several scatters per draw (:mod:`.task_hero`).

Input: a results table (``results.parquet`` from ``ladder collect``) with ``params``, ``tokens``, ``flops`` and
``task/<task>/<metric>`` columns; rows with a ``status`` other than ``done`` and rows without the task's
numbers are left out (said in ``warnings``). Pure numpy/scipy/pandas.

Modules: ``columns`` (the task columns of a runs table), ``task_loss`` (step 1 on the engine), ``accuracy``
(step 2 and its bootstrap), ``intervals`` (the bootstrap's small-sample stretch), ``hero`` (the hero through
both steps), ``forecast`` (``fit_task``, ``fit_tasks``: both steps and the hero).
"""

from __future__ import annotations

from ladder.reports.fits.tasks.accuracy import AccuracyLaw, sigmoid
from ladder.reports.fits.tasks.columns import column, task_columns
from ladder.reports.fits.tasks.task_forecast import (
    TaskFit,
    TaskScaling,
    collinear,
    fit_task,
    fit_tasks,
)
from ladder.reports.fits.tasks.task_hero import HeroForecast
from ladder.reports.fits.tasks.task_loss import LossLaw, Step1

__all__ = [
    "AccuracyLaw",
    "HeroForecast",
    "LossLaw",
    "Step1",
    "TaskFit",
    "TaskScaling",
    "collinear",
    "column",
    "fit_task",
    "fit_tasks",
    "sigmoid",
    "task_columns",
]
