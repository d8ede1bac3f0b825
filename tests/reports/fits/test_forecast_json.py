"""The frozen forecast's contract (issue 27): a freeze that `ladder forecast freeze` wrote and `score` scored reads
back through typed models, the schema is golden-tested, and a hand-damaged freeze is named field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ladder.reports.fits.study.forecast_json import FrozenForecast, parse, problem
from tests.cli_helpers import run_cli

GOLDEN = Path(__file__).parent / "golden" / "forecast_json.schema.json"


def test_the_schema_matches_the_golden_file():
    """Any change to a typed field of a freeze changes this schema: regenerate the golden file with ``python -c
    "import json; from ladder.reports.fits.study.forecast_json import FrozenForecast;
    print(json.dumps(FrozenForecast.model_json_schema(), indent=1, sort_keys=True))"
    > tests/reports/fits/golden/forecast_json.schema.json``, after making sure older freezes still read."""
    assert FrozenForecast.model_json_schema() == json.loads(GOLDEN.read_text()), (
        "the frozen forecast's typed contract changed: regenerate tests/reports/fits/golden/forecast_json.schema.json"
    )


def test_a_frozen_and_scored_forecast_reads_back_typed(study, capsys):
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M", "--note", "before").code == 0
    assert run_cli(capsys, "forecast", "score", study, "--loss", "3.5").code == 0
    record = json.loads((study / "forecast.json").read_text())
    frozen, why = parse(record)
    assert why is None and frozen is not None
    assert frozen.hero.loss == record["hero"]["loss"] and frozen.hero.params == record["hero"]["params"]
    assert [p.label for p in frozen.predictions] == [p["label"] for p in record["predictions"]]
    assert frozen.point("hero") is frozen.hero and frozen.point(record["predictions"][0]["label"]) is not None
    assert frozen.note == "before" and frozen.number == 1
    [score] = frozen.scores
    assert score.final and score.actual == 3.5 and score.source.kind == "loss"
    assert score.error_pct == pytest.approx(100 * (frozen.hero.loss - 3.5) / 3.5)
    assert frozen.final_scores == [score]
    assert "laws" in frozen.model_extra  # the copied law forms pass through as they are


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda r: r["hero"].update(loss="abc"), "hero.loss: 'abc' is not a finite positive number"),
        (lambda r: r["hero"].pop("tokens"), "hero.tokens: missing"),
        (lambda r: r.update(hero=[1]), "hero: [1] is not an object"),
        (lambda r: r["predictions"][0].update(lo=-1), "predictions[0].lo: -1 is not a finite positive number"),
        (lambda r: r.update(predictions={}), "predictions: {} is not a list"),
        (lambda r: r.update(frozen_at=5), "frozen_at: 5 is not a time"),
        (lambda r: r["scores"].append({"final": True, "actual": "3.5"}), "scores[0].actual: '3.5' is not a finite"),
        (lambda r: r["scores"].append({"partial": {"fraction": float("inf")}}), "scores[0].partial.fraction: inf"),
        (lambda r: r.update(note=7), "note: 7 is not a text"),
    ],
)
def test_a_damaged_freeze_is_named_field_by_field(edit, why):
    record = {
        "number": 1,
        "frozen_at": "2026-01-01T00:00:00+00:00",
        "hero": {"params": 8e5, "tokens": 1.6e7, "loss": 2.0, "lo": 1.9, "hi": 2.1},
        "predictions": [{"label": "4e5:8e6", "params": 4e5, "tokens": 8e6, "loss": 2.5, "lo": 2.4, "hi": 2.6}],
        "scores": [],
    }
    assert problem(record) is None
    edit(record)
    assert problem(record).startswith(why), problem(record)
    assert problem([record]) == "not a JSON object but a JSON list"
