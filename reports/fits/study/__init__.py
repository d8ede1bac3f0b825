"""The assembled fit of a study (``fit_study``): the runs table prepared, one Approach-3 law per variant, the
optional parts, the hero forecast and the recommendation, in one ``FitResult``; its decisions are in
:mod:`ladder.reports.fits.study.fit`."""

from __future__ import annotations

from ladder.reports.fits.study.fit import fit_runs_file, fit_study
from ladder.reports.fits.study.result import FitResult
from ladder.reports.fits.study.runs_file import read_runs_file

__all__ = ["FitResult", "fit_runs_file", "fit_study", "read_runs_file"]
