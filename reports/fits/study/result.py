"""The result of a study fit (``FitResult``) and its JSON, ``fit.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ladder.layout import jsonable
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.loss import Forecast
from ladder.reports.fits.study import fit_json


@dataclass
class FitResult:
    """Everything ``ladder fit`` computes. Sub-results are the fit objects (``None`` with a reason in
    ``reasons[name]`` when unavailable); ``to_dict()`` is the JSON of ``fit.json`` (no NaN/inf).

    ``loss`` is the primary variant's :class:`~ladder.reports.fits.loss.Forecast` (law forms, rollout,
    weights, calibration, reach); ``loss_by_variant`` every variant's."""

    loss: Forecast | None  # None (reason in reasons["loss"]) only when a sweep or ablation result stands alone
    primary_variant: str
    variant_choice: str
    loss_by_variant: dict[str, Forecast | None]
    predictions: list[dict]
    hero: dict | None
    compute_optimal: dict
    noise_floor: dict[str, list[dict]] = field(default_factory=dict)  # variant -> seed scatter per size
    isoflop: Any | None = None
    hparams: Any | None = None
    tied_vs_untied: Any | None = None
    depth_vs_width: Any | None = None
    recommendation: rec.Recommendation | None = None
    excluded: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # section -> why it is unavailable
    meta: dict = field(default_factory=dict)
    tasks: Any | None = None  # task-accuracy forecasts (ladder.reports.fits.tasks.TaskScaling)
    in_context: Any | None = None  # the loss on in-context repeats and novel tokens (ladder.reports.fits.in_context)
    forecast_curve: list[dict] | None = None  # the calibrated 90% band along the hero's tokens/param
    runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs after exclusion
    law_runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs each variant's laws were fitted to

    def _section(self, name: str, obj: Any, extra: dict | None = None) -> dict:
        if obj is None:
            return {"available": False, "reason": self.reasons.get(name, "not computed")}
        out = {"available": True, **obj.to_dict()}
        if extra:
            out.update(extra)
        return out

    def to_dict(self) -> dict:
        if self.loss is not None:
            law = {"available": True, **self.loss.to_dict()}
        else:
            law = {"available": False, "reason": self.reasons.get("loss")}
        law.update({"variant": self.primary_variant, "variant_choice": self.variant_choice})
        by_variant = {}
        for v, f in self.loss_by_variant.items():
            if f is None:
                by_variant[v] = {"available": False, "reason": self.reasons.get(f"law:{v}", "not fitted")}
                continue
            summary = {
                k: {"params": law_fit.params, "ci90": law_fit.intervals(), "weight": f.weights.get(k, 0.0)}
                for k, law_fit in f.laws.items()
            }
            by_variant[v] = {
                "available": True,
                "primary": v == self.primary_variant,
                "forms": summary,
                "weights": f.weights,
                "target": f.points[0].to_dict() if f.points else None,
                "calibration": {"coverage": f.coverage, "factor": f.factor},
                "reach": f.reach,
            }
        hp_extra = None
        if self.hparams is not None:
            hp_extra = {"available": bool(self.hparams.has_lr_sweep or self.hparams.has_batch_sweep)}
            if not hp_extra["available"]:
                hp_extra["reason"] = self.hparams.lr.reason
        out = {
            "loss": law,
            "loss_by_variant": by_variant,
            "noise_floor": self.noise_floor,
            "predictions": list(self.predictions),
            "hero": self.hero if self.hero is not None else {"available": False, "reason": self.reasons.get("hero")},
            "compute_optimal": self.compute_optimal,
            "isoflop": self._section("isoflop", self.isoflop),
            "hparams": self._section("hparams", self.hparams, hp_extra),
            "tied_vs_untied": self._section("tied_vs_untied", self.tied_vs_untied),
            "depth_vs_width": self._section("depth_vs_width", self.depth_vs_width),
            "recommendation": self._section("recommendation", self.recommendation),
            "tasks": self._section("tasks", self.tasks),
            "in_context": self._section("in_context", self.in_context),
            "forecast_curve": self.forecast_curve,
            "excluded": list(self.excluded),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "meta": dict(self.meta),
        }
        if self.recommendation is not None:
            out["recommendation"]["yaml"] = self.recommendation.to_yaml_snippet()
        out["meta"].setdefault("schema_version", fit_json.SCHEMA_VERSION)
        out = jsonable(out)
        fit_json.validate(out)  # the contract every reader relies on (a renamed key fails here, not in a report)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def write(self, path: str | Path) -> Path:
        """Write ``to_dict()`` as JSON (atomically: a temporary file renamed into place)."""
        from ladder.layout import atomic_write_text

        path = Path(path)
        atomic_write_text(path, self.to_json() + "\n")
        return path
