"""The one law-fitting engine that every fit of the project uses: loss laws, ablation trends, hyperparameter
laws and the task-loss step of task forecasts.

One objective family: ``sum_i w_i Huber_delta(f(x_i; theta) - y_i)`` where ``y`` is a log-space quantity (log
loss, log LR, a gap of log losses) and ``delta = HUBER_DELTA`` (1e-3, as Epoch AI's Chinchilla replication);
analytic Jacobians; a multi-start global search (:mod:`.solve`); bootstrap refits from fresh starts
(:mod:`.bootstrap`); one result type, :class:`LawFit`, with parameters, intervals, residuals and the data
used. numpy and scipy only.
"""

from ladder.reports.fits.engine.law_fit import LawFit
from ladder.reports.fits.engine.law_forms import Bounded, Form, Linear, PowerSum, ScaledPower
from ladder.reports.fits.engine.solve import HUBER_DELTA, fit

__all__ = ["HUBER_DELTA", "Bounded", "Form", "LawFit", "Linear", "PowerSum", "ScaledPower", "fit"]
