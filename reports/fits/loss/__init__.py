"""Loss laws and the hero forecast: several law forms fitted by the one engine, scored by rollout backtests
at every extrapolation distance, weighted by that evidence, with intervals calibrated on the rollout.
numpy/scipy only; imports the engine and nothing from rendering or orchestration."""

from ladder.reports.fits.loss.loss_forecast import Forecast, forecast_loss
from ladder.reports.fits.loss.loss_forms import LOSS_FORMS
from ladder.reports.fits.loss.loss_rollout import Rollout, rollout

__all__ = ["LOSS_FORMS", "Forecast", "Rollout", "forecast_loss", "rollout"]
