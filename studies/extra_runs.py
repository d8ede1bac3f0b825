"""Runs beyond the ladder's grid (``ladder.extra_runs``): what ``ladder plan STUDY_DIR --suggest --add`` writes,
one entry per run the fit says would narrow the hero's interval most per FLOP. ``ladder plan`` expands each
entry like a rung (:func:`ladder.plan.rung_runs.extra_rungs`): the study's sizing rules, recipe and schedule, every
ablation combination of the entry's variant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field, PositiveInt

from ladder.model.config import Count, Flops, Strict

if TYPE_CHECKING:
    from ladder.studies.spec import LadderSpec


class ExtraRunSpec(Strict):
    """One extra rung: a size (or depth) at a budget, optionally another seed or one variant only."""

    size: Count | None = Field(
        default=None, description="parameter count in ladder.param_count (sizes and isoflop ladders)"
    )
    depth: PositiveInt | None = Field(default=None, description="n_layers (depth ladders)")
    budget: Flops | None = Field(
        default=None,
        description="chinchilla: a multiple of tokens_per_param (default: each of ladder.budgets); "
        "isoflop: the compute budget in exact counted FLOPs (required)",
    )
    # a seed numpy and torch both take, as training.seed (-1 and 1e14 were planned, for the trainer to refuse)
    seed: Annotated[int, Field(ge=0, lt=2**32)] | None = Field(
        default=None, description="default: the study's seeds for this size"
    )
    variant: str | None = Field(
        default=None,
        description="only the ablation combinations of this variant: a plan label ('tied lr x2') or "
        "'tied' / 'untied' (every combination with that tying); default: every combination",
    )


def check_extra_runs(ladder: LadderSpec) -> None:
    """Each extra run gives what the ladder's mode sizes a run by (ValueError naming the entry otherwise)."""
    for i, extra in enumerate(ladder.extra_runs or []):
        where = f"extra_runs[{i}]"
        if ladder.mode == "isoflop":
            if extra.size is None or extra.budget is None or extra.depth is not None:
                raise ValueError(f"{where}: an isoflop ladder's extra run gives 'size' and 'budget' (exact FLOPs)")
        elif ladder.depths is not None:
            if extra.depth is None or extra.size is not None:
                raise ValueError(f"{where}: a ladder of depths sizes an extra run by 'depth', not 'size'")
        elif extra.size is None or extra.depth is not None:
            raise ValueError(f"{where}: a ladder of sizes sizes an extra run by 'size', not 'depth'")
