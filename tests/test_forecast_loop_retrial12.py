"""Re-trial 12 of the forecast loop (issue 28): freeze, hero, score (partial, complete, odd curves), show, the
report. Each test is a case the trial found, run by the command that found it, on a fake-trained ladder."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from ladder import layout
from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import hero_spec, make_ladder, train

NUMBER = r"\d+(?:\.\d+)?"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A fitted ladder, nothing frozen, no hero planned."""
    return make_ladder(tmp_path_factory.mktemp("r12") / "study")


@pytest.fixture
def study(fitted, tmp_path) -> Path:
    return Path(shutil.copytree(fitted, tmp_path / "study"))


def _page(study: Path) -> str:
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", (study / "report" / "report.html").read_text()).split()))


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _told_apart(*texts: str) -> None:
    """Numbers printed side by side: one precision, and no two alike (the values behind them differ)."""
    assert len({_decimals(t) for t in texts}) == 1, texts
    assert len(set(texts)) == len(texts), texts


def test_a_partial_score_prints_its_point_and_interval_in_one_precision(study, tmp_path, capsys):
    """`forecast score --curve` of one point at 88% printed "heads for 3.4 [3.4, 3.4]", and a hero heading for
    3.0 "heads for 3 [2.999, 3.001]": the interval's digits finer than the point's, or all three alike."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    curve = tmp_path / "c.csv"
    curve.write_text("tokens,eval_loss\n7000000,3.5\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", curve)
    assert r.code == 0, r.stderr
    m = re.search(rf"heads for ({NUMBER}) \[({NUMBER}), ({NUMBER})\]", r.stdout)
    assert m, r.stdout
    _told_apart(*m.groups())
    warned = re.search(rf"heads for ({NUMBER}), outside", r.stderr)
    assert warned and warned.group(1) == m.group(1), r.stderr  # the early warning's number is the score's
    show = run_cli(capsys, "forecast", "show", study)
    cells = " ".join(show.stdout.replace("│", " ").split())
    assert f"heads for {m.group(1)} [{m.group(2)}, {m.group(3)}]" in cells, cells
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    rm = re.search(
        rf"heads for a final loss of ({NUMBER}) \(90% ({NUMBER}) – ({NUMBER}), from the curves of 3 ", _page(study)
    )
    assert rm, _page(study)[:3000]
    _told_apart(*rm.groups())


def test_a_hero_heading_for_a_round_loss_keeps_its_zeros(study, capsys):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.0, upto=0.35)
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    m = re.search(rf"heads for ({NUMBER}) \[({NUMBER}), ({NUMBER})\]", r.stdout)
    assert m and m.group(1).startswith("3.0"), r.stdout
    _told_apart(*m.groups())


def test_a_final_score_prints_the_actual_in_the_forecasts_digits(study, capsys):
    """ "forecast 3.492 [3.438, 3.546], actual 3.5": the actual in fewer digits than the forecast beside it."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "forecast", "score", study, "--loss", "3.5")
    assert r.code == 0, r.stderr
    m = re.search(rf"forecast ({NUMBER}) \[({NUMBER}), ({NUMBER})\], actual ({NUMBER}):", r.stdout)
    assert m, r.stdout
    _told_apart(*m.groups())
    assert m.group(4) == "3.500"
    show = run_cli(capsys, "forecast", "show", study)
    assert "actual 3.500: error" in " ".join(show.stdout.replace("│", " ").split())


def _row(page: str, label: str) -> str:
    """The text after ``label`` in the report's table of the forecast on record, up to the next row's label."""
    rest = page.split(label, 1)[1]
    return re.split(r" (?:Note|Every frozen forecast of the study) ", rest, maxsplit=1)[0].strip()


def test_the_report_says_why_it_cannot_tell_when_the_hero_was_submitted(study, capsys):
    """A hero run trained without `ladder submit` (nothing in jobs.json) was "Frozen before the hero was
    submitted: unknown", and its partial score "Scored against the study's hero run X (its final eval loss)",
    though only its curve so far was scored."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.45, upto=0.5)
    assert run_cli(capsys, "forecast", "score", study).code == 0
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    page = _page(study)
    before = _row(page, "Frozen before the hero was submitted")
    assert before.startswith("not known: jobs.json holds no submission of hero run " + spec.run_id), before
    assert "no hero run of the study had trained or logged an eval point" in before, before
    against = page.split("Scored against", 1)[1][:120]
    assert f"hero run {spec.run_id} (its eval curve so far)" in against, against

    train(layout.StudyDir(study), spec, 3.45)  # done: now its final loss is what is scored
    assert run_cli(capsys, "forecast", "score", study).code == 0
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    assert f"hero run {spec.run_id} (its final eval loss)" in _page(study).split("Scored against", 1)[1][:120]


def test_the_report_says_a_loss_given_by_hand_has_no_start_time(study, capsys):
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "forecast", "score", study, "--loss", "3.5").code == 0
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    before = _row(_page(study), "Frozen before the hero was submitted")
    assert before.startswith("not known: scored against a loss given with --loss"), before
    assert "unknown" not in before


@pytest.fixture(scope="module")
def budgets(tmp_path_factory) -> Path:
    """A fitted ladder with three budgets per size (every law form fitted), nothing frozen."""
    return make_ladder(tmp_path_factory.mktemp("r12b") / "study", budgets=[0.5, 1, 2])


def _frozen_line(stdout: str) -> re.Match | None:
    return re.search(rf"on record: forecast (\d+) froze ({NUMBER}) \[({NUMBER}), ({NUMBER})\] at ([^;(]+)", stdout)


def test_hero_at_another_tokens_per_param_shows_the_frozen_forecast_and_says_why_it_differs(budgets, tmp_path, capsys):
    """`forecast freeze --predict 200K:4.5M` froze 3.810 [3.778, 3.844]; `hero --params 200K --tokens 4.5M` then
    printed "the fit forecasts 3.812 [3.783, 3.842]" beside a note that named only `fit --predict`, and never the
    freeze that `forecast score` scores the run against."""
    study = Path(shutil.copytree(budgets, tmp_path / "study"))
    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "200K:4.5M", "--json")
    assert r.code == 0, r.stderr
    [frozen] = [p for p in r.json()["predictions"] if p["label"] == "200K:4.5M"]
    r = run_cli(capsys, "hero", study, "--params", "200K", "--tokens", "4.5M")
    assert r.code == 0, r.stderr
    m = _frozen_line(r.stdout)
    assert m and m.group(1) == "1" and m.group(5).strip() == "--predict 200K:4.5M", r.stdout
    fit = re.search(rf"the fit forecasts ({NUMBER}) nats/token .*\[({NUMBER}), ({NUMBER})\]", r.stdout)
    assert fit, r.stdout
    note = next(line for line in r.stdout.splitlines() if line.startswith("note: forecast:"))
    assert m.groups()[1:4] != fit.groups()  # the two differ: the hero's line says so, and the note says why
    assert "(not the fit's forecast above" in r.stdout
    assert "22.5" in note and "study hero's 20" in note and "`ladder forecast freeze --predict`" in note, note
    j = run_cli(capsys, "hero", study, "--params", "200K", "--tokens", "4.5M", "--dry-run", "--json").json()
    [on_record] = j["frozen"]
    assert on_record["number"] == 1 and on_record["point"] == "200K:4.5M"
    assert (on_record["loss"], on_record["lo"], on_record["hi"]) == (frozen["loss"], frozen["lo"], frozen["hi"])


def test_hero_at_the_study_heros_tokens_per_param_gives_the_frozen_number(budgets, tmp_path, capsys):
    study = Path(shutil.copytree(budgets, tmp_path / "study"))
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "1M:20M").code == 0
    r = run_cli(capsys, "hero", study, "--params", "1M", "--dry-run")
    assert r.code == 0, r.stderr
    m = _frozen_line(r.stdout)
    fit = re.search(rf"the fit forecasts ({NUMBER}) nats/token .*\[({NUMBER}), ({NUMBER})\]", r.stdout)
    assert m and fit and m.groups()[1:4] == fit.groups(), r.stdout
    assert "(not the fit's forecast above" not in r.stdout
    assert "the study hero's 20 tokens/param" in r.stdout


def test_hero_at_a_point_no_freeze_holds_says_how_to_freeze_it(budgets, tmp_path, capsys):
    """A freeze of the hero only, then `hero --params 300K --tokens 6M`: "score it with `ladder forecast score`",
    which then refused: "no frozen point at the hero run's 301.7K params"."""
    study = Path(shutil.copytree(budgets, tmp_path / "study"))
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "hero", study, "--params", "300K", "--tokens", "6M")
    assert r.code == 0, r.stderr
    assert "no frozen forecast at this run" in r.stdout, r.stdout
    said = re.search(r"`(ladder forecast freeze \S+ --predict \S+)`", r.stdout)
    assert said and said.group(1).endswith("--predict 300K:6M"), r.stdout
    assert _frozen_line(r.stdout) is None
    assert run_cli(capsys, *said.group(1).split()[1:]).code == 0  # as printed
    r = run_cli(capsys, "hero", study, "--params", "300K", "--tokens", "6M")
    assert "no frozen forecast at this run" not in r.stdout
    assert _frozen_line(r.stdout).group(5).strip() == "--predict 300K:6M", r.stdout


def _runs_tile(page: str) -> str:
    """The headline's Runs tile: its count and words."""
    return re.search(r"Runs (\d+ / \d+ .*?) Recommended hero configuration", page).group(1)


def test_a_hero_planned_or_trained_after_the_last_collect_is_no_pending_rung_in_the_report(study, capsys):
    """`ladder hero` then `ladder report` (no collect between): "Runs 6 / 7 of the ladder's runs done; 1 pending",
    the hero counted as a rung of the ladder; trained and scored, still "1 pending" beside its scored loss."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    tile = _runs_tile(_page(study))
    assert tile.startswith("6 / 6 all the ladder's runs done; besides, 1 hero run ("), tile
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.5)
    assert run_cli(capsys, "forecast", "score", study).code == 0
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    page = _page(study)
    assert _runs_tile(page).startswith("6 / 6 all the ladder's runs done; besides, 1 hero run (done)"), page[:2000]
    row = re.search(rf"{spec.run_id} hero .*? (\d\.\d+|—) (\d\.\d+|—) (done|pending|planned) ", page)
    assert row and row.groups() == ("3.5350", "3.5000", "done"), row and row.group(0)


def test_the_moved_heros_note_tells_two_tokens_per_param_apart(fitted, capsys):
    """`hero --params 400K --tokens 8003200`: "taken at its 20, where ... at the study hero's 20"."""
    r = run_cli(capsys, "hero", fitted, "--params", "400K", "--tokens", "8003200", "--dry-run")
    assert r.code == 0, r.stderr
    note = next(line for line in r.stdout.splitlines() if line.startswith("note: forecast:"))
    m = re.search(rf"taken at its ({NUMBER}), where .* the study hero's ({NUMBER}),", note)
    assert m and m.group(1) != m.group(2), note


def test_score_refuses_run_with_loss_instead_of_ignoring_run(study, capsys):
    """`forecast score S --run SEED1 --loss 3.4` scored --loss against the frozen hero and dropped --run without a
    word."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    run_id = hero_spec(study).run_id
    before = (study / "forecast.json").read_bytes()
    r = run_cli(capsys, "forecast", "score", study, "--run", run_id, "--loss", "3.4")
    one_line(r, f"--run {run_id} with --loss", "nothing was scored")
    assert (study / "forecast.json").read_bytes() == before


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("nan.csv", "tokens,eval_loss\n4000000,3.9\n5000000,nan\n", "line 3"),
        ("na.csv", "tokens,eval_loss\n4000000,3.9\n5000000,NA\n", "line 3"),
        ("nan.jsonl", '{"tokens": 4000000, "eval_loss": 3.9}\n{"tokens": 5000000, "eval_loss": NaN}\n', "record 2"),
    ],
)
def test_a_curve_whose_loss_turns_nan_is_refused_not_scored_up_to_it(study, tmp_path, capsys, name, text, where):
    """A hero curve that ends in NaN (a diverged run) was scored from the point before it: "partial at 50%: heads
    for 3.303", the NaN row dropped as if it had no loss."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    before = (study / "forecast.json").read_bytes()
    curve = tmp_path / name
    curve.write_text(text)
    r = run_cli(capsys, "forecast", "score", study, "--curve", curve)
    one_line(r, where, "column eval_loss", "nothing was scored")
    assert (study / "forecast.json").read_bytes() == before
    # an empty cell (a CSV row of another record) or null is still a row without a loss
    curve.write_text(
        "tokens,eval_loss\n4000000,3.9\n5000000,\n"
        if name.endswith(".csv")
        else '{"tokens": 4000000, "eval_loss": 3.9}\n{"tokens": 5000000, "eval_loss": null}\n'
    )
    r = run_cli(capsys, "forecast", "score", study, "--curve", curve)
    assert r.code == 0 and "partial at 50%" in r.stdout, (r.stdout, r.stderr)


def test_a_scored_freeze_of_the_current_results_makes_the_headline_a_prediction(study, capsys):
    """Freeze 1, the results change (refit), freeze 2, then the hero trains and both are scored: `forecast show`
    called freeze 2 a prediction, but the report led with freeze 1 (data since changed) and so called the fit's
    forecast, freeze 2's very numbers, "Forecast loss (projection)", as did `ladder fit`."""
    from tests.hero_fixture import refresh

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    rung = next(p for p in (study / "runs").iterdir() if json.loads((p / "spec.json").read_text())["role"] == "rung")
    result = json.loads((rung / "result.json").read_text())
    layout.atomic_write_json(rung / "result.json", {**result, "final_eval_loss": result["final_eval_loss"] * 1.03})
    refresh(study)  # collected and fitted again
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert run_cli(capsys, "forecast", "score", study).code == 0
    rows = run_cli(capsys, "forecast", "show", study, "--json").json()["forecasts"]
    assert [(r["kind"], r["data_changed"]) for r in rows] == [("prediction", True), ("prediction", False)]
    r = run_cli(capsys, "fit", study)
    assert r.code == 0, r.stderr
    hero_line = next(line for line in r.stdout.splitlines() if line.startswith("hero "))
    assert "a prediction, checked against the hero run" in hero_line, hero_line
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    page = _page(study)
    assert "Forecast loss (prediction)" in page
    assert "The frozen forecast (forecast 2," in page.split("Forecast vs actual A", 1)[1][:200]


def test_fit_predict_and_freeze_predict_print_one_point_in_the_same_digits(study, capsys):
    """`forecast freeze --predict 300K:6M` printed "3.639 [3.598, 3.680]"; `fit --predict 300K:6M` printed the
    same forecast as "3.639  [3.598, 3.68]". (Since the distance floor of 2026-12-06 that point's bounds end in 9;
    200K:4M's upper bound, 3.900, keeps the trailing zero the case is about.)"""
    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "200K:4M")
    assert r.code == 0, r.stderr
    frozen = re.search(rf"200K:4M: ({NUMBER}) \[({NUMBER}), ({NUMBER})\]", r.stdout).groups()
    hero = re.search(rf"nats/token, 90% interval \[({NUMBER}), ({NUMBER})\]", r.stdout).groups()
    assert frozen[2] == "3.900", r.stdout  # the case: a trailing zero
    r = run_cli(capsys, "fit", study, "--predict", "200K:4M")
    assert r.code == 0, r.stderr
    row = re.search(rf"^200K:4M +200K +4M +({NUMBER}) +\[({NUMBER}), ({NUMBER})\]", r.stdout, re.M)
    assert row and row.groups() == frozen, r.stdout
    line = re.search(rf"^hero .*: loss ({NUMBER}) \(90% \[({NUMBER}), ({NUMBER})\]", r.stdout, re.M)
    assert line and line.groups()[1:] == hero, r.stdout


def test_a_hero_run_no_freeze_holds_is_named_beside_the_one_scored(study, capsys):
    """Two hero runs done (`hero --params 300K --tokens 6M`, then `hero`), a freeze of the study's hero only:
    score scored one and said nothing of the other, and its --json gave the other's run and loss (3.6) as the
    "source" and "final" of a score made against 3.5."""
    from ladder.plan.planner import read_plan

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study, "--params", "300K", "--tokens", "6M").code == 0
    assert run_cli(capsys, "hero", study, "--keep").code == 0  # both planned (by default the hero is replaced)
    small, big = [s for s in read_plan(study)[1] if s.role == "hero"]
    train(layout.StudyDir(study), small, 3.6)
    train(layout.StudyDir(study), big, 3.5)
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    assert f"hero run {big.run_id})" in r.stdout
    said = [line for line in r.stderr.splitlines() if f"hero run {small.run_id}" in line]
    assert said and said[0].startswith("not scored:") and "--predict" in said[0], r.stderr
    j = run_cli(capsys, "forecast", "score", study, "--json").json()
    assert j["source"]["run_id"] == big.run_id and j["final"] == 3.5
    assert [s["source"]["run_id"] for s in j["scores"]] == [big.run_id]
    assert small.run_id in j["heroes_not_scored"]


def test_a_partial_curve_scored_after_the_final_loss_does_not_call_the_forecast_a_projection_again(
    study, tmp_path, capsys
):
    """The hero done and scored ("a prediction checked against the hero"; `forecast show`: prediction), then a
    partial --curve: "scored 1 frozen forecast(s): still a projection (the hero has not finished)"."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert "a prediction checked against the hero" in run_cli(capsys, "forecast", "score", study).stdout
    curve = tmp_path / "c.csv"
    curve.write_text("tokens,eval_loss\n2000000,4.5\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", curve)
    assert r.code == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert "projection" not in last and "has not finished" not in last, last
    assert "the curve stops before the hero's planned tokens" in last and "forecast 1 stays checked" in last, last
    [row] = run_cli(capsys, "forecast", "show", study, "--json").json()["forecasts"]
    assert row["kind"] == "prediction"


def test_a_score_at_a_predict_point_says_so_in_its_summary(study, capsys):
    """`hero --params 300K --tokens 6M` scored against freeze --predict 300K:6M: "scored 1 frozen forecast(s): a
    prediction checked against the hero", while `forecast show` (rightly) keeps the freeze's hero forecast a
    projection."""
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "300K:6M").code == 0
    assert run_cli(capsys, "hero", study, "--params", "300K", "--tokens", "6M").code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.6)
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert "at --predict 300K:6M (not the freezes' hero forecast)" in last, last
    [row] = run_cli(capsys, "forecast", "show", study, "--json").json()["forecasts"]
    assert row["kind"] == "projection"


def test_a_freeze_made_after_the_hero_trained_says_so_not_after_a_submission(study, capsys):
    """A freeze made once the hero run had trained (no submission on record): `forecast score` warned "forecast 1
    was frozen after the hero was first submitted", and the report said "AFTER the hero was first submitted"."""
    assert run_cli(capsys, "hero", study).code == 0
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.5)
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    assert f"forecast 1 was frozen after hero run {spec.run_id} had trained or begun to" in r.stderr, r.stderr
    assert "first submitted" not in r.stderr
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    page = _page(study)
    assert f"AFTER hero run {spec.run_id} had trained or begun to" in page
    assert _row(page, "Frozen before the hero was submitted").startswith(f"no: frozen after hero run {spec.run_id}")


def test_score_says_how_far_the_hero_run_lies_from_the_frozen_point_as_hero_promised(study, capsys):
    """`hero`: "this run ... has 397.7K params x 8.003M tokens (-0.58% params): `ladder forecast score` scores the
    forecast against it and says the difference"; the score, terminal and report, never said it."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "hero", study)
    off = re.search(r"\(([-+][\d.]+% params)\): `ladder forecast score \S+` scores", r.stdout)
    assert off, r.stdout
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    assert f"the hero run is {off.group(1)} off the frozen point" in r.stdout, r.stdout
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    assert f"(the hero run is {off.group(1)} off it)" in _row(_page(study), "Forecast of")


def test_a_partial_score_from_one_reference_curve_says_why_it_has_no_interval(study, capsys):
    """With one finished rung's curve to read, the partial score printed "heads for 3.487 -"."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    rungs = sorted(
        (json.loads((p / "spec.json").read_text())["params"], p)
        for p in (study / "runs").iterdir()
        if json.loads((p / "spec.json").read_text())["role"] == "rung"
    )
    for _, p in rungs[:-1]:  # the largest keeps its curve; the results (and so the fit) stay as they were
        (p / "metrics.jsonl").write_text("")
    train(layout.StudyDir(study), hero_spec(study), 3.45, upto=0.4)
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    assert re.search(
        rf"heads for {NUMBER} \(no interval: the curve of 1 finished rung; an interval needs 2\)", r.stdout
    )
    assert " -;" not in r.stdout


def test_freeze_marks_a_point_beyond_reach_as_fit_does(study, capsys):
    """`fit --predict 1M:20M` marks the point "(beyond reach)"; `forecast freeze --predict 1M:20M` printed it bare,
    though its freeze records beyond_reach: true."""
    r = run_cli(capsys, "forecast", "freeze", study, "--predict", "1M:20M", "--predict", "150K:3M")
    assert r.code == 0, r.stderr
    rec = json.loads((study / "forecast.json").read_text())
    reach = {p["label"]: (p["beyond_reach"], p["beyond_tested"]) for p in rec["predictions"]}
    assert reach == {"1M:20M": (True, True), "150K:3M": (False, False)}
    lines = {line.strip().split(": ", 1)[0]: line for line in r.stdout.splitlines() if line.startswith("  ")}
    # the stronger mark that holds: "(beyond reach)" sat beside the line saying "beyond what the rollout tested"
    assert lines["1M:20M"].endswith("(beyond tested)") and "beyond" not in lines["150K:3M"], lines
    fit = run_cli(capsys, "fit", study, "--predict", "1M:20M", "--predict", "150K:3M")
    assert re.search(r"^1M:20M .*\(beyond tested\)", fit.stdout, re.M) and not re.search(
        r"^150K:3M .*\(beyond", fit.stdout, re.M
    )
    assert "1M:20M: " in fit.stdout and "(beyond what the rollout tested)" in fit.stdout


def test_a_score_of_a_prediction_and_a_late_check_says_which_is_which(study, capsys):
    """A freeze before the hero trained and one after: the summary said "a prediction checked against the hero" of
    both (any of them was enough)."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    said = " ".join(r.stdout.split())
    early, late = "a prediction checked against the hero (forecast 1)", "forecast 2 was frozen after it had trained"
    assert f"{early}; {late}" in said, said


def test_a_score_keeps_a_read_only_freeze_read_only(study, tmp_path, capsys):
    """A freeze its owner made read-only (chmod 444, to keep it from edits), then `forecast score`: the score was
    appended through a new file of mode 644, so the protection was gone with no word. The rewrite keeps the mode."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    path = study / "forecast.json"
    path.chmod(0o444)
    curve = tmp_path / "c.csv"
    curve.write_text("tokens,eval_loss\n7000000,3.5\n")
    assert run_cli(capsys, "forecast", "score", study, "--curve", curve).code == 0
    assert json.loads(path.read_text())["scores"], "the score was appended"
    assert path.stat().st_mode & 0o777 == 0o444
