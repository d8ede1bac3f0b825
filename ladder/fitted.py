"""The study's fit as the forecast commands read it: ``fit.json``, checked against the results it was fitted on.

``ladder forecast freeze``, ``ladder hero`` and ``ladder plan --suggest`` act on the fit; each first checks that
``fit.json``'s ``meta.results_sha256`` is the hash of the study's results table now
(:func:`ladder.reports.fits.study.table.results_hash`: every row but the hero runs'), so none of them acts on a fit
of other data. :func:`refit` recomputes the same fit in Python (the same bootstrap count and seed: the same
numbers) where a command needs the fitted objects, not only their JSON.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ladder import layout
from ladder.errors import StateError
from ladder.studies.spec import StudySpec


@dataclass
class CurrentFit:
    study_dir: Path
    study: StudySpec
    fit: dict  # fit.json
    results: pd.DataFrame  # results.parquet, hero rows included

    @property
    def meta(self) -> dict:
        return self.fit.get("meta") if isinstance(self.fit.get("meta"), dict) else {}

    @property
    def hero(self) -> dict:
        hero = self.fit.get("hero")
        return hero if isinstance(hero, dict) else {}


def results_hash_of(study_dir: Path) -> str | None:
    """The hash of the study's results table now (None when it has none or it cannot be read)."""
    from ladder.reports.fits.study.table import results_hash

    sd = layout.StudyDir(Path(study_dir))
    try:
        return results_hash(pd.read_parquet(sd.results_parquet))
    except Exception:  # noqa: BLE001 - missing or unreadable: no hash to compare with
        return None


def study_hash(study: StudySpec) -> str:
    """The hash of a study spec's canonical content (every field, defaults filled in, keys sorted)."""
    blob = json.dumps(study.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def read_fit(study_dir: Path) -> dict:
    sd = layout.StudyDir(Path(study_dir))
    if not sd.fit.is_file():
        raise StateError(f"{sd.path} has no {layout.FIT}: run `ladder collect {sd.path}` and `ladder fit {sd.path}` "
                         "first")
    try:
        fit = json.loads(sd.fit.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise StateError(f"{sd.fit} is unreadable ({exc}): run `ladder fit {sd.path}` again") from None
    if not isinstance(fit, dict):
        raise StateError(f"{sd.fit} is not a JSON object: run `ladder fit {sd.path}` again")
    return fit


def current_fit(study_dir: Path) -> CurrentFit:
    """The study, its fit.json and its results table, refusing a fit that is not of these results."""
    from ladder.collect import read_results
    from ladder.plan import read_plan

    study_dir = Path(study_dir)
    study, _ = read_plan(study_dir)
    fit = read_fit(study_dir)
    results = read_results(study_dir)
    from ladder.reports.fits.study.table import results_hash

    meta = fit.get("meta") if isinstance(fit.get("meta"), dict) else {}
    if meta.get("results_sha256") != results_hash(results):
        raise StateError(f"the fit is older than the results ({layout.FIT} was fitted on another results table): "
                         f"run `ladder fit {study_dir}` first")
    return CurrentFit(study_dir=study_dir, study=study, fit=fit, results=results)


def refit(current: CurrentFit, *, study: StudySpec | None = None, predict: Any = ()) -> Any:
    """``fit_study`` on the current results with fit.json's bootstrap count and seed (``study``: another hero,
    say): a :class:`~ladder.reports.fits.study.FitResult` with the fitted objects."""
    from ladder.reports.fits import fit_study

    meta = current.meta
    return fit_study(current.results, study=study or current.study, predict=predict,
                     n_boot=int(meta.get("n_boot") or 200), seed=int(meta.get("seed") or 0))
