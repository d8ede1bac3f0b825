"""fit.json's contract (issue 27): written and read through typed models, golden-tested, and an older or damaged
file refused in one line that says to refit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ladder.errors import FitError
from ladder.reports.fits.study.fit_json import SCHEMA_VERSION, FitJson, parse_fit_json, read_fit_json, validate

GOLDEN = Path(__file__).parent / "golden" / "fit_json.schema.json"


def test_the_schema_matches_the_golden_file():
    """Any change to a typed field of fit.json changes this schema: regenerate the golden file, and bump
    SCHEMA_VERSION if a file the old schema accepted would now be refused or read differently: ``python -c "import json; from ladder.reports.fits.study.fit_json import FitJson, SCHEMA_VERSION;
    print(json.dumps({'schema_version': SCHEMA_VERSION, 'schema': FitJson.model_json_schema()}, indent=1,
    sort_keys=True))" > tests/reports/fits/golden/fit_json.schema.json``."""
    golden = json.loads(GOLDEN.read_text())
    assert golden["schema_version"] == SCHEMA_VERSION, "SCHEMA_VERSION changed: regenerate the golden schema"
    assert FitJson.model_json_schema() == golden["schema"], (
        "fit.json's typed contract changed: regenerate tests/reports/fits/golden/fit_json.schema.json, and bump "
        "SCHEMA_VERSION in reports/fits/study/fit_json.py if a file the old schema accepted is now refused"
    )


@pytest.fixture(scope="module")
def fit_dict(tmp_path_factory):
    from ladder.reports.fits import fit_study
    from tests.reports.fits.synthetic import make_study, study_table  # a real fit of a synthetic ladder

    study = make_study()
    return fit_study(study_table(study), study=study, n_boot=20).to_dict()


def test_a_real_fit_round_trips_through_the_contract(fit_dict, tmp_path):
    model = validate(fit_dict)
    assert model.meta.schema_version == SCHEMA_VERSION and model.hero.loss == fit_dict["hero"]["loss"]
    assert model.hero.distance is not None and model.hero.distance.compute_x > 1
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit_dict))
    assert read_fit_json(path).model_dump(exclude_unset=True)["hero"]["loss"] == fit_dict["hero"]["loss"]


def test_a_renamed_key_fails_the_contract(fit_dict):
    renamed = json.loads(json.dumps(fit_dict))
    renamed["hero_forecast"] = renamed.pop("hero")
    with pytest.raises(FitError, match="refit with `ladder fit`"):
        parse_fit_json(renamed)


def test_an_older_fit_json_is_one_line_saying_to_refit(fit_dict):
    old = json.loads(json.dumps(fit_dict))
    del old["meta"]["schema_version"]
    with pytest.raises(FitError, match=r"another version of ladder \(one before fit.json had a schema version.*refit"):
        parse_fit_json(old)
    old["meta"]["schema_version"] = 2
    with pytest.raises(FitError, match=r"\(fit.json schema 2; this ladder reads schema \d+\): refit with `ladder fit`"):
        parse_fit_json(old)
    bad = json.loads(json.dumps(fit_dict))
    bad["hero"]["loss"] = "abc"
    with pytest.raises(FitError, match=r"hero.loss.*refit"):
        parse_fit_json(bad)
