"""Fits: every law fitted to a ladder's runs table (loss laws, hyperparameter laws, ablations, task forecasts) and the recommendation.
Imports numpy/scipy/pandas, ladder.{errors,layout,studies.spec}, ladder.model.{shape,sizing,recipe,config}; never torch, matplotlib, jinja2, ladder.{submit,jobs,status,plan}."""

from __future__ import annotations

from ladder.reports.fits.study import (
    FitResult,
    fit_runs_file,
    fit_study,
    read_runs_file,
)

__all__ = ["FitResult", "fit_runs_file", "fit_study", "read_runs_file"]
