"""The study's fit as the forecast commands read it: ``fit.json``, checked against the results it was fitted on.

``ladder forecast freeze``, ``ladder hero`` and ``ladder plan --suggest`` act on the fit; each first checks that
``fit.json``'s ``meta.results_sha256`` is the hash of the study's results table now
(:func:`ladder.reports.fits.study.table.results_hash`: the finished runs but the hero runs), so none of them acts on a fit
of other data. :func:`refit` recomputes the same fit in Python (the same bootstrap count and seed: the same
numbers) where a command needs the fitted objects, not only their JSON.

:func:`read_fit` gives fit.json as its typed contract (:class:`~ladder.reports.fits.study.fit_json.FitJson`): the
commands read validated objects, never the raw dict.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ladder import layout
from ladder.errors import StateError
from ladder.studies.spec import StudySpec

if TYPE_CHECKING:
    from ladder.reports.fits.study.fit_json import FitJson, Hero, Meta


@dataclass
class CurrentFit:
    study_dir: Path
    study: StudySpec
    fit: FitJson  # fit.json, validated
    results: pd.DataFrame  # results.parquet, hero rows included

    @property
    def meta(self) -> Meta:
        return self.fit.meta

    @property
    def hero(self) -> Hero:
        return self.fit.hero


def results_hashes_of(study_dir: Path) -> tuple[str, ...] | None:
    """The hashes a freeze of the study's results table now holds: this ladder's, and an older ladder's
    (:func:`ladder.reports.fits.study.table.results_hashes`); None when it has none or it cannot be read."""
    from ladder.reports.fits.study.table import results_hashes

    sd = layout.StudyDir(Path(study_dir))
    try:
        return results_hashes(pd.read_parquet(sd.results_parquet))
    except Exception:  # noqa: BLE001 - missing or unreadable: no hash to compare with
        return None


def study_hash(study: StudySpec) -> str:
    """The hash of a study spec's canonical content (every field, defaults filled in, keys sorted)."""
    blob = json.dumps(study.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


# the fields of fit.json that the forecast commands and the report read as numbers (None: not available)
_NUMBERS = {
    "hero": (
        "params",
        "tokens",
        "tokens_per_param",
        "compute",
        "flops",
        "loss",
        "lo",
        "hi",
        "level",
        "half_width_pct",
        "aspect_ratio",
        "seq_len",
        "ladder_flops",
        "ladder_pct_of_hero",
    ),
    "recommendation": (
        "params",
        "params_target",
        "params_total",
        "params_non_embedding",
        "tokens",
        "tokens_per_param",
        "compute",
        "flops",
        "d_model",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "head_dim",
        "ffn_dim",
        "vocab_size",
        "aspect_ratio",
        "aspect_ratio_target",
        "seq_len",
        "batch_tokens",
        "lr",
        "steps",
        "warmup_steps",
        "warmup_fraction",
        "micro_batch_size",
        "loss",
    ),
    "predictions": ("params", "tokens", "loss", "lo", "hi", "level", "half_width_pct"),
    "meta": ("n_runs", "n_used", "n_boot", "seed"),
}
_OBJECTS = ("loss", "hero", "recommendation", "meta", "rollout", "compute_optimal", "tied_vs_untied")


def fit_problem(fit: Any) -> str | None:
    """What makes a fit.json unusable (a hand edit, a torn write), or None: the sections must be JSON objects and
    the numbers the forecast commands read must be numbers (or null)."""
    if not isinstance(fit, dict):
        return f"it is a JSON {type(fit).__name__}, not an object"
    for key in _OBJECTS:
        if fit.get(key) is not None and not isinstance(fit[key], dict):
            return f"{key} is {type(fit[key]).__name__}, not an object"
    preds = fit.get("predictions")
    if preds is not None and not (isinstance(preds, list) and all(isinstance(p, dict) for p in preds)):
        return "predictions is not a list of objects"
    for section, keys in _NUMBERS.items():
        value = fit.get(section)
        entries = (
            [(f"{section}[{i}]", p) for i, p in enumerate(value)]
            if section == "predictions" and value
            else [(section, value)]
        )
        for where, entry in entries:
            if not isinstance(entry, dict):
                continue
            for key in keys:
                v = entry.get(key)
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    return f"{where}.{key} = {v!r} is not a number"
    return None


def read_fit(study_dir: Path) -> FitJson:
    """fit.json as its typed contract, refused in one line when it is missing, unreadable, damaged or of another
    version of ladder (then `ladder fit` writes it anew)."""
    sd = layout.StudyDir(Path(study_dir))
    layout.refuse_if_not_a_file(sd.fit, f"run `ladder fit {layout.shell_word(sd.path)}`")
    if not sd.fit.is_file():
        raise StateError(
            f"{sd.path} has no {layout.FIT}: run `ladder collect {layout.shell_word(sd.path)}` and `ladder fit {layout.shell_word(sd.path)}` first"
        )
    try:
        fit = layout.loads_json(sd.fit.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateError(
            f"{sd.fit} is damaged (not JSON: {exc}): refit with `ladder fit {layout.shell_word(sd.path)}`"
        ) from None
    problem = fit_problem(fit)
    if problem:
        raise StateError(f"{sd.fit} is damaged ({problem}): refit with `ladder fit {layout.shell_word(sd.path)}`")
    from ladder.reports.fits.study.fit_json import parse_fit_json

    return parse_fit_json(fit, sd.fit)  # the typed contract: an older or damaged file is one line


def current_fit(study_dir: Path) -> CurrentFit:
    """The study, its fit.json and its results table, refusing a fit that is not of these results."""
    from ladder.books.collect import read_results
    from ladder.plan.planner import read_study

    study_dir = Path(study_dir)
    study = read_study(study_dir)
    fit = read_fit(study_dir)
    results = read_results(study_dir)
    from ladder.reports.fits.study.table import results_hash

    if fit.meta.results_sha256 != results_hash(results):
        raise StateError(
            f"the fit is older than the results ({layout.FIT} was fitted on another results table): "
            f"run `ladder fit {layout.shell_word(study_dir)}` first"
        )
    return CurrentFit(study_dir=study_dir, study=study, fit=fit, results=results)


def refit(current: CurrentFit, *, study: StudySpec | None = None, predict: Any = ()) -> Any:
    """``fit_study`` on the current results with fit.json's bootstrap count and seed (``study``: another hero,
    say): a :class:`~ladder.reports.fits.study.FitResult` with the fitted objects."""
    from ladder.reports.fits import fit_study

    meta = current.meta
    return fit_study(
        current.results,
        study=study or current.study,
        predict=predict,
        n_boot=int(meta.n_boot or 200),
        seed=int(meta.seed or 0),
    )
