"""The ladder's cost: one figure with one meaning for the report's headline and its section on the ladder (and
the same count as the plan's totals and ``ladder fit``'s summary): exact counted training FLOPs, what
:data:`ladder.model.shape.LADDER_COST_COUNTS` says it counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ladder.model.shape import LADDER_COST_COUNTS
from ladder.reports.render.fmt import fmt_flops, num, ok


@dataclass(frozen=True)
class LadderCost:
    flops: float | None
    basis: str  # "spent" (what the runs spent) or "planned" (the plan's totals, before results)
    planned: float | None = None  # the plan's total, said beside a spent figure that has not reached it

    @property
    def counts(self) -> str:
        return f"exact counted training FLOPs {self.basis}{self.so_far}: {LADDER_COST_COUNTS}"

    @property
    def so_far(self) -> str:
        """The words " so far, of 2.63e13 planned" while the runs have spent less than the plan's total: a fresh study's
        report said "Ladder cost 0%" where `ladder plan` had said 27.5% of the hero's compute."""
        if self.basis != "spent" or not ok(self.planned) or not ok(self.flops) or self.flops >= 0.995 * self.planned:
            return ""
        return f" so far, of {fmt_flops(self.planned)} planned"


def spent_flops(runs: pd.DataFrame) -> float | None:
    """FLOPs the ladder's runs spent (hero rows left out): collect's ``flops_spent`` (a branch's own steps, a
    partial run's consumed FLOPs), else a row's ``flops``; None without a column to read."""
    if not len(runs) or not ({"flops_spent", "flops"} & set(runs.columns)):
        return None
    if "role" in runs.columns:
        runs = runs[runs["role"].astype(str).str.strip().str.lower() != "hero"]
    out = np.zeros(len(runs))
    for col in ("flops", "flops_spent"):  # the later column wins where it is known
        if col in runs.columns:
            v = pd.to_numeric(runs[col], errors="coerce").to_numpy(dtype=float)
            out = np.where(np.isfinite(v), v, out)
    return float(out.sum())


def ladder_cost(
    fit_ladder_flops: float | None, runs: pd.DataFrame, has_results: bool, plan_totals: Mapping[str, Any]
) -> LadderCost:
    """The fit's ``hero.ladder_flops`` (what the fitted runs' table says they spent), else the collected runs'
    spent FLOPs, else the plan's total as planned."""
    planned = num(plan_totals.get("flops")) if ok(plan_totals.get("flops")) else None
    if ok(fit_ladder_flops):
        return LadderCost(num(fit_ladder_flops), "spent", planned)
    if has_results:
        spent = spent_flops(runs)
        if spent is not None:
            return LadderCost(spent, "spent", planned)
    if ok(plan_totals.get("flops")):
        return LadderCost(num(plan_totals.get("flops")), "planned")
    return LadderCost(None, "planned")
