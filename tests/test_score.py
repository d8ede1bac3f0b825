"""Scoring a frozen forecast: the error, the interval and z against a final loss, and, while the hero trains, the
forecast of its final loss from its partial curve (synthetic curves whose final loss is known)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ladder import layout
from ladder.forecast.score import compare, in_context_score
from ladder.reports.fits.scoring import partial_forecast, z_score
from ladder.reports.fits.study.forecast_json import InContext, Interval
from tests.cli_helpers import run_cli
from tests.hero_fixture import hero_spec, law_loss, make_ladder, refresh, shape_r, train


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    """A fitted ladder with a frozen forecast and a hero run planned (not trained)."""
    from ladder.forecast.frozen import freeze
    from ladder.forecast.hero_run import plan_hero_run

    root = make_ladder(tmp_path_factory.mktemp("ladder") / "study")
    freeze(root, note="before the hero")
    plan_hero_run(root)
    refresh(root, fit=False)
    return root


@pytest.fixture
def study(planned, tmp_path) -> Path:
    return Path(shutil.copytree(planned, tmp_path / "study"))


def test_error_inside_and_z_of_a_final_loss():
    point = Interval(loss=2.0, lo=1.8, hi=2.2, level=0.9)
    s = compare(point, 2.1)
    assert s["error_pct"] == pytest.approx(100 * (2.0 - 2.1) / 2.1)
    assert s["inside"] is True
    assert s["z"] == pytest.approx(math.log(2.1 / 2.0) / (math.log(2.2 / 1.8) / 2 / 1.645))
    assert compare(point, 2.3)["inside"] is False and compare(point, 1.7)["z"] < -1.645
    assert z_score(2.0, 2.0, 1.8, 2.2) == 0


def test_the_hero_loss_by_kind_is_scored_against_the_frozen_point_it_matches():
    record = {
        "in_context": {
            "repeat_share": 0.3,
            "points": [
                {
                    "label": "hero",
                    "params": 8e5,
                    "tokens": 16e6,
                    "novel": {"loss": 2.3, "lo": 2.1, "hi": 2.5},
                    "repeats": {"loss": 1.7, "lo": 1.5, "hi": 1.9},
                },
                {
                    "label": "400K:8M",
                    "params": 4e5,
                    "tokens": 8e6,
                    "novel": {"loss": 2.55, "lo": 2.37, "hi": 2.76},
                    "repeats": {"loss": 1.98, "lo": 1.80, "hi": 2.19},
                },
            ],
        }
    }
    split = {"repeats": 1.158, "novel": 2.495}
    frozen = InContext.model_validate(record["in_context"])
    got = in_context_score(frozen, split, 3.98e5, 8.0e6)  # the check run: the prediction, not the hero
    assert got["point"] == "400K:8M" and got["actual"] == split
    assert got["novel"]["error_pct"] == pytest.approx(100 * (2.55 - 2.495) / 2.495) and got["novel"]["inside"]
    assert got["repeats"]["error_pct"] == pytest.approx(100 * (1.98 - 1.158) / 1.158) and not got["repeats"]["inside"]
    assert in_context_score(frozen, split, 1.6e6, 32e6) == {"actual": split}  # no frozen point there
    assert in_context_score(None, split, 4e5, 8e6) == {"actual": split}  # a freeze from before the split


def test_a_partial_curve_forecasts_the_final_loss():
    """References of several sizes with one curve shape; the hero at 40% of its tokens has a known final."""
    rng = np.random.default_rng(0)
    f = np.linspace(0.1, 1.0, 10)
    refs = []
    for i, final in enumerate((3.1, 2.9, 2.7)):
        wiggle = np.exp(rng.normal(0, 0.002, len(f)))
        wiggle[-1] = 1.0
        refs.append(
            {
                "run_id": f"r{i}",
                "params": 1e5 * (i + 1),
                "f": f,
                "log_r": np.log(np.array([shape_r(x) for x in f]) * wiggle),
            }
        )
    final = 2.5
    curve = [(x, final * shape_r(x)) for x in (0.1, 0.2, 0.3, 0.4)]
    p = partial_forecast(curve, refs)
    assert p["available"] and p["fraction"] == 0.4 and len(p["references"]) == 3
    assert p["final_forecast"] == pytest.approx(final, rel=5e-3)
    assert p["lo"] < final < p["hi"] and p["hi"] / p["lo"] < 1.05
    # past the references' curves there is nothing to interpolate: no forecast, a reason
    late = partial_forecast([(0.05, 3.0)], refs)
    assert late["available"] is False and "5%" in late["reason"]


def test_a_training_hero_gets_an_early_warning_from_its_curve(study, capsys):
    hero = hero_spec(study)
    final = law_loss(hero.params, hero.tokens)
    train(layout.StudyDir(study), hero, final, upto=0.5)  # still training: half its eval points
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    p = s["partial"]
    assert s["final"] is False and p["available"]
    assert 0.3 < p["fraction"] <= 0.5
    assert p["final_forecast"] == pytest.approx(final, rel=5e-3)  # the references' curves have the hero's shape
    frozen = json.loads((study / "forecast.json").read_text())["hero"]
    assert p["vs_frozen"]["forecast"] == frozen["loss"]
    assert p["vs_frozen"]["error_pct"] == pytest.approx(
        100 * (frozen["loss"] - p["final_forecast"]) / p["final_forecast"]
    )
    r = run_cli(capsys, "forecast", "show", study, "--json")
    assert r.json()["forecasts"][0]["kind"] == "projection"  # a partial score checks nothing yet

    train(layout.StudyDir(study), hero, final)  # the hero finishes
    r = run_cli(capsys, "forecast", "score", study, "--json")
    [s] = r.json()["scores"]
    assert s["final"] is True and s["actual"] == pytest.approx(final) and s["source"]["run_id"] == hero.run_id
    assert s["error_pct"] == pytest.approx(100 * (frozen["loss"] - final) / final)
    assert s["inside"] == (frozen["lo"] <= final <= frozen["hi"])
    assert [x["final"] for x in json.loads((study / "forecast.json").read_text())["scores"]] == [False, True]


def test_a_curve_file_that_stops_early(study, tmp_path, capsys):
    hero = hero_spec(study)
    final = 3.3
    steps = [hero.steps * k // 10 for k in range(1, 7)]
    text = "step,loss\n" + "".join(f"{s},{final * shape_r(s / hero.steps)}\n" for s in steps)
    (tmp_path / "curve.csv").write_text(text)
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.csv", "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["final"] is False and s["partial"]["final_forecast"] == pytest.approx(final, rel=5e-3)
    # the whole curve: its last point is the final loss
    lines = [
        {"kind": "eval", "tokens": t, "eval_loss": final * shape_r(t / hero.tokens)}
        for t in (hero.tokens / 2, hero.tokens)
    ]
    (tmp_path / "curve.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    [s] = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.jsonl", "--json").json()["scores"]
    assert s["final"] is True and s["actual"] == pytest.approx(final)


def test_a_freeze_without_a_forecast_at_the_hero_run_is_not_scored(study, capsys):
    """A hero planned elsewhere than the frozen point is not scored against the wrong forecast."""
    assert run_cli(capsys, "hero", study, "--params", "250K").code == 0
    hero = hero_spec(study)
    train(layout.StudyDir(study), hero, 3.7)
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0 and r.json()["scores"] == [] and "predict" in r.json()["not_scored"]["1"]
    assert json.loads((study / "forecast.json").read_text())["scores"] == []


@pytest.mark.parametrize("loss", ['"abc"', "Infinity", "-3"])
def test_a_hero_whose_result_is_corrupt_is_not_scored(study, capsys, loss):
    hero = hero_spec(study)
    train(layout.StudyDir(study), hero, law_loss(hero.params, hero.tokens))
    rd = layout.StudyDir(study).run(hero.run_id)
    text = rd.result.read_text(encoding="utf-8")
    rd.result.write_text(re.sub(r'"final_eval_loss": [^,}]+', f'"final_eval_loss": {loss}', text), encoding="utf-8")
    before = (study / "forecast.json").read_bytes()
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert hero.run_id in r.stderr and "result.json is corrupt" in r.stderr and "final_eval_loss" in r.stderr
    assert (study / "forecast.json").read_bytes() == before
