"""Frozen forecasts: `ladder forecast freeze` never overwrites a freeze (a new one is a new numbered file), refuses a
fit older than the results, and `show`/`score` say when the results changed after a freeze; a score is appended
and leaves the frozen forecast as it was."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ladder import layout
from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import make_ladder, refresh, train


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_freeze_writes_the_forecast_and_never_overwrites_it(study, capsys):
    fit = json.loads((study / layout.FIT).read_text())
    r = run_cli(capsys, "forecast", "freeze", study, "--note", "first", "--json")
    assert r.code == 0, r.stderr
    first = study / "forecast.json"
    rec = json.loads(first.read_text())
    assert rec["number"] == 1 and rec["note"] == "first" and rec["scores"] == []
    assert rec["hero"]["loss"] == fit["hero"]["loss"] and rec["hero"]["lo"] == fit["hero"]["lo"]
    assert rec["hero"]["hi"] == fit["hero"]["hi"] and rec["hero"]["kind"] == "projection"
    assert rec["results_sha256"] == fit["meta"]["results_sha256"]
    assert set(rec["laws"]) == set(fit["loss"]["forms"]) and rec["weights"] == fit["loss"]["weights"]
    assert len(rec["study_sha256"]) == 64 and "git_revision" in rec and rec["ladder_version"]
    before = first.read_bytes()

    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M")
    assert r.code == 0, r.stderr
    assert first.read_bytes() == before  # the first freeze is never rewritten
    second = json.loads((study / "forecast-2.json").read_text())
    assert second["number"] == 2
    [p] = second["predictions"]
    assert p["label"] == "300K:6M" and p["lo"] < p["loss"] < p["hi"]
    assert [n for n, _ in layout.StudyDir(study).forecasts()] == [1, 2]
    shown = run_cli(capsys, "forecast", "show", study).stdout  # the note, as --json and the report give it
    assert "forecast 1: first" in shown and "forecast 2:" not in shown, shown


def test_freeze_records_each_kind_of_target_at_its_own_predict_points(tmp_path, capsys):
    """A point given to freeze alone (not to the fit) gets its in-context and novel forecasts from the freeze's own
    refit, beside the hero's from the fit."""
    study = make_ladder(tmp_path / "study", split=True)
    fit = json.loads((study / layout.FIT).read_text())
    assert fit["in_context"]["available"] and not fit["in_context"]["forecasts"]["predictions"]
    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M")
    assert r.code == 0, r.stderr
    ic = json.loads((study / "forecast.json").read_text())["in_context"]
    assert ic["repeat_share"] == pytest.approx(0.3)
    assert [p["label"] for p in ic["points"]] == ["hero", "300K:6M"]
    for p in ic["points"]:
        assert p["novel"]["lo"] < p["novel"]["loss"] < p["novel"]["hi"] and p["repeats"]["loss"] < p["novel"]["loss"]


def test_freeze_refuses_a_fit_older_than_the_results(study, capsys):
    spec = json.loads(next((study / "runs").iterdir()).joinpath("spec.json").read_text())
    rd = layout.StudyDir(study).run(spec["run_id"])
    result = json.loads(rd.result.read_text())
    layout.atomic_write_json(rd.result, {**result, "final_eval_loss": result["final_eval_loss"] * 1.05})
    refresh(study, fit=False)  # collected again, not fitted again
    before = _listing(study)
    r = run_cli(capsys, "forecast", "freeze", study)
    assert r.code == 2 and "the fit is older than the results" in r.stderr and "ladder fit" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert _listing(study) == before  # nothing written


def test_show_and_score_say_when_the_data_changed_after_a_freeze(study, capsys):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "forecast", "show", study, "--json")
    [row] = r.json()["forecasts"]
    assert row["data_changed"] is False and row["warning"] is None and row["kind"] == "projection"

    runs = pd.read_parquet(study / layout.RESULTS_PARQUET)
    runs.loc[0, "loss"] *= 1.02  # the results change after the forecast was frozen
    runs.to_parquet(study / layout.RESULTS_PARQUET, index=False)
    r = run_cli(capsys, "forecast", "show", study, "--json")
    [row] = r.json()["forecasts"]
    assert row["data_changed"] is True and "the data changed after this forecast" in row["warning"]
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "the data changed after this forecast" in r.stderr

    r = run_cli(capsys, "forecast", "score", study, "--loss", "3.5", "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["data_changed"] is True and "the data changed" in s["warning"]


def test_a_score_is_appended_and_leaves_the_freeze_as_it_was(study, capsys):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    path = study / "forecast.json"
    frozen = json.loads(path.read_text())
    for loss in (3.4, 3.6):
        assert run_cli(capsys, "forecast", "score", study, "--loss", str(loss)).code == 0
    after = json.loads(path.read_text())
    scores = after.pop("scores")
    assert after == {k: v for k, v in frozen.items() if k != "scores"}
    assert [s["actual"] for s in scores] == [3.4, 3.6] and all(s["final"] for s in scores)
    h = frozen["hero"]
    assert scores[0]["error_pct"] == pytest.approx(100 * (h["loss"] - 3.4) / 3.4)
    r = run_cli(capsys, "forecast", "show", study, "--json")
    [row] = r.json()["forecasts"]
    assert row["kind"] == "prediction" and row["scores"] == 2 and row["latest_score"]["actual"] == 3.6


def test_the_hero_run_never_makes_the_fit_look_stale(study, capsys):
    """The hero's own row in the results (planned, then done) is not data the fit used."""
    assert run_cli(capsys, "hero", study).code == 0
    refresh(study, fit=False)
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    spec = [json.loads(p.read_text()) for p in (study / "runs").glob("*/spec.json")]
    hero = next(s for s in spec if s["role"] == "hero")
    from ladder.model.config import RunSpec

    train(layout.StudyDir(study), RunSpec.model_validate(hero), 3.5)
    refresh(study, fit=False)
    row = run_cli(capsys, "forecast", "show", study, "--json").json()["forecasts"][0]
    assert row["data_changed"] is False
    assert run_cli(capsys, "forecast", "freeze", study).code == 0  # the fit is still the fit of these results


def test_a_hero_with_seed_replicates_is_scored_against_their_mean(study, capsys):
    from ladder.model.config import RunSpec

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    first = run_cli(capsys, "hero", study, "--json").json()
    again = run_cli(capsys, "hero", study, "--seed", "1", "--json").json()
    assert again["state"] == "new" and again["run_id"] != first["run_id"]
    specs = {s["run_id"]: s for s in (json.loads(p.read_text()) for p in (study / "runs").glob("*/spec.json"))}
    a, b = specs[first["run_id"]], specs[again["run_id"]]
    assert (a["seed"], b["seed"]) == (0, 1) and b["role"] == "hero"
    assert {k: v for k, v in a.items() if k not in ("seed", "run_id", "axes")} == {
        k: v for k, v in b.items() if k not in ("seed", "run_id", "axes")
    }  # only the seed differs
    assert "--seed 1" in again["sources"]["seed"]
    sd = layout.StudyDir(study)
    train(sd, RunSpec.model_validate(a), 3.4)
    r = run_cli(capsys, "forecast", "score", study, "--run", a["run_id"], "--json")
    assert "replicates" not in r.json()["scores"][0]  # one finished run: nothing to average
    train(sd, RunSpec.model_validate(b), 3.6)
    r = run_cli(capsys, "forecast", "score", study, "--run", a["run_id"], "--json")
    assert r.code == 0, r.stderr
    [score] = r.json()["scores"]
    reps = score["replicates"]
    mean = float(np.exp((np.log(3.4) + np.log(3.6)) / 2))
    assert reps["n"] == 2 and {x["final"] for x in reps["runs"]} == {3.4, 3.6}
    assert reps["mean"] == pytest.approx(mean) and score["actual"] == 3.4
    assert reps["sd_log_pct"] == pytest.approx(100 * abs(np.log(3.6 / 3.4)) / np.sqrt(2))
    assert reps["vs_mean"]["error_pct"] == pytest.approx(100 * (score["forecast"] - mean) / mean)
    text = run_cli(capsys, "forecast", "score", study, "--run", a["run_id"]).stdout
    assert "2 seeds: mean " in text
    r = run_cli(capsys, "hero", study, "--seed", "-1")
    assert r.code == 2 and "--seed -1" in r.stderr


def test_a_fit_of_the_collected_table_in_memory_is_current(study, capsys):
    """`ladder run` fits the table collect returns before it is written: the freeze reads it from the parquet."""
    from ladder.books.collect import collect
    from ladder.plan.planner import read_plan
    from ladder.reports.fits import fit_study

    fit_study(collect(study).runs, study=read_plan(study)[0], n_boot=20).write(study / layout.FIT)
    assert run_cli(capsys, "forecast", "freeze", study).code == 0


def test_user_errors_exit_2_naming_the_flag_and_write_nothing(study, tmp_path, capsys):
    before = _listing(study)
    cases = [
        (("forecast", "score", study, "--loss", "3"), "no frozen forecast"),
        (("forecast", "freeze", study, "--predict", "lots"), "predict"),
        (("forecast", "freeze", tmp_path / "nowhere"), "nowhere"),
    ]
    for args, words in cases:
        r = run_cli(capsys, *args)
        assert r.code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert _listing(study) == before
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    before = _listing(study)
    for args, words in [
        (("--loss", "-1"), "--loss"),
        (("--loss", "3", "--curve", tmp_path / "c.csv"), "not both"),
        (("--curve", tmp_path / "missing.csv"), "--curve"),
        ((), "no hero run"),
        (("--run", "abc"), "--run abc"),
    ]:
        r = run_cli(capsys, "forecast", "score", study, *args)
        assert r.code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "bad.csv")
    assert r.code == 2 and "tokens (or step)" in r.stderr
    assert _listing(study) == before


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("hero.loss", lambda r: r["hero"].update(loss="abc")),
        ("hero.params", lambda r: r["hero"].update(params=-5)),
        ("hero.hi", lambda r: r["hero"].update(hi=float("inf"))),
        ("hero.tokens", lambda r: r["hero"].pop("tokens")),
        ("predictions[0].tokens", lambda r: r["predictions"][0].update(tokens=0)),
        ("scores[0].actual", lambda r: r["scores"].append({"final": True, "actual": "3.5"})),
        ("hero", lambda r: r.update(hero=[1])),
    ],
)
def test_a_hand_edited_freeze_is_damaged_shown_with_its_problem_and_never_scored(study, capsys, where, edit):
    """Issue 28: a freeze's points must hold finite positive numbers; `show` lists a damaged one with its problem,
    `score` refuses it in one line and writes nothing (before: a ValueError traceback in both)."""
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M").code == 0
    path = study / "forecast.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))
    before = _listing(study)

    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0, r.stderr
    assert f"forecast.json is damaged ({where}" in " ".join(r.stdout.split())  # the table wraps its cells
    assert f"forecast.json is damaged ({where}" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    [row] = run_cli(capsys, "forecast", "show", study, "--json").json()["forecasts"]
    assert row["problem"].startswith(f"damaged ({where}")

    r = run_cli(capsys, "forecast", "score", study, "--loss", "3.5")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{path} is damaged ({where}" in r.stderr and "restore it" in r.stderr
    assert _listing(study) == before


def test_score_names_a_freeze_that_is_not_json_and_scores_none(study, capsys):
    """Issue 28: a corrupt forecast.json is named with the way out (before: "no frozen forecast ... freeze")."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    (study / "forecast.json").write_text('{"hero": ')
    before = _listing(study)
    r = run_cli(capsys, "forecast", "score", study, "--loss", "3.5")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{study / 'forecast.json'} is unreadable" in r.stderr and "no frozen forecast" not in r.stderr
    assert "forecast-2.json" not in r.stderr and "move it out of" in r.stderr
    assert _listing(study) == before  # the sound forecast-2.json is not scored either
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "forecast.json is unreadable" in r.stderr


def test_an_implausible_loss_is_refused(study, tmp_path, capsys):
    """Issue 28: `--loss 1e300` was scored ("error -100.00%"); above 100 nats/token is no loss a model can have."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    before = _listing(study)
    r = run_cli(capsys, "forecast", "score", study, "--loss", "1e300")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--loss 1e+300" in r.stderr and "100 nats/token" in r.stderr
    (tmp_path / "curve.csv").write_text("tokens,loss\n1000,3.5\n2000,1e300\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.csv")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "line 3, column loss" in r.stderr and "100 nats/token" in r.stderr
    assert _listing(study) == before
    assert run_cli(capsys, "forecast", "score", study, "--loss", "5.5").code == 0  # below ln(256) = 5.545


@pytest.mark.parametrize(("given", "bound"), [("100.0001", "above 100 nats/token"), ("0.00099", "below 0.001")])
def test_a_loss_just_past_a_bound_is_echoed_as_given(study, capsys, given, bound):
    """Issue 28: `--loss 100.0001` said "--loss 100: above 100 nats/token"."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    before = _listing(study)
    one_line(run_cli(capsys, "forecast", "score", study, "--loss", given), f"--loss {given}: {bound}")
    assert _listing(study) == before


def test_freeze_refuses_a_point_no_law_forecasts_saying_why(study, capsys):
    """Issue 28: `freeze --predict 400K:16G` (4e4 tokens/param, on a ladder of one ratio) froze `loss: null` and
    exited 0; then `score` advised the very `freeze --predict` that had been made."""
    before = _listing(study)
    for args in (("--predict", "400K:16G"), ("--predict", "300K:6M", "--predict", "400K:16G")):
        line = one_line(
            run_cli(capsys, "forecast", "freeze", study, *args),
            "--predict 400K:16G: no fitted law form can forecast 400K params x 16B tokens (40K tokens/param)",
            "only at 20 tokens/param",
            "nothing written",
        )
        assert "300K:6M" not in line
    assert _listing(study) == before
    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M", "--json")
    assert r.code == 0 and r.json()["predictions"][0]["loss"] is not None


@pytest.mark.parametrize("tiny", ["1e-300", "3.5e-4"])
def test_an_implausibly_small_loss_is_refused(study, tmp_path, capsys, tiny):
    """Issue 28: `--loss 1e-300` was scored ("error +3.5e301%"); below 0.001 nats/token (perplexity 1.001) no model
    of held-out text goes, so it is a mistyped number, in --loss as in a --curve file."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    before = _listing(study)
    r = run_cli(capsys, "forecast", "score", study, "--loss", tiny)
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"--loss {float(tiny):g}" in r.stderr and "below 0.001 nats/token" in r.stderr
    (tmp_path / "curve.csv").write_text(f"tokens,loss\n1000,3.5\n2000,{tiny}\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.csv")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"line 3, column loss: {float(tiny)!r} is below 0.001 nats/token" in r.stderr
    assert _listing(study) == before
    assert run_cli(capsys, "forecast", "score", study, "--loss", "0.01").code == 0  # the bound itself is generous


@pytest.mark.parametrize(
    ("field", "value"), [("params", -5), ("tokens", 0), ("flops", -1e18), ("loss", -2.0), ("compute", 0)]
)
def test_freeze_refuses_a_fit_json_with_a_non_positive_hero_number(study, capsys, field, value):
    """Issue 28: fit.json with `hero.params: -5` was frozen as "hero -5 params"; fit.json's contract refuses it."""
    fit = json.loads((study / layout.FIT).read_text())
    fit["hero"][field] = value
    layout.atomic_write_json(study / layout.FIT, fit)
    before = _listing(study)
    r = run_cli(capsys, "forecast", "freeze", study)
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"is damaged (hero.{field}" in r.stderr and "ladder fit" in r.stderr
    assert _listing(study) == before


@pytest.mark.parametrize(("note", "words"), [("before\x1b[31m hero", "'\\x1b' at character 7"),
                                             ("two\nlines", "'\\n' at character 4"), ("x" * 2001, "2,001 characters")])  # fmt: skip
def test_a_note_with_control_characters_or_of_a_document_s_length_is_refused(study, capsys, note, words):
    """Issue 28: `freeze --note` kept an escape sequence, replayed to every terminal that shows the freeze."""
    before = _listing(study)
    one_line(run_cli(capsys, "forecast", "freeze", study, "--note", note), "--note: ", words)
    assert _listing(study) == before


@pytest.mark.parametrize("field", ["params", "tokens"])
def test_freeze_refuses_a_fit_json_whose_hero_size_is_null_and_writes_nothing(study, capsys, field):
    """Retrial 7: `hero.params: null` in fit.json gave a TypeError traceback, and forecast.json was written."""
    fit = json.loads((study / layout.FIT).read_text())
    fit["hero"][field] = None
    layout.atomic_write_json(study / layout.FIT, fit)
    before = _listing(study)
    one_line(run_cli(capsys, "forecast", "freeze", study), f"is damaged (hero.{field}: None")
    assert _listing(study) == before


def test_freeze_says_the_hero_size_as_fit_and_report_do(study, capsys):
    r = run_cli(capsys, "forecast", "freeze", study)
    assert r.code == 0, r.stderr
    assert "hero 400K x 8M:" in r.stdout and "400,000" not in r.stdout


def test_a_freeze_after_the_hero_trained_is_marked_and_never_headlined_as_the_prediction(study, capsys):
    """Retrial 7: a freeze made after the hero was done was accepted silently ('next: `ladder hero` plans the hero
    run') and the report headlined that late freeze as 'a prediction checked against a real run'."""
    from tests.hero_fixture import hero_spec

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    r = run_cli(capsys, "forecast", "freeze", study, "--note", "late")
    assert r.code == 0, r.stderr
    [warning] = r.stderr.strip().splitlines()
    assert "the hero has already trained or started" in warning and "after_hero" in warning
    assert "plans the hero run" not in r.stdout
    assert json.loads((study / "forecast.json").read_text())["after_hero"] is False
    assert json.loads((study / "forecast-2.json").read_text())["after_hero"] is True
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    by = {s["number"]: s for s in r.json()["scores"]}
    assert by[2]["frozen_before_training"] is False and by[1].get("frozen_before_training") is not False
    r = run_cli(capsys, "report", study, "--format", "html")
    assert r.code == 0, r.stderr
    html = (study / "report" / "report.html").read_text()
    assert "A prediction checked against a real run. The frozen forecast (forecast 1," in html


@pytest.mark.parametrize(
    "score",
    [
        {"final": True},
        {"final": False, "partial": {"available": True}},
        {"final": True, "actual": 3.5, "error_pct": 1, "inside": "yes"},
    ],
    ids=["final-without-numbers", "partial-without-forecast", "inside-as-text"],
)
def test_show_says_a_hand_edited_score_is_incomplete_without_a_traceback(study, capsys, score):
    """Issue 28 (user trial): a score the freeze's contract lets through ({"final": true}) was a KeyError
    traceback in `forecast show`."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    path = study / "forecast.json"
    record = json.loads(path.read_text())
    record["scores"] = [score]
    path.write_text(json.dumps(record))
    r = run_cli(capsys, "forecast", "show", study)
    assert r.code == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert "edited by hand?" in " ".join(r.stdout.replace("│", " ").split())


def test_collecting_runs_that_have_not_finished_leaves_a_freeze_current(tmp_path, capsys):
    """A rung planned or part-trained (runs added by `plan --suggest --add`, a run still training) changes no law:
    collecting it must not make the fit look older than the results; finishing it must."""
    from ladder.plan.planner import read_plan
    from tests.hero_fixture import law_loss

    root = make_ladder(tmp_path / "s", skip=("141K",))
    assert run_cli(capsys, "forecast", "freeze", root).code == 0
    [spec] = [s for s in read_plan(root)[1] if s.axes.get("size") == "141K" and s.role != "hero"][:1]
    train(layout.StudyDir(root), spec, law_loss(spec.params, spec.tokens), upto=0.3)
    refresh(root, fit=False)
    [row] = run_cli(capsys, "forecast", "show", root, "--json").json()["forecasts"]
    assert row["data_changed"] is False, row
    assert run_cli(capsys, "forecast", "freeze", root).code == 0  # the fit is still the fit of these results

    train(layout.StudyDir(root), spec, law_loss(spec.params, spec.tokens))
    refresh(root, fit=False)
    rows = run_cli(capsys, "forecast", "show", root, "--json").json()["forecasts"]
    assert all(r["data_changed"] for r in rows), rows
