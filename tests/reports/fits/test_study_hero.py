"""The fit's hero before the fit decides its allocation is the hero ``ladder plan`` sizes: one set of numbers."""

from __future__ import annotations

import pytest

from ladder.plan.hero_size import plan_hero
from ladder.reports.fits.study.study_hero import hero_start
from ladder.studies import load_study
from ladder.studies.spec import StudySpec


def _with_hero(name: str, **hero) -> StudySpec:
    d = load_study(name).model_dump(mode="json", exclude_none=True)
    d["hero"] = {k: v for k, v in {**d["hero"], **hero}.items() if v is not None}
    return StudySpec.model_validate(d)


@pytest.mark.parametrize(
    "name, hero",
    [
        ("default", {}),  # params by the tokens/param rule
        ("default", {"params": None, "compute": 3.3e15}),  # exact FLOPs, split by the rule
        ("default", {"tokens": "40M"}),
        ("chinchilla", {}),  # params and tokens given, untied default overridden
        ("chinchilla", {"params": None, "tokens": None, "compute": 5.76e23}),
    ],
)
def test_the_fits_hero_start_is_the_planned_hero(name, hero):
    study = _with_hero(name, **hero)
    plan, start = plan_hero(study), hero_start(study)
    assert start["params"] == plan.params
    assert start["tokens"] == plan.tokens
    assert start["flops"] == pytest.approx(plan.compute, rel=1e-12)
