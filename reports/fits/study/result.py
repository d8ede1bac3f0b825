"""The result of a study fit (``FitResult``) and its JSON, ``fit.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ladder.layout import jsonable
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.approach3 import ChinchillaFit


@dataclass
class FitResult:
    """Everything ``ladder fit`` computes. Sub-results are the fit objects (``None`` with a reason in
    ``reasons[name]`` when unavailable); ``to_dict()`` is the JSON of ``fit.json`` (no NaN/inf)."""

    loss_law: ChinchillaFit | None  # None (reason in reasons["loss_law"]) only when a sweep result stands alone
    primary_variant: str
    variant_choice: str
    laws_by_variant: dict[str, ChinchillaFit | None]
    predictions: list[dict]
    hero: dict | None
    compute_optimal: dict
    isoflop: Any | None = None
    loss_vs_compute: Any | None = None
    hparams: Any | None = None
    tied_vs_untied: Any | None = None
    depth_vs_width: Any | None = None
    recommendation: rec.Recommendation | None = None
    excluded: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # section -> why it is unavailable
    meta: dict = field(default_factory=dict)
    variant_hero: dict[str, dict] = field(default_factory=dict)  # variant -> its law's forecast at the hero
    loss_vs_compute_hero: dict | None = None
    tasks: Any | None = None  # task-accuracy forecasts (ladder.reports.fits.tasks.TaskScaling)
    forecast_curve: list[dict] | None = None  # the law's 90% prediction band along the hero's tokens/param
    runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs after exclusion
    law_runs: pd.DataFrame | None = field(default=None, repr=False)  # the runs each variant's law was fitted to

    # --------------------------------------------------------------------------------------------- output
    def _section(self, name: str, obj: Any, extra: dict | None = None) -> dict:
        if obj is None:
            return {"available": False, "reason": self.reasons.get(name, "not computed")}
        out = {"available": True, **obj.to_dict()}
        if extra:
            out.update(extra)
        return out

    def to_dict(self) -> dict:
        if self.loss_law is not None:
            law = {"available": True, **self.loss_law.to_dict()}
        else:
            law = {"available": False, "form": "chinchilla", "reason": self.reasons.get("loss_law")}
        law.update({"variant": self.primary_variant, "variant_choice": self.variant_choice})
        by_variant = {}
        for v, f in self.laws_by_variant.items():
            if f is None:
                by_variant[v] = {"available": False, "reason": self.reasons.get(f"law:{v}", "not fitted")}
            else:
                by_variant[v] = {"available": True, "primary": v == self.primary_variant, **f.to_dict(),
                                 "hero": self.variant_hero.get(v)}
        if self.loss_law is not None and self.loss_law.backtest is not None:
            bt = {"available": True, "form": "chinchilla", "variant": self.primary_variant,
                  **self.loss_law.backtest.to_dict()}
        else:
            bt = {"available": False, "reason": "no backtest was run"}
        lvc_extra = {"hero": self.loss_vs_compute_hero} if self.loss_vs_compute is not None else None
        hp_extra = None
        if self.hparams is not None:
            hp_extra = {"available": bool(self.hparams.has_lr_sweep or self.hparams.has_batch_sweep)}
            if not hp_extra["available"]:
                hp_extra["reason"] = self.hparams.lr.reason
        out = {
            "loss_law": law,
            "laws_by_variant": by_variant,
            "predictions": list(self.predictions),
            "hero": self.hero if self.hero is not None else {"available": False, "reason": self.reasons.get("hero")},
            "compute_optimal": self.compute_optimal,
            "backtest": bt,
            "isoflop": self._section("isoflop", self.isoflop),
            "loss_vs_compute": self._section("loss_vs_compute", self.loss_vs_compute, lvc_extra),
            "hparams": self._section("hparams", self.hparams, hp_extra),
            "tied_vs_untied": self._section("tied_vs_untied", self.tied_vs_untied),
            "depth_vs_width": self._section("depth_vs_width", self.depth_vs_width),
            "recommendation": self._section("recommendation", self.recommendation),
            "tasks": self._section("tasks", self.tasks),
            "forecast_curve": self.forecast_curve,
            "excluded": list(self.excluded),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "meta": dict(self.meta),
        }
        if self.recommendation is not None:
            out["recommendation"]["yaml"] = self.recommendation.to_yaml_snippet()
        return jsonable(out)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def write(self, path: str | Path) -> Path:
        """Write ``to_dict()`` as JSON (atomically: a temporary file renamed into place)."""
        from ladder.layout import atomic_write_text

        path = Path(path)
        atomic_write_text(path, self.to_json() + "\n")
        return path
